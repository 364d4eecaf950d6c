"""How far the slow channels are off at a series' ends: ``edges="plain"`` against ``"predict"``.

:func:`dsident.data.add_slow_channels` low-passes one channel (zero phase) and takes the
quadrature by the Hilbert transform; both need samples on either side, so a series' first and
last samples are estimates. ``edges="predict"`` extends each end by an autoregressive forecast
of the slow band first. This script measures the error both ways against an independent route
to the same numbers:

- **tone**: a slow sine (0.1 cycles per unit, amplitude 0.7) under a fast one, cut at eight
  phases; the truth is analytic (the band is the slow sine, its quadrature ``-0.7 cos``);
- **ECG**: the shipped recording (training split followed by the test split); the truth is the
  whole recording filtered at once, read where the cut series ends: the training split's last
  sample, and the first and last of the test split's first 10 000 samples (the benchmark's
  evaluation stretch). Errors are in training-scale units (the slow band's standard deviation,
  which the channels are divided by; away from the ends they stay within about ±1.5).

Printed: the largest error at the end samples, and the largest within one cutoff period of an
end, for the band and for the quadrature, and the time ``add_slow_channels`` takes on the
100 000-sample training split each way (best of 3).

Run (about 20 s)::

    python benchmarks/bench_slow_edges.py
"""
from __future__ import annotations

import numpy as np

from _timing import best_of
from dsident.data import add_slow_channels, as_dataset
from dsident.experiments.inputs import load_data

MODES = ("plain", "predict")


def _slow(x: np.ndarray, dt: float, cutoff: float, edges: str, scale: float = 1.0) -> np.ndarray:
    """Slow band and quadrature of channel 0 of ``x`` (time, channel), (time, 2), times ``scale``."""
    out, _ = add_slow_channels(as_dataset(x, dt=dt), cutoff, scale=scale, edges=edges)
    return out["x"].values[0, :, -2:] * scale


def _errors(got: np.ndarray, truth: np.ndarray, width: int) -> tuple[float, float, float, float]:
    """(band at the ends, quadrature at the ends, band within ``width`` of an end, quadrature within)."""
    err = np.abs(got - truth)
    ends = err[[0, -1]].max(axis=0)
    near = np.concatenate([err[:width], err[-width:]]).max(axis=0)
    return float(ends[0]), float(ends[1]), float(near[0]), float(near[1])


def tone(edges: str) -> tuple[float, ...]:
    """Worst errors over eight cuts of a two-tone series (relative to the slow tone's amplitude)."""
    dt, cutoff, f_slow, amp = 0.01, 0.5, 0.1, 0.7
    worst = np.zeros(4)
    for phase in np.linspace(0.0, 1.0, 8, endpoint=False):
        t = (np.arange(12_000) + phase / (f_slow * dt)) * dt
        x = np.stack([amp * np.sin(2 * np.pi * f_slow * t) + 0.3 * np.sin(2 * np.pi * 5.0 * t),
                      np.cos(2 * np.pi * 1.3 * t)], axis=1)
        truth = np.stack([amp * np.sin(2 * np.pi * f_slow * t), -amp * np.cos(2 * np.pi * f_slow * t)], axis=1)
        got = _slow(x, dt, cutoff, edges)
        # the slow channels have their mean removed; the sine's mean over the cut is not exactly 0
        got[:, 0] += truth[:, 0].mean()
        worst = np.maximum(worst, _errors(got, truth, int(1 / (cutoff * dt))))
    return tuple(worst / amp)


def ecg(edges: str) -> tuple[float, ...]:
    """Worst errors at the training split's end and at both ends of the first 10 000 test samples."""
    train, test = load_data("ecg", split="train"), load_data("ecg", split="test")
    dt, cutoff = float(train.attrs["dt"]), 0.4
    xtr, xte = train["x"].values[0], test["x"].values[0]
    n = xtr.shape[0]
    _, settings = add_slow_channels(train, cutoff, edges="plain")
    scale = settings["scale"]
    whole = _slow(np.concatenate([xtr, xte]), dt, cutoff, "plain", scale) / scale
    width = int(1 / (cutoff * dt))
    worst = np.zeros(4)
    for got, truth in ((_slow(xtr, dt, cutoff, edges, scale) / scale, whole[:n]),
                       (_slow(xte[:10_000], dt, cutoff, edges, scale) / scale, whole[n:n + 10_000])):
        # each cut removes its own mean; compare the band up to that constant
        got[:, 0] += (truth[:, 0] - got[:, 0]).mean()
        err = _errors(got, truth, width)
        # the training split's first samples have no recording before them to compare with
        if got.shape[0] == n:
            err = _errors(got[-width:], truth[-width:], width)
        worst = np.maximum(worst, err)
    return tuple(worst)


def main() -> None:
    train = load_data("ecg", split="train")
    print("error at the ends | within one cutoff period of an end   (band, quadrature)")
    print("| series | edges | band, end | quadrature, end | band, near | quadrature, near |")
    print("|---|---|---|---|---|---|")
    for name, fn in (("tone (× amplitude)", tone), ("ECG (× scale)", ecg)):
        for edges in MODES:
            print(f"| {name} | {edges} | " + " | ".join(f"{v:.3f}" for v in fn(edges)) + " |")
    for edges in MODES:
        seconds, _ = best_of(lambda: add_slow_channels(train, 0.4, edges=edges), 3)
        print(f"add_slow_channels on the ECG training split (100 000 samples), edges={edges}: {seconds:.3f} s")


if __name__ == "__main__":
    main()
