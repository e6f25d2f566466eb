"""Exact document deduplication across the whole dataset (a global stage).

fingerprint: xxh3-128 of the text (of source + text with ``per_source``), as 16 bytes.
resolve:     polars over all units' fingerprints; in every group of equal hashes the first
             row in input order (unit, row) is kept, the others are rejected, naming the kept id.
filter:      the generic decisions filter.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import xxhash
from pydantic import Field

from corpusforge.stage import GlobalStage, StageConfig, StageStats, write_decisions


class ExactDedupConfig(StageConfig):
    per_source: bool = Field(False, description="Only documents of the same source count as duplicates.")


class ExactDedup(GlobalStage):
    name = "text.exact_dedup"
    kinds = ("text",)
    Config = ExactDedupConfig

    def fingerprint(self, table: pa.Table) -> pa.Table:
        texts = table.column("text").to_pylist()
        if self.config.per_source:
            sources = table.column("source").to_pylist()
            digests = [xxhash.xxh3_128_digest(s.encode() + b"\0" + t.encode()) for s, t in zip(sources, texts)]
        else:
            digests = [xxhash.xxh3_128_digest(t.encode()) for t in texts]
        return pa.table({"hash": pa.array(digests, pa.binary(16)), "id": table.column("id")})

    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:
        fps = pl.scan_parquet([str(f) for f in fingerprint_files]).select("hash", "id", "unit", "row")
        ranked = fps.sort(["unit", "row"]).with_columns(
            pl.col("id").first().over("hash").alias("first_id"),
            pl.int_range(pl.len()).over("hash").alias("n"),
            pl.len().over("hash").alias("size"),
        )
        dups = ranked.filter(pl.col("n") > 0).select(
            "unit", "row",
            pl.lit("duplicate").alias("reason"),
            pl.format("exact duplicate of {} ({} copies)", "first_id", "size").alias("detail"),
        ).collect()
        groups = ranked.filter((pl.col("n") == 0) & (pl.col("size") > 1)).select(pl.len()).collect().item()
        stats.counters["duplicate_groups"] += int(groups)
        stats.counters["duplicates"] += dups.height
        write_decisions(workdir, dups.to_arrow())
