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
