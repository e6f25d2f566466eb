"""One proxy: mix the sources at a candidate's shares (``corpusforge mix``), train a small model on
exactly its token budget (``corpusforge train``), and measure its loss on every target set.

Every proxy of a round has the same model, schedule, seed and token budget: only the mixture
differs, so differences in loss are the mixture's. A proxy's ``result.json`` is written last and
atomically: a search that is killed and started again keeps every finished proxy and trains the
unfinished or failed ones again from the start (their folders are cleared first).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from corpusforge.io.atomic import write_json

RESULT = "result.json"


def target_tokens(index, limit: int) -> np.ndarray:
    """The token ids of an indexed source's rows (``mix.build.SourceIndex``), documents in order,
    each ending with its document-end token; at most ``limit`` tokens (0: all)."""
    parts, total = [], 0
    for shard, grp in index.rows.group_by("shard", maintain_order=True):
        col = index.dataset.read_shard(int(shard[0]), columns=["token_ids"]).column(0).take(grp["row"].to_numpy())
        values = col.combine_chunks().values.to_numpy(zero_copy_only=False).astype(np.uint32)
        parts.append(values)
        total += len(values)
        if limit and total >= limit:
            break
    tokens = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    return tokens[:limit] if limit else tokens


@torch.no_grad()
def target_loss(model, tokens: np.ndarray, seq_len: int, batch_size: int, device: torch.device) -> float:
    """Mean next-token loss over the non-overlapping windows of ``tokens``."""
    from corpusforge.trainer.data import PackedSequences

    seqs = PackedSequences(tokens, seq_len, 0, len(tokens))
    n = len(seqs)
    if n == 0:
        return float("nan")
    model.eval()
    total = 0.0
    for lo in range(0, n, batch_size):
        x, y = seqs.get(np.arange(lo, min(lo + batch_size, n)))
        total += model(x.to(device), y.to(device)).item() * len(x)
    return total / n


def measured(folder: Path) -> bool:
    """A proxy whose result was written without an error: kept by a resumed search."""
    path = folder / RESULT
    return path.exists() and "error" not in json.loads(path.read_text())


def run(job: dict) -> dict:
    """Train and evaluate one proxy (in this process); returns and writes its result. Errors are
    a result too (``error``), so one bad proxy does not end the search."""
    out = Path(job["dir"])
    if measured(out):
        return json.loads((out / RESULT).read_text())
    if out.exists():                       # killed half-way, or failed last time: start it again
        shutil.rmtree(out)
    out.mkdir(parents=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(job["threads"])
    started = time.perf_counter()
    try:
        with open(out / "train.log", "w") as logf, contextlib.redirect_stdout(logf):
            result = _train_and_measure(job, out)
    except Exception as exc:  # noqa: BLE001 - recorded with its traceback; the search goes on without it
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    finally:
        torch.set_num_threads(threads)
    result.update(id=job["id"], mixture=job["mixture"], kind=job["kind"], weights=job["weights"], seed=job["seed"],
                  wall_seconds=round(time.perf_counter() - started, 2))
    write_json(out / RESULT, result)
    return result


def _train_and_measure(job: dict, out: Path) -> dict:
    from corpusforge.mix.build import build as build_mix
    from corpusforge.mix.config import from_dict as mix_config
    from corpusforge.config_base import validate
    from corpusforge.trainer.config import TrainConfig
    from corpusforge.trainer.device import available_accelerators, choose_device_type
    from corpusforge.trainer.model import GPT
    from corpusforge.trainer.train import train

    overrides = {**job["train"], "seed": job["seed"], "out_dir": str(out / "train"), "save_final": True,
                 "tensorboard": False, "eval_every": 0, "checkpoint_every": 0, "resume": False, "stop_at": 0,
                 "data": {**job["train"].get("data", {}), "dataset": str(out / "data"), "val_fraction": 0.0}}
    if job.get("model"):
        overrides["model"] = {**job["train"].get("model", {}), **job["model"]}
    if job.get("steps"):
        overrides["steps"] = job["steps"]
    tcfg = validate(TrainConfig, overrides, "proxy.train")
    tokens = tcfg.steps * tcfg.batch_size * tcfg.grad_accum * tcfg.model.seq_len
    # enough rows for one pass of the run (packing drops a window at the end of the stream)
    budget = tokens + 2 * tcfg.model.seq_len + 1
    sources = {n: {**s, "weight": job["weights"][n]} for n, s in job["sources"].items()}
    stats = build_mix(mix_config({"name": job["id"], "sources": sources, "budget": budget, "on_shortfall": "warn",
                                  "seed": job["seed"], "output": {"path": str(out / "data")}}),
                      log=lambda *_: None, report=False)
    summary = train(tcfg)
    device = torch.device(choose_device_type(tcfg.device, available_accelerators()))
    model = GPT(tcfg.model).to(device)
    model.load_state_dict(torch.load(out / "train" / "final_model_stage0.pt", map_location=device))
    losses = {name: target_loss(model, np.load(path, mmap_mode="r"), tcfg.model.seq_len, tcfg.batch_size, device)
              for name, path in job["targets"].items()}
    weights = job["target_weights"]
    loss = sum(weights[n] * losses[n] for n in losses) / sum(weights.values())
    shutil.rmtree(out / "data", ignore_errors=True)          # the proxy's copy of the mix: rebuilt if ever needed
    for folder in ("checkpoints", "cache"):
        shutil.rmtree(out / "train" / folder, ignore_errors=True)
    return {"target_loss": float(loss), "target_losses": losses, "train_loss": summary["train_loss"],
            "params": summary["params"], "tokens": tokens, "achieved_shares":
            {n: v["achieved_share"] for n, v in stats["mixture"]["sources"].items()},
            "mix_warnings": stats["mixture"]["warnings"]}


def run_all(jobs: list[dict], workers: int, log) -> list[dict]:
    """Every job, finished ones read back; ``workers`` > 1 trains that many proxies at once in
    separate processes (spawned: torch and fork do not mix)."""
    todo = [j for j in jobs if not measured(Path(j["dir"]))]
    if len(todo) < len(jobs):
        log(f"  {len(jobs) - len(todo)} of {len(jobs)} proxies already measured (resumed)")
    results = {}
    if workers <= 1 or len(todo) <= 1:
        for j in todo:
            results[j["id"]] = run(j)
            _say(results[j["id"]], log)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run, j): j for j in todo}
            for f in as_completed(futures):
                job = futures[f]
                try:
                    results[job["id"]] = f.result()
                except Exception as exc:  # noqa: BLE001 - a worker that died (killed, out of memory):
                    # recorded for this search, not written, so a resumed search trains it again
                    results[job["id"]] = {"id": job["id"], "mixture": job["mixture"], "kind": job["kind"],
                                          "weights": job["weights"],
                                          "seed": job["seed"], "error": f"worker died: {type(exc).__name__}: {exc}"}
                _say(results[job["id"]], log)
    return [results.get(j["id"]) or json.loads((Path(j["dir"]) / RESULT).read_text()) for j in jobs]


def _say(r: dict, log) -> None:
    shares = " ".join(f"{n}={w:.2f}" for n, w in r["weights"].items())
    if "error" in r:
        log(f"  proxy {r['id']}: FAILED ({r['error']})")
    else:
        log(f"  proxy {r['id']} ({shares}): target loss {r['target_loss']:.4f} [{r['wall_seconds']:.1f} s]")
