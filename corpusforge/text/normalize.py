"""Unicode normalization, control-character removal and whitespace cleanup, columnar.

Every operation is one Arrow compute kernel over the whole text column (RE2 regexes, ICU-free
``utf8_normalize``), no Python loop over rows.

Note for Chinese corpora: NFKC maps full-width punctuation (，：！？（）) to ASCII, which is
what most pretraining pipelines want (one token for one symbol) but changes the text; use
``form: NFC`` to keep full-width forms. The ideographic full stop 。 is not affected.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split

# C0/C1 controls except tab and newline, plus invisible characters that carry no meaning in
# running text: zero-width space, word joiner, BOM, soft hyphen. Zero-width (non-)joiners are
# kept: emoji sequences and several scripts need them.
CONTROL = r"[\x{0}-\x{8}\x{B}-\x{1F}\x{7F}-\x{9F}\x{200B}\x{2060}\x{FEFF}\x{AD}]"
HSPACE = r"[ \t\x{A0}\x{1680}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}]+"


class NormalizeConfig(StageConfig):
    form: Literal["NFC", "NFKC", "NFD", "NFKD", "none"] = Field("NFKC", description="Unicode normalization form.")
    remove_control: bool = Field(True, description="Remove control and zero-width characters (not tab/newline).")
    normalize_whitespace: bool = Field(
        True, description="Unify line endings, collapse runs of spaces, trim lines, at most one blank line in a row.")
    min_chars: int = Field(1, ge=0, description="Reject documents shorter than this after normalization.")


class Normalize(Stage):
    name = "text.normalize"
    kinds = ("text",)
    Config = NormalizeConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"count_normalize_chars_changed": pa.int64()}

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        cfg: NormalizeConfig = self.config
        text = table.column("text")
        before = pc.utf8_length(text)
        if cfg.normalize_whitespace:
            text = pc.replace_substring(text, "\r\n", "\n")
            text = pc.replace_substring(text, "\r", "\n")
        if cfg.form != "none":
            text = pc.utf8_normalize(text, form=cfg.form)
        if cfg.remove_control:
            text = pc.replace_substring_regex(text, CONTROL, "")
        if cfg.normalize_whitespace:
            text = pc.replace_substring_regex(text, HSPACE, " ")
            text = pc.replace_substring_regex(text, r" ?\n ?", "\n")
            text = pc.replace_substring_regex(text, r"\n{3,}", "\n\n")
            text = pc.utf8_trim_whitespace(text)
        length = pc.utf8_length(text)
        changed = pc.cast(pc.abs(pc.subtract(before, length)), pa.int64())
        stats.counters["docs_changed"] += pc.sum(pc.not_equal(text, table.column("text"))).as_py() or 0
        table = table.set_column(table.schema.get_field_index("text"), "text", text)
        table = table.append_column("count_normalize_chars_changed", changed)
        too_short = pc.less(length, cfg.min_chars)
        reason = pc.if_else(too_short, pa.scalar("too_short_after_normalize"), pa.scalar(None, pa.string()))
        detail = pc.if_else(too_short, pc.binary_join_element_wise(
            pa.scalar(""), pc.cast(length, pa.string()), pa.scalar(f" chars < min_chars {cfg.min_chars}"), ""),
            pa.scalar(None, pa.string()))
        return split(table, reason, detail, stats)
