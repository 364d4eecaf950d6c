"""The PLRNN's region solves: today's route against the one before session 35, in one run.

``plrnn_cycles`` solves ``(I − J_k ⋯ J_1) z = c`` for every region tuple it tries, after refusing
the (nearly) singular systems. Before session 35 (``before`` below, kept here as it was) it
composed the maps starting from the identity, took the condition number from singular values
(``numpy.linalg.cond``) and solved in a second batched call. Now (``_solve_cycles``) it composes
from the first map, and one LU a system (LAPACK ``getrf``) gives both LAPACK's 1-norm condition
estimate (``gecon``) and the solve (``getrs``). This script times both on the same region tuples
of a random PLRNN, one BLAS thread, for fixed points (k = 1) and 2-cycles, and checks that they
refuse the same systems and find the same points, and that every solution lies in the same
regions both ways. Half the fixed-point tuples are exactly
singular: unit 0 has A = 1 and is off in them, as a manifold attractor's units are.

Run: ``python benchmarks/bench_region_solves.py`` (``--sizes 14 100 300``).
"""
from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from dsident.analysis.fixed_points import _cycle_points, _region_maps, _solve_cycles
from dsident.dynamics import PLRNNParams
from _timing import best_of


def before(p: PLRNNParams, tuples: np.ndarray, tol: float) -> dict:
    """The region solve as it was until session 35."""
    n_cand, k, m = tuples.shape
    eye = np.eye(m)
    prod = np.broadcast_to(eye, (n_cand, m, m)).copy()
    offset = np.zeros((n_cand, m))
    jac = [_region_maps(p, tuples[:, i]) for i in range(k)]
    for i in range(k):
        prod = jac[i] @ prod
        offset = np.einsum("rij,rj->ri", jac[i], offset) + p.h
    system = eye[None] - prod
    cond = np.linalg.cond(system)
    regular = np.isfinite(cond) & (cond < 1e12)
    z1 = np.full((n_cand, m), np.nan)
    if regular.any():
        z1[regular] = np.linalg.solve(system[regular], offset[regular][..., None])[..., 0]
    return _cycle_points(p, tuples, jac, z1, regular, tol)          # unchanged since: shared


def random_plrnn(m: int, rng: np.random.Generator) -> PLRNNParams:
    a = rng.uniform(0.5, 0.9, size=m)
    a[0] = 1.0                                              # unit 0 neutral: singular where it is off
    w = rng.normal(0.0, 0.5 / np.sqrt(m), size=(m, m))
    np.fill_diagonal(w, 0.0)
    return PLRNNParams(A=a, W=w, h=rng.normal(0.0, 0.1, m), C=np.zeros((m, 0)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[14, 100, 300])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print("| M | k | tuples | before (ms a tuple) | now (ms a tuple) | ratio | refused | points |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for m in args.sizes:
        p = random_plrnn(m, rng)
        for k in (1, 2):
            n = 16_384 if m <= 16 else max(20, 2_000_000 // (m * m))
            tuples = rng.random((n, k, m)) < 0.5
            with threadpool_limits(limits=1, user_api="blas"):
                t_old, old = best_of(lambda: before(p, tuples, 1e-9), args.repeat)
                t_new, new = best_of(lambda: _solve_cycles(p, tuples, 1e-9), args.repeat)
            assert np.array_equal(old["regular"], new["regular"]), "the two routes refuse different systems"
            np.testing.assert_allclose(new["points"], old["points"], rtol=1e-8, atol=1e-10)
            # every regular solution, consistent or not, lies in the same regions both ways
            assert np.array_equal(new["proposal"][new["regular"]], old["proposal"][old["regular"]])
            print(f"| {m} | {k} | {n} | {1e3 * t_old / n:.4f} | {1e3 * t_new / n:.4f} | {t_old / t_new:.1f}× | "
                  f"{new['n_singular']} | {len(new['points'])} |")


if __name__ == "__main__":
    main()
