"""``corpusforge mix search SEARCH_CONFIG``: choose a mixture with small proxy models.

    sources (train part) --caps--> candidates --proxies--> losses --regression--> chosen mixture
                                                                              --> verified at 2x size

1. Target: each target set is a held-out slice of a source (a hash split by document id, kept out
   of every proxy and of the chosen mix config) or a separate dataset; its tokens are written
   once to ``targets/NAME.npy``. The target loss is the weighted mean of the sets' losses.
2. Candidates (``candidates.py``): Dirichlet draws around a prior under each source's cap, plus
   the uniform and temperature baselines.
3. Proxies (``proxy.py``): one small model per candidate, same seed, schedule and token budget;
   in parallel processes; resumable (finished proxies are kept).
4. Fit (``fit.py``): linear / quadratic / boosted-tree regressions compared by cross-validation;
   the best scores the capped simplex; the choice is the mean of its top predictions. Optionally
   a second round of proxies around the choice, then a refit on all.
5. Verification: the chosen mixture and the baselines trained at twice the proxy's depth, once
   per seed; the report says whether the chosen mixture still wins, and by how much more than
   the seed-to-seed spread.

Output (``output.path``): ``mix.yaml`` (a ``corpusforge mix`` config with the chosen weights),
``search.json`` (everything measured), ``report.html``, ``proxies/ID/`` (each proxy's log,
metrics and result).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import yaml

from corpusforge.errors import ConfigError
from corpusforge.io.atomic import write_bytes, write_json
from corpusforge.mix.build import index_source
from corpusforge.mix.config import Holdout
from corpusforge.mix.config import from_dict as mix_config
from corpusforge.mix.search import candidates as cands
from corpusforge.mix.search import fit as fitting
from corpusforge.mix.search import proxy
from corpusforge.mix.search.config import SearchConfig

IDENTITY = "search_config.json"


def search(cfg: SearchConfig, base: Path | None = None, log=print) -> dict:
    started = time.perf_counter()
    base = Path(base) if base else Path.cwd()
    resolve = lambda p: str(Path(p) if Path(p).is_absolute() else base / p)  # noqa: E731
    out = Path(resolve(cfg.output.path))
    _claim(out, cfg)

    # ---- sources and targets ---------------------------------------------------------------------
    names = list(cfg.sources)
    held = {t.source for t in cfg.targets.values() if t.source}
    holdout = {n: Holdout(fraction=cfg.holdout.fraction, seed=cfg.holdout.seed) if n in held else None for n in names}
    sources = {n: {**s.model_dump(mode="json", exclude_none=True), "path": resolve(s.path),
                   **({"holdout": holdout[n].model_dump()} if holdout[n] else {})} for n, s in cfg.sources.items()}
    index = {n: index_source(n, sources[n]["path"], cfg.sources[n].select_source, holdout[n]) for n in names}
    available = {n: index[n].available for n in names}
    cap = cands.caps(available, {n: s.max_epochs for n, s in cfg.sources.items()}, cfg.budget)
    targets, target_sizes = _write_targets(cfg, out, resolve, holdout, index)
    target_weights = {n: t.weight for n, t in cfg.targets.items()}
    log(f"{cfg.name}: {len(names)} sources ({', '.join(f'{n} {available[n]:,} tokens' for n in names)}); "
        f"target {', '.join(f'{n} x{t.weight:g} ({target_sizes[n]:,} tokens)' for n, t in cfg.targets.items())}")

    def jobs(mixtures: list[dict], seed: int = 0, model: dict | None = None, steps: int | None = None,
             folder: str = "proxies") -> list[dict]:
        return [{"id": m["id"] + (f"-s{seed}" if folder != "proxies" else ""), "mixture": m["id"], "kind": m["kind"],
                 "weights": m["weights"], "seed": seed, "dir": str(out / folder / (m["id"] + f"-s{seed}")),
                 "sources": sources, "train": cfg.proxy.train, "model": model, "steps": steps, "targets": targets,
                 "target_weights": target_weights, "threads": cfg.parallel.threads} for m in mixtures]

    # ---- round 1: candidates and their proxies ---------------------------------------------------
    first = cands.candidates(names, available, cap, cfg.candidates)
    log(f"round 1: {len(first)} proxies ({cfg.candidates.n} sampled + baselines), {cfg.parallel.workers} at a time")
    measured = proxy.run_all(jobs(first), cfg.parallel.workers, log)
    capv = np.array([cap[n] for n in names])
    prior = cands.prior_shares(cfg.candidates.prior, names, available)
    choice = _fit(measured, names, capv, prior, cfg)

    # ---- round 2 (optional): proxies around the first choice, then a refit on all ----------------
    if cfg.refine.n:
        second = cands.around(names, choice["named"], cfg.refine.n, cfg.refine.concentration, cap,
                              cfg.candidates.seed, "r")
        log(f"round 2: {len(second)} proxies around the first choice")
        measured += proxy.run_all(jobs(second), cfg.parallel.workers, log)
        choice = _fit(measured, names, capv, prior, cfg)
    log(f"chosen ({choice['model']} regression, CV spearman {choice['cv_best']['spearman']:.3f}): "
        + " ".join(f"{n}={w:.3f}" for n, w in choice["named"].items())
        + f" | predicted target loss {choice['predicted_loss']:.4f}")

    # ---- verification at twice the depth ---------------------------------------------------------
    verification = None
    if cfg.verify.enabled:
        model = cfg.verify.model or {"n_layer": 2 * _proxy_layers(cfg)}
        mixtures = [{"id": "chosen", "kind": "chosen", "weights": choice["named"]}] + [m for m in first if m["kind"] == "baseline"]
        vjobs = [j for s in cfg.verify.seeds for j in jobs(mixtures, s, model, cfg.verify.steps, "verify")]
        log(f"verification: {len(mixtures)} mixtures x {len(cfg.verify.seeds)} seed(s) at model {model}")
        verification = _verdict(proxy.run_all(vjobs, cfg.parallel.workers, log), mixtures)
        log(verification["summary"])

    # ---- outputs -----------------------------------------------------------------------------------
    mix = _mix_config(cfg, choice["named"], sources)
    mix_config(mix)                                       # what corpusforge mix will accept, checked here
    header = [f"chosen by corpusforge mix search {cfg.name} ({len(measured)} proxies, {choice['model']} regression, "
              f"cross-validated Spearman {choice['cv_best']['spearman']:.3f})",
              f"predicted target loss at the proxies' size: {choice['predicted_loss']:.4f}"]
    if verification:
        header.append(verification["summary"])
    write_bytes(out / "mix.yaml", ("".join(f"# {line}\n" for line in header)
                                   + yaml.safe_dump(mix, sort_keys=False)).encode())
    result = {"name": cfg.name, "sources": {n: {"available_tokens": available[n], "cap": cap[n]} for n in names},
              "targets": {n: {"weight": target_weights[n], "tokens": target_sizes[n]} for n in cfg.targets},
              "proxies": measured, "fit": {k: v for k, v in choice.items() if k not in ("regression", "weights")},
              "chosen": choice["named"], "predicted_loss": choice["predicted_loss"], "verification": verification,
              "mix_config": str(out / "mix.yaml"), "wall_seconds": round(time.perf_counter() - started, 1)}
    write_json(out / "search.json", result)
    from corpusforge.mix.search.report import render

    write_bytes(out / "report.html", render(result).encode())
    log(f"mix config: {out / 'mix.yaml'} | report: {out / 'report.html'}")
    return result


def _claim(out: Path, cfg: SearchConfig) -> None:
    """A search folder holds one search: a different config there is an error, not a silent mix
    of two searches' proxies; the same config resumes."""
    ident = {"config": cfg.model_dump(mode="json", exclude={"parallel"})}     # workers may change on resume
    digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    path = out / IDENTITY
    if path.exists():
        if json.loads(path.read_text()).get("sha256") != digest:
            raise ConfigError(f"output.path: {out} holds a search with a different config; "
                              f"use another output.path or remove that folder")
        return
    write_json(path, {"sha256": digest, **ident})


def _write_targets(cfg, out: Path, resolve, holdout: dict, index: dict) -> tuple[dict, dict]:
    paths, sizes, tokenizers = {}, {}, set()
    for name, t in cfg.targets.items():
        if t.source is not None:
            s = cfg.sources[t.source]
            idx = index_source(name, resolve(s.path), s.select_source,
                               holdout[t.source].model_copy(update={"part": "heldout"}), field=f"targets.{name}")
        else:
            idx = index_source(name, resolve(t.path), t.select_source, field=f"targets.{name}")
        tokenizers.add(idx.dataset.artifact_bytes("tokenizer"))
        path = out / "targets" / f"{name}.npy"
        if not path.exists():
            tokens = proxy.target_tokens(idx, cfg.proxy.eval_tokens)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, tokens)
            tmp.replace(path)
        paths[name], sizes[name] = str(path), int(np.load(path, mmap_mode="r").shape[0])
    tokenizers |= {i.dataset.artifact_bytes("tokenizer") for i in index.values()}
    if len(tokenizers - {None}) > 1:
        raise ConfigError("targets: the sources and target sets were tokenized with different tokenizers")
    return paths, sizes


def _fit(measured: list[dict], names: list[str], cap: np.ndarray, prior: np.ndarray, cfg) -> dict:
    ok = [r for r in measured if "error" not in r and np.isfinite(r["target_loss"])]
    failed = [r["id"] for r in measured if r not in ok]
    if len(ok) < max(4, len(names) + 1):
        raise ConfigError(f"only {len(ok)} proxies measured ({len(failed)} failed: see proxies/ID/result.json); "
                          f"raise candidates.n or fix the proxy config")
    X = np.array([[r["weights"][n] for n in names] for r in ok])
    y = np.array([r["target_loss"] for r in ok])
    chosen = fitting.choose(X, y, cap, prior, cfg.fit)
    best = next(s for s in chosen["cv"] if s["model"] == chosen["model"])
    return {**chosen, "named": {n: float(w) for n, w in zip(names, chosen["weights"])}, "cv_best": best,
            "cv_ids": [r["id"] for r in ok], "failed": failed,
            "landscape": fitting.landscape(chosen["regression"], chosen["weights"], cap, names)}


def _verdict(results: list[dict], mixtures: list[dict]) -> dict:
    """Mean and spread of each mixture's target loss over seeds; does the chosen one win, and by
    more than the seed-to-seed spread?"""
    by = {}
    for r in results:
        if "error" not in r:
            by.setdefault(r["mixture"], []).append(r["target_loss"])
    rows = {m["id"]: {"losses": by.get(m["id"], []), "mean": float(np.mean(by[m["id"]])) if by.get(m["id"]) else None,
                      "spread": float(np.ptp(by[m["id"]])) if by.get(m["id"]) else None, "weights": m["weights"]}
            for m in mixtures}
    spread = max((r["spread"] for r in rows.values() if r["spread"] is not None), default=0.0)
    chosen = rows["chosen"]["mean"]
    baselines = {k: v["mean"] for k, v in rows.items() if k != "chosen" and v["mean"] is not None}
    holds = chosen is not None and all(chosen < v for v in baselines.values())
    margin = min((v - chosen for v in baselines.values()), default=None) if chosen is not None else None
    beyond_noise = bool(holds and margin is not None and margin > spread)
    summary = (f"verification: chosen {chosen:.4f} vs " + ", ".join(f"{k} {v:.4f}" for k, v in baselines.items())
               + f"; ranking {'holds' if holds else 'does NOT hold'}; margin {margin:+.4f} vs seed spread {spread:.4f}"
               if chosen is not None else "verification: the chosen mixture's proxies failed")
    return {"mixtures": rows, "seed_spread": spread, "ranking_holds": holds, "margin": margin,
            "beyond_seed_spread": beyond_noise, "summary": summary, "runs": results}


def _proxy_layers(cfg: SearchConfig) -> int:
    from corpusforge.trainer.model import ModelConfig

    return int(cfg.proxy.train.get("model", {}).get("n_layer", ModelConfig().n_layer))


def _mix_config(cfg: SearchConfig, weights: dict[str, float], sources: dict) -> dict:
    """A ``corpusforge mix`` config with the chosen shares. Target sources keep their holdout
    (train part), so the target slice stays unseen by the model trained on this mix."""
    rounded = {n: round(w, 6) for n, w in weights.items()}
    top = max(rounded, key=rounded.get)
    rounded[top] = round(1.0 - sum(v for n, v in rounded.items() if n != top), 6)
    out = {"name": f"{cfg.name}-chosen", "sources": {}}
    for n, s in cfg.sources.items():
        entry = {**s.model_dump(mode="json", exclude_none=True), "weight": rounded[n]}
        if "holdout" in sources[n]:
            entry["holdout"] = sources[n]["holdout"]
        out["sources"][n] = entry
    if cfg.budget:
        out["budget"] = cfg.budget
    out["output"] = {"path": cfg.output.mix_path or str(Path(cfg.output.path) / "mix")}
    return out
