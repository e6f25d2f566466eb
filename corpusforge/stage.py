"""The stage contract.

A *stage* is a small typed unit: a pydantic ``Config``, the record kinds it accepts, the
extension columns it adds, and a batch function over Arrow tables that keeps or rejects
every row with a reason. Rows in = kept + rejected, and the runner checks it on every batch.

A *global stage* (deduplication, ...) needs to see the whole dataset before it can decide
about one row. It has the map, reduce, map shape:

1. ``fingerprint(table, unit)``  map over every unit's rows -> a small Arrow table (spilled to Parquet)
2. ``resolve(fingerprints, workdir)``  reduce over all units' fingerprint files -> decision files in workdir
3. ``filter(table, unit, workdir)``  map over every unit again -> kept / rejected

The runner (and the Prefect and Dask flows) call these three steps; the stage holds no
state between them except what it writes to ``workdir``, so the steps can run in different
processes or on different machines.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from corpusforge.errors import AccountingError, CorpusforgeError

REJECT_REASON = "reject_reason"
REJECT_DETAIL = "reject_detail"
REJECT_STAGE = "reject_stage"
STAGE_ERROR = "stage_error"     # a record on which the stage's code raised (see process_isolating)


class StageConfig(BaseModel):
    """Base for stage configs: unknown keys are errors, so a typo never passes silently."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class StageResult:
    kept: pa.Table
    rejected: pa.Table          # same columns as kept, plus reject_reason and reject_detail
    created: int = 0            # rows a stage added (augmentation): in + created = kept + rejected


@dataclass
class StageStats:
    """What one stage did; merged across batches and units by addition."""

    rows_in: int = 0
    bytes_in: int = 0
    created: int = 0
    kept: int = 0
    rejected: int = 0
    seconds: float = 0.0
    rejected_by_reason: Counter = field(default_factory=Counter)
    counters: Counter = field(default_factory=Counter)   # stage-specific (lines removed, clusters, ...)

    def merge(self, other: "StageStats") -> None:
        self.rows_in += other.rows_in
        self.bytes_in += other.bytes_in
        self.created += other.created
        self.kept += other.kept
        self.rejected += other.rejected
        self.seconds += other.seconds
        self.rejected_by_reason.update(other.rejected_by_reason)
        self.counters.update(other.counters)

    def to_dict(self) -> dict:
        return {
            "rows_in": self.rows_in, "bytes_in": self.bytes_in, "created": self.created,
            "kept": self.kept, "rejected": self.rejected, "seconds": round(self.seconds, 4),
            "rejected_by_reason": dict(sorted(self.rejected_by_reason.items())),
            "counters": dict(sorted(self.counters.items())),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "StageStats":
        return cls(d["rows_in"], d["bytes_in"], d.get("created", 0), d["kept"], d["rejected"], d["seconds"],
                   Counter(d["rejected_by_reason"]), Counter(d.get("counters", {})))


class Stage:
    """A map stage. Subclasses set ``name``, ``kinds``, ``Config`` and implement ``process``."""

    name: ClassVar[str]
    kinds: ClassVar[tuple[str, ...]] = ("text", "image", "pointcloud")
    Config: ClassVar[type[StageConfig]] = StageConfig
    is_global: ClassVar[bool] = False

    def __init__(self, config: StageConfig | None = None, *, seed: int = 0):
        self.config = config if config is not None else self.Config()
        self.seed = seed

    def output_columns(self) -> dict[str, pa.DataType]:
        """Extension columns (score_*, tag_*, count_*) this stage adds to every row."""
        return {}

    def artifacts(self) -> dict[str, Path]:
        """Files the output dataset needs (a tokenizer, ...): the runner copies them beside the
        shards and names them in the manifest's ``artifacts``."""
        return {}

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:  # pragma: no cover - interface
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


DECISIONS = "decisions.parquet"


class GlobalStage(Stage):
    """A stage that decides across the whole dataset: fingerprint (map), resolve (reduce), filter (map).

    ``resolve`` writes ``workdir/decisions.parquet`` (see :func:`write_decisions`): one row per
    (unit, row) that is rejected (``reason`` set) or tagged (``tag_*`` columns). The default
    ``filter`` applies those decisions, so most global stages only implement the first two steps.
    """

    is_global: ClassVar[bool] = True

    def fingerprint(self, table: pa.Table) -> pa.Table:  # pragma: no cover - interface
        """One row of fingerprint per input row (the runner adds ``unit`` and ``row``)."""
        raise NotImplementedError

    def resolve(self, fingerprint_files: list[Path], workdir: Path, stats: StageStats) -> None:  # pragma: no cover
        raise NotImplementedError

    def filter(self, table: pa.Table, unit: int, row_offset: int, workdir: Path, stats: StageStats) -> StageResult:
        decisions = self._unit_decisions(workdir, unit)
        n = table.num_rows
        lo = np.searchsorted(decisions["row"], row_offset, side="left")
        hi = np.searchsorted(decisions["row"], row_offset + n, side="left")
        idx = decisions["row"][lo:hi] - row_offset
        reason = np.full(n, None, dtype=object)
        detail = np.full(n, None, dtype=object)
        reason[idx] = decisions["reason"][lo:hi]
        detail[idx] = decisions["detail"][lo:hi]
        for name, values in decisions["tags"].items():
            col = np.full(n, None, dtype=object)
            col[idx] = values[lo:hi]
            table = table.append_column(name, pa.array(col, pa.string()))
        return split(table, pa.array(reason, pa.string()), pa.array(detail, pa.string()), stats)

    def output_columns(self) -> dict[str, pa.DataType]:
        return {name: pa.string() for name in self.tag_columns()}

    def tag_columns(self) -> tuple[str, ...]:
        """tag_* columns that this stage's decisions carry."""
        return ()

    def _unit_decisions(self, workdir: Path, unit: int) -> dict:
        cache = getattr(self, "_decision_cache", None)
        if cache is not None and cache[0] == (str(workdir), unit):
            return cache[1]
        table = pq.read_table(Path(workdir) / DECISIONS, filters=[("unit", "=", unit)])
        table = table.sort_by("row")
        tags = {c: np.array(table.column(c).to_pylist(), dtype=object) for c in self.tag_columns()}
        out = {"row": table.column("row").to_numpy(), "reason": np.array(table.column("reason").to_pylist(), dtype=object),
               "detail": np.array(table.column("detail").to_pylist(), dtype=object), "tags": tags}
        self._decision_cache = ((str(workdir), unit), out)
        return out

    def process(self, table: pa.Table, stats: StageStats) -> StageResult:
        raise TypeError(f"{self.name} is a global stage: the runner calls fingerprint/resolve/filter")


def write_decisions(workdir: Path, decisions: pa.Table) -> None:
    """Write a global stage's decisions: columns unit (int32), row (int64), reason and detail
    (string; reason null = kept), plus any tag_* columns; sorted by (unit, row) so that each
    unit's filter reads only its own row groups."""
    from corpusforge.io.atomic import commit, temp_path

    cols = {"unit": decisions.column("unit").cast(pa.int32()), "row": decisions.column("row").cast(pa.int64()),
            "reason": decisions.column("reason").cast(pa.string()), "detail": decisions.column("detail").cast(pa.string())}
    for name in decisions.column_names:
        if name.startswith("tag_"):
            cols[name] = decisions.column(name).cast(pa.string())
    table = pa.table(cols).sort_by([("unit", "ascending"), ("row", "ascending")])
    path = Path(workdir) / DECISIONS
    tmp = temp_path(path)
    pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 16)
    commit(tmp, path)


def split(table: pa.Table, reason: pa.Array | pa.ChunkedArray, detail: pa.Array | pa.ChunkedArray | None = None,
          stats: StageStats | None = None) -> StageResult:
    """Split ``table`` by ``reason`` (a string array; null = keep) into a StageResult and
    count the rejections by reason in ``stats``."""
    if isinstance(reason, pa.ChunkedArray):
        reason = reason.combine_chunks()
    keep = pc.is_null(reason)
    kept = table.filter(keep)
    reject_mask = pc.invert(keep)
    rejected = table.filter(reject_mask)
    if rejected.num_rows:
        r = reason.filter(reject_mask)
        d = detail.filter(reject_mask) if detail is not None else pa.nulls(rejected.num_rows, pa.string())
        rejected = rejected.append_column(REJECT_REASON, r.cast(pa.string())).append_column(
            REJECT_DETAIL, d.cast(pa.string()) if not isinstance(d, pa.ChunkedArray) else d.combine_chunks().cast(pa.string()))
        if stats is not None:
            for value, count in zip(*_value_counts(r)):
                stats.rejected_by_reason[value] += count
    else:
        rejected = empty_rejected(table)
    return StageResult(kept, rejected)


def empty_rejected(table: pa.Table) -> pa.Table:
    schema = table.schema.append(pa.field(REJECT_REASON, pa.string())).append(pa.field(REJECT_DETAIL, pa.string()))
    return schema.empty_table()


def _value_counts(arr: pa.Array) -> tuple[list, list]:
    vc = pc.value_counts(arr)
    return vc.field("values").to_pylist(), vc.field("counts").to_pylist()


def process_isolating(stage: Stage, table: pa.Table, stats: StageStats) -> StageResult:
    """``stage.process`` on the batch; when it raises, the batch again row by row, and each row on
    which it raises is rejected as ``stage_error`` with the exception in its detail.

    A record that breaks a library (a cloud whose coordinates overflow into NaN, a decoder bug)
    then costs that record, not its batch and not the run: a failed unit is retried and fails
    again on the same record, so without this the run could never finish. Errors the user acts
    on (config), the runner's own (accounting), memory and the environment's (``_record_error``)
    still fail the unit.
    Stats come from the attempt that stands: a failed batch attempt counts nothing.
    """
    attempt = StageStats()
    try:
        result = stage.process(table, attempt)
    except Exception as exc:
        if not _record_error(exc):
            raise
        attempt = StageStats()
        kept, rejected, created = [], [], 0
        for row, one, r in _row_by_row(stage, table, stage.process):
            if isinstance(r, str):
                r = split(row, pa.array([STAGE_ERROR], pa.string()), pa.array([r], pa.string()), one)
            attempt.merge(one)
            kept.append(r.kept)
            rejected.append(r.rejected)
            created += r.created
        result = StageResult(_concat_nonempty(kept, table), _concat_nonempty(rejected, empty_rejected(table)), created)
    stats.rejected_by_reason.update(attempt.rejected_by_reason)
    stats.counters.update(attempt.counters)
    return result


def fingerprint_isolating(stage: GlobalStage, table: pa.Table, stats: StageStats) -> tuple[pa.Table, StageResult]:
    """The global stage's fingerprints of the batch and the batch split into the rows they are
    for (kept) and the rows on which ``fingerprint`` raised (rejected as ``stage_error``, counted in
    ``stats``): the same safety as :func:`process_isolating`, for the step that feeds a global
    stage (a tokenizer meeting characters it miscounts must not fail the unit on every retry)."""
    try:
        return stage.fingerprint(table), StageResult(table, empty_rejected(table))
    except Exception as exc:
        if not _record_error(exc):
            raise
    prints, reasons, details = [], [], []
    for _, _, fp in _row_by_row(stage, table, lambda row, _: stage.fingerprint(row)):
        failed = isinstance(fp, str)
        prints += [] if failed else [fp]
        reasons.append(STAGE_ERROR if failed else None)
        details.append(fp if failed else None)
    result = split(table, pa.array(reasons, pa.string()), pa.array(details, pa.string()), stats)
    # only the rejected rows: the kept ones enter the global stage's filter, which counts them there
    stats.rows_in += result.rejected.num_rows
    stats.rejected += result.rejected.num_rows
    return (pa.concat_tables(prints) if prints else stage.fingerprint(table.slice(0, 0))), result


def _row_by_row(stage: Stage, table: pa.Table, fn):
    """(row, its stats, ``fn(row, stats)``) for every row, the result replaced by the
    ``stage_error`` detail (a string) when ``fn`` raised a record's error (any other error is raised)."""
    for i in range(table.num_rows):
        row, one = table.slice(i, 1), StageStats()
        try:
            yield row, one, fn(row, one)
        except Exception as exc:
            if not _record_error(exc):
                raise
            yield row, one, f"{stage.name}: {type(exc).__name__}: {exc}"[:1000]


def _record_error(exc: Exception) -> bool:
    """Whether an exception inside a stage is the record's doing. Not: errors the user acts on
    (config), the runner's own, memory, and the environment's (an OS error with an errno: disk
    full, a network or object-store failure), which fail the unit so that it is retried or the run
    stops. PIL's "image file is truncated" is an OSError without an errno: the record's."""
    if isinstance(exc, (CorpusforgeError, MemoryError, ConnectionError, TimeoutError)):
        return False
    return not (isinstance(exc, OSError) and exc.errno is not None)


def _concat_nonempty(tables: list[pa.Table], empty: pa.Table) -> pa.Table:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables, promote_options="default") if tables else empty.slice(0, 0)


def run_checked(stage: Stage, table: pa.Table, stats: StageStats, fn) -> StageResult:
    """Run ``fn(table)`` for ``stage``, time it, update ``stats``, and check the invariant
    rows in + created == kept + rejected."""
    start = time.perf_counter()
    result = fn(table)
    stats.seconds += time.perf_counter() - start
    stats.rows_in += table.num_rows
    stats.bytes_in += table.nbytes
    stats.created += result.created
    stats.kept += result.kept.num_rows
    stats.rejected += result.rejected.num_rows
    if table.num_rows + result.created != result.kept.num_rows + result.rejected.num_rows:
        raise AccountingError(
            f"stage {stage.name}: {table.num_rows} rows in + {result.created} created != "
            f"{result.kept.num_rows} kept + {result.rejected.num_rows} rejected")
    return result
