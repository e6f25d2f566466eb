"""The trainer on a GPU against plain PyTorch loops on the same model and tokens (issue 21).

One run, whatever GPU is present (skips cleanly without one): the same GPT (default: 936M
parameters, 16 layers, d_model 2048, 16 heads, context 2048, batch 8, BPE-32k), the same tokens
(a corpusforge dataset: ``bench/configs/gpu_text.yaml`` then ``gpu_tokenize.yaml`` make it from
the shared English and Chinese text), bf16:

* plain eager loop: bf16 autocast, fused AdamW, gradient clipping;
* the same loop with ``torch.compile(model)``; and with torchao float8 (output layer kept bf16);
* ``corpusforge train`` (``python -m corpusforge.trainer``): eager; ``compile: true``; ``compile`` + float8;
* the trainer under torchrun on all visible GPUs: zero3 (FSDP2), and DDP when there are 2+.

Throughput is the median of windows of 5 steps after ``--warm`` steps (each window ends with a
device synchronisation in both the loops and the trainer's log), MFU against the device's bf16
peak (float8 rows: bf16-equivalent), peak memory from ``torch.cuda.max_memory_allocated``.
``--curve-steps N`` also trains a smaller model N steps eager and compiled (same seed) plus eager
with another seed, and writes both curves (JSON, and PNG when matplotlib is there) to ``--out``.

    python bench/bench_gpu.py --dataset out/gpu/tokens [--steps 30] [--curve-steps 200] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpusforge.trainer.data import TokenStream  # noqa: E402
from corpusforge.trainer.metrics import device_name, peak_flops  # noqa: E402
from corpusforge.trainer.model import GPT, ModelConfig  # noqa: E402

WINDOW = 5


def model_config(a, vocab: int) -> ModelConfig:
    return ModelConfig(vocab_size=vocab, n_layer=a.layers, n_head=a.heads, d_model=a.d_model, seq_len=a.seq)


def plain_loop(a, tokens, vocab: int, compile_model: bool, float8: bool) -> dict:
    """The loop a person writes by hand: bf16 autocast, fused AdamW, clipping, nothing else."""
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model = GPT(model_config(a, vocab)).cuda()
    if float8:
        from corpusforge.trainer.parallelize.float8 import apply

        model = apply(model, "tensorwise")
    if compile_model:
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    n = a.batch * a.seq
    times, t0 = [], None
    for step in range(a.steps):
        i = (step * n) % (len(tokens) - n - 1)
        chunk = torch.from_numpy(tokens[i:i + n + 1].astype("int64"))
        x = chunk[:-1].view(a.batch, a.seq).cuda(non_blocking=True)
        y = chunk[1:].view(a.batch, a.seq).cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step + 1 == a.warm:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        elif step + 1 > a.warm and (step + 1 - a.warm) % WINDOW == 0:
            loss.item()
            now = time.perf_counter()
            times.append((now - t0) / WINDOW)
            t0 = now
    del model, opt
    return {"tokens_per_s": n / statistics.median(times), "max_memory_bytes": torch.cuda.max_memory_allocated()}


def trainer_run(a, tmp: Path, name: str, sets: list[str], nprocs: int = 0, steps: int | None = None,
                seed: int = 1337) -> dict:
    out = tmp / name
    base = [f"data.dataset={a.dataset}", f"model.n_layer={a.layers}", f"model.n_head={a.heads}",
            f"model.d_model={a.d_model}", f"model.seq_len={a.seq}", f"batch_size={a.batch}",
            f"steps={steps or a.steps}", "eval_every=0", "eval_batches=1", f"log_every={WINDOW}", "tensorboard=false",
            "precision=bf16", "device=cuda", "save_final=false", "optim.lr=3e-4", "optim.warmup_steps=20",
            "data.val_fraction=0.02", f"seed={seed}", f"out_dir={out}", *sets]
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nprocs}"]
                if nprocs else [sys.executable])
    cmd = launcher + ["-m", "corpusforge.trainer", *[f"--set={s}" for s in base]]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if run.returncode:
        print(run.stdout[-3000:], run.stderr[-6000:], file=sys.stderr)
        return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"}
    recs = [json.loads(line) for line in open(out / "metrics.jsonl") if '"tokens_per_s"' in line]
    windows = {r["step"]: r for r in recs if r["step"] > a.warm and r["step"] % WINDOW == 0}
    summary = json.loads((out / "summary.json").read_text())
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in windows.values()) if windows else float("nan"),
            "max_memory_bytes": summary["max_memory_bytes"], "losses": [r["loss"] for r in recs]}


def curves(a, tmp: Path) -> dict:
    """Eager vs compiled trainer (same seed) and eager with another seed, on a smaller model."""
    small = argparse.Namespace(**{**vars(a), "layers": 12, "d_model": 768, "heads": 12, "seq": 1024, "batch": 16})
    sets = ["log_every=1", "data.sampling=random"]      # windows at random offsets: no language-by-language order
    runs = {"eager": trainer_run(small, tmp, "curve_eager", sets, steps=a.curve_steps),
            "compile": trainer_run(small, tmp, "curve_compile", ["compile=true", *sets], steps=a.curve_steps),
            "eager_seed2": trainer_run(small, tmp, "curve_eager2", sets, steps=a.curve_steps, seed=7)}
    losses = {k: v.get("losses", []) for k, v in runs.items()}
    last = slice(-50, None)

    def gap(p, q):
        return max(abs(x - y) for x, y in zip(p, q)), statistics.mean(abs(x - y) for x, y in zip(p[last], q[last]))
    out = {"losses": losses, "compile_vs_eager": gap(losses["compile"], losses["eager"]),
           "seed_vs_seed": gap(losses["eager_seed2"], losses["eager"])}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default=str(ROOT / "out" / "gpu" / "tokens"))
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warm", type=int, default=10)
    p.add_argument("--cases", default="all", help="comma-separated row keys: plain_eager, plain_compile, plain_f8, "
                   "eager, compile, f8, f8row, zero3, ddp (default: all)")
    p.add_argument("--curve-steps", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "bench" / "_out" / "gpu"))
    p.add_argument("--tag", default="run", help="names the JSON record: bench_gpu_<tag>.json")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure (skipped)")
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = torch.cuda.device_count()
    name = device_name(torch.device("cuda", 0))
    peak = peak_flops(name, "bf16")
    stream = TokenStream.open(a.dataset, out / "cache")
    tokens, vocab = stream.tokens, stream.vocab_size
    flops = GPT(model_config(a, vocab)).flops_per_token() if a.layers else 0.0
    print(f"{name}, {gpus} GPU(s), torch {torch.__version__}; {len(tokens):,} tokens, vocab {vocab}")

    rows = {      # key: (label, run)
        "plain_eager": ("plain loop, eager", lambda t: plain_loop(a, tokens, vocab, False, False)),
        "plain_compile": ("plain loop, torch.compile", lambda t: plain_loop(a, tokens, vocab, True, False)),
        "plain_f8": ("plain loop, compile + float8", lambda t: plain_loop(a, tokens, vocab, True, True)),
        "eager": ("trainer, eager", lambda t: trainer_run(a, t, "eager", [])),
        "compile": ("trainer, compile", lambda t: trainer_run(a, t, "compile", ["compile=true"])),
        "f8": ("trainer, compile + float8 tensorwise",
               lambda t: trainer_run(a, t, "f8", ["compile=true", "float8=tensorwise"])),
        "f8row": ("trainer, compile + float8 rowwise",
                  lambda t: trainer_run(a, t, "f8row", ["compile=true", "float8=rowwise"])),
        "zero3": (f"trainer, zero3 via torchrun ({gpus} GPU), compile",
                  lambda t: trainer_run(a, t, "zero3", ["compile=true", "parallel.mode=zero3"], nprocs=gpus)),
    }
    if gpus > 1:
        rows["ddp"] = (f"trainer, ddp via torchrun ({gpus} GPUs), compile",
                       lambda t: trainer_run(a, t, "ddp", ["compile=true", "parallel.mode=ddp"], nprocs=gpus))
    wanted = list(rows) if a.cases == "all" else [c.strip() for c in a.cases.split(",") if c.strip()]
    results = {}
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        for key in wanted:
            label, fn = rows[key]
            t0 = time.perf_counter()
            try:
                r = fn(Path(tmp))
            except Exception as exc:          # one failing row must not lose the others
                r = {"error": f"{type(exc).__name__}: {exc}"}
            r["wall_s"] = time.perf_counter() - t0
            results[label] = r
            torch.cuda.empty_cache()
            print(f"  {label}: {r.get('tokens_per_s', float('nan')):,.0f} tok/s ({r['wall_s']:.0f} s) {r.get('error', '')}",
                  flush=True)
        curve = curves(a, Path(tmp)) if a.curve_steps else None

    n_params = GPT(model_config(a, vocab)).num_params()
    print(f"\n{name}; GPT {n_params / 1e6:.0f}M parameters ({a.layers} layers, d_model {a.d_model}, {a.heads} heads, "
          f"context {a.seq}, batch {a.batch}), bf16; median of {WINDOW}-step windows after {a.warm} steps\n")
    print("| what | tokens/s | MFU (bf16 peak) | vs plain compiled loop | peak memory GiB |")
    print("|---|---|---|---|---|")
    ref = results.get("plain loop, torch.compile", {}).get("tokens_per_s")
    for label, r in results.items():
        tps = r.get("tokens_per_s", float("nan"))
        mfu = f"{tps * flops / peak:.1%}" if peak and "error" not in r else "-"
        ratio = f"{tps / ref:.2f}x" if ref and "error" not in r else "-"
        mem = f"{r['max_memory_bytes'] / 2**30:.1f}" if r.get("max_memory_bytes") else "-"
        print(f"| {label} | {tps:,.0f} | {mfu} | {ratio} | {mem} |" if "error" not in r else
              f"| {label} | failed: {r['error'][:120]} | - | - | - |")
    record = {"device": name, "gpus": gpus, "torch": torch.__version__, "params": n_params, "args": vars(a),
              "results": {k: {kk: vv for kk, vv in v.items() if kk != "losses"} for k, v in results.items()}}
    if curve:
        record["curves"] = curve
        g, s = curve["compile_vs_eager"], curve["seed_vs_seed"]
        print(f"\nloss over {a.curve_steps} steps (12 layers, d_model 768, context 1024, batch 16, random windows): compiled vs eager, "
              f"same seed: max |diff| {g[0]:.4f}, mean |diff| last 50 steps {g[1]:.4f}; eager seed 1337 vs seed 7: "
              f"max {s[0]:.4f}, mean last 50 {s[1]:.4f}")
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(7, 4))
            for k, v in curve["losses"].items():
                ax.plot(range(1, len(v) + 1), v, label=k, linewidth=1)
            ax.set_xlabel("step")
            ax.set_ylabel("training loss")
            ax.set_title(f"trainer eager vs compile, {name}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "loss_curves.png", dpi=110)
        except ImportError:
            pass
    (out / f"bench_gpu_{a.tag}.json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
