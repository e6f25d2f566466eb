"""Token streams and rolling window hashes for exact-substring deduplication.

A document becomes a sequence of 64-bit symbols in one of three units:

* ``words``: runs of letters, digits and marks, each CJK character (Han, kana) its own token.
  Punctuation and spacing are not tokens, so a copy that was reflowed or repunctuated still
  matches; case counts (this is exact-substring matching, not normalization).
* ``bytes``: the UTF-8 bytes, the unit of Lee et al. 2021 and deduplicate-text-datasets.
* ``tokenizer``: the ids of a ``tokenizers`` JSON file (the model's own tokens).

The hash of every window of ``length`` symbols is a polynomial hash mod 2^64 computed for the
whole batch from one prefix sum, with no loop over windows: with y_i = x_i * b^-i (b odd, so
invertible mod 2^64) and S its prefix sum, S[p+L] - S[p] = sum_k x_(p+k) b^-(p+k), and
multiplying by b^p gives sum_k x_(p+k) b^-k, the same value wherever the window sits. Two
bases give 128 bits per window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from corpusforge.text.features import CJK_CHAR, WORD_CHAR, Flat
from corpusforge.text.minhash import mix64

WORD_TOKEN = f"{CJK_CHAR}|{WORD_CHAR}+"
# a token with the non-token characters before it: matches tile the text from its start. The
# prefix never takes a character that can start a token: CJK_CHAR's scripts hold symbols too
# (the Kangxi and CJK radicals are So in the Han script, common in PDF-extracted Chinese), and a
# prefix that ate one would give this pattern one token fewer than WORD_TOKEN
PREFIXED_TOKEN = rf"[^\p{{L}}\p{{N}}\p{{M}}\p{{Han}}\p{{Hiragana}}\p{{Katakana}}]*(?:{WORD_TOKEN})"
BASES = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))


@dataclass(frozen=True)
class Tokens:
    """The tokens of a batch: ``symbols[i]`` is a token of document ``doc[i]`` (non-decreasing);
    ``starts[i]`` its first character (first byte for ``bytes``)."""

    symbols: np.ndarray      # uint64
    doc: np.ndarray          # int64
    starts: np.ndarray       # int64
    n_docs: int

    def counts(self) -> np.ndarray:
        return np.bincount(self.doc, minlength=self.n_docs)


def tokens(texts: pa.Array, unit: str, tokenizer=None) -> Tokens:
    """The tokens of a string array (nulls are empty documents)."""
    texts = pc.fill_null(texts, "").cast(pa.large_string())
    n = len(texts)
    if unit == "bytes":
        # a large_string array is its UTF-8 bytes back to back plus int64 offsets: no copy
        offsets = np.frombuffer(texts.buffers()[1], np.int64, n + 1, texts.offset * 8)
        data = np.frombuffer(texts.buffers()[2] or b"", np.uint8)[offsets[0]:offsets[-1]]
        lengths = np.diff(offsets)
        doc = np.repeat(np.arange(n, dtype=np.int64), lengths)
        starts = np.arange(len(data), dtype=np.int64) - np.repeat(offsets[:-1] - offsets[0], lengths)
        return Tokens(data.astype(np.uint64) + np.uint64(1), doc, starts, n)
    if unit == "tokenizer":
        enc = tokenizer.encode_batch(texts.to_pylist(), add_special_tokens=False)
        lengths = np.array([len(e.ids) for e in enc], np.int64)
        ids = np.fromiter((i for e in enc for i in e.ids), np.uint64, int(lengths.sum()))
        starts = np.fromiter((o[0] for e in enc for o in e.offsets), np.int64, int(lengths.sum()))
        return Tokens(ids + np.uint64(1), np.repeat(np.arange(n, dtype=np.int64), lengths), starts, n)
    series = pl.Series("text", texts)
    words = Flat.of(series.str.extract_all(WORD_TOKEN))
    prefixed = Flat.of(series.str.extract_all(PREFIXED_TOKEN))
    ends = _cumsum_within(prefixed.lengths, prefixed.doc)
    starts = ends - words.lengths
    return Tokens(words.values.hash(seed=11).to_numpy(), words.doc, starts, n)


def _cumsum_within(values: np.ndarray, doc: np.ndarray) -> np.ndarray:
    """Running sum of ``values`` restarting at each document."""
    total = np.cumsum(values)
    if not len(values):
        return total
    first = np.r_[True, doc[1:] != doc[:-1]]
    base = np.where(first, total - values, 0)
    return total - np.maximum.accumulate(base)


def window_hashes(tok: Tokens, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hash1, hash2, doc) of every window of ``length`` tokens that lies inside one document,
    in document then position order; a document shorter than ``length`` has none."""
    counts = tok.counts()
    m = len(tok.symbols)
    doc_start = np.cumsum(counts) - counts
    # windows start at every position whose document has `length` tokens from there on
    valid = np.arange(m, dtype=np.int64) - doc_start[tok.doc] + length <= counts[tok.doc]
    pos = np.flatnonzero(valid)
    x = mix64(tok.symbols)
    out = []
    with np.errstate(over="ignore"):
        for base in BASES:
            inv = np.uint64(pow(int(base), -1, 1 << 64))
            prefix = np.zeros(m + 1, np.uint64)
            np.cumsum(x * _powers(inv, m), out=prefix[1:])
            out.append((prefix[pos + length] - prefix[pos]) * _powers(base, m)[pos])
    return out[0], out[1], tok.doc[pos]


def _powers(base: np.uint64, m: int) -> np.ndarray:
    """base**0 .. base**(m-1) mod 2^64 (uint64 products wrap)."""
    p = np.full(m, base, np.uint64)
    if m:
        p[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(p, dtype=np.uint64)
