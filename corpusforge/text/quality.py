"""Heuristic quality filtering: Gopher quality, Gopher repetition, FineWeb and C4 rules.

One stage, because the rule families share their expensive part: each batch is tokenized and
split into lines once (``TextFeatures``), and every family reads the same flat arrays. Each
family is configured (or switched off with ``null``) under its own key; the first failing rule,
in the order gopher -> repetition -> fineweb -> c4, is the rejection reason (``gopher.short_doc``,
``repetition.top_2_gram``, ...), with the measured value and threshold in the detail. Every
family's scores are written to ``score_*`` columns of kept and rejected rows alike.

Language: each document's ``lang`` (from ``text.langid``, or detected here by script when null)
selects the CJK form of each rule; see each family's module.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import Field

from corpusforge.stage import Stage, StageConfig, StageResult, StageStats, split
from corpusforge.text.features import TextFeatures, first_failure
from corpusforge.text.rules.c4 import C4
from corpusforge.text.rules.fineweb import FineWeb
from corpusforge.text.rules.gopher import GopherQuality
from corpusforge.text.rules.repetition import Repetition


class QualityConfig(StageConfig):
    gopher: GopherQuality | None = Field(default_factory=GopherQuality)
    repetition: Repetition | None = Field(default_factory=Repetition)
    fineweb: FineWeb | None = Field(default_factory=FineWeb)
    c4: C4 | None = Field(None, description="Off by default: it rewrites documents (drops lines).")

    def families(self):
        return [fam for fam in (self.gopher, self.repetition, self.fineweb, self.c4) if fam is not None]


class Quality(Stage):
    name = "text.quality"
    kinds = ("text",)
    Config = QualityConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {f"score_{s}": pa.float64() for fam in self.config.families() for s in fam.score_names()}

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        features = TextFeatures(table)
        checks, new_text = [], None
        for family in self.config.families():
            result = family.evaluate(features)
            checks += result.checks
            for name in family.score_names():
                table = table.append_column(f"score_{name}", pa.array(result.scores[name], pa.float64()))
            stats.counters.update(result.counters)
            if result.new_text is not None:
                new_text = result.new_text
        reason, detail = first_failure(checks, features.n)
        if new_text is not None:   # C4 keeps only its kept lines, in kept documents
            keep = np.equal(np.array(reason.to_pylist(), dtype=object), None)
            text = np.array(table.column("text").to_pylist(), dtype=object)
            text[keep] = new_text[keep]
            table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(text, pa.string()))
        return split(table, reason, detail, stats)
