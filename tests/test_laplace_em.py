"""fit_laplace_em: protocol, likelihood history, estimator face, errors."""
import numpy as np
import pytest

import dsident
from dsident.data.container import as_dataset


def _data(T=300, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(T) * 0.1
    x = np.stack([np.sin(t), np.cos(1.3 * t), np.sin(0.7 * t) ** 2], -1) + 0.05 * rng.normal(size=(T, 3))
    x[17, 1] = np.nan
    return as_dataset(x, dt=0.1)


def test_fit_through_estimator_and_likelihood_history():
    ds = _data()
    est = dsident.models.PLRNN(latent_dim=4, tau=0.0, seed=0)
    est.fit(ds, method="laplace-em", progress=False, n_iter_per_stage=4, anneal=(1.0, 0.1))
    h = est.history_
    assert not h["diverged"]
    lds = np.array(h["lds_log_likelihood"])
    # the LDS E-step is exact, so LDS-EM must not decrease the likelihood (round-off tolerance)
    assert np.all(np.diff(lds) > -1e-6 * np.abs(lds[:-1]))
    stage = np.array(h["stage"])
    obj = np.array(h["objective"])
    for k in np.unique(stage):
        o = obj[stage == k]
        # Laplace-EM is approximate (mode, not expectation; first-order cross moments): allow a
        # documented tolerance of 2 % of |objective| per iteration within a stage
        assert np.all(np.diff(o) > -0.02 * np.abs(o[:-1]))
    assert h["stage_best"][-1] == pytest.approx(max(obj[stage == stage.max()]))
    sm = est.smooth(ds)
    assert sm["z"].shape == (1, 300, 4) and np.all(sm["z_var"].values > 0)
    gen = est.generate(200, seed=0)
    assert gen.attrs["diverged"] == 0


def test_non_piecewise_linear_dynamics_rejected():
    from dsident.inference.laplace_em import fit_laplace_em
    model = dsident.models.LTC(latent_dim=3) if hasattr(dsident.models, "LTC") else None
    if model is None:
        pytest.skip("LTC estimator not available")
    from dsident.dynamics.ltc import LTC
    from dsident.model import StateSpaceModel
    from dsident.observations.gaussian import Gaussian
    ssm = StateSpaceModel(LTC(3), Gaussian(3, 3))
    with pytest.raises(ValueError, match="piecewise-linear"):
        fit_laplace_em(ssm, _data(50), progress=False)


def test_poisson_fit_runs_and_keeps_finite_parameters():
    rng = np.random.default_rng(3)
    t = np.arange(300) * 0.1
    rate = np.exp(0.5 * np.stack([np.sin(t), np.cos(t)], -1))
    ds = as_dataset(rng.poisson(rate).astype(float), dt=0.1)
    est = dsident.models.PLRNN(latent_dim=3, tau=0.0, seed=0, observation="poisson")
    est.fit(ds, method="laplace-em", progress=False, n_iter_per_stage=3, anneal=(1.0, 0.1))
    h = est.history_
    assert not h["diverged"]
    assert np.all(np.isfinite(h["log_likelihood"]))
    assert all(np.all(np.isfinite(np.asarray(v))) for v in h["params"].values() if isinstance(v, np.ndarray))
