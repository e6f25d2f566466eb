"""All pairs of 64-bit hashes within Hamming distance k, without an all-pairs loop.

Multi-index hashing with the generalised pigeonhole principle: cut the 64 bits into ``m``
contiguous blocks (m > k). Two hashes that differ in at most k bits differ in at most k
blocks, so at least ``m - k`` blocks agree exactly. For every choice of ``m - k`` blocks
(C(m, k) tables) the hashes are sorted by those blocks' bits; equal runs are candidate pairs,
which are checked with a popcount of the XOR. Every pair within distance k is found (no
false negatives by construction); the work is C(m, k) sorts plus the candidates, whose number
falls as 2^-(bits in the key). ``m`` is chosen for each n by that cost model: at k = 6, m = 8
(16-bit keys, 28 tables) for 10k hashes, m = 9 (21-bit keys, 84 tables) for a million.

Repeated values are collapsed first, so ten thousand identical hashes (blank images) cost
one entry, not fifty million pairs; :func:`near_pairs` returns edges that connect every
group of equal hashes (a star) and one edge per pair of distinct values within k: exactly the
edges connected components need.
"""

from __future__ import annotations

from itertools import combinations
from math import comb, log2

import numpy as np

_U64 = np.uint64


def blocks(m: int) -> list[tuple[int, int]]:
    """(offset, width) of m contiguous blocks covering 64 bits, widths differing by at most one."""
    widths = [64 // m + (1 if i < 64 % m else 0) for i in range(m)]
    offsets = np.concatenate([[0], np.cumsum(widths)[:-1]]).tolist()
    return list(zip(offsets, widths))


def choose_blocks(n: int, k: int) -> int:
    """The number of blocks m minimising C(m, k) * (sort of n) + expected random candidates."""
    best, best_cost = k + 1, float("inf")
    for m in range(k + 1, min(64, k + 16) + 1):
        need = m - k
        key_bits = sum(sorted(w for _, w in blocks(m))[:need])
        tables = comb(m, k)
        cost = tables * (n * max(1.0, log2(max(n, 2))) + n * n / 2.0 ** (key_bits + 1))
        if cost < best_cost:
            best, best_cost = m, cost
    return best


def _pairs_among_unique(values: np.ndarray, k: int, m: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) into ``values`` (distinct uint64) with popcount(v_i ^ v_j) <= k."""
    n = len(values)
    if n < 2:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int8)
    if k == 0:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int8)
    m = m or choose_blocks(n, k)
    if m <= k:
        raise ValueError(f"blocks ({m}) must exceed the distance ({k})")
    parts = blocks(m)
    index_bits = max(1, int(n - 1).bit_length())
    found_i, found_j, found_d = [], [], []
    for chosen in combinations(range(m), m - k):
        key = np.zeros(n, dtype=_U64)
        shift = 0
        for b in chosen:
            off, width = parts[b]
            key |= ((values >> _U64(off)) & _U64((1 << width) - 1)) << _U64(shift)
            shift += width
        if shift + index_bits <= 64:      # one sort of key|index beats an argsort
            packed = np.sort((key << _U64(index_bits)) | np.arange(n, dtype=_U64))
            keys = packed >> _U64(index_bits)
            order = (packed & _U64((1 << index_bits) - 1)).astype(np.int64)
        else:
            order = np.argsort(key, kind="stable")
            keys = key[order]
        # equal runs: position p pairs with p + d while keys agree; runs shrink as d grows
        pos = np.flatnonzero(keys[1:] == keys[:-1])
        d = 1
        while len(pos):
            i, j = order[pos], order[pos + d]
            dist = np.bitwise_count(values[i] ^ values[j])
            ok = dist <= k
            found_i.append(i[ok]), found_j.append(j[ok]), found_d.append(dist[ok].astype(np.int8))
            d += 1
            pos = pos[pos + d < n]
            pos = pos[keys[pos + d] == keys[pos]]
    if not found_i:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int8)
    i, j, dist = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_d)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    code, first = np.unique(lo * n + hi, return_index=True)      # a pair is found by every table it agrees in
    return np.stack([code // n, code % n], axis=1), dist[first]


def near_pairs(hashes: np.ndarray, k: int, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Edges (i, j), i < j, over positions in ``hashes`` (uint64) and their Hamming distances:
    every group of equal hashes as a star from its first position, and for each pair of distinct
    values within distance k one edge between their first positions. Connected components of
    these edges equal those of all pairs within k."""
    hashes = np.ascontiguousarray(hashes, dtype=_U64)
    values, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    dup = np.flatnonzero(first[inverse] != np.arange(len(hashes)))
    star = np.stack([first[inverse[dup]], dup], axis=1).astype(np.int64)
    pairs, dist = _pairs_among_unique(values, k, m)
    edges = np.concatenate([star, first[pairs].astype(np.int64)]) if len(pairs) else star
    edges = np.sort(edges, axis=1)
    return edges, np.concatenate([np.zeros(len(star), np.int8), dist])


def brute_force_pairs(hashes: np.ndarray, k: int, chunk: int = 2048) -> np.ndarray:
    """All position pairs (i < j) within distance k by comparing everything: the reference
    the tests and the benchmark check the index against (quadratic; small n only)."""
    hashes = np.ascontiguousarray(hashes, dtype=_U64)
    out = []
    for s in range(0, len(hashes), chunk):
        block = hashes[s:s + chunk]
        d = np.bitwise_count(block[:, None] ^ hashes[None, :])
        i, j = np.nonzero(d <= k)
        i = i + s
        keep = i < j
        out.append(np.stack([i[keep], j[keep]], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), np.int64)
