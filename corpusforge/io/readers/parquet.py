"""Parquet reader: record-schema columns straight through, other columns mapped.

``columns`` maps schema fields to input column names (for example ``{text: content}``).
Columns not mapped and not in the record schema go into ``meta`` when ``keep_meta``.
Missing ids are computed like every other reader's; ``source`` comes from the config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash
from pydantic import Field

from corpusforge import schemas
from corpusforge.io.readers.base import (ReadBatch, Reader, ReaderConfig, bad_rows, describe_os_error, dumps_meta,
                                         file_error_row, record_id, text_column)
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
        batches = pf.iter_batches(batch_size=self.batch_rows)
        while True:
            try:
                batch = next(batches, None)
            except Exception as exc:  # noqa: BLE001 - corrupt page or column chunk
                yield ReadBatch(schema.empty_table(), file_error_row(
                    self.kind, cfg.source, path, "truncated_file", f"after row {offset}: {describe_os_error(exc)}",
                    row=offset))
                return
            if batch is None:
                return
            table = pa.Table.from_batches([batch]).rename_columns([rename.get(c, c) for c in batch.schema.names])
            yield self._to_records(table, schema, path, offset, payload, cfg)
            offset += batch.num_rows

    def _payload(self, column: pa.ChunkedArray, target: pa.DataType,
                 offset: int) -> tuple[pa.Array, dict[int, tuple[str, str]]]:
        """The payload column in the schema's type, and {row in the batch: (reason, detail)} for rows
        that have none: nulls, bytes that are not UTF-8, a column of another type altogether."""
        name = PAYLOAD[self.kind]
        if self.kind == "text":
            return text_column(column, offset, name)
        col = column.combine_chunks()
        base = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
        try:
            if self.kind == "image" and not (pa.types.is_binary(base) or pa.types.is_large_binary(base)):
                raise pa.ArrowTypeError(base)           # an image is bytes: numbers are not cast into it
            col = pc.cast(col, target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            why = f"column {name!r} is {column.type}, expected {target}"
            return pa.nulls(len(col), target), {i: ("wrong_column_type", why) for i in range(len(col))}
        return col, {int(i): ("missing_column", f"row {offset + i}: {name!r} is null")
                     for i in np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))}

    def _to_records(self, table, schema, path, offset, payload, cfg) -> ReadBatch:
        values, bad = self._payload(table.column(payload), schema.arrow.field(payload).type, offset)
        rejected = None
        src_rows = np.arange(offset, offset + table.num_rows)
        if bad:
            rows = sorted(bad)
            raw = table.column(payload).take(pa.array(rows, pa.int64())).to_pylist()
            if self.kind == "text":     # one table for all of them (a whole column of numbers is many rows)
                rejected = bad_rows(cfg.source, str(path), [("" if v is None else str(v)[:10_000], offset + i, *bad[i])
                                                           for i, v in zip(rows, raw)])
            else:
                rejected = pa.concat_tables([file_error_row(self.kind, cfg.source, path, *bad[i], row=offset + i)
                                             for i in rows], promote_options="default")
            keep = np.ones(table.num_rows, bool)
            keep[rows] = False
            table, values, src_rows = table.filter(keep), values.filter(keep), src_rows[keep]
        table = table.set_column(table.column_names.index(payload), payload, values)
        return ReadBatch(self._records(table, schema, path, src_rows, payload, cfg), rejected)

    def _records(self, table, schema, path, src_rows, payload, cfg) -> pa.Table:
        n = table.num_rows
        known = set(schema.arrow.names)
        # record-schema columns of another type are cast; one that cannot be goes to meta, never lost
        typed = {}
        for name in table.column_names:
            if name in known and name not in ("source", "src_path", "src_row"):
                try:
                    typed[name] = pc.cast(table.column(name), schema.arrow.field(name).type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    pass
        extra = [c for c in table.column_names if c not in typed and c not in ("source", "src_path", "src_row")]
        cols = {}
        cols["source"] = pa.array([cfg.source] * n, pa.string())
        ids = typed.get("id")
        if ids is None or ids.null_count:
            values = table.column(payload).to_pylist()
            if self.kind == "pointcloud":
                values = [pa.array(v, pa.list_(pa.float32(), 3)).flatten().to_numpy().tobytes() for v in values]
            given = ids.to_pylist() if ids is not None else [None] * n
            cols["id"] = pa.array([g if g is not None else record_id(cfg.source, v) for g, v in zip(given, values)],
                                  pa.string())
        if self.kind == "image" and "content_hash" not in typed:
            cols["content_hash"] = pa.array([xxhash.xxh3_128_hexdigest(v) for v in table.column("image").to_pylist()])
        if self.kind == "pointcloud" and "n_points" not in typed:
            cols["n_points"] = pc.list_value_length(table.column("points")).cast(pa.int64())
        cols["src_path"] = pa.array([str(path)] * n, pa.string())
        cols["src_row"] = pa.array(src_rows, pa.int64())
        if extra and cfg.keep_meta and "meta" not in typed:
            rows = table.select(extra).to_pylist()
            cols["meta"] = pa.array([dumps_meta(r) for r in rows], pa.string())
        for name, col in typed.items():
            cols.setdefault(name, col)
        return pa.table(cols)
