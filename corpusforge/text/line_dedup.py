"""Corpus-level boilerplate removal: lines (or paragraphs, ``unit: paragraph``) that repeat
across many documents (a global stage).

Navigation bars, cookie notices, footers and share buttons repeat verbatim across thousands of
pages of a site; a line is boilerplate when (normalized: lowercase, punctuation collapsed) it
appears in at least ``min_docs`` documents and has at least ``min_chars`` characters.

fingerprint: hashes of each document's distinct lines.
resolve: count documents per line hash, partition by partition (``partitions`` passes,
    bounded memory); the boilerplate hashes are written to ``boilerplate.parquet``.
filter: removes those lines from every document (counted in ``lines_removed``); a document left
    with fewer than ``min_chars_left`` characters is rejected as ``only_boilerplate``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from corpusforge.io.atomic import commit, temp_path
from corpusforge.stage import GlobalStage, StageConfig, StageResult, StageStats, split
from corpusforge.text.features import Flat
from corpusforge.text.segments import normalize_segment

BOILERPLATE = "boilerplate.parquet"


SEPARATOR = {"line": "\n", "paragraph": "\n\n"}


def _normalized_lines(texts: pl.Series, sep: str = "\n") -> pl.DataFrame:
    """Every line or paragraph (empty ones too, so that rejoining keeps the layout) with its hash."""
    flat = Flat.of(texts.str.split(sep))
    norm = normalize_segment(flat.values)
    return pl.DataFrame({"doc": flat.doc, "line": flat.values, "h": norm.hash(seed=11), "n": norm.str.len_chars()})


class LineDedupConfig(StageConfig):
    unit: Literal["line", "paragraph"] = Field("line", description="Repeated lines, or paragraphs (split on blank lines).")
    min_docs: int = Field(10, ge=2, description="A line in at least this many documents is boilerplate.")
    min_chars: int = Field(10, ge=1, description="Shorter lines (normalized) are never boilerplate.")
    min_chars_left: int = Field(1, ge=0)
    partitions: int = Field(4, ge=1)


class LineDedup(GlobalStage):
    name = "text.line_dedup"
    kinds = ("text",)
    Config = LineDedupConfig

    def output_columns(self) -> dict[str, pa.DataType]:
        return {"count_line_dedup_removed": pa.int64()}

    def fingerprint(self, table: pa.Table) -> pa.Table:
        lines = _normalized_lines(pl.Series("t", table.column("text").combine_chunks(), pl.String),
                                  SEPARATOR[self.config.unit])
        lines = lines.filter(pl.col("n") >= self.config.min_chars).unique(["doc", "h"], maintain_order=True)
        counts = np.bincount(lines["doc"].to_numpy(), minlength=table.num_rows)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        return pa.table({"lines": pa.ListArray.from_arrays(pa.array(offsets), lines["h"].to_arrow().cast(pa.uint64()))})

    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        c: LineDedupConfig = self.config
        found = []
        for p in range(c.partitions):
            parts = [pl.read_parquet(f, columns=["lines"]).explode("lines").drop_nulls()
                     .filter(pl.col("lines") % c.partitions == p) for f in fingerprint_files]
            if not parts:
                continue
            counts = pl.concat(parts).group_by("lines").len().filter(pl.col("len") >= c.min_docs)
            found.append(counts)
        table = (pl.concat(found) if found else pl.DataFrame({"lines": pl.Series([], pl.UInt64),
                                                              "len": pl.Series([], pl.UInt32)})).sort("lines")
        stats.counters["boilerplate_lines"] = table.height
        stats.counters["boilerplate_line_occurrences"] = int(table["len"].sum() or 0)
        path = workdir / BOILERPLATE
        tmp = temp_path(path)
        pq.write_table(table.to_arrow(), tmp)
        commit(tmp, path)

    def filter(self, table: pa.Table, unit: int, row_offset: int, workdir: Path, stats: StageStats) -> StageResult:
        c: LineDedupConfig = self.config
        cache = getattr(self, "_boilerplate", None)
        if cache is None or cache[0] != str(workdir):
            hashes = pq.read_table(workdir / BOILERPLATE, columns=["lines"]).column(0).to_numpy()
            self._boilerplate = cache = (str(workdir), np.sort(hashes))
        sep = SEPARATOR[c.unit]
        lines = _normalized_lines(pl.Series("t", table.column("text").combine_chunks(), pl.String), sep)
        h = lines["h"].to_numpy()
        bp = cache[1]
        hit = np.zeros(len(h), bool)
        if len(bp):
            pos = np.minimum(np.searchsorted(bp, h), len(bp) - 1)
            hit = (bp[pos] == h) & (lines["n"].to_numpy() >= c.min_chars)
        removed = np.bincount(lines["doc"].to_numpy()[hit], minlength=table.num_rows)
        stats.counters["lines_removed"] += int(hit.sum())
        stats.counters["docs_changed"] += int((removed > 0).sum())
        text = np.array(table.column("text").to_pylist(), dtype=object)
        changed = np.flatnonzero(removed > 0)
        if len(changed):
            kept = (lines.with_columns(pl.Series("hit", hit)).filter(~pl.col("hit") & pl.col("doc").is_in(changed))
                    .group_by("doc", maintain_order=True).agg(pl.col("line").str.join(sep)))
            text[changed] = ""
            text[kept["doc"].to_numpy()] = kept["line"].to_numpy()
        table = table.set_column(table.schema.get_field_index("text"), "text", pa.array(text, pa.string()))
        table = table.append_column("count_line_dedup_removed", pa.array(removed, pa.int64()))
        left = np.array([len(t.strip()) for t in text])
        bad = left < max(c.min_chars_left, 1)
        reason = np.where(bad & (removed > 0), "only_boilerplate", None)
        detail = [f"{r} boilerplate line(s) removed, {l} characters left" if b else None
                  for r, l, b in zip(removed, left, reason != None)]  # noqa: E711
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)
