"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``, so this
folder is on ``sys.path``)."""
from __future__ import annotations

import time
from typing import Any, Callable


def best_of(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """The shortest wall time (s) of ``repeats`` calls of ``fn`` and the last call's result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out
