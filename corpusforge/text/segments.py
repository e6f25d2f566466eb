"""Hashes of a document's sentences or lines, normalized, as flat arrays (shared by the
containment and boilerplate-line stages)."""

from __future__ import annotations

import numpy as np
import polars as pl

from corpusforge.text.features import Flat

SENTENCE = r"[^.!?。！？\n]+[.!?。！？]*"
LINE = r"[^\n]+"


def normalize_segment(values: pl.Series) -> pl.Series:
    """Lowercase, runs of anything but letters and digits collapsed to one space, trimmed: the
    form in which repeated sentences, lines and paragraphs are compared."""
    return values.str.to_lowercase().str.replace_all(r"[^\p{L}\p{N}]+", " ").str.strip_chars()


def segment_hashes(texts: pl.Series, pattern: str, min_chars: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(doc index, uint64 hash, character length) of every segment of at least ``min_chars``
    characters after normalization (lowercase, runs of non-alphanumerics collapsed to a space),
    one entry per distinct segment of a document."""
    flat = Flat.of(texts.str.extract_all(pattern))
    doc = flat.doc
    norm = normalize_segment(flat.values)
    size = norm.str.len_chars().to_numpy()
    keep = size >= min_chars
    df = pl.DataFrame({"doc": doc[keep], "h": norm.filter(pl.Series(keep)).hash(seed=7), "n": size[keep]})
    df = df.unique(subset=["doc", "h"], keep="first", maintain_order=True)
    return df["doc"].to_numpy(), df["h"].to_numpy(), df["n"].to_numpy()
