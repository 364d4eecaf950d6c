"""Speed of the Benettin (QR) loop behind `lyapunov_spectrum`, `free_run_regime` and `select_regime`.

For each case: the time of dsident's loop (``dsident.analysis.lyapunov._qr_average``, LAPACK's
``geqrf`` / ``orgqr`` called directly, the diagonals logged a block at a time) and of the
straightforward loop written below (``numpy.linalg.qr`` and a logarithm every step), both
best of ``--repeat`` runs on the same stream of Jacobians, their ratio, and the largest
difference between the two spectra (the same factorisation: it must be at round-off level).
Then the spectrum of a bursting-neuron-sized shallow PLRNN (M = 6, H = 400) along a run it has
generated, taken from that run (``path=``, as `free_run_regime` now does) and by stepping the
model again (as it did before), and the whole `free_run_regime` verdict: the part that teacher
forcing's ``select_regime`` adds to every evaluation.

Run: ``python benchmarks/bench_lyapunov.py`` (``--steps`` for the run length, default 50 000:
the bursting cell's 40 000-step free run plus its burn-in).
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from dsident import StateSpaceModel
from dsident.analysis import free_run_regime
from dsident.analysis.lyapunov import _initial_frame, _qr_average, lyapunov_spectrum
from dsident.dynamics import ShallowPLRNN
from dsident.observations import Gaussian
from _timing import best_of


def naive_qr_average(jacobians: np.ndarray, k: int, transient: int, dt: float) -> np.ndarray:
    """The textbook loop: ``numpy.linalg.qr`` every step, the log-diagonal summed every step."""
    q = _initial_frame(jacobians.shape[-1], k)
    total = np.zeros(k)
    for i, jac in enumerate(jacobians):
        q, r = np.linalg.qr(jac @ q)
        if i >= transient:
            total += np.log(np.abs(np.diag(r)))
    return total / ((len(jacobians) - transient) * dt)


def jacobian_stream(m: int, n_steps: int, seed: int = 0) -> np.ndarray:
    """Jacobians of a random shallow PLRNN along its own (bounded, clipped) path: (T, M, M)."""
    torch.manual_seed(seed)
    dyn = ShallowPLRNN(m, 8 * m, clip=True, seed=seed).double()
    z = torch.randn(1, m, dtype=torch.float64)
    path = torch.empty(n_steps, m, dtype=torch.float64)
    with torch.no_grad():
        for t in range(n_steps):
            path[t] = z[0]
            z = dyn.step(z)
        return dyn.jacobian(path).numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    transient = args.steps // 5
    print(f"Benettin loop, {args.steps} steps (transient {transient}), best of {args.repeat}")
    print(f"{'M':>3} | {'dsident s':>9} | {'numpy.linalg.qr loop s':>22} | {'ratio':>6} | max |Δλ|")
    for m in (3, 6, 16):
        jac = jacobian_stream(m, args.steps)
        t_ours, ours = best_of(lambda: _qr_average(iter(jac), m, m, transient, args.steps - transient, 1.0),
                               args.repeat)
        t_ref, ref = best_of(lambda: naive_qr_average(jac, m, transient, 1.0), args.repeat)
        print(f"{m:>3} | {t_ours:9.3f} | {t_ref:22.3f} | {t_ref / t_ours:5.1f}× | {np.max(np.abs(ours - ref)):.1e}")

    model = StateSpaceModel(ShallowPLRNN(6, 400, clip=True, seed=0), Gaussian(3, 6, readout="identity"))
    run = model.generate(args.steps, seed=0)
    z = run["z"].values[0]
    n = args.steps - transient
    t_path, from_path = best_of(lambda: lyapunov_spectrum(model, z0=z[0], n_steps=n, transient=transient, path=z),
                                args.repeat)
    t_step, stepped = best_of(lambda: lyapunov_spectrum(model, z0=z[0], n_steps=n, transient=transient), args.repeat)
    print(f"spectrum of a shallow PLRNN (M 6, H 400) along its {args.steps}-step run: {t_path:.2f} s from the run "
          f"(path=), {t_step:.2f} s stepping the model again: {t_step / t_path:.1f}×, max |Δλ| "
          f"{np.max(np.abs(from_path - stepped)):.1e}")
    t_verdict, regime = best_of(lambda: free_run_regime(model, n_steps=n, transient=transient, run=run), args.repeat)
    print(f"free_run_regime (the verdict select_regime adds to an evaluation): {t_verdict:.2f} s "
          f"({regime.verdict}, λ_max {regime.lyapunov[0]:.3g})")

if __name__ == "__main__":
    main()
