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


#: fit options that train more than one model (`best_of`, `restarts`), a second stage (`polish`)
#: or go back to an earlier state (`rewinds`), all decided on scored free runs
SCORED_RUN_OPTIONS = ("best_of", "polish", "restarts", "restart_after", "restart_above", "rewinds", "rewind_after")


def one_training_run(fit_options: dict[str, Any]) -> dict[str, Any]:
    """A cell's fit options for one plain training run, without :data:`SCORED_RUN_OPTIONS`: for
    scripts that time updates without scoring (``eval_every=0``) or study the epochs of one run."""
    return {k: v for k, v in fit_options.items() if k not in SCORED_RUN_OPTIONS}
