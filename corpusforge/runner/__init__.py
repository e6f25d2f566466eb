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

import time
from pathlib import Path

from corpusforge.config import PipelineConfig, from_dict
from corpusforge.errors import ConfigError
from corpusforge.io.dataset import MANIFEST
from corpusforge.errors import describe
from corpusforge.runner.executors import Executor, collect, process_executor, serial_executor
from corpusforge.runner.finalize import (FILTER_STAGES, RunSummary, already_complete, decision_warnings, finalize,
                                         merge_stats, write_report)
from corpusforge.runner.layout import RUN_FILE, input_changes, input_stamps, prepare_output
from corpusforge.runner.plan import READ_STAGE, Plan, Segment, Unit, UnitResult, plan_units
from corpusforge.runner.step import deterministic_details, guarded_read, load_done, run_resolve, run_unit

# plan.py: what a run is made of; layout.py: where its files are; step.py: one unit through one
# segment, and a global stage's reduce; executors.py: running a segment's units; finalize.py: the end
__all__ = ["run", "Plan", "Segment", "Unit", "UnitResult", "plan_units", "READ_STAGE", "RUN_FILE", "prepare_output",
           "input_stamps", "input_changes", "run_unit", "run_resolve", "guarded_read", "deterministic_details",
           "load_done", "Executor", "collect", "describe", "serial_executor", "process_executor", "RunSummary",
           "finalize", "already_complete", "merge_stats", "decision_warnings", "write_report", "FILTER_STAGES"]


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
        return already_complete(plan)
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
