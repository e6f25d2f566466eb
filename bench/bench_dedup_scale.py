"""Scale of the text dedup pipeline: wall time and peak memory at 10k, 100k and 1M documents.

Documents are 5-20 sentences drawn at random from the sentences of the real corpora in
../shared/data (English lines of Tiny Shakespeare, Chinese sentences of zhwiki and CLUE), so two
random documents share almost nothing; 5% are planted near-duplicates of a recent document
(two words changed), and documents that drew the same sentences by chance are exact copies.
Each size runs ``corpusforge run`` (normalize -> exact dedup -> MinHash near dedup, one worker)
in its own process; peak memory is that process's maximum resident set size.

    .venv/bin/python bench/bench_dedup_scale.py [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "text"
WORK = ROOT / "bench" / "_data" / "scale"


def make_input(n: int, folder: Path, seed: int = 0, per_file: int = 100_000) -> float:
    if (folder / "done").exists():
        return json.loads((folder / "done").read_text())["mb"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    import re

    en = [l for l in (DATA / "tinyshakespeare.txt").read_text().splitlines() if len(l) > 20]
    zh = [s for f in ("zhwiki_sample.zh.txt", "clue_corpus_small_sample.zh.txt")
          for s in re.split(r"(?<=。)", (DATA / f).read_text()) if len(s) > 10]
    rng = random.Random(seed)
    total, recent = 0, []
    for part in range(0, n, per_file):
        with open(folder / f"part{part // per_file:04d}.jsonl", "w", encoding="utf-8") as f:
            for i in range(part, min(n, part + per_file)):
                planted = bool(recent) and rng.random() < 0.05
                if planted:
                    base = rng.choice(recent)
                    sep = " " if base.count(" ") > 20 else ""     # Chinese: change characters
                    units = base.split(" ") if sep else list(base)
                    for _ in range(2):
                        units[rng.randrange(len(units))] = "changed" if sep else "变"
                    doc = sep.join(units)
                else:
                    pool, sep = (zh, "") if rng.random() < 0.4 else (en, "\n")
                    doc = sep.join(rng.choice(pool) for _ in range(rng.randint(5, 20)))
                    recent = (recent + [doc])[-1000:]
                line = json.dumps({"text": doc, "planted": planted}, ensure_ascii=False) + "\n"
                total += len(line.encode())
                f.write(line)
    (folder / "done").write_text(json.dumps({"mb": total / 1e6}))
    return total / 1e6


def run(n: int) -> dict:
    folder = WORK / f"in_{n}"
    mb = make_input(n, folder)
    out = WORK / f"out_{n}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = {"name": f"scale-{n}", "kind": "text",
           "inputs": [{"format": "jsonl", "paths": [str(folder / "*.jsonl")], "source": "scale"}],
           "stages": [{"stage": "text.normalize"}, {"stage": "text.exact_dedup"}, {"stage": "text.near_dedup"}],
           "output": {"path": str(out)}}
    cfg_path = WORK / f"cfg_{n}.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "r = subprocess.run(sys.argv[1:]); "
               "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", wrapper, str(ROOT / ".venv/bin/corpusforge"), "run", str(cfg_path), "-q"],
                         capture_output=True, text=True)
    rc, seconds, rss_kb = res.stdout.strip().splitlines()[-1].split()
    if rc != "0":
        raise RuntimeError(res.stderr[-2000:])
    stats = json.loads((out / "_stats.json").read_text())
    nd = stats["stages"]["02:text.near_dedup"]
    import polars as pl

    rej = pl.scan_parquet(str(out / "_rejected" / "*.parquet")).select("meta", "reject_reason").collect()
    planted_total = sum(pl.scan_parquet(str(f)).select(pl.col("meta").str.contains('"planted": true').sum())
                        .collect().item() for f in [out / "*.parquet", out / "_rejected" / "*.parquet"])
    caught = rej.filter(pl.col("meta").str.contains('"planted": true')
                        & pl.col("reject_reason").is_in(["near_duplicate", "duplicate"])).height
    shutil.rmtree(out, ignore_errors=True)
    return {"docs": n, "mb": mb, "seconds": float(seconds), "peak_rss_mb": int(rss_kb) / 1024,
            "exact_dups": stats["stages"]["01:text.exact_dedup"]["rejected"], "near_dups": nd["rejected"],
            "resolve_seconds": nd.get("resolve_seconds"), "signature_store_mb": n * 128 * 4 / 1e6,
            "planted": planted_total, "planted_caught": caught}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = p.parse_args()
    rows = [run(n) for n in args.sizes]
    print(f"{'docs':>9} {'MB':>7} {'seconds':>8} {'s/100k docs':>11} {'peak RSS MB':>11} {'sig store MB':>12} "
          f"{'exact':>7} {'near':>7} {'planted caught':>15}")
    for r in rows:
        print(f"{r['docs']:9,} {r['mb']:7.0f} {r['seconds']:8.1f} {r['seconds'] / r['docs'] * 1e5:11.1f} "
              f"{r['peak_rss_mb']:11.0f} {r['signature_store_mb']:12.0f} {r['exact_dups']:7,} {r['near_dups']:7,} "
              f"{r['planted_caught']:7,}/{r['planted']:,}")


if __name__ == "__main__":
    main()
