"""Session 53 audit of the continuous-time estimators as a lab drives them from Python."""
import math
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("dsident.inference.bptt")

from dsident.data import as_dataset  # noqa: E402
from dsident.models.continuous import GatedNODE, LTC, ORGaNICs, RecurrentFWP  # noqa: E402

BPTT = {"method": "bptt", "n_epochs": 1, "seq_len": 20, "batch_size": 4, "progress": False, "val_fraction": 0.0}


@pytest.fixture(scope="module")
def small():
    t = np.arange(120) * 0.01
    x = np.stack([np.sin(2 * np.pi * t + p) for p in (0.0, 1.0, 2.0)], -1)
    return as_dataset(x.reshape(2, 60, 3), dt=0.01)


@pytest.mark.parametrize("make, fragment", [
    (lambda: GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, tau="0.1"), "`tau` must be a positive number"),
    (lambda: GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, tau=True), "`tau` must be a positive number"),
    (lambda: RecurrentFWP(3, n_heads=1, hidden_dim=8, tau="1"), "`tau` must be a positive number"),
    (lambda: RecurrentFWP(3, n_heads=1, hidden_dim=8, tau=True), "`tau` must be a positive number"),
    (lambda: RecurrentFWP(3, n_heads=1, hidden_dim=8, fast_weight_noise=True), "`fast_weight_noise` must be"),
    (lambda: RecurrentFWP(3, n_heads=1, hidden_dim=8, fast_weight_noise=math.inf), "`fast_weight_noise` must be"),
    (lambda: ORGaNICs(3, max_rate_y=True), "`max_rate_y` must be a positive number"),
    (lambda: ORGaNICs(3, max_rate_a="1"), "`max_rate_a` must be a positive number"),
    (lambda: ORGaNICs(3, norm_weight_scale=True), "`norm_weight_scale` must be a positive number"),
])
def test_a_time_constant_or_rate_given_as_text_or_a_bool_is_refused(make, fragment, small):
    # float() used to read "0.1" as 0.1 and True as 1.0: a config read as text, or a flag in the
    # wrong slot, fitted a model with a time constant nobody asked for
    with pytest.raises(ValueError, match=fragment):
        make().fit(small, **BPTT)


def test_organics_rate_readout_must_be_a_bool(small):
    # rate_readout="no" is truthy: the firing-rate readout was switched on
    with pytest.raises(TypeError, match="`rate_readout` must be True or False; got rate_readout='no'"):
        ORGaNICs(3, rate_readout="no", seed=0).fit(small, **BPTT)


def test_numpy_hyperparameters_from_a_grid_fit_like_python_numbers(small):
    # np.arange / np.linspace grids hand numpy scalars; they were refused with "must be an integer
    # >= 1; got np.int64(8)". They must give the very fit the Python numbers give.
    pairs = [
        (GatedNODE(np.int64(3), hidden_dim=np.int64(8), gate_hidden_dim=np.int64(8), n_layers=np.int64(2),
                   gate_layers=np.int64(1), n_substeps=np.int64(2), seed=0),
         GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, n_layers=2, gate_layers=1, n_substeps=2, seed=0)),
        (LTC(3, n_substeps=np.int64(2), time_constant=np.array([0.05, 0.5]), seed=0),
         LTC(3, n_substeps=2, time_constant=(0.05, 0.5), seed=0)),
        (LTC(3, n_substeps=2, time_constant=np.float32(0.25), seed=0),
         LTC(3, n_substeps=2, time_constant=float(np.float32(0.25)), seed=0)),
        (RecurrentFWP(3, n_heads=np.int64(1), hidden_dim=np.int64(8), n_substeps=np.int64(1),
                      tau_fast=np.float32(0.125), fast_weight_noise=np.float32(0.001), seed=0),
         RecurrentFWP(3, n_heads=1, hidden_dim=8, n_substeps=1, tau_fast=0.125,
                      fast_weight_noise=float(np.float32(0.001)), seed=0)),
        (ORGaNICs(3, n_substeps=np.int64(1), norm_weight_scale=np.float32(0.5), seed=0),
         ORGaNICs(3, n_substeps=1, norm_weight_scale=0.5, seed=0)),
    ]
    for numpy_est, python_est in pairs:
        numpy_est.fit(small, **BPTT)
        python_est.fit(small, **BPTT)
        np.testing.assert_allclose(numpy_est.history_["train_loss"], python_est.history_["train_loss"], rtol=1e-6)
        config = numpy_est.model_.dynamics.config()
        # what is saved to JSON holds plain Python numbers
        assert not any(isinstance(v, np.generic) for v in config.values()), config


def test_warm_start_refuses_hyperparameters_changed_since_the_fit(small, tmp_path):
    # set_params between fits was silently ignored by warm_start: the estimator then reported (and
    # saved) latent_dim=5, solver='rk4', tau=0.5 while model_ stayed 3 units, Euler, tau = dt
    est = GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, seed=0).fit(small, **BPTT)
    fitted = est.model_
    est.set_params(latent_dim=5, tau=0.5, solver="rk4")
    with pytest.raises(ValueError, match=r"built with latent_dim=3, solver='euler', tau=None; the estimator now has "
                                         r"latent_dim=5, solver='rk4', tau=0.5"):
        est.fit(small, warm_start=True, **BPTT)
    assert est.model_ is fitted and fitted.dynamics.latent_dim == 3 and fitted.dynamics.tau == 0.01
    est.set_params(latent_dim=3, tau=None, solver="euler", seed=1)       # a new seed only draws other windows
    est.fit(small, warm_start=True, **BPTT)
    assert est.model_ is fitted
    # a model read back from disk continues too, and refuses a changed hyperparameter the same way
    rfwp = RecurrentFWP(3, n_heads=1, hidden_dim=8, process_noise=0.02, seed=0).fit(small, **BPTT)
    var = rfwp.model_.process_var.detach().clone()
    np.testing.assert_allclose(var[:3].numpy(), 0.02, rtol=1e-5)          # process_noise on y,
    np.testing.assert_allclose(var[3:].numpy(), 1e-3, rtol=1e-5)          # fast_weight_noise on W
    assert rfwp.get_params()["process_noise"] == 0.02
    rfwp.save(tmp_path / "rfwp")
    loaded = RecurrentFWP.load(tmp_path / "rfwp")
    loaded.fit(small, warm_start=True, **BPTT)
    loaded.set_params(fast_weight_noise=1e-4)
    with pytest.raises(ValueError, match=r"fast_weight_noise=0.001; the estimator now has fast_weight_noise=0.0001"):
        loaded.fit(small, warm_start=True, **BPTT)


def test_smooth_refuses_data_at_another_step_than_the_fit(small):
    # predict() refused such data, smooth() returned a posterior as if they had the fit's step
    est = GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, seed=0).fit(small, n_steps=2, window=20, batch_size=2,
                                                                   progress=False)
    x = small["x"].values
    with pytest.raises(ValueError, match=r"sampled every 0.02 .*fitted at a step of 0.01"):
        est.smooth(as_dataset(x, dt=0.02))
    assert est.smooth(as_dataset(x, dt=0.01))["z"].shape == (2, 60, 3)
    assert est.smooth(x)["z"].shape == (2, 60, 3)                       # a plain array carries no step


@pytest.mark.parametrize("noise", [np.full(2, 0.01), np.full(3 + 3 * 3, 0.01), -1.0, "0.01", True])
def test_rfwp_process_noise_is_checked_as_given(noise, small):
    # a wrong shape failed in numpy's broadcast ("operands could not be broadcast ..."), -1 was
    # reported as the built 12-unit vector, and "0.01" / True were read as 0.01 / 1.0
    with pytest.raises(ValueError, match=r"`process_noise` must be a positive finite variance \(a number or an "
                                         r"array of shape \(3,\)\); got process_noise="):
        RecurrentFWP(3, n_heads=1, hidden_dim=8, process_noise=noise, seed=0).fit(small, **BPTT)


def test_process_noise_given_as_text_is_refused(small):
    with pytest.raises(ValueError, match=r"`process_noise` must be a positive finite variance.*got process_noise='0.01'"):
        GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, process_noise="0.01", seed=0).fit(small, **BPTT)
    per_unit = RecurrentFWP(3, n_heads=1, hidden_dim=8, process_noise=[0.01, 0.02, 0.03], seed=0).fit(small, **BPTT)
    var = per_unit.model_.process_var.detach().numpy()
    assert var.shape == (12,)
    np.testing.assert_allclose(var[:3], [0.01, 0.02, 0.03], rtol=1e-5)


def test_a_noisy_run_at_another_step_says_its_noise_is_per_step(small):
    est = GatedNODE(3, hidden_dim=8, gate_hidden_dim=8, seed=0).fit(small, **BPTT)
    with pytest.warns(UserWarning, match=r"dt=0.001\).*10x as much per unit time"):
        fine = est.generate(201, dt=0.001, noise=True, seed=0)
    # what the warning claims: the increments' variance per step is the fit's per-step variance,
    # not 1/10 of it (drift over 0.001 is small next to it)
    steps = np.diff(fine["z"].values[0], axis=0)
    var = est.model_.process_var.detach().numpy()
    assert np.all(steps.var(0) > 0.5 * var)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.generate(20, noise=True, seed=0)                # at the fit's own dt: no warning
        est.generate(20, dt=0.001, seed=0)                  # and none without noise
