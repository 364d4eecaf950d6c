"""Speed of the PLRNN core: Jacobians, fixed-point search, free runs, and one BPTT epoch.

Prints, in one run:

1. the analytic PLRNN / shallow-PLRNN Jacobian against the autograd one (time per call and
   ratio; they must agree to rounding);
2. exact fixed points by enumerating all 2^M regions for M = 8 .. 14 (time, number found), and
   the region search at the largest M (time, candidates tried, whether it found the same
   points);
3. a free run of one trial (what every teacher-forcing evaluation and every ``generate`` call
   does) for the benchmark cells' shapes: the models' in-place ``rollout`` against ``step`` in a
   plain loop (the route before it), per step and as a ratio, and that both give the same numbers;
4. the time of one BPTT epoch on the addition problem (T = 50, 1 000 trials, M = 40, batch
   500, the paper's setting) with 1 and with the default number of torch threads.

Targets on 2 cores: analytic PLRNN Jacobian >= 5x faster than autograd at B = 1 000, M = 40
(the shallow PLRNN's is dominated by a batched (M, H) x (H, M) product, so no ratio is promised);
enumeration at M = 14 (16 384 regions) <= 2 s; one BPTT epoch (T = 50, 1 000 trials) <= 10 s
with one thread.

Run: ``python benchmarks/bench_plrnn.py`` (``--quick`` skips the BPTT epochs).
"""
from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np
import torch

from dsident import StateSpaceModel, analysis
from dsident.data.tasks import addition_problem
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.dynamics.base import LatentDynamics
from dsident.inference.bptt import fit_bptt
from dsident.observations import Gaussian
from _timing import best_of


def autograd_jacobian(f, z):
    return torch.func.vmap(torch.func.jacrev(lambda zi: f.step(zi[None])[0]))(z)


def bench_jacobians() -> None:
    print(f"== Jacobians (B = 1000, {torch.get_num_threads()} torch thread(s)) ==")
    z = torch.randn(1000, 40, generator=torch.Generator().manual_seed(0))
    for name, f in (("PLRNN M=40", PLRNN(40, seed=0)), ("ShallowPLRNN M=40 H=200", ShallowPLRNN(40, 200, seed=0)),
                    ("clipped ShallowPLRNN", ShallowPLRNN(40, 200, clip=True, seed=0))):
        with torch.no_grad():
            t_an = best_of(lambda: f.jacobian(z), 5)[0]
        t_ag = best_of(lambda: autograd_jacobian(f, z), 5)[0]
        with torch.no_grad():
            err = float((f.jacobian(z) - autograd_jacobian(f, z)).abs().max())
        print(f"{name:26s} analytic {t_an * 1e3:8.2f} ms  autograd {t_ag * 1e3:8.2f} ms  "
              f"ratio {t_ag / t_an:6.1f}x  max diff {err:.1e}")


def random_multistable(m: int, seed: int) -> PLRNN:
    rng = np.random.default_rng(seed)
    f = PLRNN(m, seed=seed, penalty="none")
    f.set_params(A=rng.uniform(-0.5, 0.9, m), W=rng.normal(0, 1.5 / np.sqrt(m), (m, m)), h=rng.normal(0, 1.0, m))
    return f


def bench_fixed_points() -> None:
    print("== Exact fixed points ==")
    last = None
    for m in (8, 10, 12, 14):
        f = random_multistable(m, 1)
        t0 = time.perf_counter()
        exact = analysis.fixed_points(f, method="enumerate")
        dt = time.perf_counter() - t0
        print(f"enumerate M={m:2d} ({2 ** m:6d} regions): {dt:7.3f} s, {len(exact)} fixed points")
        last = (f, exact, m)
    f, exact, m = last
    t0 = time.perf_counter()
    search = analysis.fixed_points(f, method="search", n_trajectories=50, n_steps=200, n_random=200, seed=0)
    dt = time.perf_counter() - t0
    same = len(search) == len(exact) and all(
        np.min(np.linalg.norm(search.points[:, 0] - z, axis=1)) < 1e-8 for z in exact.points[:, 0])
    print(f"search    M={m:2d}: {dt:7.3f} s, {search.info['n_candidates']} candidate regions, "
          f"{len(search)} fixed points, same as enumeration: {same}")
    f = random_multistable(40, 2)
    t0 = time.perf_counter()
    big = analysis.fixed_points(f, method="search", seed=0)
    print(f"search    M=40: {time.perf_counter() - t0:7.3f} s, {big.info['n_candidates']} candidate regions, "
          f"{len(big)} fixed points")
    t0 = time.perf_counter()
    cyc = analysis.cycles(random_multistable(6, 3), period=2)
    print(f"2-cycles by enumeration, M=6 (4096 region pairs): {time.perf_counter() - t0:7.3f} s, {len(cyc)} found")


def bench_free_runs(n_steps: int = 20_000) -> None:
    print(f"== free runs, one trial, {n_steps} steps, {torch.get_num_threads()} torch thread(s) ==")
    cases = {"rPLRNN, M 50 (Lorenz-63 cell)": PLRNN(50, penalty="none", seed=0),
             "rPLRNN, M 20 (ECG cell)": PLRNN(20, penalty="none", seed=0),
             "shallow, M 6, H 400 (bursting)": ShallowPLRNN(6, 400, clip=True, seed=0),
             "shallow, M 3, H 100 (Lorenz-63)": ShallowPLRNN(3, 100, clip=True, seed=0)}
    for name, dyn in cases.items():
        z0 = torch.randn(1, dyn.latent_dim, generator=torch.Generator().manual_seed(0))
        # the base class's rollout is step() in a plain loop: the route before the in-place ones
        stepped = partial(LatentDynamics.rollout, dyn, z0, n_steps)
        t_step = best_of(stepped, 3)[0]
        t_roll = best_of(lambda: dyn.rollout(z0, n_steps), 3)[0]
        same = torch.equal(stepped(), dyn.rollout(z0, n_steps))
        print(f"{name:32s} rollout {1e6 * t_roll / n_steps:6.1f} µs/step  step loop {1e6 * t_step / n_steps:6.1f} "
              f"µs/step  ratio {t_step / t_roll:4.2f}  identical: {same}")


def bench_bptt() -> None:
    print("== BPTT, addition problem T=50, 1000 trials, M=40, batch 500 (one epoch) ==")
    data = addition_problem(1000, 50, seed=0)
    default_threads = torch.get_num_threads()
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        model = StateSpaceModel(PLRNN(40, input_dim=2, seed=0), Gaussian(1, 40))
        t0 = time.perf_counter()
        fit_bptt(model, data, n_epochs=1, seq_len=None, batch_size=500, seed=0, progress=False, device="cpu",
                 val_fraction=0.0)
        print(f"torch threads {threads}: {time.perf_counter() - t0:7.2f} s per epoch")
    torch.set_num_threads(default_threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the BPTT epochs")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads for the Jacobian and fixed-point parts (default 1)")
    args = parser.parse_args()
    default_threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    bench_jacobians()
    bench_fixed_points()
    bench_free_runs()
    torch.set_num_threads(default_threads)
    if not args.quick:
        bench_bptt()


if __name__ == "__main__":
    main()
