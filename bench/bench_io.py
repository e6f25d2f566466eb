"""Write and read text records through corpusforge vs bare pyarrow, in the same run.

corpusforge: ShardWriter (schema conform, 256 MB shards, sha256 while writing, atomic
rename) + manifest; Dataset.read(verify=True) (sha256 of every shard checked while it is
decoded). Bare: pyarrow.parquet.write_table / read_table with the same compression.
Records are windows of real text from ../shared/data (Shakespeare, Chinese Wikipedia and
news), or of the demo samples if that folder is absent.

    .venv/bin/python bench/bench_io.py [--mb 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpusforge import schemas  # noqa: E402
from corpusforge.io.dataset import Dataset, build_manifest, write_manifest  # noqa: E402
from corpusforge.io.readers.base import text_table  # noqa: E402
from corpusforge.io.writer import ShardWriter, WriterOptions  # noqa: E402


def corpus_text() -> str:
    shared = ROOT.parent / "shared" / "data" / "text"
    files = sorted(shared.glob("*.txt")) if shared.exists() else []
    if files:
        return "\n".join(p.read_text(encoding="utf-8") for p in files)
    return "\n".join(json.loads(line)["text"] for line in open(ROOT / "data_samples/text/web_en.jsonl")
                     if line.startswith('{"text"') and line.rstrip().endswith("}"))


def make_table(target_mb: int, seed: int = 0) -> pa.Table:
    text = corpus_text()
    rng = np.random.default_rng(seed)
    texts, total = [], 0
    while total < target_mb * 1_000_000:
        n = int(rng.integers(200, 4000))
        start = int(rng.integers(0, len(text) - n))
        doc = text[start:start + n]
        texts.append(doc)
        total += len(doc.encode())
    return text_table("bench", texts)


def bench(table: pa.Table, workdir: Path, repeats: int) -> dict:
    schema = schemas.load("text")
    target = schemas.dataset_schema(schema)
    opts = WriterOptions()
    results = {k: [] for k in ("cf_write", "pa_write", "pa_rg_write", "cf_read", "pa_read", "pa_rg_read")}
    for _ in range(repeats):
        for d in ("cf", "pa", "pa_rg"):
            shutil.rmtree(workdir / d, ignore_errors=True)
            (workdir / d).mkdir(parents=True)
        t0 = time.perf_counter()
        w = ShardWriter(workdir / "cf", "part-00000", target, opts)
        w.write(table)
        shards = w.close()
        write_manifest(workdir / "cf", build_manifest(schema=schema, target=target, shards=shards, dataset="kept",
                                                      config_hash="0" * 64, lineage={}))
        results["cf_write"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        pq.write_table(table, workdir / "pa" / "data.parquet", compression="zstd", compression_level=3)
        results["pa_write"].append(time.perf_counter() - t0)
        # the same, with corpusforge's row-group size: isolates the cost of checksums,
        # schema conformance, atomic rename and the manifest
        rg_rows = pq.ParquetFile(workdir / "cf" / shards[0].path).metadata.row_group(0).num_rows
        t0 = time.perf_counter()
        pq.write_table(table, workdir / "pa_rg" / "data.parquet", compression="zstd", compression_level=3,
                       row_group_size=rg_rows)
        results["pa_rg_write"].append(time.perf_counter() - t0)
        os.sync()   # reads must not compete with the write-back of the files just written
        readers = [
            ("cf_read", lambda: Dataset.open(workdir / "cf").read(verify=True)),
            ("pa_read", lambda: pq.read_table(workdir / "pa" / "data.parquet")),
            ("pa_rg_read", lambda: pq.read_table(workdir / "pa_rg" / "data.parquet")),
        ]
        rep = len(results["cf_write"])
        for key, fn in readers[rep % 3:] + readers[:rep % 3]:    # rotate the order between repeats
            gc.collect()
            t0 = time.perf_counter()
            got = fn()
            results[key].append(time.perf_counter() - t0)
            assert got.num_rows == table.num_rows
            del got
    best = {k: min(v) for k, v in results.items()}
    return {"best_seconds": best, "shards": len(shards), "cf_bytes": sum(s.bytes for s in shards),
            "pa_bytes": (workdir / "pa" / "data.parquet").stat().st_size}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mb", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workdir", default=str(ROOT / "bench" / "_out" / "io"))
    args = p.parse_args()
    table = make_table(args.mb)
    raw_mb = sum(len(t.encode()) for t in table.column("text").to_pylist()) / 1e6
    r = bench(table, Path(args.workdir), args.repeats)
    b = r["best_seconds"]
    print(f"{table.num_rows:,} records, {raw_mb:.0f} MB of text, {r['shards']} corpusforge shard(s), "
          f"best of {args.repeats}")
    print(f"{'':6} {'corpusforge':>12} {'pyarrow':>9} {'ratio':>6}   {'pyarrow same row groups':>24} {'ratio':>6}"
          f"  {'cf MB/s':>8}")
    for op in ("write", "read"):
        cf, pa_, rg = b[f"cf_{op}"], b[f"pa_{op}"], b[f"pa_rg_{op}"]
        print(f"{op:6} {cf:11.2f}s {pa_:8.2f}s {cf / pa_:5.2f}x   {rg:23.2f}s {cf / rg:5.2f}x  {raw_mb / cf:8.0f}")
    print(f"file bytes: corpusforge {r['cf_bytes']:,}  pyarrow {r['pa_bytes']:,}")
    shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
