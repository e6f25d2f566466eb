"""One step of work: a unit through a segment (its input -> the global stage's filter -> the
segment's stages -> kept shards, rejected shards, the next global stage's fingerprints, a done
marker), and the reduce step of a global stage."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from corpusforge.errors import AccountingError, describe
from corpusforge.io.readers.base import ReadBatch, Reader, file_error_row, file_size, input_path
from corpusforge.io.writer import ShardWriter
from corpusforge.runner.plan import READ_STAGE, Plan, Unit, UnitResult
from corpusforge.stage import (REJECT_DETAIL, REJECT_STAGE, StageResult, StageStats, fingerprint_isolating,
                               process_isolating, run_checked, write_decisions)


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
        # the global stage's decisions: located (on an object store: fetched) once for the unit
        decisions = plan.local_resolve_dir(segment_index) if seg.global_stage is not None else None
        for batch, row_offset in _segment_input(plan, segment_index, unit, read_stats, reject):
            if seg.global_stage is not None:
                key = plan.stage_key(seg.global_position, seg.global_stage)
                st = stats.setdefault(key, StageStats())
                res = run_checked(seg.global_stage, batch, st,
                                  lambda t: seg.global_stage.filter(t, unit.index, row_offset, decisions, st))
                reject(res.rejected, seg.global_stage.name)
                batch = res.kept
            for position, stage in seg.stages:
                if batch.num_rows == 0:
                    break
                st = stats.setdefault(plan.stage_key(position, stage), StageStats())
                res: StageResult = run_checked(stage, batch, st, lambda t, s=stage, st=st: process_isolating(s, t, st))
                reject(res.rejected, stage.name)
                batch = res.kept
            if batch.num_rows and next_global is not None:
                fp_stats = StageStats()
                fp, res = fingerprint_isolating(next_global.global_stage, batch, fp_stats)
                if res.rejected.num_rows:   # counted with the global stage's own decisions, later
                    stats.setdefault(plan.stage_key(next_global.global_position, next_global.global_stage),
                                     StageStats()).merge(fp_stats)
                    reject(res.rejected, next_global.global_stage.name)
                    batch = res.kept
                if fp.num_rows != batch.num_rows:
                    raise AccountingError(f"{next_global.global_stage.name}.fingerprint returned {fp.num_rows} "
                                          f"rows for {batch.num_rows}")
                if batch.num_rows:
                    fp = (fp.append_column("unit", pa.array([unit.index] * fp.num_rows, pa.int32()))
                          .append_column("row", pa.array(range(kept_rows, kept_rows + fp.num_rows), pa.int64())))
                    try:
                        if fp_writer is None:
                            fp_writer = pq.ParquetWriter(fp_tmp, fp.schema, compression="zstd")
                        fp_writer.write_table(fp)
                    except OSError as exc:
                        raise _named(exc, plan.store.display(fp_path)) from exc
            if batch.num_rows:
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
            f"reader {reader.format} failed after {given} row(s): {describe(exc)}"))
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
        if files:
            seg.global_stage.resolve(files, local_work, stats)
        else:   # every row was rejected before this stage: nothing to decide (and no file to scan)
            write_decisions(local_work, pa.table({"unit": pa.array([], pa.int32()), "row": pa.array([], pa.int64()),
                                                  "reason": pa.array([], pa.string()),
                                                  "detail": pa.array([], pa.string())}))
        stats.seconds = time.perf_counter() - start
    out = {"counters": dict(sorted(stats.counters.items())), "seconds": round(stats.seconds, 4)}
    store.write_json(done, out)
    return out
