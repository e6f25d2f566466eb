"""Sharded Parquet writer.

Rows are buffered into row groups (by rows and by uncompressed Arrow bytes) and row groups
into shards (by rows and by compressed bytes on disk). Each shard is written to a local
staging file, hashed while it is written, and committed to its final name when complete
(renamed beside it on a local filesystem, uploaded to its final key on an object store:
see ``io.storage``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpusforge.io.atomic import HashingFile
from corpusforge.io.storage import Store
from corpusforge.schemas import conform

# Columns with few distinct values, worth Parquet dictionary encoding. Free text and
# binary columns are not: trying a dictionary on them only costs time.
DICTIONARY_COLUMNS = ("source", "lang", "format", "mode", "label", "group", "reject_stage", "reject_reason")


@dataclass(frozen=True)
class ShardInfo:
    path: str       # relative to the dataset folder
    rows: int
    bytes: int
    sha256: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class WriterOptions:
    shard_rows: int | None = None                # roll to a new shard after this many rows
    shard_bytes: int | None = 256 << 20          # ... or once the file reaches this size
    row_group_rows: int = 100_000
    row_group_bytes: int = 64 << 20              # uncompressed Arrow bytes per row group
    compression: str = "zstd"
    compression_level: int | None = 3


class ShardWriter:
    """Write tables to ``<directory>/<prefix>-NNNNN.parquet`` shards of schema ``target``.

    ``directory`` is a local folder, or (with ``store``) a folder of that store.
    ``close()`` returns the :class:`ShardInfo` of every shard written, in order. A writer
    that is never closed (a crash) leaves only staging files behind, never a final name.
    """

    def __init__(self, directory: Path | str, prefix: str, target: pa.Schema, options: WriterOptions = WriterOptions(),
                 schema_name: str = "record", store: Store | None = None):
        self.store = store or Store(directory)
        self.directory = str(directory) if store else self.store.root
        self.prefix = prefix
        self.target = target
        self.options = options
        self.schema_name = schema_name
        self.shards: list[ShardInfo] = []
        self._buffer: list[pa.Table] = []
        self._buffer_rows = 0
        self._buffer_bytes = 0
        self._sink: HashingFile | None = None
        self._writer: pq.ParquetWriter | None = None
        self._shard_rows = 0
        self._tmp: Path | None = None
        self._final: str | None = None
        self.store.makedirs(self.directory)

    # -- public -------------------------------------------------------------------
    def write(self, table: pa.Table | pa.RecordBatch) -> None:
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if table.num_rows == 0:
            return
        table = conform(table, self.target, schema_name=self.schema_name)
        opts = self.options
        bytes_per_row = max(1, table.nbytes // table.num_rows)
        while table.num_rows:
            # never let one buffered row group exceed the row or byte limit
            room = opts.row_group_rows - self._buffer_rows
            room = min(room, max(1, (opts.row_group_bytes - self._buffer_bytes) // bytes_per_row))
            if opts.shard_rows:
                room = min(room, opts.shard_rows - self._shard_rows - self._buffer_rows)
            head, table = table.slice(0, room), table.slice(room)
            self._buffer.append(head)
            self._buffer_rows += head.num_rows
            self._buffer_bytes += head.nbytes
            if (self._buffer_rows >= opts.row_group_rows or self._buffer_bytes >= opts.row_group_bytes
                    or (opts.shard_rows and self._shard_rows + self._buffer_rows >= opts.shard_rows)):
                self._flush_row_group()

    def close(self) -> list[ShardInfo]:
        if self._buffer_rows:
            self._flush_row_group()
        self._close_shard()
        return list(self.shards)

    def abort(self) -> None:
        """Drop the shard being written (its temp file); finished shards stay."""
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - we are discarding it anyway
                pass
        if self._sink is not None:
            self._sink.close()
        self.store.discard(self._tmp)
        self._writer = self._sink = self._tmp = None

    # -- internals ----------------------------------------------------------------
    def _open_shard(self) -> None:
        name = f"{self.prefix}-{len(self.shards):05d}.parquet"
        self._final = f"{self.directory}/{name}"
        try:
            self._tmp = self.store.staging_path(self._final)
            self._sink = HashingFile(self._tmp)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot write shard {self.store.display(self._final)}: {exc.strerror}") from exc
        opts = self.options
        try:
            self._writer = pq.ParquetWriter(
                self._sink, self.target,
                compression=opts.compression,
                compression_level=opts.compression_level if opts.compression != "none" else None,
                use_dictionary=[c for c in DICTIONARY_COLUMNS if c in self.target.names]
                + [c for c in self.target.names if c.startswith("tag_")],
                write_statistics=True,
            )
        except OSError as exc:
            self._fail(exc)
        self._shard_rows = 0

    def _fail(self, exc: OSError):
        final = self._final
        self.abort()
        raise OSError(exc.errno, f"cannot write shard {self.store.display(final)}: {exc.strerror or exc}") from exc

    def _flush_row_group(self) -> None:
        if self._writer is None:
            self._open_shard()
        table = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        try:
            self._writer.write_table(table, row_group_size=table.num_rows)
        except OSError as exc:
            self._fail(exc)
        self._shard_rows += table.num_rows
        self._buffer, self._buffer_rows, self._buffer_bytes = [], 0, 0
        opts = self.options
        if ((opts.shard_rows and self._shard_rows >= opts.shard_rows)
                or (opts.shard_bytes and self._sink.tell() >= opts.shard_bytes)):
            self._close_shard()

    def _close_shard(self) -> None:
        if self._writer is None:
            return
        try:
            self._writer.close()
            self._sink.close()
            self.store.commit(self._tmp, self._final)
        except OSError as exc:
            self._fail(exc)
        self.shards.append(ShardInfo(self._final.rsplit("/", 1)[1], self._shard_rows, self._sink.size, self._sink.hexdigest()))
        self._writer = self._sink = self._tmp = self._final = None
        self._shard_rows = 0
