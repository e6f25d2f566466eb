"""Compression on the GPU (issue 21): train a GPT on the benchmark tokens with the trainer, then
quantize it on CUDA with every method against its bf16 self: held-out perplexity change, batch-1
decoding latency (one token through the model, replayed as a CUDA graph) and prefill tokens/s;
then pruning with fine-tuning and distillation, also on the GPU. Skips cleanly without a GPU.

    python bench/bench_compress_gpu.py --dataset out/gpu/tokens [--steps 300] [--out DIR] [--parts train,quantize,prune,distill]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
QUANT = "[int8_weight_only,int8_dynamic,int4_tinygemm,int4_weight_only,nf4,float8_weight_only,float8_dynamic]"


def sh(cmd: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-3000:], r.stderr[-5000:])
        raise SystemExit(f"failed: {' '.join(cmd[:6])}")
    print(r.stdout[-6000:], flush=True)
    return time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default=str(ROOT / "out" / "gpu" / "tokens"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--out", default=str(ROOT / "bench" / "_out" / "compress_gpu"))
    p.add_argument("--parts", default="train,quantize,prune,distill")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to measure (skipped)")
        return
    out, parts = Path(a.out), a.parts.split(",")
    run = out / "run"
    py = sys.executable
    common = [f"--set=run={run}", "--set=device=cuda", "--set=batch_size=8", "--set=eval_batches=8",
              "--set=calibration_batches=4"]
    if "train" in parts:    # the 936M model of bench_gpu.py
        wall = sh([py, "-m", "corpusforge.trainer", f"--set=data.dataset={a.dataset}", "--set=model.n_layer=16", "--set=model.n_head=16",
                   "--set=model.d_model=2048", "--set=model.seq_len=2048", "--set=batch_size=8", f"--set=steps={a.steps}",
                   "--set=precision=bf16", "--set=device=cuda", "--set=compile=true", "--set=optim.lr=3e-4",
                   "--set=optim.warmup_steps=30", "--set=data.sampling=random", "--set=data.val_fraction=0.1",
                   "--set=eval_every=0", "--set=log_every=50", "--set=tensorboard=false", f"--set=out_dir={run}"])
        print(f"trained {a.steps} steps in {wall:.0f} s")
    if "quantize" in parts:
        wall = sh([py, "-m", "corpusforge.trainer.compress", "quantize", "trainer/configs/compress_demo.yaml", *common,
                   f"--set=out_dir={out / 'quantize'}", f"--set=quantize.methods={QUANT}", "--set=quantize.group_size=128"])
        print(f"quantize: {wall:.0f} s")
    if "prune" in parts:
        wall = sh([py, "-m", "corpusforge.trainer.compress", "prune", "trainer/configs/compress_demo.yaml", *common,
                   "--set=precision=fp32", f"--set=out_dir={out / 'prune'}", "--set=prune.sparsity=0.5",
                   "--set=prune.finetune_steps=100"])
        print(f"prune (50% unstructured, 100 fine-tuning steps, fp32 weights on the GPU): {wall:.0f} s")
    if "distill" in parts:
        wall = sh([py, "-m", "corpusforge.trainer.compress", "distill", "trainer/configs/compress_demo.yaml", *common,
                   "--set=precision=fp32", f"--set=out_dir={out / 'distill'}", "--set=distill.steps=200",
                   "--set=distill.student.n_layer=4", "--set=distill.student.d_model=512", "--set=distill.student.n_head=8",
                   "--set=distill.student.seq_len=2048"])
        print(f"distill (4-layer d512 student, 200 steps, on the GPU): {wall:.0f} s")


if __name__ == "__main__":
    main()
