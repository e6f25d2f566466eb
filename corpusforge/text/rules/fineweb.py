"""FineWeb quality rules (Penedo et al. 2024; datatrove's ``FineWebQualityFilter``), columnar.

On the non-empty lines of a document:

| reason | rule (default) | CJK form |
|---|---|---|
| ``fineweb.line_punct_ratio`` | share of lines ending in terminal punctuation >= 0.12 | CJK terminal punctuation counts |
| ``fineweb.short_line_ratio`` | share of lines of <= 30 characters <= 0.67 | <= 10 characters (a CJK character carries about a word) |
| ``fineweb.char_dup_ratio`` | characters in lines seen earlier / characters (newlines excluded) <= 0.01 | same |
| ``fineweb.list_ratio`` | newlines per word (whitespace words with a letter or digit) <= 0.3 | a CJK character is a word |
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from corpusforge.stage import StageConfig
from corpusforge.text.features import TextFeatures, describe, ratio
from corpusforge.text.rules import RuleResult

# Sentence-final punctuation across scripts (Latin, CJK full/half width, Arabic, Devanagari, ...).
STOP_CHARS = ".!?;:\"'”’»)]}。！？；：」』】）…؟।॥።፧፨᙮᠃᠉"
STOP_END = "[" + "".join("\\" + c if c in "]\\^-[" else c for c in STOP_CHARS) + "]$"


class FineWeb(StageConfig):
    line_punct_thr: float | None = Field(0.12, ge=0, le=1)
    line_punct_exclude_zero: bool = False
    short_line_thr: float | None = Field(0.67, ge=0, le=1)
    short_line_length: int = Field(30, ge=0)
    short_line_length_cjk: int = Field(10, ge=0)
    char_duplicates_ratio: float | None = Field(0.01, ge=0, le=1)
    new_line_ratio: float | None = Field(0.3, ge=0)

    def score_names(self) -> list[str]:
        return ["fineweb_line_punct_ratio", "fineweb_short_line_ratio", "fineweb_char_dup_ratio", "fineweb_list_ratio"]

    def evaluate(self, f: TextFeatures) -> RuleResult:
        lines = f.nonempty_lines
        blank = lines.values.str.strip_chars().str.len_chars().to_numpy() == 0   # whitespace-only lines
        real = ~blank
        n_lines = lines.count(real)
        punct = ratio(lines.count(real & lines.values.str.contains(STOP_END).to_numpy()), n_lines)
        limit = np.where(f.cjk, self.short_line_length_cjk, self.short_line_length)
        short = ratio(lines.count(real & (lines.lengths <= limit[lines.doc])), n_lines)
        repeated = ~lines.first_in_doc() & real if len(lines.values) else np.zeros(0, bool)
        dup_chars = lines.total(lines.lengths.astype(np.float64), repeated)
        no_newline_chars = f.chars - f.text.str.count_matches("\n").to_numpy()
        dup_ratio = ratio(dup_chars, no_newline_chars)
        newlines = f.text.str.count_matches("\n").to_numpy()
        list_ratio = ratio(newlines, f.tokens.count(f.token_is_word))
        checks = [("fineweb.empty", n_lines == 0, describe("no non-empty line", n_lines))]
        if self.line_punct_thr is not None:
            failed = punct < self.line_punct_thr
            if self.line_punct_exclude_zero:
                failed &= punct > 0
            checks.append(("fineweb.line_punct_ratio", failed,
                           describe(f"{{:.3f}} of lines end in punctuation < {self.line_punct_thr}", punct)))
        if self.short_line_thr is not None:
            checks.append(("fineweb.short_line_ratio", short > self.short_line_thr,
                           describe(f"{{:.3f}} of lines are short > {self.short_line_thr}", short)))
        if self.char_duplicates_ratio is not None:
            checks.append(("fineweb.char_dup_ratio", dup_ratio > self.char_duplicates_ratio,
                           describe(f"{{:.3f}} of characters in repeated lines > {self.char_duplicates_ratio}",
                                    dup_ratio)))
        if self.new_line_ratio is not None:
            checks.append(("fineweb.list_ratio", list_ratio > self.new_line_ratio,
                           describe(f"{{:.3f}} newlines per word > {self.new_line_ratio}", list_ratio)))
        return RuleResult(checks, {"fineweb_line_punct_ratio": punct, "fineweb_short_line_ratio": short,
                                   "fineweb_char_dup_ratio": dup_ratio, "fineweb_list_ratio": list_ratio})
