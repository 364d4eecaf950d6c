"""Cost of the verdict behind every benchmark point's late free run: one exponent or all of them.

The late free run (``dsident.experiments.late_run``) and teacher forcing's ``select_regime``
need a free run's verdict and its largest Lyapunov exponent only. Until session 34 they had
``free_run_regime`` compute the whole spectrum: a QR of an (M, M) frame every step, O(M³). With
``n_exponents=1`` the frame is one column, O(M²) a step, and the QR's first column (hence λ_max
and the verdict) is the same whatever the number of columns. For each latent size M this
script times ``free_run_regime`` both ways on the same random, bounded rPLRNN (one torch
thread, best of ``--repeat``), prints the ratio, and checks that λ_max and the verdict agree.

Run: ``python benchmarks/bench_late_run.py`` (``--sizes 50 100 200``, ``--steps 5000``; the
benchmark's late run has 20 000 steps, and the ECG's rPLRNN M = 300).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from dsident import StateSpaceModel
from dsident.analysis import free_run_regime
from dsident.dynamics import PLRNN
from dsident.observations import Gaussian
from _timing import best_of


def model_of_size(m: int) -> StateSpaceModel:
    """A random rPLRNN with M latent units read out directly (its initialisation: bounded)."""
    torch.manual_seed(0)
    return StateSpaceModel(PLRNN(latent_dim=m), Gaussian(m, m, readout="identity"), dt=1.0).double()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"free_run_regime over {args.steps} steps (+ {args.steps // 10} transient), one torch thread")
    print("| M | all M exponents (s) | leading exponent only (s) | ratio | λ_max all / one | verdicts |")
    print("|---|---|---|---|---|---|")
    for m in args.sizes:
        model = model_of_size(m)
        x0 = np.random.default_rng(0).normal(size=m)
        kw = dict(n_steps=args.steps, transient=args.steps // 10, x0=x0, seed=0)
        t_all, full = best_of(lambda: free_run_regime(model, **kw), args.repeat)
        t_one, lead = best_of(lambda: free_run_regime(model, n_exponents=1, **kw), args.repeat)
        print(f"| {m} | {t_all:.2f} | {t_one:.2f} | {t_all / t_one:.1f}× | {full.max_lyapunov:.6g} / "
              f"{lead.max_lyapunov:.6g} | {full.verdict} / {lead.verdict} |")


if __name__ == "__main__":
    main()
