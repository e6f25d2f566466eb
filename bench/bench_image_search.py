"""Near-duplicate search over 64-bit perceptual hashes: ``hamming.near_pairs`` (multi-index
hashing) vs the alternatives, on one core, in the same run.

Data: n random 64-bit hashes plus ``--planted`` near-duplicates, each a copy of a random hash
with 1 to k bits flipped. Every method must find every planted pair; times are wall seconds.

  near_pairs    corpusforge.image.hamming (blocks chosen by its cost model)
  faiss         faiss-cpu IndexBinaryMultiHash range search (nhash = m blocks of b = 64/m bits,
                m > k so that one block must agree: the pigeonhole bound it supports),
                one OpenMP thread (skipped when faiss is not installed: ``pip install faiss-cpu``)
  bk-tree       pybktree, queried with every hash (skipped above --bk-max; ``pip install pybktree``)
  brute force   numpy XOR + popcount of all pairs in blocks (skipped above --brute-max)

    .venv/bin/python bench/bench_image_search.py [--sizes 10000,100000,1000000] [--k 6]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from corpusforge.image.hamming import brute_force_pairs, choose_blocks, near_pairs  # noqa: E402


def planted_set(n: int, planted: int, k: int, seed: int = 0) -> tuple[np.ndarray, set]:
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
    src = rng.choice(n, planted, replace=False)
    copies = hashes[src].copy()
    for i in range(planted):
        for b in rng.choice(64, rng.integers(1, k + 1), replace=False):
            copies[i] ^= np.uint64(1) << np.uint64(b)
    return np.concatenate([hashes, copies]), {(int(s), n + i) for i, s in enumerate(src)}


def found(pairs, want: set) -> int:
    got = {(min(a, b), max(a, b)) for a, b in pairs}
    return len(want & got)


def run_faiss(hashes: np.ndarray, k: int):
    import faiss

    faiss.omp_set_num_threads(1)
    m = choose_blocks(len(hashes), k)
    codes = hashes.view(np.uint8).reshape(-1, 8)
    index = faiss.IndexBinaryMultiHash(64, m, 64 // m)
    index.add(codes)
    lims, _, ids = index.range_search(codes, k + 1)      # faiss: distance < radius
    q = np.repeat(np.arange(len(hashes)), np.diff(lims.astype(np.int64)))
    keep = q < ids
    return np.stack([q[keep], ids[keep]], axis=1)


def run_bktree(hashes: np.ndarray, k: int):
    import pybktree

    out = []
    # pybktree compares items with the distance function, so items are (hash, index) pairs
    tree = pybktree.BKTree(lambda a, b: bin(a[0] ^ b[0]).count("1"), [(int(h), i) for i, h in enumerate(hashes.tolist())])
    for i, h in enumerate(hashes.tolist()):
        out.extend((i, j) for _, (_, j) in tree.find((int(h), i), k) if i < j)
    return out


def timed(fn):
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return dt, peak, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--planted", type=int, default=1000)
    ap.add_argument("--brute-max", type=int, default=20_000)
    ap.add_argument("--bk-max", type=int, default=10_000)
    ap.add_argument("--faiss-max", type=int, default=100_000)
    args = ap.parse_args()
    print(f"k = {args.k}, {args.planted} planted pairs per size; one thread\n")
    print("| n | method | seconds | planted found | peak MB (numpy) | vs near_pairs |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        hashes, want = planted_set(n, args.planted, args.k)
        dt, peak, (edges, _) = timed(lambda: near_pairs(hashes, args.k))
        base = dt
        print(f"| {n:,} | near_pairs (m={choose_blocks(len(hashes), args.k)}) | {dt:.2f} | {found(edges.tolist(), want)}/{len(want)} "
              f"| {peak / 1e6:.0f} | 1.00x |", flush=True)
        methods = []
        if n <= args.faiss_max:
            try:
                import faiss  # noqa: F401
                methods.append(("faiss IndexBinaryMultiHash", run_faiss))
            except ImportError:
                print(f"| {n:,} | faiss | skipped: not installed | | | |")
        if n <= args.bk_max:
            try:
                import pybktree  # noqa: F401
                methods.append(("pybktree", run_bktree))
            except ImportError:
                print(f"| {n:,} | bk-tree | skipped: not installed | | | |")
        if n <= args.brute_max:
            methods.append(("brute force (numpy)", lambda h, k: brute_force_pairs(h, k)))
        for name, fn in methods:
            dt, peak, pairs = timed(lambda: fn(hashes, args.k))
            pairs = pairs.tolist() if isinstance(pairs, np.ndarray) else pairs
            print(f"| {n:,} | {name} | {dt:.2f} | {found(pairs, want)}/{len(want)} | {peak / 1e6:.0f} | {dt / base:.1f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
