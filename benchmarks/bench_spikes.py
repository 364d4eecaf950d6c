"""Speed of spike binning and of the population metrics.

Setting: an NLB-sized session, 200 units at ~10 Hz over 30 min (~3.6 M spikes), binned at 5 ms
into 1 000 trials of 700 ms (the MC_Maze layout), plus the whole recording as one trial.
Compared with the per-unit, per-trial ``np.histogram`` loop that binning code is usually written
as (same counts in all bins; a check is printed). Target: ``bin_spikes`` >= 5x faster than the
loop for the trial layout, and under 2 s in total.

Metrics: bits per spike and co-bps on (1 000 trial, 140 bin, 200 neuron) arrays, and the ridge
behaviour R² on 500 + 500 trials; its penalty search is compared with scikit-learn's
``GridSearchCV(Ridge())`` on 100 + 100 trials (same R² expected; target >= 5x faster).

BLAS runs on one thread (threadpoolctl) unless ``--threads`` says otherwise: on a shared machine
multi-threaded BLAS mostly waits, and the figures become noise.

Run:  python benchmarks/bench_spikes.py [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse

import numpy as np

from dsident.data.spikes import bin_spikes
from dsident.metrics.population import behavior_r2, bits_per_spike, co_smoothing_bps
from _timing import best_of

N_UNITS, RATE_HZ, DURATION_S, BIN_S = 200, 10.0, 1800.0, 0.005
N_TRIALS, TRIAL_S = 1000, 0.7


def _histogram_loop(units, starts):
    n_bins = int(round(TRIAL_S / BIN_S))
    out = np.zeros((len(starts), n_bins, len(units)))
    for j, spikes in enumerate(units):
        for i, s in enumerate(starts):
            edges = s + BIN_S * np.arange(n_bins + 1)
            inside = spikes[(spikes >= s) & (spikes < edges[-1])]     # half-open, like bin_spikes
            out[i, :, j] = np.histogram(inside, bins=edges)[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads")
    args = parser.parse_args()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=args.threads):
        _run(args.repeats)


def _run(repeats: int) -> None:
    rng = np.random.default_rng(0)
    units = [np.sort(rng.uniform(0, DURATION_S, rng.poisson(RATE_HZ * DURATION_S))) for _ in range(N_UNITS)]
    n_spikes = sum(len(u) for u in units)
    starts = np.sort(rng.uniform(0, DURATION_S - TRIAL_S, N_TRIALS))
    trials = {"start_time": starts, "stop_time": starts + TRIAL_S}
    print(f"{N_UNITS} units, {n_spikes / 1e6:.2f} M spikes over {DURATION_S:.0f} s, bins of {BIN_S * 1e3:.0f} ms")

    t_trials, ds = best_of(lambda: bin_spikes(units, BIN_S, 0.0, DURATION_S, trials=trials), repeats)
    t_loop, ref = best_of(lambda: _histogram_loop(units, starts), 1)
    # decimal edge effects aside (bin_spikes snaps times within 1e-9 bin of an edge), the counts agree
    same = np.array_equal(np.nan_to_num(ds["x"].values), ref)
    print(f"bin_spikes, {N_TRIALS} trials x {ds.sizes['time']} bins: {t_trials:.3f} s   "
          f"np.histogram loop: {t_loop:.3f} s   ratio {t_loop / t_trials:.1f}x   counts identical: {same}")
    t_whole, whole = best_of(lambda: bin_spikes(units, BIN_S, 0.0, DURATION_S), repeats)
    print(f"bin_spikes, one trial x {whole.sizes['time']} bins: {t_whole:.3f} s "
          f"({n_spikes / t_whole / 1e6:.1f} M spikes/s)")

    counts = np.nan_to_num(ds["x"].values)
    rates = np.clip(counts, 0.05, None)
    t_bps, _ = best_of(lambda: bits_per_spike(rates, counts), repeats)
    t_co, _ = best_of(lambda: co_smoothing_bps(rates, counts, list(range(150, 200))), repeats)
    print(f"bits_per_spike on {counts.shape}: {t_bps:.3f} s   co_smoothing_bps (50 held out): {t_co:.3f} s")
    behaviour = counts[..., :2] @ np.ones((2, 2)) + rng.standard_normal(counts.shape[:2] + (2,))
    t_r2, r2 = best_of(lambda: behavior_r2(rates[:500], behaviour[:500], rates[500:], behaviour[500:]), 1)
    print(f"behavior_r2 ({500 * counts.shape[1]} training rows, 9 alphas x 5 folds): {t_r2:.3f} s (R2 {r2:.3f})")
    # the same choice made by scikit-learn's grid search, on 100 + 100 trials
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV

    xtr, ytr = rates[:100].reshape(-1, N_UNITS), behaviour[:100].reshape(-1, 2)
    xev, yev = rates[100:200].reshape(-1, N_UNITS), behaviour[100:200].reshape(-1, 2)
    t_ours, ours = best_of(lambda: behavior_r2(rates[:100], behaviour[:100], rates[100:200], behaviour[100:200]), 1)
    t_grid, grid = best_of(lambda: GridSearchCV(Ridge(), {"alpha": np.logspace(-4, 0, 9)}, cv=5)
                         .fit(xtr, ytr).score(xev, yev), 1)
    print(f"behavior_r2 vs GridSearchCV(Ridge) on {xtr.shape[0]} rows: {t_ours:.3f} s vs {t_grid:.3f} s "
          f"(ratio {t_grid / t_ours:.1f}x), R2 {ours:.6f} vs {grid:.6f}")

if __name__ == "__main__":
    main()
