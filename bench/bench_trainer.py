"""Trainer overhead, loader speed and ZeRO memory, on CPU.

1. Tokens/s of ``trainer.train`` (one process) vs a plain hand-written PyTorch loop with the same
   model (nanoGPT's CPU recipe: 4 layers, 128 dims, context 64, batch 12), the same AdamW and
   gradient clipping, on the same tokens; median over steps after a warm-up, runs alternated.
2. Tokens/s the data loader delivers alone, vs what the model consumes.
3. Memory per rank for DDP and ZeRO-1/2/3 (torchrun, 2 processes, gloo): the bytes of parameters,
   gradients and optimizer state each rank holds, on a 25M-parameter model.

Needs the Tiny Shakespeare token set (``bench/bench_train_shakespeare.py`` makes it).

    .venv/bin/python bench/bench_trainer.py
"""

from __future__ import annotations

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
TOKENS = ROOT / "out" / "shakespeare" / "tokens"

from corpusforge.trainer.config import load  # noqa: E402
from corpusforge.trainer.data import TokenLoader, TokenStream, split  # noqa: E402
from corpusforge.trainer.model import GPT  # noqa: E402
from corpusforge.trainer.optim import build_optimizer  # noqa: E402
from corpusforge.trainer.train import train  # noqa: E402

STEPS = 150
WARM = 20


def trainer_run(tmp: Path) -> float:
    cfg = load(ROOT / "trainer/configs/shakespeare_char.yaml",
               [f"data.dataset={TOKENS}", f"out_dir={tmp}", f"steps={STEPS}", "eval_every=0", "eval_batches=1",
                "tensorboard=false", "log_every=1"])
    train(cfg)
    tps = [json.loads(l)["tokens_per_s"] for l in open(tmp / "metrics.jsonl") if '"tokens_per_s"' in l]
    return statistics.median(tps[WARM:])


def plain_loop(tokens) -> float:
    cfg = load(ROOT / "trainer/configs/shakespeare_char.yaml", [f"data.dataset={TOKENS}"])
    cfg.model.vocab_size = int(tokens.max()) + 1
    torch.manual_seed(0)
    model = GPT(cfg.model)
    opt = build_optimizer(model, cfg, zero1=False)
    data = torch.from_numpy(tokens[:1_000_000].astype("int64"))
    b, t = cfg.batch_size, cfg.model.seq_len
    times = []
    for i in range(STEPS):
        t0 = time.perf_counter()
        ix = torch.randint(len(data) - t - 1, (b,))
        x = torch.stack([data[j:j + t] for j in ix])
        y = torch.stack([data[j + 1:j + t + 1] for j in ix])
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter() - t0)
    return b * t / statistics.median(times[WARM:])


def loader_rate(tokens) -> float:
    seqs, _ = split(tokens, 64, 0.1)
    loader = TokenLoader(seqs, 12, shuffle_window=4096, epoch_shift=True)
    for _ in range(10):
        next(loader)
    t0 = time.perf_counter()
    n = 2000
    for _ in range(n):
        next(loader)
    return n * 12 * 64 / (time.perf_counter() - t0)


def zero_memory() -> dict:
    out = {}
    for mode in ("ddp", "zero1", "zero2", "zero3"):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29733",
                   "-m", "corpusforge.trainer", "trainer/configs/shakespeare_char.yaml", f"--set=data.dataset={TOKENS}",
                   f"--set=out_dir={tmp}", "--set=steps=2", "--set=eval_every=0", "--set=eval_batches=1",
                   "--set=tensorboard=false", "--set=model.n_layer=8", "--set=model.d_model=512",
                   "--set=model.n_head=8", "--set=batch_size=2", f"--set=parallel.mode={mode}"]
            subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
            out[mode] = json.loads((Path(tmp) / "summary.json").read_text())["rank_state_bytes"]
    return out


def main():
    if not TOKENS.exists():
        sys.exit("run bench/bench_train_shakespeare.py first (it builds the token set)")
    stream = TokenStream.open(TOKENS, ROOT / "out" / "shakespeare" / "cache")
    runs = {"trainer": [], "plain": []}
    for _ in range(2):
        with tempfile.TemporaryDirectory() as tmp:
            runs["trainer"].append(trainer_run(Path(tmp)))
        runs["plain"].append(plain_loop(stream.tokens))
    tr, pl = max(runs["trainer"]), max(runs["plain"])
    print(f"trainer {tr:,.0f} tok/s | hand-written loop {pl:,.0f} tok/s | ratio {tr / pl:.3f}")
    lr = loader_rate(stream.tokens)
    print(f"data loader alone {lr:,.0f} tok/s = {lr / tr:.0f}x what the model consumes")
    mem = zero_memory()
    print("bytes per rank (params + grads + optimizer state), 25.5M-parameter model, 2 ranks:")
    for mode, ranks in mem.items():
        r = ranks[0]
        print(f"  {mode:6s} params {r['params'] / 2**20:7.1f} MiB  grads {r['grads'] / 2**20:7.1f} MiB  "
              f"optimizer {r['optimizer'] / 2**20:7.1f} MiB  total {r['total'] / 2**20:7.1f} MiB")


if __name__ == "__main__":
    main()
