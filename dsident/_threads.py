"""Thread limits for the BLAS/LAPACK that numpy and scipy call.

The analysis loops here (the Benettin QR of a Lyapunov spectrum, the PLRNN's batched region
solves) make one small LAPACK call after another: a QR, a solve or an eigen-decomposition of an
(M, M) matrix with M of tens to hundreds. Above a size threshold OpenBLAS splits each call over
its threads, and for calls this small the threads spend their time waiting for each other. On
2 cores with another process busy, one ``orgqr`` of a 100 × 100 frame took 96 ms with two
threads and 0.48 ms with one (``benchmarks/bench_late_run.py`` measures the whole loop). So these
loops run with one BLAS thread; parallelism comes from running several fits or grid points side
by side, as the sweep does.
"""
from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with numpy's and scipy's BLAS/LAPACK limited to one thread (torch untouched)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def set_blas_threads(n_threads: int) -> None:
    """Limit numpy's and scipy's BLAS/LAPACK to ``n_threads`` for the rest of the process."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=int(n_threads), user_api="blas")


def usable_cores() -> int:
    """The cores this process may run on: a container or ``taskset`` can narrow them below
    ``os.cpu_count()`` (Linux's affinity mask; elsewhere every core)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):      # not on Linux
        return os.cpu_count() or 1
