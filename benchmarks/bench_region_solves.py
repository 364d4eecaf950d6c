"""The PLRNN's region solves: one LU a system (condition estimate and solve) against SVD + solve.

``plrnn_cycles`` solves ``(I − J) z = h`` for every region tuple it tries, after refusing the
(nearly) singular ones. Until session 35 the refusal came from ``numpy.linalg.cond`` (singular
values) and the solve from a second, batched ``numpy.linalg.solve``. Since then one LU per system
(LAPACK ``getrf``) serves both: ``gecon`` estimates the 1-norm condition number from it and
``getrs`` solves. This script times both routes on the same random systems of the search's
shapes (``I − diag(A) − W D`` with random sign patterns D) with one BLAS thread, and checks that
they refuse the same systems and agree on the solutions. Half the systems of each batch are made
exactly singular (a unit with A = 1 whose column of W is switched off), as a manifold attractor's
are.

Run: ``python benchmarks/bench_region_solves.py`` (``--sizes 14 100 300``).
"""
from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from dsident.analysis.fixed_points import _solve_regular
from _timing import best_of


def svd_route(system: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The route before session 35: batched condition numbers, then a batched solve."""
    cond = np.linalg.cond(system)
    regular = np.isfinite(cond) & (cond < 1e12)
    z = np.full(rhs.shape, np.nan)
    if regular.any():
        z[regular] = np.linalg.solve(system[regular], rhs[regular][..., None])[..., 0]
    return regular, z


def systems(m: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.uniform(0.5, 0.9, size=(n, m))
    a[: n // 2, 0] = 1.0                                    # unit 0 neutral ...
    d = rng.random((n, m)) < 0.5
    d[: n // 2, 0] = False                                  # ... and its column of W off: singular
    w = rng.normal(0.0, 0.5 / np.sqrt(m), size=(m, m))
    np.fill_diagonal(w, 0.0)
    jac = a[:, :, None] * np.eye(m)[None] + w[None] * d[:, None, :]
    return np.eye(m)[None] - jac, rng.normal(size=(n, m))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[14, 100, 300])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print("| M | systems | SVD + solve (ms a system) | one LU (ms a system) | ratio | refused (both) |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for m in args.sizes:
        n = {14: 16_384}.get(m, max(20, 60_000 // (m * m) * 10))
        system, rhs = systems(m, n, rng)
        with threadpool_limits(limits=1, user_api="blas"):
            t_svd, (reg_svd, z_svd) = best_of(lambda: svd_route(system, rhs), args.repeat)
            t_lu, (reg_lu, z_lu) = best_of(lambda: _solve_regular(system, rhs), args.repeat)
        assert np.array_equal(reg_svd, reg_lu), "the two routes refuse different systems"
        np.testing.assert_allclose(z_lu[reg_lu], z_svd[reg_svd], rtol=1e-8, atol=1e-10)
        print(f"| {m} | {n} | {1e3 * t_svd / n:.4f} | {1e3 * t_lu / n:.4f} | {t_svd / t_lu:.1f}× | "
              f"{int((~reg_lu).sum())} |")


if __name__ == "__main__":
    main()
