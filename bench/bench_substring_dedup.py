"""text.substring_dedup side by side with google-research/deduplicate-text-datasets (Rust) and
with a suffix array from pydivsufsort, on the same bytes.

Corpus: ``bench_dedup_scale.make_input`` (documents of 5-20 sentences drawn from the real
corpora in ../shared/data, 5% planted near copies). Unit: bytes, spans of ``--length`` bytes
(Lee et al.'s 50 tokens ~ 100 bytes), every occurrence cut (``keep: none``, what the Rust tool's
``collect`` outputs), so the three must cover exactly the same bytes.

* Rust: the documents written back to back, each after ``\\xff\\xff`` + its 4-byte index (the
  separator of the tool's own ``load_dataset.py``), then its ``make_suffix_array.py``,
  ``self-similar`` and ``collect``; the byte ranges it prints are compared.
* pydivsufsort: suffix array + LCP (kasai) of the same file, one process, in memory.
* corpusforge: the stage's fingerprint -> resolve in this process (the map/reduce without file
  reading and shard writing), and the whole ``corpusforge run`` in its own process.

The Rust tool is not a dependency: build it beside the project from its public source (offline:
Debian's Rust crates, filebuffer from its repository, the unused ``bitvec`` dropped, zstd and
filebuffer versions raised) and pass its folder:

    .venv/bin/python bench/bench_substring_dedup.py --rust /tmp/sd/rust --sizes 10000 100000
    .venv/bin/python bench/bench_substring_dedup.py --scale --sizes 10000 100000 1000000   # defaults, words

Peak memory of each process: its maximum resident set size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_dedup_scale import WORK, make_input  # noqa: E402

SEP = b"\xff\xff"


def corpus(n: int) -> tuple[list[bytes], Path]:
    folder = WORK / f"in_{n}"
    make_input(n, folder)
    docs = []
    for f in sorted(folder.glob("*.jsonl")):
        with open(f, encoding="utf-8") as fh:
            docs += [json.loads(line)["text"].encode() for line in fh]
    return docs, folder


def write_raw(docs: list[bytes], path: Path) -> np.ndarray:
    """The Rust tool's input file; returns each document's first byte in it."""
    starts = np.zeros(len(docs), np.int64)
    with open(path, "wb") as f:
        at = 0
        for i, d in enumerate(docs):
            f.write(SEP + struct.pack("<I", i))
            at += 6
            starts[i] = at
            f.write(d)
            at += len(d)
    return starts


def timed(cmd: list[str], cwd: Path | None = None, stdout=None) -> tuple[float, float]:
    """(seconds, peak RSS MB) of a command run in its own process."""
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'w') if sys.argv[1] != '-' else None, "
               "stderr=subprocess.DEVNULL); "
               "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", wrapper, str(stdout) if stdout else "-", *cmd], cwd=cwd,
                         capture_output=True, text=True)
    rc, seconds, rss = res.stdout.strip().splitlines()[-1].split()
    if rc != "0":
        raise RuntimeError(f"{cmd} failed: {res.stdout[-2000:]} {res.stderr[-2000:]}")
    return float(seconds), int(rss) / 1024


def rust(raw: Path, length: int, tool: Path, mask_len: int) -> tuple[np.ndarray, float, float]:
    cache = raw.parent / "rust_cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    for p in raw.parent.glob(raw.name + ".part.*"):
        p.unlink()
    debug = tool / "target" / "debug"          # its scripts call target/debug: point it at the release build
    debug.mkdir(parents=True, exist_ok=True)
    if not (debug / "dedup_dataset").exists():
        os.symlink(tool / "target" / "release" / "dedup_dataset", debug / "dedup_dataset")
    (tool / "tmp").mkdir(exist_ok=True)        # its make_suffix_array.py merges into tmp/
    total_s, peak = 0.0, 0.0
    ranges_file = raw.parent / "rust_ranges.txt"
    make_sa = f'ulimit -Sn $(ulimit -Hn); exec "{sys.executable}" scripts/make_suffix_array.py "{raw}"'
    for cmd, out in ((["bash", "-c", make_sa], None),
                     ([str(debug / "dedup_dataset"), "self-similar", "--data-file", str(raw), "--length-threshold",
                       str(length), "--cache-dir", str(cache), "--num-threads", "2"], None),
                     ([str(debug / "dedup_dataset"), "collect", "--data-file", str(raw), "--cache-dir", str(cache),
                       "--length-threshold", str(length)], ranges_file)):
        s, m = timed(cmd, cwd=tool, stdout=out)
        total_s += s
        peak = max(peak, m)
    mask = np.zeros(mask_len, bool)
    lines = ranges_file.read_text().splitlines()
    for line in lines[lines.index("out") + 1 if "out" in lines else 0:]:
        a, b = map(int, line.split())
        mask[a:b] = True
    return mask, total_s, peak


def suffix_array(docs: list[bytes], starts: np.ndarray, length: int, mask_len: int) -> tuple[np.ndarray, float]:
    """Every byte in a window of ``length`` bytes that occurs twice: suffix array + LCP over the
    documents joined by separators that each occur once (symbols 256 + i), so no match crosses
    a document boundary."""
    import pydivsufsort

    t = time.perf_counter()
    seq = np.concatenate([np.r_[np.frombuffer(d, np.uint8).astype(np.uint32), 256 + i] for i, d in enumerate(docs)])
    where = np.concatenate([np.r_[starts[i] + np.arange(len(d)), -1] for i, d in enumerate(docs)])
    sa = pydivsufsort.divsufsort(seq)
    lcp = pydivsufsort.kasai(seq, sa)           # lcp[i]: sa[i] vs sa[i + 1]
    hit = np.flatnonzero(lcp[:-1] >= length)
    pos = where[np.concatenate([sa[hit], sa[hit + 1]])]
    cover = np.zeros(mask_len + 1, np.int64)
    np.add.at(cover, pos, 1)
    np.add.at(cover, pos + length, -1)
    mask = np.cumsum(cover[:-1]) > 0
    return mask, time.perf_counter() - t


def ours(docs: list[bytes], starts: np.ndarray, length: int, mask_len: int, work: Path) -> tuple[np.ndarray, float, dict]:
    from corpusforge.stage import StageStats
    from corpusforge.text.substring_dedup import SubstringDedup

    stage = SubstringDedup(SubstringDedup.Config(unit="bytes", min_tokens=length, keep="none", min_remaining=0))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t = time.perf_counter()
    files, batch = [], 20_000
    for u, a in enumerate(range(0, len(docs), batch)):
        texts = [d.decode() for d in docs[a:a + batch]]
        table = pa.table({"id": [str(i) for i in range(a, a + len(texts))], "source": ["s"] * len(texts), "text": texts})
        fp = stage.fingerprint(table)
        fp = fp.append_column("unit", pa.array([u] * fp.num_rows, pa.int32())).append_column(
            "row", pa.array(np.arange(fp.num_rows), pa.int64()))
        files.append(work / f"u{u:05d}.parquet")
        pq.write_table(fp, files[-1])
    stats = StageStats()
    stage.resolve(files, work, stats)
    seconds = time.perf_counter() - t
    dec = pq.read_table(work / "decisions.parquet").to_pylist()
    mask = np.zeros(mask_len, bool)
    for d in dec:
        base = starts[d["unit"] * batch + d["row"]]
        for a, b in zip(d["starts"], d["ends"]):
            mask[base + a:base + b] = True
    return mask, seconds, dict(stats.counters)


def ours_run(folder: Path, length: int, stage: dict | None = None) -> tuple[float, float, dict]:
    """``corpusforge run`` with the stage alone, in its own process: seconds, peak MB, counters."""
    out = WORK / "substring_out"
    shutil.rmtree(out, ignore_errors=True)
    stage = stage or {"stage": "text.substring_dedup", "unit": "bytes", "min_tokens": length, "keep": "none"}
    cfg = {"name": "substring", "kind": "text",
           "inputs": [{"format": "jsonl", "paths": [str(folder / "*.jsonl")], "source": "scale"}],
           "stages": [stage], "output": {"path": str(out)}}
    path = WORK / "substring_cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    s, m = timed([str(ROOT / ".venv/bin/corpusforge"), "run", str(path), "-q"])
    counters = json.loads((out / "_stats.json").read_text())["stages"]["00:text.substring_dedup"]["counters"]
    shutil.rmtree(out, ignore_errors=True)
    return s, m, {k: v for k, v in counters.items() if not k.startswith("repeated_span")}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--length", type=int, default=100)
    p.add_argument("--rust", type=Path, help="folder of a release build of deduplicate-text-datasets")
    p.add_argument("--scale", action="store_true",
                   help="only corpusforge run with the stage's defaults (words, 50 tokens, keep first) per size")
    a = p.parse_args()
    if a.scale:
        for n in a.sizes:
            _, folder = corpus(n)
            mb = json.loads((folder / "done").read_text())["mb"]
            s, m, counters = ours_run(folder, a.length, {"stage": "text.substring_dedup"})
            print(json.dumps({"docs": n, "mb": round(mb, 1), "seconds": round(s, 1), "peak_mb": round(m),
                              "windows": counters["windows"], "partitions": counters["partitions"],
                              "documents_with_cuts": counters["documents_with_cuts"],
                              "tokens_cut": counters["tokens_cut"]}), flush=True)
        return
    for n in a.sizes:
        docs, folder = corpus(n)
        raw = WORK / f"raw_{n}.bin"
        starts = write_raw(docs, raw)
        size = raw.stat().st_size
        text_bytes = np.zeros(size, bool)
        for s0, d in zip(starts, docs):
            text_bytes[s0:s0 + len(d)] = True
        row = {"docs": n, "mb": round(size / 1e6, 1)}
        mine, secs, counters = ours(docs, starts, a.length, size, WORK / "substring_work")
        row["corpusforge_map_reduce_s"] = round(secs, 1)
        row["corpusforge_bytes_cut"] = int(mine.sum())
        run_s, run_mb, _ = ours_run(folder, a.length)
        row["corpusforge_run_s"], row["corpusforge_run_peak_mb"] = round(run_s, 1), round(run_mb)
        sa_mask, sa_s = suffix_array(docs, starts, a.length, size)
        row["pydivsufsort_s"] = round(sa_s, 1)
        row["pydivsufsort_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        row["same_bytes_as_suffix_array"] = bool((sa_mask == mine).all())
        if a.rust:
            r_mask, r_s, r_mb = rust(raw, a.length, a.rust, size)
            outside = int((r_mask & ~text_bytes).sum())
            r_mask &= text_bytes
            row["rust_s"], row["rust_peak_mb"] = round(r_s, 1), round(r_mb)
            row["rust_bytes_cut"] = int(r_mask.sum())
            row["rust_bytes_in_separators"] = outside
            row["same_bytes_as_rust"] = bool((r_mask == mine).all())
            row["bytes_only_rust"] = int((r_mask & ~mine).sum())
            # the Rust tool's separator (\xff\xff + 4-byte index) can extend a match past a
            # document's edge when two documents start or end alike and their indices share
            # bytes: how many of its extra bytes lie within `length` bytes of a document's edge
            ends = starts + np.array([len(d) for d in docs])
            edge = np.zeros(size + 1, np.int64)
            for lo, hi in ((np.maximum(ends - a.length, starts), ends), (starts, np.minimum(starts + a.length, ends))):
                np.add.at(edge, lo, 1)
                np.add.at(edge, hi, -1)
            row["bytes_only_rust_at_document_edges"] = int((r_mask & ~mine & (np.cumsum(edge[:-1]) > 0)).sum())
            row["bytes_only_corpusforge"] = int((mine & ~r_mask).sum())
            row["run_vs_rust"] = round(run_s / r_s, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
