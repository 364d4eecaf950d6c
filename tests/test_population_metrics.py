"""Tests for dsident.metrics.population (Neural Latents Benchmark definitions), with analytic oracles."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import poisson

from dsident.data import as_dataset
from dsident.metrics.population import (
    behavior_r2, bits_per_spike, chop_trials, co_smoothing_bps, forward_prediction_bps, held_out_mask, poisson_nll, psth,
    psth_r2, split_forward,
)

RNG = np.random.default_rng(0)


def _two_level(n_bins: int, high: float, low: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rates alternating high/low per bin and Poisson counts drawn from them: (1, time, 1)."""
    rates = np.where(np.arange(n_bins) % 2 == 0, high, low).astype(np.float64)[None, :, None]
    return rates, np.random.default_rng(seed).poisson(rates).astype(np.float64)


def test_poisson_nll_matches_scipy_logpmf():
    rates = RNG.uniform(0.1, 3.0, size=(2, 30, 4))
    counts = RNG.poisson(rates).astype(np.float64)
    assert poisson_nll(rates, counts) == pytest.approx(-poisson.logpmf(counts, rates).sum(), rel=1e-12)


def test_null_model_scores_exactly_zero():
    rates = RNG.uniform(0.2, 2.0, size=(3, 50, 5))
    counts = RNG.poisson(rates).astype(np.float64)
    null = np.broadcast_to(counts.mean(axis=(0, 1)), counts.shape)
    assert bits_per_spike(null, counts) == pytest.approx(0.0, abs=1e-12)


def test_perfect_rates_match_the_analytic_expectation():
    # expected gain per pair of bins: high log(high/m) + low log(low/m) nats for (high + low) spikes
    high, low = 2.0, 0.5
    m = (high + low) / 2
    expected = (high * math.log(high / m) + low * math.log(low / m)) / ((high + low) * math.log(2.0))
    rates, counts = _two_level(400_000, high, low)
    assert bits_per_spike(rates, counts) == pytest.approx(expected, rel=0.02)
    # the null model is beaten by the truth, and a wrong prediction scores below the truth
    assert bits_per_spike(rates[:, ::-1], counts) < 0 < bits_per_spike(rates, counts)


def test_bits_per_spike_from_its_definition_with_scipy():
    rates = RNG.uniform(0.1, 3.0, size=(2, 40, 3))
    counts = RNG.poisson(rates).astype(np.float64)
    null = counts.mean(axis=(0, 1))
    nll_model = -poisson.logpmf(counts, rates).sum()
    nll_null = -poisson.logpmf(counts, np.broadcast_to(null, counts.shape)).sum()
    assert bits_per_spike(rates, counts) == pytest.approx((nll_null - nll_model) / counts.sum() / math.log(2))


def test_nan_bins_are_dropped_not_zero():
    rates = RNG.uniform(0.5, 2.0, size=(1, 60, 2))
    counts = RNG.poisson(rates).astype(np.float64)
    holey = counts.copy()
    holey[0, 10:20, 0] = np.nan
    keep = np.ones(60, bool)
    keep[10:20] = False
    # same score as evaluating neuron 0 on its observed bins only (the null mean uses them too)
    by_hand_n = np.concatenate([counts[0, keep, 0], counts[0, :, 1]])
    by_hand_r = np.concatenate([rates[0, keep, 0], rates[0, :, 1]])
    null = np.concatenate([np.full(keep.sum(), counts[0, keep, 0].mean()), np.full(60, counts[0, :, 1].mean())])
    gain = -poisson.logpmf(by_hand_n, null).sum() + poisson.logpmf(by_hand_n, by_hand_r).sum()
    assert bits_per_spike(rates, holey) == pytest.approx(gain / by_hand_n.sum() / math.log(2))


def test_rate_and_count_checks():
    counts = np.array([[[1.0], [0.0]]])
    with pytest.warns(RuntimeWarning, match="raised to"):
        bits_per_spike(np.array([[[0.0], [1.0]]]), counts)
    with pytest.raises(ValueError, match="finite and >= 0"):
        bits_per_spike(np.array([[[-1.0], [1.0]]]), counts)
    with pytest.raises(ValueError, match="shape"):
        bits_per_spike(np.ones((1, 3, 1)), counts)
    with pytest.raises(ValueError, match="no spikes"):
        bits_per_spike(np.ones((1, 2, 1)), np.zeros((1, 2, 1)))
    with pytest.raises(ValueError, match="integer counts"):
        bits_per_spike(np.ones((1, 2, 1)), np.array([[[0.5], [1.0]]]))


def test_co_smoothing_uses_only_held_out_neurons():
    rates = RNG.uniform(0.2, 2.0, size=(2, 40, 6))
    counts = RNG.poisson(rates).astype(np.float64)
    bad = rates.copy()
    bad[..., :4] = 5.0                                           # ruin the held-in neurons only
    held_out = [4, 5]
    full = co_smoothing_bps(bad, counts, held_out)
    assert full == pytest.approx(bits_per_spike(rates[..., 4:], counts[..., 4:]))
    assert co_smoothing_bps(rates[..., 4:], counts, held_out) == pytest.approx(full)
    with pytest.raises(ValueError, match="out of range"):
        co_smoothing_bps(rates, counts, [9])


def test_split_forward_and_forward_bps():
    counts = RNG.poisson(1.0, size=(2, 30, 3)).astype(np.float64)
    ds = as_dataset(counts, dt=0.005)
    ds.attrs["held_out_neurons"] = json.dumps([2])
    observed, forward = split_forward(ds, 10)
    assert observed.sizes["time"] == 20 and forward.sizes["time"] == 10
    np.testing.assert_array_equal(forward["x"].values, counts[:, 20:])
    assert observed.attrs["held_out_neurons"] == "[2]" and json.loads(forward.attrs["split"])["n_forward"] == 10
    rates = np.full_like(forward["x"].values, 1.0)
    assert forward_prediction_bps(rates, forward) == pytest.approx(bits_per_spike(rates, counts[:, 20:]))
    with pytest.raises(ValueError, match="n_forward"):
        split_forward(ds, 29)


def test_chop_trials_errors():
    with pytest.raises(ValueError, match="n_bins"):
        chop_trials(as_dataset(np.ones((1, 5, 2))), 6)


def test_held_out_mask():
    ds = as_dataset(np.ones((1, 5, 4)))
    ds.attrs["held_out_neurons"] = "[1, 3]"
    masked = held_out_mask(ds)
    assert np.isnan(masked["x"].values[..., [1, 3]]).all() and np.isfinite(masked["x"].values[..., [0, 2]]).all()
    assert np.isfinite(ds["x"].values).all()                      # input untouched
    with pytest.raises(ValueError, match="held_out"):
        held_out_mask(as_dataset(np.ones((1, 5, 4))))


def test_psth_and_psth_r2():
    cond = np.array(["b", "a", "b", "a"])
    rates = RNG.uniform(0, 1, size=(4, 10, 3))
    ref = psth(rates, cond)
    assert ref.dims == ("condition", "time", "neuron") and ref["condition"].values.tolist() == ["a", "b"]
    np.testing.assert_allclose(ref.values[0], rates[[1, 3]].mean(axis=0))
    assert psth_r2(rates, cond, ref) == pytest.approx(1.0)
    # predicting every (condition, time) row by the reference's column mean gives R² = 0
    flat = np.broadcast_to(ref.values.reshape(-1, 3).mean(axis=0), rates.shape)
    assert psth_r2(flat, cond, ref) == pytest.approx(0.0, abs=1e-12)
    smooth = psth(rates, cond, smooth_sd=2.0)
    assert smooth.values.std(axis=1).mean() < ref.values.std(axis=1).mean()
    with pytest.raises(ValueError, match="reference_psth"):
        psth_r2(rates, cond, ref.values[:, :5])


def test_behavior_r2_linear_readout_and_noise():
    rates = RNG.uniform(0, 2, size=(6, 50, 4))
    weights = np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 1.0], [2.0, 0.3]])
    behavior = rates @ weights + 0.1
    assert behavior_r2(rates[:4], behavior[:4], rates[4:], behavior[4:]) > 0.999
    noise = RNG.standard_normal((6, 50, 2))
    assert behavior_r2(rates[:4], noise[:4], rates[4:], noise[4:]) < 0.05
    # lag: behaviour at t + 2 is a readout of rates at t
    lagged = np.concatenate([np.zeros((6, 2, 2)), behavior[:, :-2]], axis=1)
    assert behavior_r2(rates[:4], lagged[:4], rates[4:], lagged[4:], lag=2) > 0.999
    with pytest.raises(ValueError, match="lag"):
        behavior_r2(rates, behavior, rates, behavior, lag=-1)


@pytest.mark.parametrize("n_rows, noise", [(103, 0.5), (240, 3.0), (61, 20.0)])
def test_behavior_r2_matches_sklearn_grid_search(n_rows, noise):
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV

    rng = np.random.default_rng(n_rows)
    x = rng.standard_normal((1, n_rows, 6)) * rng.uniform(0.1, 3.0, size=6)
    y = x @ rng.standard_normal((6, 2)) + noise * rng.standard_normal((1, n_rows, 2))
    x_ev = rng.standard_normal((1, 50, 6))
    y_ev = x_ev @ rng.standard_normal((6, 2)) + rng.standard_normal((1, 50, 2))
    alphas = np.logspace(-2, 3, 11)
    search = GridSearchCV(Ridge(), {"alpha": alphas}, cv=5).fit(x[0], y[0])
    assert behavior_r2(x, y, x_ev, y_ev, alphas=alphas) == pytest.approx(search.score(x_ev[0], y_ev[0]), rel=1e-9)


def test_offline_nlb_protocol_on_lorenz63_spikes():
    from dsident import datasets

    test = datasets.load("lorenz63_spikes", split="test").isel(time=slice(0, 2000))
    trials = chop_trials(test, 140)                            # NLB layout: 14 trials of 140 bins
    assert trials["x"].shape == (14, 140, 30) and trials["z_true"].shape == (14, 140, 3)
    np.testing.assert_array_equal(trials["x"].values[3], test["x"].values[0, 420:560])
    observed, forward = split_forward(trials, 40)
    readout = json.loads(test.attrs["provenance"])["readout"]
    true_rates = np.exp(trials["z_true"].values @ np.asarray(readout["C"]).T + np.asarray(readout["b"]))
    held_out = json.loads(trials.attrs["held_out_neurons"])
    assert held_out == list(range(20, 30))
    co_true = co_smoothing_bps(true_rates[:, :100], observed, held_out)
    shuffled = true_rates[:, :100][:, RNG.permutation(100)]
    assert co_true > 0.1 > co_smoothing_bps(shuffled, observed, held_out)
    assert forward_prediction_bps(true_rates[:, 100:], forward) > 0.1


def test_rates_as_a_float32_tensor_that_requires_grad():
    # a model's rates straight from the forward pass: np.asarray raised torch's "Can't call numpy()
    # on Tensor that requires grad"; the state-space metrics already took such tensors
    import torch

    rng = np.random.default_rng(3)
    rates = rng.uniform(0.2, 3.0, size=(2, 30, 4))
    spikes = rng.poisson(rates).astype(float)
    tensor = torch.tensor(rates, dtype=torch.float32, requires_grad=True)
    want = -poisson.logpmf(spikes, rates.astype(np.float32).astype(float)).sum()
    np.testing.assert_allclose(poisson_nll(tensor, spikes), want, rtol=1e-12)
    # and against the float64 rates: equal to float32 precision
    np.testing.assert_allclose(poisson_nll(tensor, spikes), poisson_nll(rates, spikes), rtol=1e-6)
    assert np.isfinite(bits_per_spike(tensor, spikes))
