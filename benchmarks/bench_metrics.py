"""Speed and memory of the reconstruction metrics (issue: metrics, item 7).

Prints, for each case, the time of dsident's implementation (best of ``--repeat`` runs), its
peak traced memory (tracemalloc; numpy registers its buffers there), the time of a
straightforward dense implementation written below, their ratio, and the difference of the
two values (they must agree). Targets on 2 cores: binned D_stsp 100 000 × 3 ≤ 0.2 s,
100 000 × 5 ≤ 0.5 s; GMM D_stsp 10 000 × 64 ≤ 5 s; D_H 100 000 × 5 ≤ 0.3 s; peak ≤ 1 GB.

Run: ``python benchmarks/bench_metrics.py`` (add ``--quick`` to skip the 5-D dense comparator,
which needs ~1.5 GB for its 30^5 arrays).
"""
from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from dsident.metrics import power_spectrum_distance, state_space_divergence

TARGETS = {"bins-3d": 0.2, "bins-5d": 0.5, "gmm-64d": 5.0, "dh-5d": 0.3}


# ---------------------------------------------------------------------------------------------
# straightforward dense comparators
# ---------------------------------------------------------------------------------------------
def dense_binned_kl(xt: np.ndarray, xg: np.ndarray, n_bins: int = 30, alpha: float = 1e-5) -> float:
    """Full n_bins**N histograms with numpy.histogramdd, smoothed, summed over every cell."""
    lo, hi = xt.min(0) - 0.1 * xt.std(0), xt.max(0) + 0.1 * xt.std(0)
    edges = [np.linspace(lo[d], hi[d], n_bins + 1) for d in range(xt.shape[1])]
    ht, _ = np.histogramdd(xt, bins=edges)
    hg, _ = np.histogramdd(xg, bins=edges)
    p = (ht + alpha) / (ht.sum() + alpha * ht.size)
    q = (hg + alpha) / (hg.sum() + alpha * hg.size)
    return float(np.sum(p * np.log(p / q)))


def dense_gmm_kl(xt: np.ndarray, xg: np.ndarray, scaling: float = 1.0, n_points: int = 10_000,
                 mc_samples: int = 1_000, seed: int = 0) -> float:
    """All pairwise distances at once (scipy cdist, no chunking), same random draws as dsident's."""
    rng = np.random.default_rng(seed)
    ct, cg = xt[:n_points], xg[:n_points]
    pick = rng.integers(0, ct.shape[0], size=mc_samples)
    s = ct[pick] + np.sqrt(scaling) * rng.standard_normal((mc_samples, ct.shape[1]))
    d_t = cdist(s, ct, "sqeuclidean")
    d_g = cdist(s, cg, "sqeuclidean")
    log_p = logsumexp(-0.5 * d_t / scaling, axis=1) - np.log(ct.shape[0])
    log_q = logsumexp(-0.5 * d_g / scaling, axis=1) - np.log(cg.shape[0])
    return float(np.mean(log_p - log_q))


def dense_hellinger(xt: np.ndarray, xg: np.ndarray, sigma: float = 20.0) -> float:
    """Per-channel loop: full complex FFT, explicit kernel, reflect padding, np.convolve."""
    radius = int(4 * sigma + 0.5)
    k = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    k /= k.sum()
    out = []
    for c in range(xt.shape[1]):
        spectra = []
        for x in (xt[:, c], xg[:, c]):
            z = (x - x.mean()) / x.std()
            ps = np.abs(np.fft.fft(z)) ** 2
            ps = ps[: len(z) // 2 + 1]
            padded = np.concatenate([ps[radius - 1::-1], ps, ps[:-radius - 1:-1]])
            sm = np.clip(np.convolve(padded, k, mode="valid"), 0, None)
            spectra.append(sm / sm.sum())
        out.append(np.sqrt(max(0.0, 1 - np.sum(np.sqrt(spectra[0] * spectra[1])))))
    return float(np.mean(out))


# ---------------------------------------------------------------------------------------------
def timed(fn, repeat: int) -> tuple[float, float, float]:
    """(best seconds, value, peak traced MB) of fn() over `repeat` runs."""
    best, value, peak = np.inf, np.nan, 0.0
    for _ in range(repeat):
        tracemalloc.start()
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
        peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return best, value, peak


def lorenz_like(n: int, dim: int, seed: int) -> np.ndarray:
    """A smooth chaotic-looking test series: a random walk folded through sines (no ODE solve)."""
    rng = np.random.default_rng(seed)
    phase = np.cumsum(rng.normal(0.05, 0.02, size=(n, dim)), axis=0)
    return np.sin(phase) + 0.3 * np.sin(2.7 * phase + 1.0) + 0.05 * rng.normal(size=(n, dim))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the 30^5 dense comparator")
    args = parser.parse_args()
    cases = []
    for name, n, dim in [("bins-3d", 100_000, 3), ("bins-5d", 100_000, 5)]:
        xt, xg = lorenz_like(n, dim, 0), lorenz_like(n, dim, 1)
        ours = timed(lambda: state_space_divergence(xt, xg, method="bins"), args.repeat)
        dense = (np.nan, np.nan, np.nan) if (args.quick and dim == 5) else timed(lambda: dense_binned_kl(xt, xg), 1)
        cases.append((f"D_stsp binned {n}x{dim}", name, ours, dense))
    xt, xg = lorenz_like(10_000, 64, 0), lorenz_like(10_000, 64, 1)
    ours = timed(lambda: state_space_divergence(xt, xg, method="gmm", seed=0), args.repeat)
    dense = timed(lambda: dense_gmm_kl(xt, xg, seed=0), 1)
    cases.append(("D_stsp GMM 10000x64", "gmm-64d", ours, dense))
    xt, xg = lorenz_like(100_000, 5, 0), lorenz_like(100_000, 5, 1)
    ours = timed(lambda: power_spectrum_distance(xt, xg), args.repeat)
    dense = timed(lambda: dense_hellinger(xt, xg), 1)
    cases.append(("D_H 100000x5", "dh-5d", ours, dense))

    print(f"{'case':24s} {'dsident s':>10s} {'target s':>9s} {'peak MB':>8s} {'dense s':>9s} {'dense MB':>9s} "
          f"{'speed-up':>9s} {'|diff|':>9s}")
    for label, key, (t, v, mb), (td, vd, mbd) in cases:
        print(f"{label:24s} {t:10.3f} {TARGETS[key]:9.1f} {mb:8.1f} {td:9.3f} {mbd:9.1f} {td / t:9.1f} "
              f"{abs(v - vd):9.2e}")
    print(f"process max RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
