"""Parquet reader: record-schema columns straight through, other columns mapped.

``columns`` maps schema fields to input column names (for example ``{text: content}``).
Columns not mapped and not in the record schema go into ``meta`` when ``keep_meta``.
Missing ids are computed like every other reader's; ``source`` comes from the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash
from pydantic import Field

from corpusforge import schemas
from corpusforge.io.readers.base import ReadBatch, Reader, ReaderConfig, describe_os_error, file_error_row, record_id
from corpusforge.io.storage import is_url

PAYLOAD = {"text": "text", "image": "image", "pointcloud": "points"}


class ParquetConfig(ReaderConfig):
    columns: dict[str, str] = Field(default_factory=dict, description="schema field -> input column")
    keep_meta: bool = True


class ParquetReader(Reader):
    format = "parquet"
    kinds = ("text", "image", "pointcloud")
    Config = ParquetConfig
    suffixes = (".parquet",)

    def read(self, path: Path) -> Iterator[ReadBatch]:
        cfg: ParquetConfig = self.config
        schema = schemas.load(self.kind)
        try:
            pf = pq.ParquetFile(path.open("rb") if is_url(path) else path)
        except Exception as exc:  # noqa: BLE001 - arrow raises several types for bad files
            yield ReadBatch(schema.empty_table(), file_error_row(self.kind, cfg.source, path, "unreadable_file",
                                                                 describe_os_error(exc)))
            return
        if pf.metadata.num_rows == 0:
            yield ReadBatch(schema.empty_table(), file_error_row(self.kind, cfg.source, path, "empty_file", "0 rows"))
            return
        rename = {v: k for k, v in cfg.columns.items()}
        payload = PAYLOAD[self.kind]
        if payload not in [rename.get(c, c) for c in pf.schema_arrow.names]:
            yield ReadBatch(schema.empty_table(), file_error_row(
                self.kind, cfg.source, path, "missing_column",
                f"no column {payload!r} (map one with `columns: {{{payload}: <column>}}`)"))
            return
        offset = 0
        try:
            for batch in pf.iter_batches(batch_size=self.batch_rows):
                table = pa.Table.from_batches([batch]).rename_columns(
                    [rename.get(c, c) for c in batch.schema.names])
                yield ReadBatch(self._to_records(table, schema, path, offset, payload, cfg))
                offset += batch.num_rows
        except Exception as exc:  # noqa: BLE001 - corrupt page or column chunk
            yield ReadBatch(schema.empty_table(), file_error_row(
                self.kind, cfg.source, path, "truncated_file", f"after row {offset}: {describe_os_error(exc)}",
                row=offset))

    def _to_records(self, table, schema, path, offset, payload, cfg) -> pa.Table:
        n = table.num_rows
        known = set(schema.arrow.names)
        extra = [c for c in table.column_names if c not in known]
        cols = {}
        cols["source"] = pa.array([cfg.source] * n, pa.string())
        if "id" not in table.column_names:
            values = table.column(payload).to_pylist()
            if self.kind == "pointcloud":
                values = [pa.array(v, pa.list_(pa.float32(), 3)).flatten().to_numpy().tobytes() for v in values]
            cols["id"] = pa.array([record_id(cfg.source, v) for v in values], pa.string())
        if self.kind == "image" and "content_hash" not in table.column_names:
            cols["content_hash"] = pa.array([xxhash.xxh3_128_hexdigest(v) for v in table.column("image").to_pylist()])
        if self.kind == "pointcloud" and "n_points" not in table.column_names:
            cols["n_points"] = pc.list_value_length(table.column("points")).cast(pa.int64())
        cols["src_path"] = pa.array([str(path)] * n, pa.string())
        cols["src_row"] = pa.array(range(offset, offset + n), pa.int64())
        if extra and cfg.keep_meta and "meta" not in table.column_names:
            rows = table.select(extra).to_pylist()
            cols["meta"] = pa.array([json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) for r in rows])
        for name in table.column_names:
            if name in known and name not in ("source", "src_path", "src_row"):
                cols[name] = table.column(name)
        return pa.table(cols)
