"""Real data: Tiny Shakespeare through corpusforge, then the trainer on nanoGPT's CPU recipe.

corpusforge: the play text as one document (text reader), a char tokenizer
(``train-tokenizer --model char``), the tokenize stage. The trainer: 4 layers, 4 heads, 128 dims,
context 64, batch 12, 2,000 iterations, no dropout (``trainer/configs/shakespeare_char.yaml``),
one process. Reports the final held-out loss (the last 10% of the characters, as nanoGPT
splits them), bits per character and the wall time.

    .venv/bin/python bench/bench_train_shakespeare.py [--steps 2000]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT.parent / "shared" / "data" / "text" / "tinyshakespeare.txt"
OUT = ROOT / "out" / "shakespeare"


def sh(*cmd):
    subprocess.run(cmd, check=True, cwd=ROOT)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=2000)
    args = p.parse_args()
    cf = str(ROOT / ".venv" / "bin" / "corpusforge")
    sh(cf, "run", "bench/configs/shakespeare_char.yaml", "-q", "--set", f"inputs.0.paths=[{SRC}]",
       "--set", f"output.path={OUT / 'raw'}")
    sh(cf, "train-tokenizer", str(OUT / "raw"), "--model", "char")
    sh(cf, "run", "bench/configs/shakespeare_tokenize.yaml", "-q")
    t0 = time.perf_counter()
    sh(sys.executable, "-m", "corpusforge.trainer", "trainer/configs/shakespeare_char.yaml", f"--set=steps={args.steps}",
       f"--set=out_dir={OUT / 'run'}")
    wall = time.perf_counter() - t0
    s = json.loads((OUT / "run" / "summary.json").read_text())
    print(f"steps {args.steps}: train loss {s['train_loss']:.4f}, val loss {s['val_loss']:.4f} "
          f"({s['val_loss'] / math.log(2):.3f} bits per character), {wall:.0f} s wall, {s['params'] / 1e6:.2f}M params")


if __name__ == "__main__":
    main()
