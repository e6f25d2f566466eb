"""Timing helper the benchmarks share."""

from __future__ import annotations

import time


def best(fn, repeats: int) -> tuple[float, object]:
    """(fastest wall seconds over ``repeats`` calls, the last call's result)."""
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out
