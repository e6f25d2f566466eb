"""C4 rules (Raffel et al. 2020; datatrove's ``C4QualityFilter``), per line, columnar.

Lines (split on newlines, stripped) are dropped, in this order, when they: have a word longer
than ``max_word_length``; lack terminal punctuation or end with an ellipsis (after removing
Wikipedia-style citations); have fewer than ``min_words_per_line`` words; mention javascript;
contain a cookie/terms-of-use phrase. The document is rejected when a line that survived the
earlier line rules contains "lorem ipsum" (``c4.lorem_ipsum``) or "{" (``c4.curly_bracket``), or
when the kept lines hold fewer than ``min_sentences`` sentences (``c4.too_few_sentences``).
Kept documents keep only their kept lines.

CJK form: 。！？」』 and full-width forms count as terminal punctuation; a CJK character counts
as a word (so a Chinese sentence is not "a line of one word"); sentences end at 。！？ as well.
Sentences are counted as runs of sentence-final punctuation followed by a space or the line end
(datatrove runs NLTK's punkt per line; this is the columnar approximation).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import Field

from corpusforge.stage import StageConfig
from corpusforge.text.features import CJK_CHAR, TextFeatures, describe
from corpusforge.text.rules import RuleResult

CITATION = r"\[\d*\]|\[edit\]|\[citation needed\]"
TERMINAL_END = r"[.?!\"'。！？」』”’]$"
ELLIPSIS_END = r"(\.\.\.|…)$"
WORD = CJK_CHAR + r"|[^\s\p{Han}\p{Hiragana}\p{Katakana}]+"
SENTENCE_END = r"[。！？]+[”’」』）]*|[.!?]+[\"'”’)]*(\s|$)"   # CJK full stops need no space after them
POLICY = r"terms of use|privacy policy|cookie policy|uses cookies|use of cookies|use cookies"


class C4(StageConfig):
    remove_citations: bool = True
    filter_no_terminal_punct: bool = True
    min_sentences: int | None = Field(5, ge=0)
    min_words_per_line: int | None = Field(3, ge=0)
    max_word_length: int | None = Field(1000, ge=1)
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True

    def score_names(self) -> list[str]:
        return ["c4_lines_removed_ratio", "c4_sentences"]

    def evaluate(self, f: TextFeatures) -> RuleResult:
        lines = f.lines
        raw = lines.values.str.strip_chars()
        n = len(raw)
        alive = np.ones(n, dtype=bool)
        counters = {}

        def drop(name: str, mask) -> None:
            nonlocal alive
            hit = alive & np.asarray(mask, dtype=bool)
            counters[f"c4_lines_dropped_{name}"] = int(hit.sum())
            alive &= ~hit

        if self.max_word_length is not None:
            # only lines longer than the limit can hold such a word; words are CJK-aware (a
            # Chinese paragraph has no spaces but is not one 1,000-character word)
            long_line = (raw.str.len_chars() > self.max_word_length).to_numpy()
            if long_line.any():
                longest = (raw.filter(pl.Series(long_line)).str.extract_all(WORD)
                           .list.eval(pl.element().str.len_chars()).list.max().fill_null(0).to_numpy())
                has_long_word = np.zeros(n, bool)
                has_long_word[np.flatnonzero(long_line)] = longest > self.max_word_length
                drop("long_word", has_long_word)
        line = raw.str.replace_all(CITATION, "") if self.remove_citations else raw
        if self.filter_no_terminal_punct:
            drop("no_terminal_punct", (~line.str.contains(TERMINAL_END) | line.str.contains(ELLIPSIS_END)).to_numpy())
        if self.min_words_per_line is not None:
            drop("too_few_words", (raw.str.count_matches(WORD) < self.min_words_per_line).to_numpy())
        lower = line.str.to_lowercase()
        lorem = alive & lower.str.contains("lorem ipsum", literal=True).to_numpy() if self.filter_lorem_ipsum \
            else np.zeros(n, bool)
        if self.filter_javascript:
            drop("javascript", lower.str.contains("javascript", literal=True).to_numpy())
        curly = alive & line.str.contains("{", literal=True).to_numpy() if self.filter_curly_bracket \
            else np.zeros(n, bool)
        if self.filter_policy:
            drop("policy", lower.str.contains(POLICY).to_numpy())
        sentences = lines.total(np.maximum(line.str.count_matches(SENTENCE_END).to_numpy(), 1).astype(np.float64),
                                alive)
        n_lines = lines.count()
        removed_ratio = np.divide(n_lines - lines.count(alive), np.maximum(n_lines, 1))
        checks = []
        if self.filter_lorem_ipsum:
            checks.append(("c4.lorem_ipsum", lines.count(lorem) > 0, describe("contains 'lorem ipsum'", lines.doc)))
        if self.filter_curly_bracket:
            checks.append(("c4.curly_bracket", lines.count(curly) > 0, describe("contains '{{'", lines.doc)))
        if self.min_sentences is not None:
            checks.append(("c4.too_few_sentences", sentences < self.min_sentences,
                           describe(f"{{:.0f}} sentences in kept lines < {self.min_sentences}", sentences)))
        kept = (pl.DataFrame({"d": lines.doc, "line": line, "keep": alive})
                .filter(pl.col("keep")).group_by("d", maintain_order=True).agg(pl.col("line").str.join("\n")))
        new_text = np.full(f.n, "", dtype=object)
        new_text[kept["d"].to_numpy()] = kept["line"].to_numpy()
        return RuleResult(checks, {"c4_lines_removed_ratio": removed_ratio.astype(np.float64),
                                   "c4_sentences": sentences}, new_text=new_text, counters=counters)
