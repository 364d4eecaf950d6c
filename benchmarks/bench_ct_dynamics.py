"""Forward+backward time of one training step of each continuous-time latent dynamics.

Setting (issue 5): batch 64, latent 32, 100 sampling steps, float32, CPU (or CUDA with
``--device cuda``). One "training step" is a free run of 100 steps from a random state
with a random input, a squared-error loss on all states and the backward pass.

Also compares our LTC (per-synapse form, fused solver, 6 unfolds) with the LTC cell of the
``ncps`` package at equal sizes, when ``ncps`` is installed (it is *not* a dependency of
dsident; the comparison is skipped cleanly without it). Target: ours >= 1.5x faster.

Run:  python benchmarks/bench_ct_dynamics.py [--repeats 5] [--threads 1] [--device cpu]
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from dsident.dynamics.gnode import GatedNODE
from dsident.dynamics.ltc import LTC
from dsident.dynamics.organics import ORGaNICs
from dsident.dynamics.rfwp import RecurrentFWP

BATCH, LATENT, N_STEPS, INPUTS = 64, 32, 100, 8


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_call(fn: Callable[[], None], device: torch.device, repeats: int) -> float:
    """Median wall time of ``fn`` in seconds, after one warm-up call."""
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _once(fn: Callable[[], None], device: torch.device) -> float:
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def training_step(dynamics: torch.nn.Module, device: torch.device, dt: float = 0.1) -> Callable[[], None]:
    """A closure running one forward+backward pass of a 100-step free run."""
    gen = torch.Generator().manual_seed(0)
    z0 = (0.1 * torch.randn(BATCH, dynamics.latent_dim, generator=gen)).to(device)
    u = torch.randn(N_STEPS, BATCH, INPUTS, generator=gen).to(device)

    def run() -> None:
        dynamics.zero_grad(set_to_none=True)
        z, loss = z0, 0.0
        for t in range(N_STEPS):
            z = dynamics.step(z, u[t], dt)
            loss = loss + z.square().mean()
        loss.backward()
    return run


def ncps_step(cell: torch.nn.Module, device: torch.device) -> Callable[[], None]:
    gen = torch.Generator().manual_seed(0)
    h0 = (0.1 * torch.randn(BATCH, LATENT, generator=gen)).to(device)
    u = torch.randn(N_STEPS, BATCH, INPUTS, generator=gen).to(device)

    def run() -> None:
        cell.zero_grad(set_to_none=True)
        h, loss = h0, 0.0
        for t in range(N_STEPS):
            _, h = cell(u[t], h, 1.0)
            loss = loss + h.square().mean()
        loss.backward()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--ltc-only", action="store_true", help="only the LTC vs ncps comparison")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"batch={BATCH} latent={LATENT} steps={N_STEPS} inputs={INPUTS} float32 device={device} "
          f"threads={torch.get_num_threads()} repeats={args.repeats} (median)")

    models = {
        "GatedNODE (H=100, Euler)": GatedNODE(LATENT, INPUTS, hidden_dim=100, seed=0),
        "GatedNODE (H=100, RK4)": GatedNODE(LATENT, INPUTS, hidden_dim=100, method="rk4", seed=0),
        "LTC synaptic (fused, 6 unfolds)": LTC(LATENT, INPUTS, seed=0),
        "LTC compact (fused, 6 unfolds)": LTC(LATENT, INPUTS, form="compact", seed=0),
        "RecurrentFWP (4 heads, RK4; latent 32+256)": RecurrentFWP(LATENT, INPUTS, n_heads=4, seed=0),
        "ORGaNICs (16 y + 16 a, Euler)": ORGaNICs(LATENT // 2, INPUTS, recurrence="free", seed=0),
    }
    if args.ltc_only:
        models = {}
    else:
        print(f"{'model':46s} {'seconds/step':>12s} {'ms per time step':>17s}")
    for name, model in models.items():
        model.to(device)
        seconds = time_call(training_step(model, device), device, args.repeats)
        print(f"{name:46s} {seconds:12.4f} {1e3 * seconds / N_STEPS:17.3f}")

    try:
        from ncps.torch import LTCCell
        from ncps.wirings import FullyConnected
    except ImportError:
        print("ncps is not installed: LTC vs ncps comparison skipped (pip install ncps to run it).")
        return
    wiring = FullyConnected(LATENT)
    wiring.build(INPUTS)
    theirs = LTCCell(wiring, in_features=INPUTS, ode_unfolds=6).to(device)
    ours = LTC(LATENT, INPUTS, form="synaptic", method="fused", n_substeps=6, seed=0).to(device)
    run_ours = training_step(ours, device, dt=1.0)
    run_theirs = ncps_step(theirs, device)
    # interleave the two so that load changes on a shared machine hit both alike
    t_ours, t_theirs = [], []
    run_ours(), run_theirs()
    for _ in range(args.repeats):
        t_ours.append(_once(run_ours, device))
        t_theirs.append(_once(run_theirs, device))
    # the minimum is the least load-sensitive estimate on a shared machine; the median is shown too
    ratio_min = min(t_theirs) / min(t_ours)
    ratio_median = statistics.median(t_theirs) / statistics.median(t_ours)
    print(f"LTC vs ncps LTCCell (fully connected, {LATENT} units, 6 unfolds, {args.repeats} interleaved runs):")
    print(f"  ours  min {min(t_ours):.4f} s  median {statistics.median(t_ours):.4f} s")
    print(f"  ncps  min {min(t_theirs):.4f} s  median {statistics.median(t_theirs):.4f} s")
    print(f"  speed-up x{ratio_min:.2f} (min), x{ratio_median:.2f} (median); target >= 1.5: "
          f"{'met' if ratio_min >= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
