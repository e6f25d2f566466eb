"""Open a dataset by its manifest, verify it, read it.

The shards are plain Parquet: polars (``pl.scan_parquet``), ``pyarrow.dataset`` and Hugging
Face ``datasets`` (``load_dataset("parquet", data_files=...)``) read them without
corpusforge. This module adds what those do not know: the manifest's order, the record
schema and version, and checksums.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from corpusforge import schemas
from corpusforge.errors import ManifestError
from corpusforge.io.storage import Store
from corpusforge.io.writer import ShardInfo

# A dataset folder holds its Parquet shards and, under names that begin with "_", everything
# else: Arrow, Spark, DuckDB and polars skip such names, so `pyarrow.dataset.dataset(folder)` and
# the like read the folder as it is.
MANIFEST = "_manifest.json"
LEGACY_MANIFEST = "manifest.json"    # datasets written before the rename are still read
STATS = "_stats.json"
REJECTED = "_rejected"
REPORT_HTML, REPORT_JSON = "_report.html", "_report.json"
FORMAT = "corpusforge.dataset"
MANIFEST_VERSION = "1.0.0"


def build_manifest(*, schema: schemas.RecordSchema, target: pa.Schema, shards: list[ShardInfo], dataset: str,
                   config_hash: str, lineage: dict, sources: dict | None = None, artifacts: dict | None = None,
                   order: dict | None = None) -> dict:
    """The manifest as a dict. Deterministic: no timestamps or host names, so that a
    re-run of the same config on the same input writes the same bytes."""
    return {
        "format": FORMAT,
        "manifest_version": MANIFEST_VERSION,
        "schema": {"name": schema.name, "version": schema.version},
        "dataset": dataset,
        "columns": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in target],
        "shards": [s.to_dict() for s in shards],
        "rows": sum(s.rows for s in shards),
        "bytes": sum(s.bytes for s in shards),
        "sources": sources or {},
        "config_hash": config_hash,
        "lineage": lineage,
        "artifacts": artifacts or {},
        "order": order or {"kind": "input", "description": "shards and rows in input order"},
    }


def write_manifest(directory: Path | str, manifest: dict, store: Store | None = None) -> str:
    """Write ``_manifest.json`` into ``directory`` (a local folder, or a folder of ``store``)."""
    if store is None:
        store = Store(directory)
        directory = store.root
    path = f"{directory}/{MANIFEST}"
    store.write_json(path, manifest)
    return path


@dataclass(frozen=True)
class Problem:
    shard: str
    problem: str

    def __str__(self) -> str:
        return f"{self.shard}: {self.problem}"


class Dataset:
    """A dataset: ``_manifest.json`` plus the shards it lists, in a local folder or on an object
    store (``Dataset.open("s3://bucket/corpus")``). ``root`` is the folder as a ``Path`` for a
    local dataset and as its URL otherwise; ``store`` reads either."""

    def __init__(self, root: Path | str, manifest: dict, store: Store | None = None):
        self.store = store or Store(root)
        self.root = Path(self.store.root) if self.store.is_local else self.store.url
        self.manifest = manifest

    @classmethod
    def open(cls, path: str | Path) -> "Dataset":
        path = str(path).rstrip("/")
        if path.endswith(".json"):
            path = path.rsplit("/", 1)[0] if "/" in path else "."
        store = Store(path)
        manifest_path = store.join(MANIFEST)
        if not store.exists(manifest_path) and store.exists(store.join(LEGACY_MANIFEST)):
            manifest_path = store.join(LEGACY_MANIFEST)
        shown = store.display(manifest_path)
        if not store.exists(manifest_path):
            raise ManifestError(f"no manifest at {shown}: not a corpusforge dataset (run `corpusforge run` first)")
        try:
            manifest = json.loads(store.read_bytes(manifest_path))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ManifestError(f"{shown}: not valid JSON: {exc}") from exc
        for key in ("format", "schema", "shards"):
            if key not in manifest:
                raise ManifestError(f"{shown}: missing key {key!r}")
        if manifest["format"] != FORMAT:
            raise ManifestError(f"{shown}: format is {manifest['format']!r}, expected {FORMAT!r}")
        listed = sum(int(s.get("rows", 0)) for s in manifest["shards"])
        if "rows" in manifest and manifest["rows"] != listed:
            raise ManifestError(f"{shown}: rows {manifest['rows']} != {listed}, the sum of its shards' rows "
                                f"(an edited manifest)")
        ds = cls(store.root, manifest, store)
        ds.check_schema_version()
        return ds

    # -- metadata -------------------------------------------------------------------
    @property
    def schema_name(self) -> str:
        return self.manifest["schema"]["name"]

    @property
    def schema_version(self) -> str:
        return self.manifest["schema"]["version"]

    @property
    def record_schema(self) -> schemas.RecordSchema:
        return schemas.load(self.schema_name)

    @property
    def num_rows(self) -> int:
        return int(self.manifest.get("rows", sum(s["rows"] for s in self.manifest["shards"])))

    @property
    def shard_paths(self) -> list[Path]:
        """The shards as path objects: ``Path`` for a local dataset, ``upath.UPath`` (the pathlib
        API over fsspec) for one on an object store."""
        if self.store.is_local:
            return [self.root / s["path"] for s in self.manifest["shards"]]
        from corpusforge.io.readers.base import input_path

        return [input_path(self.store.display(self._path(s["path"]))) for s in self.manifest["shards"]]

    def _path(self, name: str) -> str:
        return self.store.join(name)

    def check_schema_version(self, expected: str | None = None) -> None:
        """Refuse a dataset whose record schema has a different major version than the one
        this code was built for (or than ``expected``)."""
        try:
            current = expected or self.record_schema.version
        except Exception as exc:  # unknown schema name
            raise ManifestError(f"{self.root}: {exc}") from exc
        if self.schema_version.split(".")[0] != current.split(".")[0]:
            raise ManifestError(
                f"{self.root}: record schema {self.schema_name} v{self.schema_version} is not compatible with "
                f"v{current} that this code reads (major versions differ); re-run the pipeline or upgrade")

    # -- integrity --------------------------------------------------------------------
    def verify(self, *, checksums: bool = True) -> list[Problem]:
        """Check every shard exists, has the listed size and (``checksums``) sha256, and
        that its Parquet schema is the dataset's. Returns the problems found (empty = valid)."""
        problems: list[Problem] = []
        listed = {s["path"] for s in self.manifest["shards"]}
        store = self.store
        for entry in self.manifest["shards"]:
            path = self._path(entry["path"])
            if not store.exists(path):
                problems.append(Problem(entry["path"], "missing"))
                continue
            size = store.size(path)
            if size != entry["bytes"]:
                problems.append(Problem(entry["path"], f"size {size} != {entry['bytes']} in manifest (truncated or altered)"))
                continue
            if checksums:
                digest = _sha256(store, path)
                if digest != entry["sha256"]:
                    problems.append(Problem(entry["path"], f"sha256 {digest[:12]}... != {entry['sha256'][:12]}... in manifest"))
                    continue
            try:
                meta = pq.read_metadata(path, filesystem=store.arrow_fs)
            except Exception as exc:  # noqa: BLE001 - any parse failure is a problem to report
                problems.append(Problem(entry["path"], f"not readable as Parquet: {exc}"))
                continue
            if meta.num_rows != entry["rows"]:
                problems.append(Problem(entry["path"], f"{meta.num_rows} rows != {entry['rows']} in manifest"))
        for stray in store.glob(self._path("*.parquet")):
            name = stray.rsplit("/", 1)[1]
            if name not in listed:
                problems.append(Problem(name, "shard file not listed in the manifest"))
        return problems

    # -- reading ----------------------------------------------------------------------
    def read_shard(self, index: int, columns: list[str] | None = None, verify: bool = False) -> pa.Table:
        entry = self.manifest["shards"][index]
        path = self._path(entry["path"])
        if not verify:
            try:
                table = pq.read_table(path, columns=columns, filesystem=self.store.arrow_fs)
            except (OSError, pa.ArrowException) as exc:
                raise ManifestError(f"{self.store.display(path)}: shard not readable ({exc}): truncated or altered; "
                                    f"`corpusforge validate` checks every shard") from None
            if table.num_rows != entry["rows"]:
                raise ManifestError(f"{self.store.display(path)}: {table.num_rows} rows, the manifest says "
                                    f"{entry['rows']} (altered shard or manifest)")
            return table
        # One pass over the file's pages: memory-map it (or, on an object store, fetch it once),
        # hash the bytes in a second thread (hashlib releases the GIL) while Arrow decodes them.
        with _whole_file(self.store, path) as buf, ThreadPoolExecutor(1) as pool:
            digest = pool.submit(lambda: hashlib.sha256(memoryview(buf)).hexdigest())
            try:
                table = pq.read_table(pa.BufferReader(buf), columns=columns)
            except Exception:  # noqa: BLE001 - a checksum mismatch is the better explanation
                table = None
            if digest.result() != entry["sha256"]:
                raise ManifestError(f"{self.store.display(path)}: sha256 does not match the manifest "
                                    f"(altered or truncated shard)")
        if table is None:  # intact bytes that do not parse: let Arrow say why
            table = pq.read_table(path, columns=columns, filesystem=self.store.arrow_fs)
        if table.num_rows != entry["rows"]:
            raise ManifestError(f"{self.store.display(path)}: {table.num_rows} rows, the manifest says {entry['rows']} "
                                f"(altered manifest)")
        return table

    def iter_tables(self, columns: list[str] | None = None, verify: bool = False) -> Iterator[pa.Table]:
        """Yield one table per shard, in manifest order."""
        for i in range(len(self.manifest["shards"])):
            yield self.read_shard(i, columns=columns, verify=verify)

    def iter_batches(self, columns: list[str] | None = None, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        """Stream record batches in manifest order without loading whole shards."""
        for entry in self.manifest["shards"]:
            pf = pq.ParquetFile(self._path(entry["path"]), filesystem=self.store.arrow_fs)
            yield from pf.iter_batches(batch_size=batch_size, columns=columns)

    def read(self, columns: list[str] | None = None, verify: bool = False) -> pa.Table:
        tables = list(self.iter_tables(columns=columns, verify=verify))
        if not tables:
            return self.arrow_schema().empty_table() if columns is None else self.arrow_schema().empty_table().select(columns)
        return pa.concat_tables(tables)

    def shard_schema(self, index: int) -> pa.Schema:
        return pq.read_schema(self._path(self.manifest["shards"][index]["path"]), filesystem=self.store.arrow_fs)

    def arrow_schema(self) -> pa.Schema:
        if self.manifest["shards"]:
            return self.shard_schema(0)
        return self.record_schema.arrow

    def artifact_bytes(self, key: str) -> bytes | None:
        """The bytes of an artifact the manifest lists (``tokenizer``), or None when it lists none."""
        name = self.manifest.get("artifacts", {}).get(key)
        return self.store.read_bytes(self._path(name)) if name else None

    def to_polars(self, columns: list[str] | None = None):
        import polars as pl

        return pl.from_arrow(self.read(columns=columns))

    def scan_polars(self):
        """A lazy polars frame over the shards, in manifest order (on an object store, through
        Arrow's dataset API and the store's filesystem, so fsspec's credentials apply)."""
        import polars as pl

        if self.store.is_local:
            return pl.scan_parquet([str(p) for p in self.shard_paths])
        import pyarrow.dataset as pads

        paths = [self._path(s["path"]) for s in self.manifest["shards"]]
        return pl.scan_pyarrow_dataset(pads.dataset(paths, format="parquet", filesystem=self.store.arrow_fs))


class _whole_file:
    """A shard's bytes as one Arrow buffer: a memory map locally, one read from an object store."""

    def __init__(self, store: Store, path: str):
        self.store, self.path, self._mapped = store, path, None

    def __enter__(self) -> pa.Buffer:
        if self.store.is_local:
            self._mapped = pa.memory_map(self.path)
            return self._mapped.read_buffer()          # zero-copy view of the whole file
        return pa.py_buffer(self.store.read_bytes(self.path))

    def __exit__(self, *exc) -> None:
        if self._mapped is not None:
            self._mapped.close()


def _sha256(store: Store, path: str, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with store.open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
