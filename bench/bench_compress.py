"""Model compression on the Tiny Shakespeare model: size, speed and quality of every method
against the uncompressed model, in one run.

Needs the trained model: ``bench/bench_train_shakespeare.py`` writes it to out/shakespeare/run.
Runs the three commands on ``trainer/configs/compress_shakespeare.yaml`` plus the variants below
and prints each report (they are also in out/shakespeare/compress*/report.md).

    .venv/bin/python bench/bench_compress.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "trainer/configs/compress_shakespeare.yaml"
RUNS = [
    ("quantize", "compress_quantize", []),
    ("quantize", "compress_static_variants", ["quantize.methods=[static]", "quantize.observer=minmax"]),
    ("quantize", "compress_static_ma_asym_group", ["quantize.methods=[static]", "quantize.observer=moving_average",
                                                  "quantize.scheme=asymmetric", "quantize.granularity=per_group"]),
    ("prune", "compress_prune_unstructured", []),
    ("prune", "compress_prune_iterative_layer", ["prune.schedule=iterative", "prune.scope=layer"]),
    ("prune", "compress_prune_mlp25_l2", ["prune.kind=structured", "prune.sparsity=0.25", "prune.target=mlp",
                                           "prune.importance=l2"]),
    ("prune", "compress_prune_mlp25_taylor", ["prune.kind=structured", "prune.sparsity=0.25", "prune.target=mlp",
                                               "prune.importance=taylor"]),
    ("prune", "compress_prune_heads25_activation", ["prune.kind=structured", "prune.sparsity=0.25",
                                                     "prune.target=heads", "prune.importance=activation"]),
    ("distill", "compress_distill", []),
    ("distill", "compress_distill_patient", ["distill.hidden_weight=1.0", "distill.baseline=false"]),
]


def main() -> None:
    only = set(sys.argv[1:])
    for method, name, overrides in RUNS:
        if only and name not in only:
            continue
        out = ROOT / "out" / "shakespeare" / name
        cmd = [sys.executable, "-m", "corpusforge.trainer.compress", method, CONFIG, f"--set=out_dir={out}"] + \
              [f"--set={o}" for o in overrides]
        print(f"## {method} {' '.join(overrides)}\n", flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        print((out / "report.md").read_text(), flush=True)


if __name__ == "__main__":
    main()
