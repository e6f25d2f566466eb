"""MinHash signatures for whole batches of documents, without a Python loop per document.

1. Shingles. Documents are tokenized once (polars regex): lowercase word tokens, or for CJK
   documents single characters. Token hashes (64-bit) are combined into the hash of every
   n-token window by a rolling combination over the flat token array of the batch; a document
   shorter than n tokens has one shingle, all its tokens. Duplicate shingles in a document
   change nothing (a min ignores them), so no set is built.
2. Signatures by one-permutation hashing with optimal densification (see ``signatures``):
   one mixed 64-bit hash per shingle, a scatter-min (``np.minimum.at``) into
   (document, bin) cells, and a vectorized densification pass. O(shingles), not
   O(shingles x num_perm) like applying ``num_perm`` permutations (datasketch's way).

``bench/bench_minhash.py`` compares throughput and Jaccard-estimation error with
``datasketch.MinHash.bulk`` on the same shingles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from corpusforge.text.features import CJK_CHAR, Flat

EMPTY = np.uint32(0xFFFFFFFF)
FNV = np.uint64(1099511628211)
WORD = r"[\p{L}\p{N}\p{M}_]+"


@dataclass(frozen=True)
class Shingles:
    """Shingle hashes of a batch: ``hashes[i]`` belongs to document ``doc[i]`` (non-decreasing)."""

    hashes: np.ndarray       # uint64
    doc: np.ndarray          # int64
    n_docs: int

    def counts(self) -> np.ndarray:
        return np.bincount(self.doc, minlength=self.n_docs)


def shingle(texts: pl.Series, cjk: np.ndarray, n: int, cjk_n: int) -> Shingles:
    """Word n-grams (lowercased) for most documents; character ``cjk_n``-grams for CJK ones."""
    lowered = texts.str.to_lowercase()
    words = lowered.str.extract_all(WORD)
    if cjk.any():
        chars = lowered.str.extract_all(CJK_CHAR + "|" + WORD)
        mask = pl.Series(cjk)
        words = pl.select(pl.when(mask).then(chars).otherwise(words)).to_series()
    size = np.where(cjk, cjk_n, n)
    flat = Flat.of(words)
    lengths = flat.count()
    h = flat.values.hash(seed=42).to_numpy()
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    # every document gets windows of its own size; short documents one window of all tokens
    win = np.minimum(size, np.maximum(lengths, 1))
    m = len(h)
    out_h, out_d = [], []
    for w in np.unique(win[lengths > 0]):
        docs = np.flatnonzero((win == w) & (lengths > 0))
        # positions i whose window [i, i+w) stays inside the document
        nwin = lengths[docs] - w + 1
        pos = np.repeat(starts[docs] - np.cumsum(np.r_[0, nwin[:-1]]), nwin) + np.arange(nwin.sum())
        g = h[pos].copy()
        for k in range(1, int(w)):
            g = g * FNV + h[np.minimum(pos + k, m - 1)]
        out_h.append(g)
        out_d.append(np.repeat(docs, nwin))
    if not out_h:
        return Shingles(np.zeros(0, np.uint64), np.zeros(0, np.int64), len(lengths))
    hashes, docs = np.concatenate(out_h), np.concatenate(out_d)
    order = np.argsort(docs, kind="stable")
    return Shingles(hashes[order], docs[order], len(lengths))


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: a bijective mix of 64-bit values (all bits depend on all bits)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def probe_table(num_perm: int, seed: int, attempts: int = 64) -> np.ndarray:
    """Bins that an empty bin j borrows from, in order (the same for every document, which
    is what keeps densified signatures of equal sets equal)."""
    return np.random.default_rng(seed).integers(0, num_perm, (num_perm, attempts))


def signatures(sh: Shingles, num_perm: int = 128, seed: int = 1) -> np.ndarray:
    """(n_docs, num_perm) uint32 signatures by one-permutation hashing with optimal
    densification (Li, Owen, Zhang 2012; Shrivastava 2017): each shingle is hashed once, the
    high bits pick one of ``num_perm`` bins, the low 32 bits are its value, every bin keeps its
    minimum; an empty bin takes the value of the first non-empty bin on its fixed probe
    sequence. The fraction of equal entries estimates Jaccard similarity like ``num_perm``
    independent permutations would, at O(shingles) instead of O(shingles x num_perm) work.
    Documents without shingles get all ones (and are never candidates)."""
    k = np.uint64(num_perm)
    sig = np.full((sh.n_docs, num_perm), EMPTY, dtype=np.uint32)
    if len(sh.hashes) == 0:
        return sig
    h = mix64(sh.hashes ^ np.uint64(seed * 0x632BE59BD9B4E019 & 0xFFFFFFFFFFFFFFFF))
    bins = (((h >> np.uint64(32)) * k) >> np.uint64(32)).astype(np.int64)
    values = np.minimum(h & np.uint64(0xFFFFFFFF), np.uint64(0xFFFFFFFE)).astype(np.uint32)
    np.minimum.at(sig.reshape(-1), sh.doc * num_perm + bins, values)
    # densify: documents with shingles but empty bins
    has = sh.counts() > 0
    empty_d, empty_j = np.nonzero((sig == EMPTY) & has[:, None])
    if len(empty_d):
        filled = sig.copy()
        probes = probe_table(num_perm, seed)
        todo = np.arange(len(empty_d))
        for t in range(probes.shape[1]):
            src = sig[empty_d[todo], probes[empty_j[todo], t]]
            ok = src != EMPTY
            filled[empty_d[todo[ok]], empty_j[todo[ok]]] = src[ok]
            todo = todo[~ok]
            if not len(todo):
                break
        if len(todo):   # astronomically rare: fall back to the next non-empty bin, circularly
            for i in todo:
                row = sig[empty_d[i]]
                nz = np.flatnonzero(row != EMPTY)
                filled[empty_d[i], empty_j[i]] = row[nz[np.searchsorted(nz, empty_j[i]) % len(nz)]]
        sig = filled
    return sig


def band_keys(sig: np.ndarray, bands: int, rows: int, seed: int = 7) -> np.ndarray:
    """(n_docs, bands) uint64 bucket keys: a random linear combination of each band's rows."""
    rng = np.random.default_rng(seed)
    mult = rng.integers(1, 2**63, (bands, rows), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    keys = np.zeros((sig.shape[0], bands), dtype=np.uint64)
    s = sig[:, : bands * rows].astype(np.uint64).reshape(sig.shape[0], bands, rows)
    for r in range(rows):
        keys = keys * FNV + s[:, :, r] * mult[None, :, r]
    return keys ^ (np.arange(bands, dtype=np.uint64)[None, :] * np.uint64(0x9E3779B97F4A7C15))


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    return (sig_a == sig_b).mean(axis=-1)
