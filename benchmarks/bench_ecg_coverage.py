"""Where an ECG free run misses the data: D_stsp's coverage, split by distance to the R peaks.

The binned D_stsp is close to ``12 × (1 − coverage)`` at 10 000 samples
(:func:`dsident.metrics.state_space_coverage`, docs/metrics.md "What a binned D_stsp counts").
This script says *which* test samples a run leaves uncovered: those within ``--near`` samples
of an R peak (the fast QRS complex) or the rest of the beat (P and T waves and the T–P
stretch, which the breathing moves up and down), and on which phase of the breathing each
R peak falls. Rows:

- other stretches of the true signal (the next test stretch, the end of the training series,
  test samples 20 000–30 000): what a perfect model scores on this test stretch;
- each fitted point directory given on the command line (``dsident benchmark`` / ``sweep``
  output containing ``generated.nc``, the scored free run), e.g. the ECG shallow-PLRNN cell.

The breathing phase at an R peak is the angle of (``slow``, ``slow_q``), the two slow channels
of :func:`dsident.data.add_slow_channels` (a run that has them; for the true stretches they
are computed with the cell's cutoff). A periodic run locked at k beats a breath puts its R
peaks on k phases only; the data come close to that too (ECGSYN's heart rate is modulated at
the breathing frequency), four clusters of phases within ≈ 0.1 rad.

Run::

    python benchmarks/bench_ecg_coverage.py                       # the true-signal rows
    python benchmarks/bench_ecg_coverage.py dsident-results/ecg/points/*/
"""
from __future__ import annotations

import argparse
import glob
import os

import numpy as np
import xarray as xr
from scipy.signal import find_peaks

from dsident import datasets
from dsident.data import add_slow_channels
from dsident.experiments.config import resolve_config
from dsident.metrics import state_space_coverage, state_space_divergence

#: the scored length and R-peak detection (R peaks stand far above the 99.5th percentile's 60 %)
LENGTH = 10_000
PEAK_HEIGHT = 0.6
PEAK_DISTANCE = 200


def r_peaks(signal: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Indices of R peaks in ``signal`` (time,), thresholded on ``reference``'s 99.5th percentile."""
    peaks, _ = find_peaks(signal, height=PEAK_HEIGHT * np.percentile(reference, 99.5), distance=PEAK_DISTANCE)
    return peaks


def report(name: str, test: np.ndarray, run: np.ndarray, near_qrs: np.ndarray) -> None:
    """One row: D_stsp, coverage, uncovered share near and away from R peaks, beats and phases.

    ``test`` and ``run`` are (time, channel) with the 5 scored channels first and, optionally,
    the two slow channels after them.
    """
    covered = state_space_coverage(test[:, :5], run[:, :5], per_sample=True)
    peaks = r_peaks(run[:, 0], test[:, 0])
    rr = np.diff(peaks)
    phases = np.angle(run[peaks, 5] + 1j * run[peaks, 6]) if run.shape[1] >= 7 else np.array([])
    print(f"{name}\n    D_stsp {state_space_divergence(test[:, :5], run[:, :5]):5.2f}  coverage {np.mean(covered):.3f}"
          f"  uncovered near R {1 - covered[near_qrs].mean():.2f} / elsewhere {1 - covered[~near_qrs].mean():.2f}"
          f"  beats {peaks.size}"
          + (f"  RR {rr.mean():.0f} ± {rr.std():.0f}" if rr.size else "  RR – (fewer than two beats)")
          + (f"  breathing phases {np.array2string(np.sort(phases), precision=2, max_line_width=400)}" if phases.size else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("points", nargs="*", help="point directories holding generated.nc (globs allowed)")
    parser.add_argument("--near", type=int, default=60, help="samples either side of an R peak counted as QRS")
    args = parser.parse_args()

    cutoff = resolve_config("ecg", "shplrnn", "teacher-forcing")["slow_channels"]["cutoff"]
    train7, slow = add_slow_channels(datasets.load("ecg", split="train"), cutoff=cutoff)
    test7, _ = add_slow_channels(datasets.load("ecg", split="test"), cutoff=cutoff, scale=slow["scale"],
                                 before=datasets.load("ecg", split="train"))     # as the benchmark scores
    tr, te = train7["x"].values[0], test7["x"].values[0]
    test = te[:LENGTH]
    peaks = r_peaks(test[:, 0], test[:, 0])
    near_qrs = np.min(np.abs(np.arange(LENGTH)[:, None] - peaks[None, :]), axis=1) < args.near
    print(f"test stretch: first {LENGTH} samples, {peaks.size} R peaks; {near_qrs.mean():.0%} of the samples "
          f"within {args.near} of one")
    report("test (itself)", test, test, near_qrs)
    for name, other in [("next test stretch", te[LENGTH:2 * LENGTH]), ("end of training series", tr[-LENGTH:]),
                        ("test 20 000-30 000", te[2 * LENGTH:3 * LENGTH])]:
        report(name, test, other, near_qrs)
    for pattern in args.points:
        for point in sorted(glob.glob(pattern)):
            run = xr.open_dataset(os.path.join(point, "generated.nc"))["x"].values[0]
            report(os.path.basename(os.path.normpath(point)), test, run[np.all(np.isfinite(run), axis=1)], near_qrs)


if __name__ == "__main__":
    main()
