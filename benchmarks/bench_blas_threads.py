"""BLAS threads in the analysis loops: the library's default against one thread, in one run.

The Benettin loop of ``lyapunov_spectrum`` makes one QR of an (M, M) frame per time step, and the
PLRNN's fixed-point search solves and eigen-decomposes batches of (M, M) systems. Above a size
threshold OpenBLAS splits each of these small calls over its threads, which then mostly wait for
each other; with another process busy on a 2-core machine the loop slowed by two orders of
magnitude at M = 100 (session 35). Since then both loops run with one BLAS thread
(``dsident._threads.one_blas_thread``). This script times the same calls both ways:

- Benettin: ``steps`` products ``J @ Q`` and QRs (``lyapunov._qr``, the loop's own routine) of
  a full (M, M) frame;
- fixed points: the region search of ``plrnn_cycles`` (``fixed_points._search``) on a random
  contracting PLRNN.

Run: ``python benchmarks/bench_blas_threads.py`` (``--sizes 50 100 200 300``, ``--steps 500``).
The gap depends on the machine and its load: run it once quiet and once beside a busy process
(e.g. a running fit) to see both.
"""
from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from dsident.analysis import lyapunov
from dsident.analysis.fixed_points import _search
from dsident.dynamics import PLRNNParams
from _timing import best_of


def benettin(jac: np.ndarray, steps: int) -> float:
    """Sum of log|diag R| over ``steps`` QR steps of a constant Jacobian (the loop's work)."""
    q = lyapunov._initial_frame(jac.shape[0], jac.shape[0])
    total = 0.0
    for _ in range(steps):
        q, diag_r = lyapunov._qr(jac @ q)
        total += float(np.log(np.abs(diag_r)).sum())
    return total


def random_plrnn(m: int, rng: np.random.Generator) -> PLRNNParams:
    """A contracting PLRNN (A = 0.5, weak W): one fixed point, found by the search's first rounds."""
    return PLRNNParams(A=np.full(m, 0.5), W=rng.normal(0.0, 0.3 / np.sqrt(m), (m, m)),
                       h=rng.normal(0.0, 0.1, m), C=np.zeros((m, 0)))


def search(p: PLRNNParams) -> int:
    found, *_ = _search(p, 1, 1e-9, n_trajectories=50, n_steps=300, n_random=1000,
                        max_iter=20, max_candidates=50_000,
                        rng=np.random.default_rng(0), scale=1.0)
    return sum(len(f) for f in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200, 300])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    default = max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=1)
    print(f"BLAS threads by default: {default}; Benettin loop over {args.steps} steps")
    print("| M | Benettin default (s) | Benettin 1 thread (s) | ratio | search default (s) | search 1 thread (s) | ratio |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for m in args.sizes:
        jac = rng.normal(0.0, 1.0 / np.sqrt(m), (m, m))
        p = random_plrnn(m, rng)
        t_qr, s_default = best_of(lambda: benettin(jac, args.steps), args.repeat)
        t_fp, n_default = best_of(lambda: search(p), 1)
        with threadpool_limits(limits=1, user_api="blas"):
            t_qr1, s_one = best_of(lambda: benettin(jac, args.steps), args.repeat)
            t_fp1, n_one = best_of(lambda: search(p), 1)
        assert np.isclose(s_default, s_one, rtol=1e-9) and n_default == n_one, "the two routes disagree"
        print(f"| {m} | {t_qr:.3f} | {t_qr1:.3f} | {t_qr / t_qr1:.1f}× | {t_fp:.2f} | {t_fp1:.2f} | "
              f"{t_fp / t_fp1:.1f}× |")


if __name__ == "__main__":
    main()
