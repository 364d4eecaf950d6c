"""rPLRNN (τ > 0) vs PLRNN (τ = 0) by Laplace-EM on the bursting-neuron short data (the direction
of Fig. 3 of Schmidt, Koppe et al., ICLR 2021).

For each seed a model is fitted on one trial (T = 1 501; trial = seed mod 3) with the full
annealing protocol, then run freely for 100 000 steps from its initial mean (deterministic). Printed
per seed and summarised: D_stsp (``dsident.metrics.state_space_divergence``, training trials vs
the free orbit after a 1 000-step burn-in), whether the orbit is bounded (finite, |x| < 10 in the
z-scored units) and bursting (not collapsed to a fixed point: the voltage channel's standard
deviation over the last 20 000 steps > 0.2, and at least 20 spikes — upward crossings of 1.0 —
there), and D_H (``power_spectrum_distance``) of the bounded ones against the training trial.

Run:  python benchmarks/bench_rplrnn_bursting.py [--seeds 5] [--tau 0.667] [--latent 10]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def run(seeds: int, tau: float, latent: int, n_steps: int = 100_000) -> None:
    import dsident
    from dsident.datasets import load
    from dsident.metrics import power_spectrum_distance, state_space_divergence

    data = load("bursting_neuron", split="short")
    true_all = data["x"].values
    rows = []
    for t_value in (0.0, tau):
        for seed in range(seeds):
            trial = seed % data.sizes["trial"]
            ds = data.isel(trial=[trial])
            est = dsident.models.PLRNN(latent_dim=latent, tau=t_value, seed=seed)
            t0 = time.perf_counter()
            est.fit(ds, method="laplace-em", progress=False)
            fit_s = time.perf_counter() - t0
            gen = est.generate(n_steps, seed=seed)
            x = gen["x"].values[0]
            bounded = bool(gen.attrs["diverged"] == 0 and np.all(np.isfinite(x)) and np.abs(x).max() < 10)
            tail = x[-20_000:, 0] if bounded else np.array([0.0])
            spikes = int(np.sum((tail[1:] > 1.0) & (tail[:-1] <= 1.0))) if bounded else 0
            bursting = bool(bounded and tail.std() > 0.2 and spikes >= 20)
            d_stsp = state_space_divergence(true_all, x[1000:]) if bounded else float("nan")
            T = ds.sizes["time"]
            d_h = float(power_spectrum_distance(ds["x"].values[0], x[1000:1000 + T])) if bounded else float("nan")
            rows.append((t_value, seed, fit_s, bounded, bursting, d_stsp, d_h))
            print(f"tau={t_value:<6g} seed={seed} trial={trial} fit {fit_s:5.1f} s  bounded={bounded!s:5}  "
                  f"bursting={bursting!s:5} spikes(last 20k)={spikes:5d}  D_stsp={d_stsp:.3f}  D_H={d_h:.3f}", flush=True)
    print("\nsummary")
    for t_value in (0.0, tau):
        r = [row for row in rows if row[0] == t_value]
        ok = [row for row in r if row[4]]
        print(f"tau={t_value:g}: bounded {sum(row[3] for row in r)}/{len(r)}, bursting {len(ok)}/{len(r)}, "
              f"median D_stsp (bounded) {np.nanmedian([row[5] for row in r]) if any(row[3] for row in r) else float('nan'):.3f}, "
              f"D_H of bursting seeds {[round(row[6], 3) for row in ok]}, mean fit {np.mean([row[2] for row in r]):.1f} s")
    wins = sum(1 for s in range(seeds)
               if np.nan_to_num(rows[seeds + s][5], nan=np.inf) < np.nan_to_num(rows[s][5], nan=np.inf))
    print(f"seeds where tau={tau:g} reaches lower D_stsp than tau=0: {wins}/{seeds}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tau", type=float, default=0.667)
    ap.add_argument("--latent", type=int, default=10)
    a = ap.parse_args()
    run(a.seeds, a.tau, a.latent)
