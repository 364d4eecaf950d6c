"""fit_laplace_em: protocol, likelihood history, estimator face, errors."""
import numpy as np
import pytest
import torch

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


def test_prior_is_the_paper_penalty_in_log_likelihood_units():
    """EM maximises log p(X) − (T/2)·L_reg: the ridge prior is −(n_trans/2)·eq. 3, on the first
    M_reg units only (A → 1, W rows → 0 off the diagonal, h → 0), so that a model τ is the
    paper's LL-unit τ divided by T."""
    import torch

    from dsident.dynamics import PLRNN as PLRNNDynamics
    from dsident.inference.laplace_em import PLRNNParams, prior_from_dynamics

    dyn = PLRNNDynamics(6, tau=0.3, tau_h=0.05, seed=1)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        dyn.a.copy_(torch.as_tensor(rng.normal(0.5, 0.3, 6)))
        dyn.W.copy_(torch.as_tensor(rng.normal(0.0, 0.3, (6, 6))))
        dyn.h.copy_(torch.as_tensor(rng.normal(0.0, 0.3, 6)))
    n_trans = 1500
    prior = prior_from_dynamics(dyn, n_trans)
    W = dyn.W.detach().double().numpy() * (1 - np.eye(6))
    p = PLRNNParams(A=dyn.a.detach().double().numpy(), W=W, h=dyn.h.detach().double().numpy(), C=np.zeros((6, 0)),
                    Sigma=np.ones(6), mu0=np.zeros(6), B=np.zeros((3, 6)), b=np.zeros(3), Gamma=np.ones(3))
    assert prior.value(p) == pytest.approx(-0.5 * n_trans * float(dyn.regularization().detach()), rel=1e-6)
    # eq. 3 written out: regularized units 0, 1, 2
    reg = slice(0, 3)
    by_hand = (0.3 * np.sum((p.A[reg] - 1) ** 2) + 0.3 * np.sum(W[reg] ** 2) + 0.05 * np.sum(p.h[reg] ** 2))
    assert prior.value(p) == pytest.approx(-0.5 * n_trans * by_hand, rel=1e-6)
    assert np.all(prior.A_weight[3:] == 0) and np.all(prior.W_weight[3:] == 0) and np.all(prior.h_weight[3:] == 0)
    assert np.all(np.diag(prior.W_weight) == 0)


@pytest.mark.parametrize("reg_units", ["first", "last"])
def test_strong_regularization_pins_the_regularized_units(reg_units):
    """With a very large τ the fitted regularized units are a manifold attractor (A = 1, W rows = 0,
    h = 0) while the other units stay free; a τ = 0 fit from the same seed does not sit there."""
    ds = _data(T=200)
    strong = dsident.models.PLRNN(latent_dim=4, tau=1e6, seed=0, reg_units=reg_units)
    strong.fit(ds, method="laplace-em", progress=False, n_iter_per_stage=3, anneal=(1.0, 0.1))
    p = strong.history_["params"]
    reg, other = (slice(0, 2), slice(2, 4)) if reg_units == "first" else (slice(2, 4), slice(0, 2))
    np.testing.assert_allclose(p["A"][reg], 1.0, atol=1e-4)
    np.testing.assert_allclose(p["W"][reg], 0.0, atol=1e-4)
    np.testing.assert_allclose(p["h"][reg], 0.0, atol=1e-4)
    assert np.abs(p["A"][other] - 1).max() > 1e-3 or np.abs(p["W"][other]).max() > 1e-3
    if reg_units == "last":
        return
    free = dsident.models.PLRNN(latent_dim=4, tau=0.0, seed=0)
    free.fit(ds, method="laplace-em", progress=False, n_iter_per_stage=3, anneal=(1.0, 0.1))
    q = free.history_["params"]
    assert np.abs(q["A"][:2] - 1).max() > 1e-3 or np.abs(q["h"][:2]).max() > 1e-3


@pytest.mark.parametrize("manifold_init", [True, False])
def test_manifold_init_sets_or_keeps_the_lds_values_of_the_regularized_units(manifold_init):
    """With one EM iteration in one stage the kept parameters are the initial ones. The manifold
    init puts the regularized units at A = 1, W rows = 0, h = 0; without it every unit keeps the
    LDS initialisation, which a τ = 0 fit from the same seed reaches by a route without any prior."""
    ds = _data(T=200)
    opts = dict(method="laplace-em", progress=False, n_iter_per_stage=1, anneal=(1.0,), select="likelihood")
    reg = dsident.models.PLRNN(latent_dim=4, tau=1.0, seed=3).fit(ds, manifold_init=manifold_init, **opts)
    lds = dsident.models.PLRNN(latent_dim=4, tau=0.0, seed=3).fit(ds, **opts)
    p, q = reg.history_["params"], lds.history_["params"]
    assert reg.history_["settings"]["manifold_init"] is manifold_init
    np.testing.assert_allclose(p["A"][2:], q["A"][2:])
    np.testing.assert_allclose(p["W"][2:], q["W"][2:])
    if manifold_init:
        np.testing.assert_array_equal(p["A"][:2], 1.0)
        np.testing.assert_array_equal(p["W"][:2], 0.0)
        np.testing.assert_array_equal(p["h"][:2], 0.0)
        assert np.abs(q["A"][:2] - 1).max() > 1e-3
    else:
        np.testing.assert_allclose(p["A"], q["A"])
        np.testing.assert_allclose(p["W"], q["W"])
        np.testing.assert_allclose(p["h"], q["h"])


def _driven_trials(lengths=(200, 150, 250), missing=0.2, seed=1):
    """Ragged trials of a linear-Gaussian system driven by a white-noise input, with missing
    samples: z_t = diag(a) z_{t-1} + c u_t + noise, x_t = B z_t + 10 + noise."""
    rng = np.random.default_rng(seed)
    a, c = np.array([0.8, 0.6]), np.array([[1.5], [-1.0]])
    B = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    xs, us = [], []
    for n in lengths:
        u = rng.normal(size=(n, 1))
        z, zc = np.zeros((n, 2)), np.zeros(2)
        for t in range(n):
            zc = a * zc + c @ u[t] + 0.05 * rng.normal(size=2)
            z[t] = zc
        x = z @ B.T + 10.0 + 0.05 * rng.normal(size=(n, 3))
        x[rng.random(x.shape) < missing] = np.nan
        xs.append(x)
        us.append(u)
    return as_dataset(xs, u=us), (a, c, B)


def test_inputs_are_recovered_and_missing_samples_are_ignored(monkeypatch):
    """Through the whole protocol (LDS init, EM stages, selection) on ragged trials with 20 %
    missing samples: the input's effect on the observations (B C at lag 0, B F C at lag 1, which
    do not depend on the latent basis) matches the true system's, and values written under the
    mask change nothing."""
    from dsident.inference.laplace_em import em

    ds, (a, c, B) = _driven_trials()
    options = dict(progress=False, n_iter_per_stage=5, n_iter_lds=10, anneal=(0.1, 0.01), check_steps=500)
    est = dsident.models.PLRNN(latent_dim=2, tau=0.0, readout="linear", seed=0).fit(ds, **options)
    p = est.history_["params"]
    F = np.diag(p["A"]) + p["W"]
    np.testing.assert_allclose(p["B"] @ p["C"], B @ c, atol=0.15)
    np.testing.assert_allclose(p["B"] @ F @ p["C"], B @ np.diag(a) @ c, atol=0.2)
    np.testing.assert_allclose(p["b"], 10.0, atol=0.5)
    chain_from_dataset = em.chain_from_dataset
    monkeypatch.setattr(em, "chain_from_dataset", lambda d: (lambda ch: ch._replace(
        x=np.where(ch.mask, ch.x, 1e6)))(chain_from_dataset(d)))
    wild = dsident.models.PLRNN(latent_dim=2, tau=0.0, readout="linear", seed=0).fit(ds, **options)
    np.testing.assert_allclose(wild.history_["log_likelihood"], est.history_["log_likelihood"], rtol=1e-10)


def test_smooth_names_the_channels_and_inputs_it_expected():
    ds, _ = _driven_trials(lengths=(60, 40), missing=0.0)
    est = dsident.models.PLRNN(latent_dim=2, seed=0).fit(ds, progress=False, n_iter_per_stage=2, n_iter_lds=2,
                                                         anneal=(1.0,), check_steps=50)
    x = [ds["x"].values[i, :n] for i, n in enumerate(ds["length"].values)]
    with pytest.raises(ValueError, match=r"`data` has 0 input\(s\).*model takes 1"):
        est.smooth(x)
    with pytest.raises(ValueError, match=r"`data` has 2 channel\(s\) but the model observes 3"):
        est.smooth(as_dataset([v[:, :2] for v in x], u=[u[:len(v)] for u, v in zip(ds["u"].values, x)]))
    with pytest.raises(ValueError, match=r"`test` has 0 input\(s\).*model takes 1"):
        est.score(x)


@pytest.mark.parametrize("option, value", [
    ("anneal", 0.1), ("anneal", (1.0, "0.1")), ("n_iter_per_stage", 2.5), ("n_iter_lds", -1),
    ("max_estep_iter", 0), ("tol", -1e-3), ("tol", float("nan")), ("gamma_floor", -1.0), ("gamma_floor", 0.0),
    ("initial_var", -1.0)])
def test_out_of_range_options_are_refused_by_name(option, value):
    """Each of these used to run on silently (no E-step solve, no Γ floor, a stage that never
    stops early, no LDS iterations) or fail deep inside with an unnamed TypeError/LinAlgError."""
    est = dsident.models.PLRNN(latent_dim=2, seed=0)
    with pytest.raises(ValueError, match=rf"`{option}` must be .*got {option}="):
        est.fit(_data(60), progress=False, **{option: value})
    assert not hasattr(est, "model_")


def test_a_loaded_fit_smooths_as_before_the_save(tmp_path):
    """save → load keeps generate and gives the Laplace smoother back: the same posterior (to the
    bit, from the history's float64 parameters) on ragged trials with inputs and missing samples."""
    ds, _ = _driven_trials(lengths=(80, 50), missing=0.1)
    est = dsident.models.PLRNN(latent_dim=2, seed=0).fit(ds, progress=False, n_iter_per_stage=2, n_iter_lds=3,
                                                         anneal=(1.0, 0.1), check_steps=50)
    before = est.smooth(ds)
    est.save(tmp_path / "fit")
    loaded = dsident.models.PLRNN.load(tmp_path / "fit")
    after = loaded.smooth(ds)
    np.testing.assert_array_equal(after["z"].values, before["z"].values)
    np.testing.assert_array_equal(after["z_var"].values, before["z_var"].values)
    assert after.attrs["log_likelihood"] == before.attrs["log_likelihood"]
    u = np.random.default_rng(0).normal(size=(30, 1))
    np.testing.assert_array_equal(loaded.generate(30, u=u, noise=True, seed=1)["x"].values,
                                  est.generate(30, u=u, noise=True, seed=1)["x"].values)
    # a model changed after the fit is smoothed with its own parameters, not the history's
    with torch.no_grad():
        loaded.model_.dynamics.h += 1.0
    loaded.save(tmp_path / "changed")
    changed = dsident.models.PLRNN.load(tmp_path / "changed").smooth(ds)
    assert not np.allclose(changed["z"].values, before["z"].values, equal_nan=True)


@pytest.mark.parametrize("readout", ["identity", "relu"])
def test_poisson_rates_of_the_fitted_model_match_the_counts_whatever_the_bin_size(readout, tmp_path):
    """With ``bin_size`` ≠ 1 the model's rate per bin is exp(η)·bin_size. The identity readout's
    fixed offset used to be 0 inside the EM, so the fit explained the counts with exp(z) while the
    written model generated exp(z)·bin_size: 10× too few spikes at bin_size=0.1."""
    rng = np.random.default_rng(0)
    means = np.array([2.0, 0.5, 4.0])
    counts = [rng.poisson(means, size=(n, 3)).astype(float) for n in (200, 150)]
    est = dsident.models.PLRNN(latent_dim=3, seed=0, observation="poisson", readout=readout,
                               observation_options={"bin_size": 0.1})
    est.fit(counts, progress=False, n_iter_per_stage=3, anneal=(1.0, 0.1), check_steps=100)
    z = torch.as_tensor(np.nan_to_num(est.smooth(counts)["z"].values), dtype=torch.float32)
    with torch.no_grad():
        rate = est.model_.observation.rate(z).numpy()
    fitted = np.concatenate([rate[i, :len(c)] for i, c in enumerate(counts)]).mean(0)
    np.testing.assert_allclose(fitted, np.concatenate(counts).mean(0), rtol=0.15)
    generated = est.generate(3000, observation_noise=True, seed=0)["x"].values[0, 500:].mean(0)
    np.testing.assert_allclose(generated, np.concatenate(counts).mean(0), rtol=0.25)
    # the loaded fit smooths as before the save (Γ, unused for counts, does not block the exact parameters)
    est.save(tmp_path / "fit")
    np.testing.assert_array_equal(dsident.models.PLRNN.load(tmp_path / "fit").smooth(counts)["z"].values,
                                  est.smooth(counts)["z"].values)
