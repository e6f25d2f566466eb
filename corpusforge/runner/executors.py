"""Executors: run one segment's units and return their results in unit order, retrying a failed
unit up to ``retries`` times, then failing the run with every failure listed. Here: in this
process, or in a pool of processes; ``flows/pipeline.py`` adds Prefect tasks (and through them
Dask). All collect with :func:`collect`."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

from corpusforge.errors import ConfigError, UnitsFailed, describe
from corpusforge.runner.plan import Plan, Unit, UnitResult
from corpusforge.runner.step import run_unit

Executor = Callable[[Plan, int, list[Unit]], list[UnitResult]]
Outcome = tuple[Unit, "UnitResult | BaseException"]


def collect(segment: int, units: list[Unit], attempts: int, run_round: Callable[[list[Unit]], Iterable[Outcome]],
            progress=None) -> list[UnitResult]:
    """The retry-and-collect loop every executor shares: ``run_round(pending)`` runs the pending
    units and yields each one's result or the exception it ended with; the units that failed go
    round again, ``attempts`` rounds at most; a failure never stops the other units. Returns the
    results in unit order, or raises ``UnitsFailed`` listing every unit that still failed."""
    results: dict[int, UnitResult] = {}
    failures: dict[int, str] = {}
    pending = list(units)
    for _ in range(attempts):
        if not pending:
            break
        for unit, outcome in run_round(pending):
            if isinstance(outcome, BaseException):
                failures[unit.index] = describe(outcome)
                continue
            results[unit.index] = outcome
            failures.pop(unit.index, None)
            if progress:
                progress(segment, unit)
        pending = [u for u in units if u.index in failures]
    if failures:
        raise UnitsFailed(segment, failures, len(units))
    return [results[u.index] for u in units]


def serial_executor(plan: Plan, segment: int, units: list[Unit], progress=None) -> list[UnitResult]:
    """Every unit in this process; a config error (the same on every unit) stops the run at once."""
    def run_round(pending: list[Unit]) -> Iterator[Outcome]:
        for u in pending:
            try:
                yield u, run_unit(plan, segment, u)
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of one unit must not stop the others
                yield u, exc
    return collect(segment, units, plan.config.retries + 1, run_round, progress)


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

        def run_round(pending: list[Unit]) -> Iterator[Outcome]:
            with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=die_with_parent,
                                     initargs=(os.getpid(),)) as pool:
                futures = {pool.submit(_worker, raw, str(plan.base), segment, u): u for u in pending}
                for fut in as_completed(futures):
                    try:
                        yield futures[fut], fut.result()
                    except Exception as exc:  # noqa: BLE001 - includes BrokenProcessPool (a worker died)
                        yield futures[fut], exc
        return collect(segment, units, plan.config.retries + 1, run_round, progress)
    return execute
