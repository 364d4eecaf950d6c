"""Reconstruction metrics and the evaluation protocol (``SPEC-metrics.md``).

- :func:`state_space_divergence` — D_stsp, attractor geometry (binned or Gaussian mixture);
  :func:`state_space_coverage`, the share of the true samples in bins the free run visits;
  :func:`state_space_projections`, D_stsp of every channel and channel pair (which variables miss);
- :func:`power_spectrum_distance` — D_H, time scales (Hellinger of smoothed spectra);
  :func:`power_spectrum_mse` — the rPLRNN paper's spectrum MSE with a low/high band split;
- :func:`prediction_error` — PE(n) from data-initialised states;
- :func:`evaluate` — the protocol (free run, burn-in, divergence detection, settings recorded);
  :func:`evaluate_starts`, the same from many starts spread over the data;
  :func:`summarize` over seeds; :func:`floor`, the best value reachable on a benchmark;
- neural-population scores of the Neural Latents Benchmark: :func:`bits_per_spike`,
  :func:`co_smoothing_bps`, :func:`forward_prediction_bps`, :func:`psth_r2`, :func:`behavior_r2`.

>>> from dsident import metrics, datasets
>>> scores = metrics.evaluate(model, datasets.load("lorenz63", split="test"))   # doctest: +SKIP
"""
from .evaluate import SCALAR_METRICS, evaluate, floor, summarize
from .population import (behavior_r2, bits_per_spike, chop_trials, co_smoothing_bps, forward_prediction_bps,
                         held_out_mask, poisson_nll, psth, psth_r2, split_forward)
from .prediction import prediction_error
from .spectrum import SpectrumMSE, power_spectrum, power_spectrum_distance, power_spectrum_mse
from .starts import evaluate_starts
from .state_space import state_space_coverage, state_space_divergence
from .projections import state_space_projections

__all__ = [
    "state_space_divergence", "state_space_coverage", "state_space_projections", "power_spectrum_distance", "power_spectrum",
    "power_spectrum_mse", "SpectrumMSE",
    "prediction_error", "evaluate", "evaluate_starts", "summarize", "floor", "SCALAR_METRICS",
    "poisson_nll", "bits_per_spike", "co_smoothing_bps", "forward_prediction_bps", "psth", "psth_r2",
    "behavior_r2", "chop_trials", "split_forward", "held_out_mask",
]
