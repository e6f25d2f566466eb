"""Columnar text features shared by the quality stages.

Documents are tokenized once per batch by one polars regex kernel (Rust), then flattened:
every token (or line) becomes one element of a flat Series with the index of its document,
so per-document statistics are ``np.bincount`` over the flat arrays instead of Python loops.

Tokens are the rules' words. For alphabetic scripts a word is a whitespace-separated word, as
Gopher (Rae et al. 2021) and C4 define it: "3.5", "$19.00", "file.pdf" and "end." are one word
each, and a lone "-" or "|" is a word without a letter. For CJK text each Han, Hiragana or
Katakana character is a token of its own (Chinese and Japanese have no spaces; one character
is the unit that length and repetition rules can use without a segmenter), and runs of other
non-space characters between them (digits, Latin names, punctuation) are tokens too.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl
import pyarrow as pa

from corpusforge.text.langid import CJK_LANGS, LangIdConfig, script_detect

CJK_CHAR = r"[\p{Han}\p{Hiragana}\p{Katakana}]"
WORD_CHAR = r"[[\p{L}\p{N}\p{M}]--[\p{Han}\p{Hiragana}\p{Katakana}]]"   # Rust regex class subtraction
TOKEN = CJK_CHAR + r"|[^\s\p{Han}\p{Hiragana}\p{Katakana}]+"     # whitespace words; CJK characters apart
EDGE_PUNCT = r"^\p{P}+|\p{P}+$"

# Sentence-ending punctuation, Latin and CJK (full-width forms survive NFC; NFKC maps them to ASCII).
TERMINAL = ".!?\"'。！？…」』”’）)"
STOP_WORDS = {
    "en": ["the", "be", "to", "of", "and", "that", "have", "with"],
    "zh": ["的", "了", "是", "在", "和", "有", "也", "就", "不", "都", "这", "我", "他", "们", "一", "个"],
    "ja": ["の", "に", "は", "を", "た", "が", "で", "て", "と", "し", "れ", "さ", "な", "い"],
}


def languages(table: pa.Table) -> np.ndarray:
    """The ``lang`` column, filled in by script detection where it is null."""
    lang = table.column("lang")
    values = np.array(lang.to_pylist(), dtype=object)
    missing = np.equal(values, None)
    if missing.any():
        detected, _ = script_detect(table.column("text").filter(pa.array(missing)), LangIdConfig(), 1000)
        values[missing] = np.array(detected.to_pylist(), dtype=object)
    return values


def is_cjk(langs: np.ndarray) -> np.ndarray:
    return np.isin(langs, list(CJK_LANGS))


@dataclass
class Flat:
    """A flattened list column: ``values[i]`` belongs to document ``doc[i]``."""

    values: pl.Series
    doc: np.ndarray
    n_docs: int

    @classmethod
    def of(cls, lists: pl.Series) -> "Flat":
        lengths = lists.list.len().fill_null(0).to_numpy()
        values = lists.explode()
        if len(values) != lengths.sum():      # polars explodes an empty list into one null
            values = values.drop_nulls()
        return cls(values, np.repeat(np.arange(len(lengths), dtype=np.int64), lengths), len(lengths))

    def count(self, mask: np.ndarray | None = None) -> np.ndarray:
        doc = self.doc if mask is None else self.doc[mask]
        return np.bincount(doc, minlength=self.n_docs)

    def total(self, weights: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        if mask is not None:
            return np.bincount(self.doc[mask], weights=weights[mask], minlength=self.n_docs)
        return np.bincount(self.doc, weights=weights, minlength=self.n_docs)

    @cached_property
    def lengths(self) -> np.ndarray:
        return self.values.str.len_chars().to_numpy().astype(np.int64)

    def first_in_doc(self) -> np.ndarray:
        """True for the first occurrence of each value within its document."""
        df = pl.DataFrame({"d": self.doc, "v": self.values})
        return df.select(pl.struct("d", "v").is_first_distinct()).to_series().to_numpy()


class TextFeatures:
    """Per-batch tokenization and line splitting, computed lazily and shared by rules."""

    def __init__(self, table: pa.Table):
        self.text = pl.Series("text", table.column("text").combine_chunks() if table.num_rows else [], pl.String)
        self.n = table.num_rows
        self.langs = languages(table) if self.n else np.array([], dtype=object)
        self.cjk = is_cjk(self.langs)

    @cached_property
    def chars(self) -> np.ndarray:
        return self.text.str.len_chars().to_numpy().astype(np.int64)

    @cached_property
    def tokens(self) -> Flat:
        return Flat.of(self.text.str.extract_all(TOKEN))

    @cached_property
    def lines(self) -> Flat:
        """Lines as split on \\n (empty lines included)."""
        return Flat.of(self.text.str.split("\n"))

    @cached_property
    def nonempty_lines(self) -> Flat:
        return Flat.of(self.text.str.extract_all(r"[^\n]+"))

    @cached_property
    def token_is_word(self) -> np.ndarray:
        """Token has a letter or digit: a "non-symbol word" (datatrove's term); "-", "|", "..." are not."""
        return self.tokens.values.str.contains(r"[\p{L}\p{N}]").to_numpy()

    @cached_property
    def token_core(self) -> pl.Series:
        """Tokens without leading/trailing punctuation ("end." -> "end", '"Hello,' -> "Hello"): the
        form whose length is a word's length and that stop-word lists match, as a word tokenizer
        that splits punctuation off would give."""
        return self.tokens.values.str.replace_all(EDGE_PUNCT, "")

    @cached_property
    def token_is_punct(self) -> np.ndarray:
        return self.tokens.values.str.contains(r"^\p{P}+$").to_numpy()

    @cached_property
    def token_has_alpha(self) -> np.ndarray:
        return self.tokens.values.str.contains(r"\p{L}").to_numpy()

    def stop_word_counts(self, stop_words: dict[str, list[str]]) -> np.ndarray:
        """Stop words per document, using each document's language list (-1: no list for it)."""
        out = np.full(self.n, -1, dtype=np.int64)
        tok = self.tokens
        for lang, words in stop_words.items():
            docs = self.langs == lang
            if not docs.any() or not words:
                continue
            # only short tokens of this language's documents can be stop words: lowercase just those
            sub = np.flatnonzero(docs[tok.doc] & (tok.lengths <= max(len(w) for w in words) + 4))
            hit = tok.values.gather(sub).str.replace_all(EDGE_PUNCT, "").str.to_lowercase().is_in(words).to_numpy()
            out[docs] = np.bincount(tok.doc[sub[hit]], minlength=self.n)[docs]
        return out


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(len(num), dtype=np.float64), where=den > 0)


def first_failure(checks, n: int):
    """Combine rule results. ``checks`` is [(reason, failed mask, detail)] in priority order,
    where ``detail(idx)`` returns the detail strings for the rows ``idx`` (only rows that fail
    that rule first are formatted). Returns (reason, detail) Arrow arrays, null where all passed."""
    reason = np.full(n, None, dtype=object)
    detail = np.full(n, None, dtype=object)
    for name, failed, describe in checks:
        pick = np.flatnonzero(failed & np.equal(reason, None))
        if len(pick):
            reason[pick] = name
            detail[pick] = describe(pick)
    return pa.array(reason, pa.string()), pa.array(detail, pa.string())


def describe(template: str, *arrays):
    """A detail formatter for :func:`first_failure`: ``template.format(a[i], b[i], ...)``."""
    def run(idx):
        return [template.format(*(a[i] for a in arrays)) for i in idx]
    return run
