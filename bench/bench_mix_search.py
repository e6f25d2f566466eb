"""Mixture search on real corpora, end to end on the CPU (issue 23's benchmark).

Sources (the shared corpora, one document a line): English plays (Tiny Shakespeare), Chinese
Wikipedia, Chinese web/news (CLUECorpusSmall), normalized and tokenized by corpusforge with a
2,048-token BPE trained on them. Target: held-out documents of the three, weighted 0.7 / 0.2 / 0.1
(en_plays / zh_wiki / zh_web). The search (bench/configs/mix_search.yaml): 16 Dirichlet
candidates around the token shares + uniform + temperature (T=2) baselines, proxies of 2 layers
x 96 dims trained on 614k tokens each (600 steps x 16 x 64), linear / quadratic / boosted-tree regressions compared by
5-fold cross-validation, verification of the chosen mixture and both baselines at twice the depth
with 3 seeds. Reports the verified target losses, the seed-to-seed spread, the regressions'
held-out rank correlation and the wall time, and writes bench/results/mix_search.json.

    .venv/bin/python bench/bench_mix_search.py            # ~10 minutes on 2 cores
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "text"
OUT = ROOT / "out" / "mix_search_bench"


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, cwd=ROOT)


def main() -> None:
    if not SHARED.exists():
        raise SystemExit(f"{SHARED} is absent: this benchmark needs the shared corpora")
    cf = str(ROOT / ".venv" / "bin" / "corpusforge")
    if not (OUT / "tokens" / "_manifest.json").exists():
        sh(cf, "run", "bench/configs/mix_search_sources.yaml", "-q")
        sh(cf, "train-tokenizer", str(OUT / "clean"), "--vocab-size", "2048")
        sh(cf, "run", "bench/configs/mix_search_tokenize.yaml", "-q")
    shutil.rmtree(OUT / "search", ignore_errors=True)
    t0 = time.perf_counter()
    sh(cf, "mix", "search", "bench/configs/mix_search.yaml")
    wall = time.perf_counter() - t0
    r = json.loads((OUT / "search" / "search.json").read_text())
    v = r["verification"]
    summary = {"cpu_cores": os.cpu_count(), "wall_seconds": round(wall, 1), "proxies": len(r["proxies"]),
               "chosen": r["chosen"], "predicted_loss": r["predicted_loss"],
               "cv": {s["model"]: {"spearman": s["spearman"], "rmse": s["rmse"]} for s in r["fit"]["cv"]},
               "regression": r["fit"]["model"],
               "verified": {k: {"mean": m["mean"], "spread": m["spread"], "losses": m["losses"], "weights": m["weights"]}
                            for k, m in v["mixtures"].items()},
               "seed_spread": v["seed_spread"], "margin": v["margin"], "ranking_holds": v["ranking_holds"],
               "beyond_seed_spread": v["beyond_seed_spread"],
               "proxy_best": min((p for p in r["proxies"] if "error" not in p), key=lambda p: p["target_loss"])["id"]}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "mix_search.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
