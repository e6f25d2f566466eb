"""The runner: a pipeline config over input files -> a kept dataset, a rejected dataset, stats.

How a run is cut up
-------------------
* **Units.** Input files are grouped (in config order, files sorted) into *work units* of
  about ``unit_bytes``. A unit is processed independently of every other unit, so units
  run in parallel (``--workers``), as Prefect tasks, or on Dask workers.
* **Segments.** The stage list is cut before every global stage. Segment 0 reads the
  inputs; segment k > 0 starts with global stage k's filter and reads segment k-1's
  intermediate shards. At the end of segment k-1 the runner fingerprints the kept rows for
  global stage k (map); between the segments it resolves the fingerprints (reduce).

What is on disk
---------------
``<out>/part-UUUUU-NNNNN.parquet`` + ``_manifest.json``     kept rows (last segment)
``<out>/_rejected/part-UUUUU-S-NNNNN.parquet`` + manifest   rejected rows, with stage and reason
``<out>/_stats.json``                                        per-stage stats and the accounting check
``<out>/_work/``                                             intermediate shards, fingerprints, decisions,
                                                             and one ``done`` marker per finished step

``<out>`` is a local folder or an object-store URL (``s3://bucket/prefix``): every file goes
through an ``io.storage.Store``, so the spill files of the global stages' map steps live where
every worker can read them, and the reduce step reads them from there.

Every file is written atomically (renamed into place, or uploaded to its final key); a step's
``done`` marker is written last. ``--resume`` skips steps whose marker exists and redoes the
others after deleting their partial files, so a killed run resumes to byte-identical output.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpusforge import __version__, schemas
from corpusforge.config import PipelineConfig, from_dict
from corpusforge.errors import AccountingError, ConfigError, CorpusforgeError, UnitsFailed
from corpusforge.io.dataset import (LEGACY_MANIFEST, MANIFEST, REJECTED, REPORT_HTML, REPORT_JSON, STATS,
                                   build_manifest, write_manifest)
from corpusforge.io.readers.base import ReadBatch, Reader, file_error_row, file_size, file_stamp, input_path
from corpusforge.io.storage import Store, prune_scratch, scratch_dir
from corpusforge.io.writer import ShardInfo, ShardWriter
from corpusforge.stage import REJECT_DETAIL, REJECT_STAGE, GlobalStage, Stage, StageResult, StageStats, run_checked

READ_STAGE = "read"
RUN_FILE = "run.json"


@dataclass(frozen=True)
class Unit:
    index: int
    files: tuple[tuple[int, str], ...]   # (input index, path)
    bytes: int


@dataclass
class Segment:
    index: int
    global_stage: GlobalStage | None     # filtered at the start of this segment (None for segment 0)
    global_position: int | None          # its index in the config's stage list
    stages: list[tuple[int, Stage]]      # (index in the config's stage list, stage)


@dataclass
class UnitResult:
    segment: int
    unit: int
    kept: list[dict]
    rejected: list[dict]
    stats: dict                          # stage key -> StageStats dict
    read: dict = field(default_factory=dict)


class Plan:
    """Everything a worker needs to run one step, rebuilt from the config alone."""

    def __init__(self, config: PipelineConfig, base: Path | None = None):
        self.config = config
        self.base = Path(base) if base else Path.cwd()
        self.store = Store(config.output.path, base=self.base)
        self.out = self.store.root                      # paths below are paths of self.store
        self.rejected_dir = self.store.join(REJECTED)
        self.work = self.store.join("_work")
        self.record_schema = schemas.load(config.kind)
        self.readers: list[Reader] = config.readers(base=self.base)
        self.stages: list[Stage] = config.stage_objects()
        ext: dict[str, pa.DataType] = {}
        for component in [*self.readers, *self.stages]:
            for name, typ in component.output_columns().items():
                if ext.get(name, typ) != typ:
                    raise CorpusforgeError(f"column {name!r} declared with two types ({ext[name]}, {typ})")
                ext[name] = typ
        self.kept_schema = schemas.dataset_schema(self.record_schema, ext)
        self.rejected_schema = schemas.dataset_schema(self.record_schema, ext, rejected=True)
        self.segments = self._segments()
        self.config_hash = config.config_hash()
        self._units: list[Unit] | None = None

    @classmethod
    def from_dict(cls, raw: dict, base: Path | None = None) -> "Plan":
        return cls(from_dict(raw), base=base)

    # -- planning --------------------------------------------------------------------
    def _segments(self) -> list[Segment]:
        segments = [Segment(0, None, None, [])]
        for i, stage in enumerate(self.stages):
            if stage.is_global:
                segments.append(Segment(len(segments), stage, i, []))
            else:
                segments[-1].stages.append((i, stage))
        return segments

    @property
    def units(self) -> list[Unit]:
        if self._units is None:
            self._units = plan_units(self.readers, self.config.unit_bytes)
        return self._units

    def rejected_text(self, table: pa.Table) -> pa.Table:
        """Rejected text rows as ``output.rejected_text`` says: kept, scrubbed or emptied."""
        mode = self.config.output.rejected_text
        if mode == "keep" or "text" not in table.column_names:
            return table
        at = table.schema.get_field_index("text")
        if mode == "drop":
            return table.set_column(at, "text", pa.array([""] * table.num_rows, pa.string()))
        if getattr(self, "_scrubber", None) is None:
            from corpusforge.text.pii import Pii

            configs = [s.config for s in self.stages if s.name == "text.pii"]
            self._scrubber = Pii(configs[-1] if configs else None)
        n = table.num_rows
        probe = pa.table({"text": table.column("text"), "lang": pa.nulls(n, pa.string()),
                          "__row": pa.array(range(n), pa.int64())})
        res = self._scrubber.process(probe, StageStats())
        texts = [""] * n             # a row the scrubber would drop whole (policy drop) keeps no text
        for row, text in zip(res.kept.column("__row").to_pylist(), res.kept.column("text").to_pylist()):
            texts[row] = text
        return table.set_column(at, "text", pa.array(texts, pa.string()))

    def stage_key(self, position: int, stage: Stage) -> str:
        return f"{position:02d}:{stage.name}"

    # -- paths -------------------------------------------------------------------------
    def done_path(self, segment: int, unit: int | str) -> str:
        """The marker of (segment, unit) finished; ``unit="*"`` gives the glob of all of them."""
        return f"{self.work}/seg{segment}/u{unit if isinstance(unit, str) else f'{unit:05d}'}.done.json"

    def resolve_dir(self, segment: int) -> str:
        return f"{self.work}/global{segment}"

    def fingerprint_path(self, segment: int, unit: int) -> str:
        """Fingerprints of unit's rows for the global stage that opens ``segment``."""
        return f"{self.work}/fp{segment}/u{unit:05d}.parquet"

    def kept_location(self, segment: int) -> tuple[str, str]:
        last = segment == len(self.segments) - 1
        return (self.out, "part") if last else (f"{self.work}/seg{segment}", "part")

    def local_resolve_dir(self, segment: int) -> Path:
        """The resolve step's output (decisions) as a local folder, for the global filter. On an
        object store it is downloaded once per machine and run (keyed by its done marker) and
        shared by the worker processes there."""
        path = self.resolve_dir(segment)
        if self.store.is_local:
            return Path(path)
        import xxhash

        marker = self.store.read_bytes(f"{path}/done.json")
        key = xxhash.xxh3_64_hexdigest(f"{self.store.display(path)}\0{self.config_hash}\0".encode() + marker)
        local = scratch_dir() / f"resolve-{key}"
        if local.exists():
            os.utime(local)                 # in use: see the pruning below
            return local
        staging = Path(tempfile.mkdtemp(prefix=f".resolve-{key}-", dir=scratch_dir()))
        self.store.get_dir(path, staging)
        try:
            staging.rename(local)           # another process on this machine may have won: fine
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
        prune_scratch()
        return local


def plan_units(readers: list[Reader], unit_bytes: int) -> list[Unit]:
    """Group input files into units of about ``unit_bytes`` (never splitting a file, never
    mixing inputs), in a deterministic order."""
    units: list[Unit] = []
    for reader in readers:
        current, size = [], 0
        for path in reader.files():
            n = file_size(path)
            if current and size + n > unit_bytes:
                units.append(Unit(len(units), tuple(current), size))
                current, size = [], 0
            current.append((reader.index, str(path)))
            size += n
        if current:
            units.append(Unit(len(units), tuple(current), size))
    return units


# ---------------------------------------------------------------------------------------
# One step of work: a unit through a segment
# ---------------------------------------------------------------------------------------

def _coalesce(batches: Iterator[pa.Table], rows: int, nbytes: int = 64 << 20) -> Iterator[pa.Table]:
    """Merge small tables (one image, one cloud) into batches worth handing to a stage."""
    pending, n, b = [], 0, 0
    for t in batches:
        if t.num_rows == 0:
            continue
        pending.append(t)
        n += t.num_rows
        b += t.nbytes
        if n >= rows or b >= nbytes:
            yield pa.concat_tables(pending, promote_options="default")
            pending, n, b = [], 0, 0
    if pending:
        yield pa.concat_tables(pending, promote_options="default")


def _clean_unit_outputs(plan: Plan, segment: int, unit: int) -> None:
    """Delete the shards a crashed attempt at (segment, unit) left behind: this attempt may write
    fewer. (Its fingerprint file has one fixed name, which this attempt overwrites before its
    done marker, so it needs no deleting.)"""
    directory, prefix = plan.kept_location(segment)
    store = plan.store
    # final names, and the staging files (hidden, named per process) a killed writer left
    for p in (store.glob(f"{directory}/{prefix}-{unit:05d}-*.parquet")
              + store.glob(f"{directory}/.{prefix}-{unit:05d}-*.tmp")
              + store.glob(f"{plan.rejected_dir}/part-{unit:05d}-{segment}-*.parquet")
              + store.glob(f"{plan.rejected_dir}/.part-{unit:05d}-{segment}-*.tmp")):
        store.rm(p)


def run_unit(plan: Plan, segment_index: int, unit: Unit) -> UnitResult:
    """Run one unit through one segment and write its shards, fingerprints and done marker."""
    seg = plan.segments[segment_index]
    done = plan.done_path(segment_index, unit.index)
    finished = plan.store.read_json_or_none(done)
    if finished is not None:
        return UnitResult(**finished)
    _clean_unit_outputs(plan, segment_index, unit.index)
    directory, prefix = plan.kept_location(segment_index)
    opts = plan.config.output.writer_options()
    kept_writer = ShardWriter(directory, f"{prefix}-{unit.index:05d}", plan.kept_schema, opts, plan.record_schema.name,
                              store=plan.store)
    rej_writer = ShardWriter(plan.rejected_dir, f"part-{unit.index:05d}-{segment_index}", plan.rejected_schema, opts,
                             f"{plan.record_schema.name} (rejected)", store=plan.store)
    stats: dict[str, StageStats] = {}
    read_stats = {"files": 0, "files_accounted": 0, "records": 0, "rejected": 0, "rejected_by_reason": Counter(),
                  "bytes": 0}
    next_global = plan.segments[segment_index + 1] if segment_index + 1 < len(plan.segments) else None
    # the next global stage's fingerprints are written batch by batch (a unit's fingerprints can be
    # larger than its text: 16 bytes a byte for text.substring_dedup in bytes)
    fp_path = plan.fingerprint_path(segment_index + 1, unit.index) if next_global is not None else None
    fp_tmp = plan.store.staging_path(fp_path) if fp_path else None
    fp_writer = None
    kept_rows = 0

    def reject(table: pa.Table, stage_name: str) -> None:
        if table.num_rows:
            table = table.set_column(table.schema.get_field_index(REJECT_DETAIL), REJECT_DETAIL,
                                     deterministic_details(table.column(REJECT_DETAIL)))
            table = plan.rejected_text(table)
            rej_writer.write(table.append_column(REJECT_STAGE, pa.array([stage_name] * table.num_rows, pa.string())))

    try:
        for batch, row_offset in _segment_input(plan, segment_index, unit, read_stats, reject):
            if seg.global_stage is not None:
                key = plan.stage_key(seg.global_position, seg.global_stage)
                st = stats.setdefault(key, StageStats())
                res = run_checked(seg.global_stage, batch, st,
                                  lambda t: seg.global_stage.filter(t, unit.index, row_offset,
                                                                    plan.local_resolve_dir(segment_index), st))
                reject(res.rejected, seg.global_stage.name)
                batch = res.kept
            for position, stage in seg.stages:
                if batch.num_rows == 0:
                    break
                st = stats.setdefault(plan.stage_key(position, stage), StageStats())
                res: StageResult = run_checked(stage, batch, st, lambda t, s=stage, st=st: s.process(t, st))
                reject(res.rejected, stage.name)
                batch = res.kept
            if batch.num_rows:
                if next_global is not None:
                    fp = next_global.global_stage.fingerprint(batch)
                    if fp.num_rows != batch.num_rows:
                        raise AccountingError(f"{next_global.global_stage.name}.fingerprint returned {fp.num_rows} "
                                              f"rows for {batch.num_rows}")
                    fp = (fp.append_column("unit", pa.array([unit.index] * fp.num_rows, pa.int32()))
                          .append_column("row", pa.array(range(kept_rows, kept_rows + fp.num_rows), pa.int64())))
                    try:
                        if fp_writer is None:
                            fp_writer = pq.ParquetWriter(fp_tmp, fp.schema, compression="zstd")
                        fp_writer.write_table(fp)
                    except OSError as exc:
                        raise _named(exc, plan.store.display(fp_path)) from exc
                kept_writer.write(batch)
                kept_rows += batch.num_rows
        kept = kept_writer.close()
        rejected = rej_writer.close()
        try:
            if fp_writer is not None:
                fp_writer.close()
            elif fp_tmp is not None:
                pq.write_table(pa.table({"unit": pa.array([], pa.int32()), "row": pa.array([], pa.int64())}), fp_tmp)
        except OSError as exc:
            raise _named(exc, plan.store.display(fp_path)) from exc
    except BaseException:
        kept_writer.abort()
        rej_writer.abort()
        if fp_tmp is not None:
            if fp_writer is not None:
                with contextlib.suppress(Exception):      # the first error is the one to report
                    fp_writer.close()
            plan.store.discard(fp_tmp)
        raise
    if fp_path is not None:
        plan.store.commit(fp_tmp, fp_path)
    read_stats["rejected_by_reason"] = dict(sorted(read_stats["rejected_by_reason"].items()))
    result = UnitResult(segment_index, unit.index, [s.to_dict() for s in kept], [s.to_dict() for s in rejected],
                        {k: v.to_dict() for k, v in stats.items()}, read_stats if segment_index == 0 else {})
    plan.store.write_json(done, result.__dict__)
    return result


def _named(exc: OSError, path: str) -> OSError:
    """Arrow's write errors name no file (disk full): name it."""
    return OSError(exc.errno, f"cannot write {path}: {exc.strerror or exc}")


def _segment_input(plan: Plan, segment: int, unit: Unit, read_stats: dict, reject) -> Iterator[tuple[pa.Table, int]]:
    """Yield (batch, row offset within the unit's input to this segment)."""
    offset = 0
    if segment == 0:
        def records():
            for input_index, path in unit.files:
                reader = plan.readers[input_index]
                read_stats["files"] += 1
                read_stats["bytes"] += file_size(path)
                rows = 0
                for rb in guarded_read(reader, path):
                    if rb.rejected is not None and rb.rejected.num_rows:
                        rows += rb.rejected.num_rows
                        read_stats["rejected"] += rb.rejected.num_rows
                        read_stats["rejected_by_reason"].update(rb.rejected.column("reject_reason").to_pylist())
                        reject(rb.rejected, READ_STAGE)
                    rows += rb.records.num_rows
                    read_stats["records"] += rb.records.num_rows
                    yield rb.records
                read_stats["files_accounted"] += rows > 0
        source = _coalesce(records(), plan.config.batch_rows)
    else:
        prev = load_done(plan, plan.done_path(segment - 1, unit.index))
        directory, _ = plan.kept_location(segment - 1)
        # intermediate shards hold every declared column, null where no stage has run yet:
        # drop those that this segment's stages and later ones will add
        later = set()
        for seg in plan.segments[segment:]:
            for stage in ([seg.global_stage] if seg.global_stage else []) + [s for _, s in seg.stages]:
                later.update(stage.output_columns())
        columns = [n for n in plan.kept_schema.names if n not in later]

        def shards():
            for shard in prev.kept:
                pf = pq.ParquetFile(f"{directory}/{shard['path']}", filesystem=plan.store.arrow_fs)
                for b in pf.iter_batches(batch_size=plan.config.batch_rows, columns=columns):
                    yield pa.Table.from_batches([b])
        source = shards()
    for batch in source:
        yield batch, offset
        offset += batch.num_rows


def guarded_read(reader: Reader, path: str) -> Iterator[ReadBatch]:
    """``reader.read(path)``, where an exception the reader did not expect ends the file with a
    rejected row naming the file, the error and how far it got, never the unit; and a file that
    gave no row at all gets one (``no_records``), so that every listed file is accounted for."""
    given = 0
    try:
        for rb in reader.read(input_path(path)):
            given += rb.records.num_rows + (rb.rejected.num_rows if rb.rejected is not None else 0)
            yield rb
    except Exception as exc:  # noqa: BLE001 - a reader bug or a library's error on hostile input
        yield ReadBatch(pa.table({}), file_error_row(
            reader.kind, reader.config.source, input_path(path), "unreadable_file",
            f"reader {reader.format} failed after {given} row(s): {_describe(exc)}"))
        return
    if given == 0:
        yield ReadBatch(pa.table({}), file_error_row(
            reader.kind, reader.config.source, input_path(path), "no_records", f"reader {reader.format} gave no row"))


_ADDRESS = r" at 0x[0-9a-fA-F]+"


def deterministic_details(details: pa.ChunkedArray) -> pa.ChunkedArray:
    """Reject details without run-specific text: object reprs carry memory addresses
    (``<_io.BytesIO object at 0x7ff0...>``), which would make rejected/ differ between runs."""
    return pc.replace_substring_regex(details, _ADDRESS, "")


def load_done(plan: Plan, path: str) -> UnitResult:
    return UnitResult(**plan.store.read_json(path))


def run_resolve(plan: Plan, segment_index: int) -> dict:
    """The reduce step of the global stage that opens ``segment_index``: it reads every unit's
    fingerprint spill file and writes the decisions that the units' filters read.

    The stages' resolve works on local files (numpy, Arrow memory maps); with an object-store
    output the spill files are downloaded to local scratch first and the decisions uploaded
    after, before the done marker (``Store.local_dir``)."""
    seg = plan.segments[segment_index]
    store = plan.store
    workdir = plan.resolve_dir(segment_index)
    done = f"{workdir}/done.json"
    finished = store.read_json_or_none(done)
    if finished is not None:
        return finished
    store.rm(workdir)
    spills = [plan.fingerprint_path(segment_index, u.index) for u in plan.units]
    stats = StageStats()
    with store.local_dir(spills[0].rsplit("/", 1)[0]) as spill_dir, \
            store.local_dir(workdir, upload=True) as local_work:
        # in unit order; units whose rows were all rejected upstream have empty files: skip them
        local_files = [spill_dir / f.rsplit("/", 1)[1] for f in spills]
        files = [f for f in local_files if pq.read_metadata(f).num_rows > 0]
        start = time.perf_counter()
        seg.global_stage.resolve(files, local_work, stats)
        stats.seconds = time.perf_counter() - start
    out = {"counters": dict(sorted(stats.counters.items())), "seconds": round(stats.seconds, 4)}
    store.write_json(done, out)
    return out


# ---------------------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------------------

@dataclass
class RunSummary:
    out: str                 # the output folder: a local path or an object-store URL
    kept_rows: int
    rejected_rows: int
    stats: dict
    skipped_steps: int = 0


Executor = Callable[[Plan, int, list[Unit]], list[UnitResult]]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]


def serial_executor(plan: Plan, segment: int, units: list[Unit], progress=None) -> list[UnitResult]:
    """Every unit in this process; a failing unit is retried ``retries`` times, then the others
    still run and the run fails with all failures listed (``UnitsFailed``)."""
    results, failures = {}, {}
    for u in units:
        for attempt in range(plan.config.retries + 1):
            try:
                results[u.index] = run_unit(plan, segment, u)
                failures.pop(u.index, None)
                break
            except ConfigError:
                raise                                       # the same on every unit: no retry, no next unit
            except Exception as exc:  # noqa: BLE001 - any failure of one unit must not stop the others
                failures[u.index] = _describe(exc)
        if u.index in results and progress:
            progress(segment, u)
    if failures:
        raise UnitsFailed(segment, failures, len(units))
    return [results[u.index] for u in units]


def _worker(raw: dict, base: str, segment: int, unit: Unit) -> UnitResult:
    plan = Plan.from_dict(raw, base=Path(base))
    return run_unit(plan, segment, unit)


def die_with_parent(parent: int) -> None:
    """Worker initializer: end this process when the run that started it ends, even by kill -9
    (a stray worker would go on writing into the output while the resume runs). Linux: the
    kernel's parent-death signal; elsewhere, and as a backstop, a thread watching the parent."""
    import signal
    import threading

    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:                      # the parent died before the signal was set
        os._exit(1)

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def process_executor(workers: int):
    """Run units in ``workers`` processes (spawned, so no forked Arrow thread pools). A unit that
    raises, or whose worker process dies (killed, out of memory), is retried in a fresh pool."""
    def execute(plan: Plan, segment: int, units: list[Unit], progress=None) -> list[UnitResult]:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        raw = plan.config.model_dump(mode="json")
        results, failures = {}, {}
        pending = list(units)
        for attempt in range(plan.config.retries + 1):
            if not pending:
                break
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=die_with_parent,
                                     initargs=(os.getpid(),)) as pool:
                futures = {pool.submit(_worker, raw, str(plan.base), segment, u): u for u in pending}
                for fut in as_completed(futures):
                    u = futures[fut]
                    try:
                        results[u.index] = fut.result()
                        failures.pop(u.index, None)
                        if progress:
                            progress(segment, u)
                    except Exception as exc:  # noqa: BLE001 - includes BrokenProcessPool (a worker died)
                        failures[u.index] = _describe(exc)
            pending = [u for u in units if u.index in failures]
        if failures:
            raise UnitsFailed(segment, failures, len(units))
        return [results[u.index] for u in units]
    return execute


def prepare_output(plan: Plan, resume: bool) -> None:
    """Check the output folder and record this run's config hash in _work/run.json. The first
    touch of the store: an unreachable or unwritable one fails here, named."""
    try:
        _prepare_output(plan, resume)
    except CorpusforgeError:
        raise
    except Exception as exc:  # noqa: BLE001 - fsspec back ends raise their own types (botocore, aiohttp)
        raise CorpusforgeError(f"output.path {plan.store.url}: cannot use it: {_describe(exc)}") from exc


def _prepare_output(plan: Plan, resume: bool) -> None:
    store, out = plan.store, plan.out
    run_file = f"{plan.work}/{RUN_FILE}"
    manifest_path = f"{out}/{MANIFEST}"
    if resume and store.exists(run_file):
        previous = store.read_json(run_file)
        if previous.get("config_hash") != plan.config_hash:
            raise CorpusforgeError(
                f"{store.url}: the config changed since the interrupted run (config hash "
                f"{previous.get('config_hash', '?')[:12]} -> {plan.config_hash[:12]}); run without --resume to start over")
        changed = input_changes(previous.get("inputs"), input_stamps(plan))
        if changed:
            raise CorpusforgeError(f"{store.url}: the inputs changed since the interrupted run ({changed}); "
                                   "resuming would mix two input sets: run without --resume to start over")
        return
    if not store.is_empty_dir(out):
        ours = store.exists(manifest_path) or store.exists(f"{out}/{LEGACY_MANIFEST}") or store.exists(plan.work)
        if not ours:
            raise CorpusforgeError(f"{store.url} exists and is not a corpusforge output folder; choose an empty or new path")
        if resume and store.exists(manifest_path):
            if store.read_json(manifest_path).get("config_hash") == plan.config_hash:
                return   # already complete: finalize() rewrites nothing new
        stale = [manifest_path, f"{out}/{STATS}", f"{out}/{REPORT_HTML}", f"{out}/{REPORT_JSON}",
                 *(f"{out}/{name}" for name in (LEGACY_MANIFEST, "stats.json", "report.html", "report.json"))]
        for p in store.glob(f"{out}/*.parquet") + [p for p in stale if store.exists(p)]:
            store.rm(p)
        for d in (plan.rejected_dir, plan.work, f"{out}/rejected"):
            store.rm(d)
    store.makedirs(plan.work)
    store.write_json(run_file, {"config_hash": plan.config_hash, "config": plan.config.model_dump(mode="json"),
                                "inputs": input_stamps(plan)})


def input_stamps(plan: Plan) -> dict[str, str]:
    """The run's input listing as part of its identity: each file's size and modification time
    (local) or size and ETag (object store). Cheap: no byte of the inputs is read."""
    return {path: file_stamp(path) for unit in plan.units for _, path in unit.files}


def input_changes(before: dict[str, str] | None, now: dict[str, str]) -> str | None:
    """A description of the files added, removed or changed between two listings, or None."""
    if before is None:
        return None
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    changed = sorted(p for p in set(now) & set(before) if now[p] != before[p])
    parts = [f"{label} {len(files)}: {', '.join(files[:5])}{' ...' if len(files) > 5 else ''}"
             for label, files in (("added", added), ("removed", removed), ("changed", changed)) if files]
    return "; ".join(parts) or None


def run(config: PipelineConfig | dict, *, resume: bool = False, workers: int = 1, base: Path | None = None,
        progress=None, executor=None, resolver=None) -> RunSummary:
    """Run a pipeline end to end.

    ``executor(plan, segment, units, progress)`` runs one segment's units and returns their
    results in unit order (serially, in processes, as Prefect tasks, on Dask);
    ``resolver(plan, segment)`` runs a global stage's reduce step. Both default to local runs.
    """
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers: {workers!r} is not a number of processes (at least 1)")
    if isinstance(config, dict):
        config = from_dict(config)
    plan = Plan(config, base=base)
    store = plan.store
    started = time.perf_counter()
    if resume and store.exists(f"{plan.out}/{MANIFEST}"):
        return _already_complete(plan)
    prepare_output(plan, resume)
    execute = executor or (serial_executor if workers <= 1 else process_executor(workers))
    skipped = 0
    results: list[list[UnitResult]] = []
    for seg in plan.segments:
        if seg.global_stage is not None:
            (resolver or run_resolve)(plan, seg.index)
        skipped += len(store.glob(plan.done_path(seg.index, "*")))      # one listing, not one request per unit
        results.append(execute(plan, seg.index, plan.units, progress))
    summary = finalize(plan, results, wall_seconds=time.perf_counter() - started)
    summary.skipped_steps = skipped
    return summary


def _already_complete(plan: Plan) -> RunSummary:
    """``--resume`` of a run whose manifest exists: the dataset is complete (the manifest is
    written last), whatever state ``_work/`` was left in by a kill during the cleanup after it.
    It is never touched: a changed config or input listing is refused; else what is left of
    ``_work/`` is removed and the summary returned."""
    store = plan.store
    manifest = store.read_json(f"{plan.out}/{MANIFEST}")
    if manifest.get("config_hash") != plan.config_hash:
        raise CorpusforgeError(f"{store.url}: a completed run with another config is there (config hash "
                               f"{str(manifest.get('config_hash'))[:12]} -> {plan.config_hash[:12]}); "
                               "run without --resume to replace it")
    listed = {i["path"]: i["bytes"] for i in manifest.get("lineage", {}).get("inputs", [])}
    now = {p: file_size(p) for u in plan.units for _, p in u.files}
    changed = input_changes({p: str(b) for p, b in listed.items()}, {p: str(b) for p, b in now.items()})
    if changed:
        raise CorpusforgeError(f"{store.url}: the inputs changed since this run completed ({changed}); "
                               "run without --resume to rebuild")
    if not plan.config.output.keep_work and store.exists(plan.work):
        store.rm(plan.work)
    stats = store.read_json(f"{plan.out}/{STATS}")
    return RunSummary(store.url, manifest["rows"], stats["totals"]["rejected"], stats,
                      skipped_steps=len(plan.segments) * len(plan.units))


def finalize(plan: Plan, results: list[list[UnitResult]], wall_seconds: float = 0.0) -> RunSummary:
    """Merge the steps' results into manifests and stats, check the accounting, clean up."""
    last = results[-1]
    kept_shards = [ShardInfo(**s) for r in sorted(last, key=lambda r: r.unit) for s in r.kept]
    rejected_shards = sorted((ShardInfo(**s) for seg in results for r in seg for s in r.rejected),
                             key=lambda s: s.path)
    stats = merge_stats(plan, results)
    stats["wall_seconds"] = round(wall_seconds, 3)
    lineage = {
        "corpusforge_version": __version__,
        "inputs": [{"path": p, "bytes": file_size(p)} for u in plan.units for _, p in u.files],
        "stages": [{"name": s.name, "config": s.config.model_dump(mode="json")} for s in plan.stages],
        "seed": plan.config.seed,
    }
    store = plan.store
    sources = _source_counts(store, plan.out, kept_shards)
    artifacts = {}
    for stage in plan.stages:
        for key, path in stage.artifacts().items():
            path = path if path.is_absolute() else plan.base / path
            if not path.exists():
                raise CorpusforgeError(f"stage {stage.name}: artifact {key} {path} does not exist")
            store.write_bytes(f"{plan.out}/{path.name}", path.read_bytes())
            artifacts[key] = path.name
    kept_manifest = build_manifest(schema=plan.record_schema, target=plan.kept_schema, shards=kept_shards,
                                   dataset="kept", config_hash=plan.config_hash, lineage=lineage, sources=sources,
                                   artifacts=artifacts)
    rej_manifest = build_manifest(schema=plan.record_schema, target=plan.rejected_schema, shards=rejected_shards,
                                  dataset="rejected", config_hash=plan.config_hash, lineage=lineage,
                                  sources=_source_counts(store, plan.rejected_dir, rejected_shards))
    store.makedirs(plan.rejected_dir)
    write_manifest(plan.rejected_dir, rej_manifest, store=store)
    store.write_json(f"{plan.out}/{STATS}", stats)
    write_manifest(plan.out, kept_manifest, store=store)   # last: its presence means the run is complete
    if not plan.config.output.keep_work:
        store.rm(plan.work)
    _report(store.url)
    return RunSummary(store.url, kept_manifest["rows"], rej_manifest["rows"], stats)


def _report(out: str) -> None:
    """Every run ends with its report; the data is complete before, so a report failure only warns."""
    import warnings

    from corpusforge.report.build import generate

    try:
        generate(out)
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"the dataset is complete, but its report failed: {type(exc).__name__}: {exc}")


def _source_counts(store: Store, directory: str, shards: list[ShardInfo]) -> dict:
    """Rows per source, and tokens per source where the shards carry ``n_tokens``."""
    import polars as pl

    totals: dict[str, dict] = {}
    for s in shards:
        pf = pq.ParquetFile(f"{directory}/{s.path}", filesystem=store.arrow_fs)
        cols = ["source"] + (["n_tokens"] if "n_tokens" in pf.schema_arrow.names else [])
        df = pl.from_arrow(pf.read(columns=cols))
        aggs = [pl.len().alias("rows")] + ([pl.col("n_tokens").sum().alias("tokens")] if "n_tokens" in cols else [])
        for row in df.group_by("source").agg(aggs).iter_rows(named=True):
            entry = totals.setdefault(row["source"], {"rows": 0})
            entry["rows"] += row["rows"]
            if row.get("tokens"):
                entry["tokens"] = entry.get("tokens", 0) + int(row["tokens"])
    return dict(sorted(totals.items()))


# Quality decisions that keep nearly everything or nearly nothing are usually a model or a
# threshold from another domain (a classifier scoring every document 0.06-0.18): say so.
FILTER_STAGES = ("text.quality", "text.quality_classifier")
WARN_MIN_ROWS = 20            # fewer documents say nothing about a filter's share


def decision_warnings(stages: dict) -> list[str]:
    """Warnings for quality filters that reject more than 95% or keep more than 99% of the
    documents they see, and for single rules that reject more than 95% of them."""
    out = []
    for key, e in stages.items():
        n = e["rows_in"]
        if e["stage"] not in FILTER_STAGES or n < WARN_MIN_ROWS:
            continue
        if e["rejected"] > 0.95 * n:
            out.append(f"{key} rejected {e['rejected']:,} of {n:,} documents ({e['rejected'] / n:.1%}): "
                       f"check its thresholds or model against this data")
        elif e["kept"] > 0.99 * n:
            out.append(f"{key} kept {e['kept']:,} of {n:,} documents ({e['kept'] / n:.1%}): it decides almost "
                       f"nothing here; check its thresholds or model against this data")
        for reason, count in e["rejected_by_reason"].items():
            if count > 0.95 * n:
                out.append(f"{key}: rule {reason} alone rejected {count:,} of {n:,} documents ({count / n:.1%})")
    return out


def merge_stats(plan: Plan, results: list[list[UnitResult]]) -> dict:
    read = {"files": 0, "files_accounted": 0, "records": 0, "rejected": 0, "bytes": 0,
            "rejected_by_reason": Counter()}
    for r in results[0]:
        for k in ("files", "files_accounted", "records", "rejected", "bytes"):
            read[k] += r.read.get(k, 0)
        read["rejected_by_reason"].update(r.read["rejected_by_reason"])
    read["rejected_by_reason"] = dict(sorted(read["rejected_by_reason"].items()))
    stages: dict[str, StageStats] = {}
    for seg_results in results:
        for r in seg_results:
            for key, d in r.stats.items():
                stages.setdefault(key, StageStats()).merge(StageStats.from_dict(d))
    # stages that never saw a row still appear, in pipeline order
    ordered = {}
    for i, stage in enumerate(plan.stages):
        key = plan.stage_key(i, stage)
        st = stages.get(key, StageStats())
        entry = {"stage": stage.name, **st.to_dict()}
        seg = next((s for s in plan.segments if s.global_position == i), None)
        if seg is not None:
            resolved = plan.store.read_json_or_none(f"{plan.resolve_dir(seg.index)}/done.json")
            if resolved is not None:
                entry["counters"] = dict(sorted({**entry["counters"], **resolved["counters"]}.items()))
                entry["resolve_seconds"] = resolved["seconds"]
        ordered[key] = entry
    kept = sum(s["rows"] for r in results[-1] for s in r.kept)
    rejected = read["rejected"] + sum(e["rejected"] for e in ordered.values())
    created = sum(e["created"] for e in ordered.values())
    entered = read["records"] + read["rejected"]
    files_listed = sum(len(u.files) for u in plan.units)
    ok = entered + created == kept + rejected and read["files"] == read["files_accounted"] == files_listed
    stats = {
        "pipeline": plan.config.name, "kind": plan.config.kind, "config_hash": plan.config_hash,
        "units": len(plan.units), "read": read, "stages": ordered,
        "totals": {"entered": entered, "created": created, "kept": kept, "rejected": rejected,
                   "files_listed": files_listed, "files_accounted": read["files_accounted"], "accounting_ok": ok},
    }
    warnings = decision_warnings(ordered)
    if warnings:
        stats["warnings"] = warnings
    if not ok:
        raise AccountingError(f"run accounting failed: {entered} entered + {created} created vs {kept} kept + "
                              f"{rejected} rejected; {files_listed} files listed, {read['files']} read, "
                              f"{read['files_accounted']} accounted for")
    return stats
