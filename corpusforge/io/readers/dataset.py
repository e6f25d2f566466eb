"""A corpusforge dataset as input: its shards in manifest order, every column kept.

This is how pipelines chain: clean -> tokenize, cleaned sets -> mixing. Ids, provenance
(``src_path``, ``src_row``) and the scores and tags earlier stages wrote are carried through;
``source`` is kept unless the config sets one. The dataset's checksums are verified as each
shard is read (``verify: false`` to skip), and its record schema must be the pipeline's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from corpusforge import schemas
from corpusforge.errors import ConfigError
from corpusforge.io.dataset import Dataset
from corpusforge.io.readers.base import ReadBatch, Reader, ReaderConfig
from corpusforge.io.storage import is_url


class DatasetReaderConfig(ReaderConfig):
    source: str | None = Field(None, description="Overrides every record's source when set.")
    verify: bool = Field(True, description="Check each shard's sha256 against the manifest while reading.")


class DatasetReader(Reader):
    format = "dataset"
    kinds = ("text", "image", "pointcloud")
    Config = DatasetReaderConfig

    def _datasets(self) -> list[Dataset]:
        out = []
        for p in self.config.paths:
            path = p if is_url(p) else Path(p) if Path(p).is_absolute() else self.base / p
            ds = Dataset.open(path)
            if ds.schema_name != self.kind:
                raise ConfigError(f"inputs.{self.index}.paths: {p} holds {ds.schema_name} records, "
                                  f"the pipeline kind is {self.kind}")
            out.append(ds)
        return out

    def files(self) -> list[Path]:
        return [path for ds in self._datasets() for path in ds.shard_paths]

    def output_columns(self) -> dict[str, pa.DataType]:
        base = set(schemas.load(self.kind).with_reject_fields().names)
        cols = {}
        for ds in self._datasets():
            for f in pq_schema(ds):
                if f.name not in base:
                    cols[f.name] = f.type
        return cols

    def read(self, path: Path) -> Iterator[ReadBatch]:
        ds = Dataset.open(path.parent)
        index = [s["path"] for s in ds.manifest["shards"]].index(path.name)
        table = ds.read_shard(index, verify=self.config.verify)
        if self.config.source:
            table = table.set_column(table.schema.get_field_index("source"), "source",
                                     pa.array([self.config.source] * table.num_rows, pa.string()))
        for batch in table.to_batches(max_chunksize=self.batch_rows):
            yield ReadBatch(pa.Table.from_batches([batch]))


def pq_schema(ds: Dataset) -> pa.Schema:
    return ds.arrow_schema()
