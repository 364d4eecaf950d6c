"""Where a bursting-neuron free run misses the data: coverage inside and outside bursts, and the bursts' shape.

The binned D_stsp is close to ``12 × (1 − coverage)`` (:func:`dsident.metrics.state_space_coverage`,
docs/metrics.md "What a binned D_stsp counts"). This script, the bursting neuron's counterpart of
``bench_ecg_coverage.py``, says which test samples a run leaves uncovered — inside a burst
(from its first spike to 10 samples after its last) or in the silent phase between bursts, and
at the spikes' tops (voltage above its 90th percentile) — and sets that beside how well the run
reproduces the bursts themselves:

- ``spikes/burst``, ``period`` and the period's std over the stretch (samples);
- ``spike-time error``: the mean absolute difference, in samples, between the run's and the
  data's average spike times within a burst (counted from the burst's first spike), over the
  bursts with the data's number of spikes;
- ``h error``: the same for the slow variable h at each spike (z-units);
- the pair projections of D_stsp (:func:`dsident.metrics.state_space_projections`) for (V, n),
  (V, h) and (n, h).

Rows: other stretches of the true system (what a perfect model scores) and each fitted point
directory given on the command line (``generated.nc``, the scored free run)::

    python benchmarks/bench_bursting_coverage.py                       # the true-system rows
    python benchmarks/bench_bursting_coverage.py dsident-results/benchmark/points/bursting_neuron__shplrnn*/
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np
import xarray as xr

from dsident import datasets
from dsident.metrics import state_space_coverage, state_space_divergence, state_space_projections

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rplrnn_bursting import burst_groups  # noqa: E402  (one burst rule for the bursting benchmarks)

#: the scored length
LENGTH = 10_000
#: samples after a burst's last spike still counted as the burst (the spike's fall)
TAIL = 10


def burst_shape(x: np.ndarray, n_spikes: int | None = None) -> dict[str, object]:
    """Bursts of an orbit ``x`` (time, 3: V, n, h): counts, period, and the mean spike template.

    ``n_spikes``: average the template over bursts with that many spikes (default: the most
    common count). Returns ``in_burst`` (time,) bool, ``spb``, ``period``, ``period_std``,
    ``times`` (mean spike times from the burst's first spike) and ``h`` (mean h at each spike).
    """
    groups = burst_groups(x[:, 0])[1:-1]                  # the complete bursts
    in_burst = np.zeros(len(x), bool)
    for g in groups:
        in_burst[g[0]:g[-1] + TAIL] = True
    counts = np.array([len(g) for g in groups])
    out: dict[str, object] = {"in_burst": in_burst, "spb": np.nan, "period": np.nan, "period_std": np.nan,
                              "times": None, "h": None}
    if counts.size < 2:
        return out
    n = int(np.bincount(counts).argmax()) if n_spikes is None else n_spikes
    same = [g for g in groups if len(g) == n]
    periods = np.diff([g[0] for g in groups])
    out.update(spb=float(np.median(counts)), period=float(np.median(periods)), period_std=float(periods.std()))
    if same:
        out["times"] = np.mean([g - g[0] for g in same], axis=0)
        out["h"] = np.mean([x[g, 2] for g in same], axis=0)
    return out


def report(name: str, test: np.ndarray, ref: dict[str, object], run: np.ndarray) -> None:
    """One row for ``run`` (time, 3) scored against ``test`` (time, 3) with the data's bursts ``ref``."""
    covered = state_space_coverage(test, run, per_sample=True)
    in_burst = ref["in_burst"]
    top = test[:, 0] > np.percentile(test[:, 0], 90)
    shape = burst_shape(run, n_spikes=len(ref["times"]))
    proj = state_space_projections(test, run).values
    t_err = h_err = np.nan
    if shape["times"] is not None:
        t_err = float(np.abs(shape["times"] - ref["times"]).mean())
        h_err = float(np.abs(shape["h"] - ref["h"]).mean())
    print(f"{name}\n    D_stsp {state_space_divergence(test, run):5.3f}  coverage {covered.mean():.4f}"
          f"  uncovered samples {int((covered == 0).sum()):4d}: in bursts {int(((covered == 0) & in_burst).sum()):4d}"
          f", silent {int(((covered == 0) & ~in_burst).sum()):3d}, at spike tops {int(((covered == 0) & top).sum()):4d}"
          f"\n    spikes/burst {shape['spb']:4.1f}  period {shape['period']:5.1f} (std {shape['period_std']:.2f})"
          f"  spike-time error {t_err:.2f} samples  h error {h_err:.4f}"
          f"  pairs (V,n) {proj[0, 1]:.3f} (V,h) {proj[0, 2]:.3f} (n,h) {proj[1, 2]:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("points", nargs="*", help="point directories holding generated.nc (globs allowed)")
    args = parser.parse_args()

    tr = datasets.load("bursting_neuron", split="train")["x"].values[0]
    te = datasets.load("bursting_neuron", split="test")["x"].values[0]
    test = te[:LENGTH]
    ref = burst_shape(test)
    print(f"test stretch: first {LENGTH} samples; {ref['in_burst'].mean():.0%} of them in bursts of "
          f"{ref['spb']:.0f} spikes, period {ref['period']:.0f} samples")
    for name, other in [("next test stretch", te[LENGTH:2 * LENGTH]), ("training samples 20 000-30 000", tr[20_000:30_000]),
                        ("end of training series", tr[-LENGTH:])]:
        report(name, test, ref, other)
    for pattern in args.points:
        for point in sorted(glob.glob(pattern)):
            run = xr.open_dataset(os.path.join(point, "generated.nc"))["x"].values[0]
            report(os.path.basename(os.path.normpath(point)), test, ref, run[np.all(np.isfinite(run), axis=1)])


if __name__ == "__main__":
    main()
