"""Gopher quality rules (Rae et al. 2021, table A1), CJK-aware and columnar.

Defaults follow the paper and datatrove's ``GopherQualityFilter``.

A word, for alphabetic scripts, is a whitespace-separated word, as in the paper: "3.5",
"$19.00", "report.pdf" and "end." are one word each; a lone "-", "|" or "..." is a word made of
symbols only. datatrove instead splits with a word tokenizer, which makes "$19.00" three
tokens and every comma and full stop a token of its own (so punctuation lowers its alphabetic
share). For CJK text a word is one Han/kana character (see ``features``).

Rules, in order (the first failing one is the reason):

| reason | rule (default) | CJK form |
|---|---|---|
| ``gopher.short_doc`` / ``long_doc`` | words with a letter or digit within [50, 100000] | a CJK character counts as a word |
| ``gopher.avg_word_length`` | mean length of those words, leading/trailing punctuation not counted ("end." is 3), within [3, 10] | not applied (one character per token) |
| ``gopher.hash_ratio`` / ``ellipsis_ratio`` | ``#`` per word, and ``...``/``…`` runs per word, <= 0.1 | per token (``……`` is one ellipsis) |
| ``gopher.bullet_lines`` | share of lines starting with a bullet (``•`` ``-`` ``*`` ``·`` ``▪`` ...) <= 0.9 | same |
| ``gopher.ellipsis_lines`` | share of lines ending with an ellipsis <= 0.3 | same |
| ``gopher.alpha_words`` | share of words with at least one letter >= 0.8 (all words in the denominator) | Han/kana characters are letters; share of non-punctuation tokens |
| ``gopher.stop_words`` | at least 2 stop words (``the be to of and that have with``), matched lowercased without surrounding punctuation | per-language lists (built in: en, zh, ja); languages without a list skip the rule |

Scores written (by the ``text.quality`` stage): ``score_gopher_words``, ``score_gopher_avg_word_length``, ``score_gopher_symbol_ratio``,
``score_gopher_bullet_ratio``, ``score_gopher_ellipsis_line_ratio``, ``score_gopher_alpha_ratio``,
``score_gopher_stop_words``.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from corpusforge.stage import StageConfig
from corpusforge.text.features import STOP_WORDS, TextFeatures, describe, ratio
from corpusforge.text.rules import RuleResult

BULLET = r"^\s*[•●○■□▪▫‣⁃◦∙·\-\*]"
ELLIPSIS_END = r"(\.\.\.|…)\s*$"


SCORES = ("words", "avg_word_length", "symbol_ratio", "bullet_ratio", "ellipsis_line_ratio", "alpha_ratio",
          "stop_words")


class GopherQuality(StageConfig):
    min_words: int | None = Field(50, ge=0)
    max_words: int | None = Field(100_000, ge=1)
    min_avg_word_length: float | None = Field(3, ge=0)
    max_avg_word_length: float | None = Field(10, ge=0)
    max_symbol_word_ratio: float | None = Field(0.1, ge=0)
    max_bullet_lines_ratio: float | None = Field(0.9, ge=0, le=1)
    max_ellipsis_lines_ratio: float | None = Field(0.3, ge=0, le=1)
    min_alpha_words_ratio: float | None = Field(0.8, ge=0, le=1)
    min_stop_words: int | None = Field(2, ge=0)
    stop_words: dict[str, list[str]] = Field(default_factory=lambda: dict(STOP_WORDS),
                                             description="Stop words per language code.")


    def evaluate(self, f: TextFeatures) -> RuleResult:
        c = self
        tok = f.tokens
        n_tokens = tok.count()
        words = tok.count(f.token_is_word)
        core_len = f.token_core.str.len_chars().to_numpy().astype(np.float64)
        avg_len = ratio(tok.total(core_len, f.token_is_word), words)
        hashes = f.text.str.count_matches("#").to_numpy()
        ellipses = f.text.str.count_matches(r"\.\.\.|…+").to_numpy()
        hash_ratio, ellipsis_ratio = ratio(hashes, n_tokens), ratio(ellipses, n_tokens)
        lines = f.lines
        n_lines = lines.count()
        bullet_ratio = ratio(lines.count(lines.values.str.contains(BULLET).to_numpy()), n_lines)
        ellipsis_lines = ratio(lines.count(lines.values.str.contains(ELLIPSIS_END).to_numpy()), n_lines)
        # Alphabetic scripts: all whitespace words are the denominator (punctuation rides on its
        # word). CJK: a character is a token, so punctuation stands alone and is several times
        # denser per token than in English; measure the share over non-punctuation tokens
        alpha_den = np.where(f.cjk, n_tokens - tok.count(f.token_is_punct), n_tokens) if f.cjk.any() else n_tokens
        alpha_ratio = ratio(tok.count(f.token_has_alpha), alpha_den)
        stop = f.stop_word_counts(c.stop_words) if c.min_stop_words is not None else np.full(f.n, -1)
        latin = ~f.cjk

        checks = []
        if c.min_words is not None:
            checks.append(("gopher.short_doc", words < c.min_words, describe(f"{{}} words < {c.min_words}", words)))
        if c.max_words is not None:
            checks.append(("gopher.long_doc", words > c.max_words, describe(f"{{}} words > {c.max_words}", words)))
        if c.min_avg_word_length is not None:
            checks.append(("gopher.avg_word_length", latin & (words > 0) & (avg_len < c.min_avg_word_length),
                           describe(f"mean word length {{:.2f}} < {c.min_avg_word_length}", avg_len)))
        if c.max_avg_word_length is not None:
            checks.append(("gopher.avg_word_length", latin & (avg_len > c.max_avg_word_length),
                           describe(f"mean word length {{:.2f}} > {c.max_avg_word_length}", avg_len)))
        if c.max_symbol_word_ratio is not None:
            checks.append(("gopher.hash_ratio", hash_ratio > c.max_symbol_word_ratio,
                           describe(f"'#' per token {{:.3f}} > {c.max_symbol_word_ratio}", hash_ratio)))
            checks.append(("gopher.ellipsis_ratio", ellipsis_ratio > c.max_symbol_word_ratio,
                           describe(f"ellipses per token {{:.3f}} > {c.max_symbol_word_ratio}", ellipsis_ratio)))
        if c.max_bullet_lines_ratio is not None:
            checks.append(("gopher.bullet_lines", bullet_ratio > c.max_bullet_lines_ratio,
                           describe(f"{{:.2f}} of lines start with a bullet > {c.max_bullet_lines_ratio}", bullet_ratio)))
        if c.max_ellipsis_lines_ratio is not None:
            checks.append(("gopher.ellipsis_lines", ellipsis_lines > c.max_ellipsis_lines_ratio,
                           describe(f"{{:.2f}} of lines end with an ellipsis > {c.max_ellipsis_lines_ratio}",
                                    ellipsis_lines)))
        if c.min_alpha_words_ratio is not None:
            checks.append(("gopher.alpha_words", (n_tokens > 0) & (alpha_ratio < c.min_alpha_words_ratio),
                           describe(f"{{:.2f}} of tokens have a letter < {c.min_alpha_words_ratio}", alpha_ratio)))
        if c.min_stop_words is not None:
            checks.append(("gopher.stop_words", (stop >= 0) & (stop < c.min_stop_words),
                           describe(f"{{}} stop words ({{}}) < {c.min_stop_words}", stop, f.langs)))
        scores = {"words": words, "avg_word_length": avg_len, "symbol_ratio": np.maximum(hash_ratio, ellipsis_ratio),
                  "bullet_ratio": bullet_ratio, "ellipsis_line_ratio": ellipsis_lines, "alpha_ratio": alpha_ratio,
                  "stop_words": np.where(stop >= 0, stop, np.nan)}
        return RuleResult(checks, {f"gopher_{k}": np.asarray(v, np.float64) for k, v in scores.items()})

    def score_names(self) -> list[str]:
        return [f"gopher_{s}" for s in SCORES]
