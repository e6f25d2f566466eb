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
``<out>/part-UUUUU-NNNNN.parquet`` + ``manifest.json``      kept rows (last segment)
``<out>/rejected/part-UUUUU-S-NNNNN.parquet`` + manifest    rejected rows, with stage and reason
``<out>/stats.json``                                         per-stage stats and the accounting check
``<out>/_work/``                                             intermediate shards, fingerprints, decisions,
                                                             and one ``done`` marker per finished step

Every file is written atomically; a step's ``done`` marker is written last. ``--resume``
skips steps whose marker exists and redoes the others after deleting their partial
files, so a killed run resumes to byte-identical output.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from corpusforge import __version__, schemas
from corpusforge.config import PipelineConfig, from_dict
from corpusforge.errors import AccountingError, ConfigError, CorpusforgeError, UnitsFailed
from corpusforge.io.atomic import commit, temp_path, write_bytes, write_json
from corpusforge.io.dataset import build_manifest, write_manifest
from corpusforge.io.readers.base import Reader, file_size
from corpusforge.io.writer import ShardInfo, ShardWriter
from corpusforge.stage import REJECT_STAGE, GlobalStage, Stage, StageResult, StageStats, run_checked

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
        out = Path(config.output.path)
        self.out = out if out.is_absolute() else self.base / out
        self.rejected_dir = self.out / "rejected"
        self.work = self.out / "_work"
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

    def stage_key(self, position: int, stage: Stage) -> str:
        return f"{position:02d}:{stage.name}"

    # -- paths -------------------------------------------------------------------------
    def done_path(self, segment: int, unit: int) -> Path:
        return self.work / f"seg{segment}" / f"u{unit:05d}.done.json"

    def resolve_dir(self, segment: int) -> Path:
        return self.work / f"global{segment}"

    def fingerprint_path(self, segment: int, unit: int) -> Path:
        """Fingerprints of unit's rows for the global stage that opens ``segment``."""
        return self.work / f"fp{segment}" / f"u{unit:05d}.parquet"

    def kept_location(self, segment: int) -> tuple[Path, str]:
        last = segment == len(self.segments) - 1
        return (self.out, "part") if last else (self.work / f"seg{segment}", "part")


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
    """Delete whatever a crashed attempt at (segment, unit) left behind."""
    directory, prefix = plan.kept_location(segment)
    for p in directory.glob(f"{prefix}-{unit:05d}-*.parquet"):
        p.unlink()
    for p in plan.rejected_dir.glob(f"part-{unit:05d}-{segment}-*.parquet"):
        p.unlink()
    if segment + 1 < len(plan.segments):
        plan.fingerprint_path(segment + 1, unit).unlink(missing_ok=True)


def run_unit(plan: Plan, segment_index: int, unit: Unit) -> UnitResult:
    """Run one unit through one segment and write its shards, fingerprints and done marker."""
    seg = plan.segments[segment_index]
    done = plan.done_path(segment_index, unit.index)
    if done.exists():
        return load_done(done)
    _clean_unit_outputs(plan, segment_index, unit.index)
    directory, prefix = plan.kept_location(segment_index)
    opts = plan.config.output.writer_options()
    kept_writer = ShardWriter(directory, f"{prefix}-{unit.index:05d}", plan.kept_schema, opts, plan.record_schema.name)
    rej_writer = ShardWriter(plan.rejected_dir, f"part-{unit.index:05d}-{segment_index}", plan.rejected_schema, opts,
                             f"{plan.record_schema.name} (rejected)")
    stats: dict[str, StageStats] = {}
    read_stats = {"files": 0, "records": 0, "rejected": 0, "rejected_by_reason": Counter(), "bytes": 0}
    next_global = plan.segments[segment_index + 1] if segment_index + 1 < len(plan.segments) else None
    fingerprints: list[pa.Table] = []
    kept_rows = 0

    def reject(table: pa.Table, stage_name: str) -> None:
        if table.num_rows:
            rej_writer.write(table.append_column(REJECT_STAGE, pa.array([stage_name] * table.num_rows, pa.string())))

    try:
        for batch, row_offset in _segment_input(plan, segment_index, unit, read_stats, reject):
            if seg.global_stage is not None:
                key = plan.stage_key(seg.global_position, seg.global_stage)
                st = stats.setdefault(key, StageStats())
                res = run_checked(seg.global_stage, batch, st,
                                  lambda t: seg.global_stage.filter(t, unit.index, row_offset,
                                                                    plan.resolve_dir(segment_index), st))
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
                    fingerprints.append(fp.append_column("unit", pa.array([unit.index] * fp.num_rows, pa.int32()))
                                          .append_column("row", pa.array(range(kept_rows, kept_rows + fp.num_rows),
                                                                         pa.int64())))
                kept_writer.write(batch)
                kept_rows += batch.num_rows
        kept = kept_writer.close()
        rejected = rej_writer.close()
    except BaseException:
        kept_writer.abort()
        rej_writer.abort()
        raise
    if next_global is not None:
        fp_path = plan.fingerprint_path(segment_index + 1, unit.index)
        fp_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(fp_path)
        if fingerprints:
            pq.write_table(pa.concat_tables(fingerprints), tmp, compression="zstd")
        else:
            pq.write_table(pa.table({"unit": pa.array([], pa.int32()), "row": pa.array([], pa.int64())}), tmp)
        commit(tmp, fp_path)
    read_stats["rejected_by_reason"] = dict(sorted(read_stats["rejected_by_reason"].items()))
    result = UnitResult(segment_index, unit.index, [s.to_dict() for s in kept], [s.to_dict() for s in rejected],
                        {k: v.to_dict() for k, v in stats.items()}, read_stats if segment_index == 0 else {})
    write_json(done, result.__dict__)
    return result


def _segment_input(plan: Plan, segment: int, unit: Unit, read_stats: dict, reject) -> Iterator[tuple[pa.Table, int]]:
    """Yield (batch, row offset within the unit's input to this segment)."""
    offset = 0
    if segment == 0:
        def records():
            for input_index, path in unit.files:
                reader = plan.readers[input_index]
                read_stats["files"] += 1
                read_stats["bytes"] += file_size(Path(path))
                for rb in reader.read(Path(path)):
                    if rb.rejected is not None and rb.rejected.num_rows:
                        read_stats["rejected"] += rb.rejected.num_rows
                        read_stats["rejected_by_reason"].update(rb.rejected.column("reject_reason").to_pylist())
                        reject(rb.rejected, READ_STAGE)
                    read_stats["records"] += rb.records.num_rows
                    yield rb.records
        source = _coalesce(records(), plan.config.batch_rows)
    else:
        prev = load_done(plan.done_path(segment - 1, unit.index))
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
                pf = pq.ParquetFile(directory / shard["path"])
                for b in pf.iter_batches(batch_size=plan.config.batch_rows, columns=columns):
                    yield pa.Table.from_batches([b])
        source = shards()
    for batch in source:
        yield batch, offset
        offset += batch.num_rows


def load_done(path: Path) -> UnitResult:
    return UnitResult(**json.loads(path.read_text()))


def run_resolve(plan: Plan, segment_index: int) -> dict:
    """The reduce step of the global stage that opens ``segment_index``."""
    seg = plan.segments[segment_index]
    workdir = plan.resolve_dir(segment_index)
    done = workdir / "done.json"
    if done.exists():
        return json.loads(done.read_text())
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    # units whose rows were all rejected upstream have empty fingerprint files: skip them
    files = [f for f in (plan.fingerprint_path(segment_index, u.index) for u in plan.units)
             if pq.read_metadata(f).num_rows > 0]
    stats = StageStats()
    start = time.perf_counter()
    seg.global_stage.resolve(files, workdir, stats)
    stats.seconds = time.perf_counter() - start
    out = {"counters": dict(sorted(stats.counters.items())), "seconds": round(stats.seconds, 4)}
    write_json(done, out)
    return out


# ---------------------------------------------------------------------------------------
# The whole run
# ---------------------------------------------------------------------------------------

@dataclass
class RunSummary:
    out: Path
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
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
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
    """Check the output folder and record this run's config hash in _work/run.json."""
    out = plan.out
    run_file = plan.work / RUN_FILE
    if resume and run_file.exists():
        previous = json.loads(run_file.read_text())
        if previous.get("config_hash") != plan.config_hash:
            raise CorpusforgeError(
                f"{out}: the config changed since the interrupted run (config hash "
                f"{previous.get('config_hash', '?')[:12]} -> {plan.config_hash[:12]}); run without --resume to start over")
        return
    if out.exists() and any(out.iterdir()):
        ours = (out / "manifest.json").exists() or plan.work.exists()
        if not ours:
            raise CorpusforgeError(f"{out} exists and is not a corpusforge output folder; choose an empty or new path")
        if resume and (out / "manifest.json").exists():
            manifest = json.loads((out / "manifest.json").read_text())
            if manifest.get("config_hash") == plan.config_hash:
                return   # already complete: finalize() rewrites nothing new
        for p in list(out.glob("*.parquet")) + [out / "manifest.json", out / "stats.json"]:
            p.unlink(missing_ok=True)
        for d in (plan.rejected_dir, plan.work):
            if d.exists():
                shutil.rmtree(d)
    plan.work.mkdir(parents=True, exist_ok=True)
    write_json(run_file, {"config_hash": plan.config_hash, "config": plan.config.model_dump(mode="json")})


def run(config: PipelineConfig | dict, *, resume: bool = False, workers: int = 1, base: Path | None = None,
        progress=None, executor=None, resolver=None) -> RunSummary:
    """Run a pipeline end to end.

    ``executor(plan, segment, units, progress)`` runs one segment's units and returns their
    results in unit order (serially, in processes, as Prefect tasks, on Dask);
    ``resolver(plan, segment)`` runs a global stage's reduce step. Both default to local runs.
    """
    if isinstance(config, dict):
        config = from_dict(config)
    plan = Plan(config, base=base)
    started = time.perf_counter()
    if resume and (plan.out / "manifest.json").exists() and not plan.work.exists():
        manifest = json.loads((plan.out / "manifest.json").read_text())
        if manifest.get("config_hash") == plan.config_hash:
            stats = json.loads((plan.out / "stats.json").read_text())
            return RunSummary(plan.out, manifest["rows"], stats["totals"]["rejected"], stats,
                              skipped_steps=len(plan.segments) * len(plan.units))
    prepare_output(plan, resume)
    execute = executor or (serial_executor if workers <= 1 else process_executor(workers))
    skipped = 0
    results: list[list[UnitResult]] = []
    for seg in plan.segments:
        if seg.global_stage is not None:
            (resolver or run_resolve)(plan, seg.index)
        skipped += sum(plan.done_path(seg.index, u.index).exists() for u in plan.units)
        results.append(execute(plan, seg.index, plan.units, progress))
    summary = finalize(plan, results, wall_seconds=time.perf_counter() - started)
    summary.skipped_steps = skipped
    return summary


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
        "inputs": [{"path": p, "bytes": file_size(Path(p))} for u in plan.units for _, p in u.files],
        "stages": [{"name": s.name, "config": s.config.model_dump(mode="json")} for s in plan.stages],
        "seed": plan.config.seed,
    }
    sources = _source_counts(plan.out, kept_shards)
    artifacts = {}
    for stage in plan.stages:
        for key, path in stage.artifacts().items():
            path = path if path.is_absolute() else plan.base / path
            if not path.exists():
                raise CorpusforgeError(f"stage {stage.name}: artifact {key} {path} does not exist")
            write_bytes(plan.out / path.name, path.read_bytes())
            artifacts[key] = path.name
    kept_manifest = build_manifest(schema=plan.record_schema, target=plan.kept_schema, shards=kept_shards,
                                   dataset="kept", config_hash=plan.config_hash, lineage=lineage, sources=sources,
                                   artifacts=artifacts)
    rej_manifest = build_manifest(schema=plan.record_schema, target=plan.rejected_schema, shards=rejected_shards,
                                  dataset="rejected", config_hash=plan.config_hash, lineage=lineage,
                                  sources=_source_counts(plan.rejected_dir, rejected_shards))
    plan.rejected_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(plan.rejected_dir, rej_manifest)
    write_json(plan.out / "stats.json", stats)
    write_manifest(plan.out, kept_manifest)   # last: its presence means the run is complete
    if not plan.config.output.keep_work and plan.work.exists():
        shutil.rmtree(plan.work)
    _report(plan.out)
    return RunSummary(plan.out, kept_manifest["rows"], rej_manifest["rows"], stats)


def _report(out: Path) -> None:
    """Every run ends with its report; the data is complete before, so a report failure only warns."""
    import warnings

    from corpusforge.report.build import generate

    try:
        generate(out)
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"the dataset is complete, but its report failed: {type(exc).__name__}: {exc}")


def _source_counts(directory: Path, shards: list[ShardInfo]) -> dict:
    """Rows per source, and tokens per source where the shards carry ``n_tokens``."""
    import polars as pl

    totals: dict[str, dict] = {}
    for s in shards:
        names = pq.read_schema(directory / s.path).names
        cols = ["source"] + (["n_tokens"] if "n_tokens" in names else [])
        df = pl.read_parquet(directory / s.path, columns=cols)
        aggs = [pl.len().alias("rows")] + ([pl.col("n_tokens").sum().alias("tokens")] if "n_tokens" in cols else [])
        for row in df.group_by("source").agg(aggs).iter_rows(named=True):
            entry = totals.setdefault(row["source"], {"rows": 0})
            entry["rows"] += row["rows"]
            if row.get("tokens"):
                entry["tokens"] = entry.get("tokens", 0) + int(row["tokens"])
    return dict(sorted(totals.items()))


def merge_stats(plan: Plan, results: list[list[UnitResult]]) -> dict:
    read = {"files": 0, "records": 0, "rejected": 0, "bytes": 0, "rejected_by_reason": Counter()}
    for r in results[0]:
        for k in ("files", "records", "rejected", "bytes"):
            read[k] += r.read[k]
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
            done = plan.resolve_dir(seg.index) / "done.json"
            if done.exists():
                resolved = json.loads(done.read_text())
                entry["counters"] = dict(sorted({**entry["counters"], **resolved["counters"]}.items()))
                entry["resolve_seconds"] = resolved["seconds"]
        ordered[key] = entry
    kept = sum(s["rows"] for r in results[-1] for s in r.kept)
    rejected = read["rejected"] + sum(e["rejected"] for e in ordered.values())
    created = sum(e["created"] for e in ordered.values())
    entered = read["records"] + read["rejected"]
    ok = entered + created == kept + rejected
    stats = {
        "pipeline": plan.config.name, "kind": plan.config.kind, "config_hash": plan.config_hash,
        "units": len(plan.units), "read": read, "stages": ordered,
        "totals": {"entered": entered, "created": created, "kept": kept, "rejected": rejected,
                   "accounting_ok": ok},
    }
    if not ok:
        raise AccountingError(f"run accounting failed: {entered} entered + {created} created != "
                              f"{kept} kept + {rejected} rejected")
    return stats
