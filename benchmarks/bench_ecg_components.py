"""What the ECG benchmark's scores reward: the true system with one ingredient changed.

The shipped ECG (``dsident.datasets.load("ecg")``) is ECGSYN's ``z`` through the benchmark
pipeline (700 Hz, z-score, smoothing, 5-d delay embedding). ECGSYN has three ingredients a
reconstruction must reproduce: the beat's shape (the P-QRS-T waves on a limit cycle), the
heart-rate variability (the RR process, ``hr_std``) and a respiratory **baseline wander**
(``z`` relaxes towards ``A sin(2π f_resp t)`` with f_resp = 0.25 Hz, i.e. a 4 s = 2 800-sample
cycle that shifts the flat stretch between beats by about ±0.3 z-units).

This script regenerates the series with the benchmark's own code (same seed, same RR process,
the shipped z-score constants, so the beats are exactly the data's), changes one ingredient at a
time (:func:`dsident.data.ecg.synthetic_ecg` keyword arguments), and scores ``--stretches``
stretches of ``--length`` samples of each variant against the first ``--length`` test samples
with :func:`dsident.metrics.state_space_divergence` and
:func:`dsident.metrics.power_spectrum_distance` (the benchmark's scores), beside the floor
(:func:`dsident.metrics.floor`). Each variant is thus a *perfect* model of everything but the
changed ingredient: its score is the price of getting that ingredient wrong.

It first checks that the unchanged variant reproduces the shipped training split.

Run (about 2 minutes)::

    python benchmarks/bench_ecg_components.py
"""
from __future__ import annotations

import argparse

import numpy as np

from dsident import metrics
from dsident.data.benchmarks import _ECG_DELAYS, _ecg_process
from dsident.data.ecg import synthetic_ecg
from dsident.data.preprocessing import zscore_constants
from dsident.datasets import load

#: name → ECGSYN overrides (the shipped data: resp_amplitude 0.005, hr_std 1 bpm, hr_mean 60 bpm)
VARIANTS: dict[str, dict[str, float]] = {
    "the system itself": {},
    "no heart-rate variability": {"hr_std": 0.0},
    "baseline wander at half amplitude": {"resp_amplitude": 0.0025},
    "no baseline wander": {"resp_amplitude": 0.0},
    "no wander, no variability": {"resp_amplitude": 0.0, "hr_std": 0.0},
    "beats 10 % faster": {"hr_mean": 66.0},
    "beats 25 % faster": {"hr_mean": 75.0},
}

#: the shipped data's simulation rate and seed (dsident.data.benchmarks._ecg)
SIM_RATE, RATE, SEED = 350.0, 700.0, 0


def variant_series(n: int, constants: tuple[float, float], **params: float) -> np.ndarray:
    """``n`` embedded samples of ECGSYN with ``params`` changed, through the benchmark pipeline."""
    duration = (2 * n + max(_ECG_DELAYS) + 200) / RATE   # as _ecg: the same RR process for the same length
    raw = synthetic_ecg(duration, sampling_rate=SIM_RATE, seed=SEED, **params)
    part, _ = _ecg_process(raw, n, n, RATE, 6.0, zscore_constants=constants)
    return part["x"].values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=10_000, help="evaluation length (the benchmark's: 10 000)")
    parser.add_argument("--stretches", type=int, default=4, help="stretches of each variant scored")
    args = parser.parse_args()

    train, test = load("ecg", split="train"), load("ecg", split="test")
    n = int(train.sizes["time"])
    truth = test["x"].values[0, : args.length]
    mean, std = zscore_constants(train)          # the ECG lead's, before the delay embedding
    constants = (float(mean[0]), float(std[0]))
    fl = metrics.floor("ecg", length=args.length)
    print(f"floor at {args.length}: D_stsp {float(fl['state_space_divergence'].mean()):.2f} "
          f"[{float(fl['state_space_divergence'].min()):.2f}, {float(fl['state_space_divergence'].max()):.2f}], "
          f"D_H {float(fl['power_spectrum_distance'].mean()):.3f}")
    starts = np.linspace(0, n - args.length, args.stretches).astype(int)
    print(f"{'variant':36s} {'D_stsp median [min, max]':28s} {'D_H median':10s}")
    for name, params in VARIANTS.items():
        x = variant_series(n, constants, **params)
        if not params:
            err = float(np.abs(x - train["x"].values[0]).max())
            if err > 1e-4:
                raise SystemExit(f"the regenerated series differs from the shipped training split (max {err:.2g})")
        d = [float(metrics.state_space_divergence(truth, x[s: s + args.length])) for s in starts]
        h = [float(metrics.power_spectrum_distance(truth, x[s: s + args.length])) for s in starts]
        print(f"{name:36s} {np.median(d):5.2f} [{min(d):.2f}, {max(d):.2f}]{'':11s} {np.median(h):.3f}", flush=True)


if __name__ == "__main__":
    main()
