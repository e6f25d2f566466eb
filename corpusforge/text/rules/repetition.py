"""Gopher repetition rules (Rae et al. 2021, table A1), vectorized over the whole batch.

| reason | rule (default, as in the paper and datatrove's ``GopherRepetitionFilter``) |
|---|---|
| ``repetition.dup_para_frac`` / ``dup_para_char_frac`` | paragraphs (split on blank lines) seen earlier in the document: share of paragraphs <= 0.3, of characters <= 0.2 |
| ``repetition.dup_line_frac`` / ``dup_line_char_frac`` | the same for non-empty lines: <= 0.3 and <= 0.2 |
| ``repetition.top_{n}_gram`` | characters of the most frequent n-gram x its count / document characters: n=2 <= 0.20, 3 <= 0.18, 4 <= 0.16 |
| ``repetition.dup_{n}_gram`` | characters covered by n-grams seen earlier in the document / document characters: n=5..10 <= 0.15 .. 0.10 |

**CJK form.** Tokens of Chinese and Japanese text are single characters, and a word there is
about 1.5-2 characters, so n-gram rules use n-grams of ``cjk_ngram_scale`` x n characters
(default 2: "top 2-gram" is the top 4-character sequence). Calibration on ../shared/data
(documents of >= 200 characters): at scale 1 the default thresholds reject ~10% of Chinese
Wikipedia on ``dup_5_gram`` alone; at scale 2 the 99th percentiles of zhwiki and CLUE news sit
at or under the thresholds.

**How.** Tokens are hashed once (polars, 64-bit); an n-gram's hash is a rolling combination of
its tokens' hashes over the flat token array of the whole batch; "seen earlier in the same
document" is a hash-based ``is_first_distinct`` on (document, n-gram); covered characters come
from a difference array. A repeated n-gram's (n-1)-prefix is repeated too, so for n > 5 only
positions whose shorter n-gram occurs at least twice are examined.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from corpusforge.stage import StageConfig
from corpusforge.text.features import Flat, TextFeatures, describe, ratio
from corpusforge.text.rules import RuleResult

MIX = np.uint64(0x9E3779B97F4A7C15)
FNV = np.uint64(1099511628211)


class Repetition(StageConfig):
    dup_line_frac: float | None = Field(0.3, ge=0, le=1)
    dup_para_frac: float | None = Field(0.3, ge=0, le=1)
    dup_line_char_frac: float | None = Field(0.2, ge=0, le=1)
    dup_para_char_frac: float | None = Field(0.2, ge=0, le=1)
    top_n_grams: dict[int, float] = Field(default_factory=lambda: {2: 0.20, 3: 0.18, 4: 0.16})
    dup_n_grams: dict[int, float] = Field(
        default_factory=lambda: {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10})
    cjk_ngram_scale: int = Field(2, ge=1, description="n-gram size multiplier (in characters) for zh/ja text.")

    def rules(self) -> list[str]:
        out = ["dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac"]
        return out + [f"top_{n}_gram" for n in sorted(self.top_n_grams)] + [f"dup_{n}_gram" for n in sorted(self.dup_n_grams)]

    def score_names(self) -> list[str]:
        return [f"repetition_{r}" for r in self.rules()]

    def evaluate(self, f: TextFeatures) -> RuleResult:
        chars = f.chars.astype(np.float64)
        paras = Flat.of(f.text.str.strip_chars().str.extract_all(r"[^\n]+(?:\n[^\n]+)*"))
        lines = f.nonempty_lines
        para_dups, para_dup_chars = _dup_stats(paras)
        line_dups, line_dup_chars = _dup_stats(lines)
        scores = {
            "dup_para_frac": ratio(para_dups, paras.count()), "dup_para_char_frac": ratio(para_dup_chars, chars),
            "dup_line_frac": ratio(line_dups, lines.count()), "dup_line_char_frac": ratio(line_dup_chars, chars),
        }
        scores.update(self._ngram_scores(f, chars))
        limits = {"dup_para_frac": self.dup_para_frac, "dup_para_char_frac": self.dup_para_char_frac,
                  "dup_line_frac": self.dup_line_frac, "dup_line_char_frac": self.dup_line_char_frac}
        limits.update({f"top_{n}_gram": v for n, v in self.top_n_grams.items()})
        limits.update({f"dup_{n}_gram": v for n, v in self.dup_n_grams.items()})
        checks = [(f"repetition.{rule}", scores[rule] > limits[rule],
                   describe(f"{rule} {{:.3f}} > {limits[rule]}", scores[rule]))
                  for rule in self.rules() if limits[rule] is not None]
        return RuleResult(checks, {f"repetition_{k}": v for k, v in scores.items()})

    def _ngram_scores(self, f: TextFeatures, chars: np.ndarray) -> dict[str, np.ndarray]:
        top_ns, dup_ns = set(self.top_n_grams), set(self.dup_n_grams)
        scale = self.cjk_ngram_scale if f.cjk.any() else 1
        needed = top_ns | dup_ns | ({n * scale for n in top_ns | dup_ns} if scale > 1 else set())
        raw_top, raw_dup = _ngram_stats(f.tokens, f.n, needed, {n for n in needed if n in top_ns or n // scale in top_ns},
                                        {n for n in needed if n in dup_ns or n // scale in dup_ns})
        out = {}
        for n in top_ns:
            v = raw_top[n] if scale == 1 else np.where(f.cjk, raw_top[n * scale], raw_top[n])
            out[f"top_{n}_gram"] = ratio(v, chars)
        for n in dup_ns:
            v = raw_dup[n] if scale == 1 else np.where(f.cjk, raw_dup[n * scale], raw_dup[n])
            out[f"dup_{n}_gram"] = ratio(v, chars)
        return out


def _dup_stats(flat: Flat) -> tuple[np.ndarray, np.ndarray]:
    """(repeated elements, characters of repeated elements) per document."""
    if len(flat.values) == 0:
        return np.zeros(flat.n_docs), np.zeros(flat.n_docs)
    repeated = ~flat.first_in_doc()
    return flat.count(repeated).astype(np.float64), flat.total(flat.lengths.astype(np.float64), repeated)


def _segment_max(doc: np.ndarray, values: np.ndarray, n_docs: int) -> np.ndarray:
    """Per-document maximum of ``values``; ``doc`` is non-decreasing (tokens are stored
    document by document), so this is one ``reduceat`` instead of a scatter."""
    out = np.zeros(n_docs)
    if len(doc):
        starts = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
        out[doc[starts]] = np.maximum.reduceat(values, starts)
    return out


def _ngram_stats(tok: Flat, n_docs: int, ns: set[int], top_ns: set[int], dup_ns: set[int]):
    """Per document: the most frequent n-gram's characters (counting joining spaces, like
    " ".join) x its count, for n in top_ns (ties: the longer n-gram), and the characters covered
    by n-grams seen earlier in the document, for n in dup_ns."""
    top = {n: np.zeros(n_docs) for n in top_ns}
    dup = {n: np.zeros(n_docs) for n in dup_ns}
    m = len(tok.values)
    if m == 0 or not ns:
        return top, dup
    h = tok.values.hash(seed=0).to_numpy()
    lengths = tok.lengths.astype(np.float64)
    cum = np.concatenate([[0.0], np.cumsum(lengths)])
    doc = tok.doc
    salt = doc.astype(np.uint64) * MIX
    g = h.copy()
    # Positions whose n-gram occurs at least twice in its document. A repeated n-gram's
    # (n-1)-gram prefix is repeated too, so each n only looks at the previous n's candidates.
    candidates = None
    for n in range(2, max(ns) + 1):
        span = m - n + 1
        if span <= 0:
            break
        g = g[:span] * FNV + h[n - 1:n - 1 + span]
        if candidates is None:
            idx = np.flatnonzero(doc[:span] == doc[n - 1:n - 1 + span])
            if n in top_ns and len(idx):   # documents with no repeated n-gram: the longest single one
                top[n] = _segment_max(doc[idx], cum[idx + n] - cum[idx] + (n - 1), n_docs)
        else:
            idx = candidates[candidates < span]
            idx = idx[doc[idx] == doc[idx + n - 1]]
        key = g[idx] ^ salt[idx]
        counts = pl.DataFrame({"k": key}).select(pl.len().over("k")).to_series().to_numpy()
        twice = counts >= 2
        candidates = idx[twice]
        if n in top_ns and len(candidates):
            c = counts[twice].astype(np.float64)
            value = c * (cum[candidates + n] - cum[candidates] + (n - 1))
            # most frequent first, then the larger value: one combined key per position
            packed = _segment_max(doc[candidates], c * 1e12 + value, n_docs)
            has = packed > 0
            top[n][has] = packed[has] - np.floor(packed[has] / 1e12) * 1e12
        if n in dup_ns and len(candidates):
            first = pl.Series(key[twice]).is_first_distinct().to_numpy()
            repeated = candidates[~first]
            diff = (np.bincount(repeated, minlength=m + 1)
                    - np.bincount(np.minimum(repeated + n, m), minlength=m + 1))
            covered = np.cumsum(diff[:m]) > 0
            dup[n] = tok.total(lengths, covered)
        if not len(candidates):
            break
    return top, dup
