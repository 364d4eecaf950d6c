"""Speed of `dsident.analysis.rhythm_period` (fit.md's period line, `dsident inspect`'s periods).

A spectral line counts as a rhythm when it stands 10× above the median of the spectrum from
1/1.5 to 1.5 times its frequency. Taking that median at every bin costs about the square of
the series' length. The package takes it at the local maxima only, over about 5 000 bins of
the smoothed spectrum for the wide bands. This script times both on a noisy 40-sample sine,
checks they agree, and prints their ratio. It also times the package alone on longer series
(2 M samples is a 100-s recording at 20 kHz, which `dsident inspect` reads whole).

Run:  python benchmarks/bench_rhythm.py [--lengths 10000 100000 ...] [--reference-up-to 100000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.ndimage import gaussian_filter1d

from dsident.analysis import rhythm_period
from dsident.analysis.report import RHYTHM_MIN_CYCLES, RHYTHM_PROMINENCE


def every_bin_reference(x: np.ndarray, dt: float) -> float:
    """The same rule with the background median taken at every bin (the first version)."""
    power = np.abs(np.fft.rfft(x - x.mean())) ** 2
    freq = np.fft.rfftfreq(len(x), d=dt)
    power = gaussian_filter1d(power, max(1.0, len(power) / 5000.0))
    first = RHYTHM_MIN_CYCLES
    p = power[first:]
    left = np.r_[True, p[1:] >= p[:-1]]
    right = np.r_[p[:-1] >= p[1:], True]
    bins = np.arange(first, len(power))
    lo, hi = np.floor(bins / 1.5).astype(int), np.minimum(len(power), np.ceil(bins * 1.5).astype(int) + 1)
    background = np.array([np.median(power[a:b]) for a, b in zip(lo, hi)])
    peaks = left & right & (p >= RHYTHM_PROMINENCE * background)
    if not peaks.any():
        return float("nan")
    strong = np.flatnonzero(peaks & (p >= 0.5 * p[peaks].max()))
    return float(1.0 / freq[first + int(strong[0])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", nargs="+", type=int, default=[10_000, 100_000, 400_000, 2_000_000])
    parser.add_argument("--reference-up-to", type=int, default=100_000,
                        help="time the every-bin reference on series up to this long (it grows with the square)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| samples | rhythm_period (s) | every-bin reference (s) | ratio | periods (package / reference) |")
    print("|---|---|---|---|---|")
    for n in args.lengths:
        x = np.sin(2 * np.pi * np.arange(n) / 40) + rng.standard_normal(n)
        t0 = time.perf_counter()
        ours = rhythm_period(x, 1.0)
        t_ours = time.perf_counter() - t0
        if n <= args.reference_up_to:
            t0 = time.perf_counter()
            ref = every_bin_reference(x, 1.0)
            t_ref = time.perf_counter() - t0
            print(f"| {n} | {t_ours:.3f} | {t_ref:.3f} | {t_ref / t_ours:.0f}× | {ours:g} / {ref:g} |", flush=True)
        else:
            print(f"| {n} | {t_ours:.3f} | – | – | {ours:g} / – |", flush=True)


if __name__ == "__main__":
    main()
