"""The true system's fixed points (numerical roots) against analytic values and an independent scan,
and the one-to-one pairing with a model's fixed points."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dsident.analysis import match_fixed_points, system_fixed_points
from dsident.data.systems import get_system
from dsident.datasets import load


def test_lorenz63_roots_are_the_analytic_ones_in_the_data_channels():
    data = load("lorenz63", split="test")
    found = system_fixed_points(data)
    sigma, rho, beta = 10.0, 28.0, 8.0 / 3.0
    c = math.sqrt(beta * (rho - 1.0))
    expected = np.array([[-c, -c, rho - 1.0], [0.0, 0.0, 0.0], [c, c, rho - 1.0]])
    np.testing.assert_allclose(found.state, expected, atol=1e-8)
    # through the set's own z-score (read from its preprocessing record, not from the module)
    step = json.loads(data.attrs["preprocessing"])[0]
    np.testing.assert_allclose(found.channels, (expected - step["mean"]) / np.asarray(step["std"]), atol=1e-8)
    # origin: eigenvalues (-(σ+1) ± sqrt((σ+1)² + 4σ(ρ-1)))/2 and -β, a saddle; C±: saddle-foci
    disc = math.sqrt((sigma + 1.0) ** 2 + 4.0 * sigma * (rho - 1.0))
    np.testing.assert_allclose(np.sort(found.eigenvalues[1].real),
                               np.sort([(-(sigma + 1) + disc) / 2, (-(sigma + 1) - disc) / 2, -beta]), rtol=1e-10)
    assert found.kind == ["saddle"] * 3 and not found.stable.any()
    assert np.all(np.abs(found.eigenvalues[[0, 2]].imag).max(axis=1) > 1.0)


def test_bursting_neuron_roots_agree_with_a_scan_of_the_reduced_current():
    """Independent route: at a fixed point n = n∞(V) and h = h∞(V), so V is a root of the
    one-dimensional steady-state current; scan it on a fine grid and refine each sign change."""
    from scipy.optimize import brentq

    found = system_fixed_points("bursting_neuron")
    system = get_system("bursting_neuron")
    p = system.params

    def boltz(v, vh, k):
        return 1.0 / (1.0 + np.exp((vh - v) / k))

    def reduced(v):
        x = np.array([v, boltz(v, p["V_hK"], p["k_K"]), boltz(v, p["V_hM"], p["k_M"])])
        return system.rhs(0.0, x)[0]

    grid = np.linspace(-120.0, 80.0, 20_001)
    values = np.array([reduced(v) for v in grid])
    roots = [brentq(reduced, a, b, xtol=1e-12) for a, b, fa, fb in zip(grid[:-1], grid[1:], values[:-1], values[1:])
             if fa * fb < 0]
    assert len(roots) >= 1
    np.testing.assert_allclose(np.sort(found.state[:, 0]), np.sort(roots), atol=1e-6)
    for point in found.state:
        assert np.max(np.abs(system.rhs(0.0, point)) / system.state_scale) < 1e-8


def test_latent_system_has_states_but_no_channels():
    found = system_fixed_points("lorenz63_spikes")
    assert len(found) == 3 and found.channels is None


def test_a_recording_is_refused_by_name():
    with pytest.raises(ValueError, match="no deterministic system"):
        system_fixed_points(load("ecg", split="test"))
    with pytest.raises(ValueError, match="n_starts"):
        system_fixed_points("lorenz63", n_starts=0)
    # a time-dependent vector field (the ECG's generator) has no fixed points
    data = load("lorenz63", split="test").isel(time=slice(0, 50))
    prov = json.loads(data.attrs["provenance"])
    data.attrs["provenance"] = json.dumps({**prov, "system": "ecgsyn", "params": {}})
    with pytest.raises(ValueError, match="changes with time"):
        system_fixed_points(data)


def test_rossler_roots_are_the_analytic_ones():
    data = load("lorenz63", split="test").isel(time=slice(0, 50))
    prov = json.loads(data.attrs["provenance"])
    a, b, c = 0.2, 0.2, 5.7
    data.attrs["provenance"] = json.dumps({**prov, "system": "rossler", "params": {"a": a, "b": b, "c": c}})
    found = system_fixed_points(data)
    x = (c + np.array([-1.0, 1.0]) * math.sqrt(c * c - 4 * a * b)) / 2
    np.testing.assert_allclose(found.state, np.stack([x, -x / a, x / a], axis=1), rtol=1e-8, atol=1e-10)


def test_pairing_is_one_to_one_and_names_the_spurious_points():
    true = np.array([[0.0, 0.0], [2.0, 0.0]])
    # model point 0 is nearest to both true points; the pairing must give true 1 to model point 2
    model = np.array([[0.9, 0.0], [10.0, 10.0], [2.3, 0.0]])
    match = match_fixed_points(true, model, tol=1.0)
    assert list(match.paired) == [0, 2]
    np.testing.assert_allclose(match.distance, [0.9, 0.3])
    assert match.matched.all() and list(match.spurious) == [1]
    assert match.summary().startswith("2 of 2 true fixed points matched within 1 sd")
    # distances are in units of each channel's scale
    scaled = match_fixed_points(true, model, scale=[0.5, 1.0], tol=1.0)
    np.testing.assert_allclose(scaled.distance, [1.8, 0.6])
    assert list(scaled.matched) == [False, True] and list(scaled.spurious) == [0, 1]
    # fewer model points than true ones: the rest stay unpaired
    few = match_fixed_points(true, model[:1], tol=1.0)
    assert list(few.paired) == [0, -1] and np.isinf(few.distance[1])
    with pytest.raises(ValueError, match="model_points"):
        match_fixed_points(true, np.zeros((2, 3)))
    with pytest.raises(ValueError, match="scale"):
        match_fixed_points(true, model, scale=[1.0, 0.0])


@pytest.mark.parametrize("option", ["residual_tol", "dedup_tol"])
@pytest.mark.parametrize("value", [-1.0, 0.0, float("nan"), "1e-8", True])
def test_a_tolerance_that_keeps_no_root_is_refused(option, value):
    # audit-s53: residual_tol=-1 kept no root and reported Lorenz-63 as having no fixed points
    with pytest.raises(ValueError, match=f"`{option}` must be a positive finite number"):
        system_fixed_points("lorenz63", n_starts=4, **{option: value})


def test_match_names_a_non_finite_fixed_point():
    # audit-s53: scipy's assignment refused it as "matrix contains invalid numeric entries"
    true = np.array([[0.0, 0.0], [3.0, 4.0]])
    found = match_fixed_points(true, np.array([[3.0, 4.1], [0.1, 0.0]]))
    assert found.paired.tolist() == [1, 0] and found.distance == pytest.approx([0.1, 0.1])
    with pytest.raises(ValueError, match=r"`model_points` must be finite; row 1 is array\(\[nan,  0\.\]\)"):
        match_fixed_points(true, np.array([[3.0, 4.0], [np.nan, 0.0]]))
    with pytest.raises(ValueError, match=r"`true_points` must be finite; row 0"):
        match_fixed_points(np.array([[np.inf, 0.0]]), true)
