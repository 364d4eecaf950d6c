"""Tests of the SVI engine (``dsident.inference.svi``).

Oracles: the Kalman filter / RTS smoother written below (linear-Gaussian posterior means,
variances and the exact log-likelihood), an explicit per-step loop for the prior's log
density, and the true latent of ``lorenz63_spikes``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm
from torch import nn

from dsident.data import as_dataset
from dsident.dynamics import PLRNN
from dsident.dynamics.base import LatentDynamics
from dsident.inference.svi import GUIDES, fit_svi, make_guide
from dsident.inference.svi.pyro_model import Batch, LatentPathPrior
from dsident.inference.svi.training import _elbo_sum, _kl_scale
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian, Poisson


class LinearDynamics(LatentDynamics):
    """z_t = A z_{t-1} + C u_t (discrete) or z_t = z_{t-1} + dt (A z_{t-1} + C u_t) (Euler)."""

    def __init__(self, latent_dim: int, input_dim: int = 0, euler: bool = False) -> None:
        super().__init__()
        self.latent_dim, self.input_dim, self.euler = latent_dim, input_dim, euler
        self.A = nn.Parameter(0.5 * torch.eye(latent_dim))
        self.C = nn.Parameter(0.3 * torch.ones(latent_dim, input_dim))

    def step(self, z, u=None, dt=None):
        drive = z @ self.A.T + (0.0 if u is None else u @ self.C.T)
        return z + dt * drive if self.euler else drive


class NaNDynamics(LinearDynamics):
    def step(self, z, u=None, dt=None):
        return z * float("nan")


# ---------------------------------------------------------------------------------------------
# the oracle: Kalman filter and RTS smoother (float64 numpy)
# ---------------------------------------------------------------------------------------------
def kalman_smoother(x, A, Q, C, d, R, mu0, V0):
    """Posterior means (T, M), marginal variances (T, M) and log p(x) of one trial."""
    T, M = x.shape[0], A.shape[0]
    mf, Vf = np.zeros((T, M)), np.zeros((T, M, M))
    mp, Vp = np.zeros((T, M)), np.zeros((T, M, M))
    loglik = 0.0
    for t in range(T):
        m, V = (mu0, V0) if t == 0 else (A @ mf[t - 1], A @ Vf[t - 1] @ A.T + Q)
        mp[t], Vp[t] = m, V
        S = C @ V @ C.T + R
        r = x[t] - C @ m - d
        loglik += -0.5 * (r @ np.linalg.solve(S, r) + np.linalg.slogdet(2 * np.pi * S)[1])
        K = V @ C.T @ np.linalg.inv(S)
        mf[t], Vf[t] = m + K @ r, V - K @ C @ V
    ms, Vs = mf.copy(), Vf.copy()
    for t in range(T - 2, -1, -1):
        J = Vf[t] @ A.T @ np.linalg.inv(Vp[t + 1])
        ms[t] = mf[t] + J @ (ms[t + 1] - mp[t + 1])
        Vs[t] = Vf[t] + J @ (Vs[t + 1] - Vp[t + 1]) @ J.T
    return ms, np.diagonal(Vs, axis1=1, axis2=2), loglik


def _model_params(model):
    dyn, obs = model.dynamics, model.observation
    f = lambda t: t.detach().double().numpy()  # noqa: E731
    return (f(dyn.A), np.diag(f(model.process_var)), f(obs.B), f(obs.b), np.diag(f(obs.var)),
            f(model.initial_mean), np.diag(f(model.log_initial_var.exp())))


@pytest.fixture(scope="module")
def linear_gaussian():
    """16 trials of 25 steps from a damped rotation seen through 3 noisy channels, and the model."""
    rng = np.random.default_rng(0)
    M, N, T, R = 2, 3, 25, 16
    A = 0.95 * np.array([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]])
    C, d = rng.normal(size=(N, M)), rng.normal(size=N)
    q, r = 0.1, 0.2
    x = np.zeros((R, T, N))
    for i in range(R):
        z = rng.normal(size=M)
        for t in range(T):
            if t:
                z = A @ z + math.sqrt(q) * rng.normal(size=M)
            x[i, t] = C @ z + d + math.sqrt(r) * rng.normal(size=N)

    def build():
        model = StateSpaceModel(LinearDynamics(M), Gaussian(N, M), process_noise=q, initial_var=1.0)
        with torch.no_grad():
            model.dynamics.A.copy_(torch.tensor(A))
            model.observation.B.copy_(torch.tensor(C))
            model.observation.b.copy_(torch.tensor(d))
            model.observation.log_var.fill_(math.log(r))
        return model

    return as_dataset(x, dt=1.0), build


#: the guide-only fits of the linear-Gaussian tests (about 3 s of CPU each)
N_STEPS, LR, HID = 200, 2e-2, 16


def _kalman_all(ds, model):
    A, Q, C, d, R, mu0, V0 = _model_params(model)
    out = [kalman_smoother(xi, A, Q, C, d, R, mu0, V0) for xi in ds["x"].values]
    return np.stack([o[0] for o in out]), np.stack([o[1] for o in out]), sum(o[2] for o in out)


# ---------------------------------------------------------------------------------------------
# linear-Gaussian: posterior and ELBO against the Kalman smoother
# ---------------------------------------------------------------------------------------------
def test_markov_guide_matches_kalman_smoother_and_elbo_approaches_loglik(linear_gaussian):
    """With the true model fixed, the Markov guide can represent the exact posterior.

    Tolerances (from 200 steps: measured 0.2, 0.97 and 0.03; the gap keeps shrinking with more steps): posterior means
    within 0.35 posterior standard deviations (RMS over all steps), marginal variances within
    30 %, and ELBO within 0.08 nats per time step of log p(x), never above it.
    """
    ds, build = linear_gaussian
    model = build()
    hist = fit_svi(model, ds, seed=0, device="cpu", window=25, batch_size=16, n_steps=N_STEPS, lr=LR,
                   kl_anneal=0, learn_model=False, eval_every=N_STEPS, patience=None, progress=False,
                   hidden_dim=HID, combiner_dim=HID)
    assert hist["n_steps_run"] == N_STEPS and hist["elbo"][-1] > hist["elbo"][0]
    means, variances, loglik = _kalman_all(ds, model)
    post = model.smoother_(ds, n_samples=256)
    assert post["z"].dims == ("trial", "time", "latent")
    err = (post["z"].values - means) / np.sqrt(variances)
    elbo = model.smoother_.elbo(ds, n_samples=32)
    n_steps = ds.sizes["trial"] * ds.sizes["time"]
    assert np.sqrt(np.mean(err ** 2)) < 0.35
    assert 0.7 < np.mean(post["z_var"].values / variances) < 1.3
    assert elbo <= loglik + 1.0                           # a bound (1 nat of Monte Carlo slack)
    assert (loglik - elbo) / n_steps < 0.08


def test_mean_field_means_match_kalman_and_variances_are_not_larger(linear_gaussian):
    """For a Gaussian posterior the mean-field optimum has the exact means and the inverse
    diagonal precision as variances, never above the true marginal variances."""
    ds, build = linear_gaussian
    model = build()
    fit_svi(model, ds, seed=1, device="cpu", guide="mean-field", window=25, batch_size=16, n_steps=N_STEPS, lr=LR,
            kl_anneal=0, learn_model=False, eval_every=N_STEPS, patience=None, progress=False, hidden_dim=HID)
    means, variances, loglik = _kalman_all(ds, model)
    post = model.smoother_(ds)
    err = (post["z"].values - means) / np.sqrt(variances)
    assert np.sqrt(np.mean(err ** 2)) < 0.35
    assert np.mean(post["z_var"].values / variances) < 1.0
    assert model.smoother_.elbo(ds, n_samples=8) < loglik


def test_learning_the_model_raises_the_exact_likelihood(linear_gaussian):
    """From a wrong readout and noise level, SVI moves the parameters uphill on log p(x),
    and its ELBO stays below the exact log-likelihood of the parameters it reached."""
    ds, build = linear_gaussian
    model = build()
    with torch.no_grad():
        model.observation.B.mul_(0.3)
        model.observation.log_var.fill_(math.log(2.0))
    before = _kalman_all(ds, model)[2]
    truth = _kalman_all(ds, build())[2]
    fit_svi(model, ds, seed=0, device="cpu", window=25, batch_size=16, n_steps=100, lr=3e-2, kl_anneal=20,
            eval_every=50, patience=None, progress=False, hidden_dim=16, combiner_dim=16)
    after = _kalman_all(ds, model)[2]
    # measured: 61 % of the way from the start (-1644) to the true parameters' value (-901)
    assert after > before + (truth - before) / 3
    assert model.smoother_.elbo(ds, n_samples=8) <= after + 1.0


# ---------------------------------------------------------------------------------------------
# the pyro model: prior log density, masks, KL scale
# ---------------------------------------------------------------------------------------------
def test_prior_log_density_matches_a_step_by_step_loop():
    """Ragged trials, inputs and per-step dt, against an explicit loop with scipy's normal pdf."""
    torch.manual_seed(0)
    M, K, T = 2, 1, 6
    model = StateSpaceModel(LinearDynamics(M, K, euler=True), Gaussian(2, M), process_noise=0.05, initial_var=0.5)
    with torch.no_grad():
        model.initial_mean.copy_(torch.tensor([0.3, -0.2]))
        model.dynamics.A.copy_(torch.tensor([[-0.5, 1.0], [-1.0, -0.2]]))
    lengths = np.array([6, 3])
    dts = np.random.default_rng(0).uniform(0.05, 0.5, size=(2, T))      # dts[:, t]: step into t
    u = torch.randn(2, T, K)
    z = torch.randn(2, T, M)
    time_mask = torch.as_tensor(np.arange(T)[None, :] < lengths[:, None])
    batch = Batch(x=torch.zeros(2, T, 2), mask=torch.ones(2, T, 2, dtype=torch.bool), time_mask=time_mask,
                  u=u, dt=torch.tensor(dts, dtype=torch.float32))
    got = LatentPathPrior(model, batch).log_prob(z).detach().numpy()
    A, C = model.dynamics.A.detach().numpy(), model.dynamics.C.detach().numpy()
    sd, sd0 = math.sqrt(0.05), math.sqrt(0.5)
    for i in range(2):
        zi, ui = z[i].numpy(), u[i].numpy()
        want = norm.logpdf(zi[0], [0.3, -0.2], sd0).sum()
        for t in range(1, lengths[i]):
            loc = zi[t - 1] + dts[i, t] * (A @ zi[t - 1] + C @ ui[t])
            want += norm.logpdf(zi[t], loc, sd).sum()
        assert got[i] == pytest.approx(want, rel=1e-5)


def test_the_observation_term_is_the_gaussian_log_density_of_the_observed_entries():
    # a fixed guide sample replayed through the pyro model: its "x" site against scipy, entry by
    # entry over observed samples only (a NaN sample, a NaN time step, a ragged end)
    from pyro import poutine

    from dsident.dynamics import GatedNODE
    from dsident.inference.svi.pyro_model import svi_model
    from dsident.inference.svi.windows import prepare_trials

    rng = np.random.default_rng(0)
    trials = [rng.normal(size=(12, 3)), rng.normal(size=(7, 3))]
    trials[0][3, 1] = np.nan
    trials[1][2] = np.nan
    ds = as_dataset(trials, dt=0.1)
    model = StateSpaceModel(GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0), Gaussian(3, 2), dt=0.1).double()
    with torch.no_grad():
        model.observation.log_var.copy_(torch.tensor([-1.0, 0.0, 0.5]))
    batch = prepare_trials(ds, model, device=torch.device("cpu"), dtype=torch.float64).full_trials()
    torch.manual_seed(0)
    guide = make_guide("markov", latent_dim=2, obs_dim=3, input_dim=0, hidden_dim=4, combiner_dim=4,
                       x_mean=torch.zeros(3), x_scale=torch.ones(3)).double()
    guide_trace = poutine.trace(lambda: guide.pyro_guide(batch, 1.0, torch.Generator().manual_seed(0))).get_trace()
    trace = poutine.trace(poutine.replay(lambda: svi_model(model, batch), trace=guide_trace)).get_trace()
    trace.compute_log_prob()
    z = trace.nodes["z"]["value"].detach().numpy()
    B, b = model.observation.B.detach().numpy(), model.observation.b.detach().numpy()
    sd = np.exp(0.5 * model.observation.log_var.detach().numpy())
    expected = np.zeros(2)
    for r, x in enumerate(trials):
        for t in range(len(x)):
            seen = np.isfinite(x[t])
            expected[r] += norm.logpdf(x[t][seen], (B @ z[r, t] + b)[seen], sd[seen]).sum()
    np.testing.assert_allclose(trace.nodes["x"]["log_prob"].detach().numpy(), expected, rtol=1e-12)


def _grads(model, guide, batch, seed):
    model.zero_grad()
    guide.zero_grad()
    (-_elbo_sum(model, guide, batch, 1.0, torch.Generator().manual_seed(seed))).backward()
    return torch.cat([p.grad.flatten() for p in [*model.parameters(), *guide.parameters()] if p.grad is not None])


def test_masked_samples_do_not_change_the_gradient():
    torch.manual_seed(0)
    M, N, T = 2, 3, 12
    model = StateSpaceModel(LinearDynamics(M), Gaussian(N, M))
    guide = make_guide("markov", latent_dim=M, obs_dim=N, hidden_dim=8, combiner_dim=8)
    x = torch.randn(4, T, N)
    mask = torch.rand(4, T, N) > 0.3
    time_mask = torch.ones(4, T, dtype=torch.bool)
    time_mask[1, 8:] = False
    clean = torch.where(mask, x, torch.zeros_like(x))
    ref = _grads(model, guide, Batch(clean, mask, time_mask, None, 1.0), seed=3)
    for garbage in (1e6, float("nan"), float("inf")):
        dirty = torch.where(mask, x, torch.full_like(x, garbage))
        assert torch.equal(_grads(model, guide, Batch(dirty, mask, time_mask, None, 1.0), seed=3), ref)
    # the control: the same values *observed* do change the gradient
    finite = torch.where(mask, x, torch.full_like(x, 5.0))
    changed = _grads(model, guide, Batch(finite, torch.ones_like(mask), time_mask, None, 1.0), seed=3)
    assert not torch.allclose(changed, ref)


def test_kl_scale_weights_the_latent_terms_only():
    """ELBO_beta = E[log p(x|z)] + beta (log p(z) - log q(z)), for the same sampled path."""
    torch.manual_seed(0)
    model = StateSpaceModel(LinearDynamics(2), Gaussian(3, 2))
    guide = make_guide("mean-field", latent_dim=2, obs_dim=3, hidden_dim=8)
    batch = Batch(torch.randn(2, 10, 3), torch.ones(2, 10, 3, dtype=torch.bool), torch.ones(2, 10, dtype=torch.bool),
                  None, 1.0)
    with torch.no_grad():
        one = _elbo_sum(model, guide, batch, 1.0, torch.Generator().manual_seed(0))
        half = _elbo_sum(model, guide, batch, 0.5, torch.Generator().manual_seed(0))
        zero_ish = _elbo_sum(model, guide, batch, 1e-9, torch.Generator().manual_seed(0))
    # linear in beta: ELBO_1 - ELBO_0.5 == ELBO_0.5 - ELBO_0
    assert float(one - half) == pytest.approx(float(half - zero_ish), rel=1e-4, abs=1e-3)
    assert abs(float(one - zero_ish)) > 1.0
    assert _kl_scale(0, 10, 0.1) == pytest.approx(0.1) and _kl_scale(5, 10, 0.1) == pytest.approx(0.55)
    assert _kl_scale(10, 10, 0.1) == 1.0 and _kl_scale(0, 0, 0.1) == 1.0


# ---------------------------------------------------------------------------------------------
# training machinery
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_data():
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.normal(size=(2, 80, 3)), axis=1) * 0.1
    return as_dataset(x, dt=0.1)


def _small_model(seed=0):
    torch.manual_seed(seed)
    return StateSpaceModel(LinearDynamics(2), Gaussian(3, 2))


SMALL = dict(device="cpu", window=20, batch_size=4, n_steps=12, lr=1e-2, eval_every=4, patience=None,
             progress=False, hidden_dim=8, combiner_dim=8)


def test_resume_after_interruption_continues_from_the_saved_step(small_data, tmp_path):
    whole = _small_model()
    ref = fit_svi(whole, small_data, seed=5, checkpoint=tmp_path / "a", **SMALL)
    assert (tmp_path / "a" / "last.pt").exists() and (tmp_path / "a" / "best.pt").exists()

    class Interrupt(Exception):
        pass

    def stop_at_9(step, record, model):
        if step == 9:
            raise Interrupt

    part = _small_model()
    with pytest.raises(Interrupt):
        fit_svi(part, small_data, seed=5, checkpoint=tmp_path / "b", checkpoint_every=4, callback=stop_at_9, **SMALL)
    saved = torch.load(tmp_path / "b" / "last.pt", weights_only=True)
    assert saved["step"] == 8
    resumed = _small_model(seed=99)                      # a different start: everything comes from the file
    hist = fit_svi(resumed, small_data, seed=5, checkpoint=tmp_path / "b", resume=True, **SMALL)
    assert hist["resumed_from"] == 8 and hist["n_steps_run"] == 4
    assert hist["step"] == list(range(12))
    np.testing.assert_array_equal(hist["loss"], ref["loss"])
    assert hist["val_elbo"] == ref["val_elbo"]
    for a, b in zip(whole.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_resume_trains_at_the_learning_rate_it_is_given(small_data, tmp_path):
    # the checkpoint's optimizer state used to bring its own rate back: a resume with a smaller
    # `lr` (after a near-divergence) went on at the old one, while settings recorded the new one
    fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path, **{**SMALL, "n_steps": 8})
    hist = fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path, resume=True,
                   **{**SMALL, "lr": 1e-4, "lr_final": 1e-5})
    assert hist["resumed_from"] == 8 and hist["settings"]["lr"] == 1e-4
    expected = [1e-4 * 0.1 ** (step / 12) for step in range(8, 12)]      # the exponential schedule, from step 8
    np.testing.assert_allclose(hist["lr"][8:], expected, rtol=1e-12)
    assert hist["lr"][:8][0] == 1e-2                                     # the history before the resume is kept


def test_a_resumed_fit_keeps_its_kl_ramp_when_given_more_steps(small_data, tmp_path):
    # the default ramp (n_steps // 10) was recomputed from the resumed call's n_steps: 8 steps ramp
    # over 0 steps (β = 1 from the start), but a resume to 400 steps put β back on a 40-step ramp
    first = fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path, **{**SMALL, "n_steps": 8})
    assert first["settings"]["kl_anneal"] == 0
    hist = fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path, resume=True,
                   **{**SMALL, "n_steps": 400, "patience": None}, callback=lambda step, rec, m: step >= 11)
    assert hist["resumed_from"] == 8 and hist["settings"]["kl_anneal"] == 0
    assert hist["kl_scale"][8:] == [1.0] * (len(hist["kl_scale"]) - 8)
    # a ramp given to the resumed call is used as given
    given = fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path / "b", **{**SMALL, "n_steps": 8})
    assert given["settings"]["kl_anneal"] == 0
    hist = fit_svi(_small_model(), small_data, seed=0, checkpoint=tmp_path / "b", resume=True, kl_anneal=40,
                   **{**SMALL, "n_steps": 400, "patience": None}, callback=lambda step, rec, m: step >= 11)
    np.testing.assert_allclose(hist["kl_scale"][8:], [_kl_scale(s, 40, SMALL.get("kl_start", 0.1))
                                                      for s in range(8, len(hist["kl_scale"]))])


def test_same_seed_same_fit_other_seed_other_fit(small_data):
    a = fit_svi(_small_model(), small_data, seed=3, **SMALL)
    b = fit_svi(_small_model(), small_data, seed=3, **SMALL)
    c = fit_svi(_small_model(), small_data, seed=4, **SMALL)
    assert a["loss"] == b["loss"] and a["loss"] != c["loss"]
    assert a["settings"]["seed"] == 3 and a["settings"]["device"] == "cpu"


def test_callback_gets_each_step_and_the_model_and_can_stop_the_fit(small_data):
    model = _small_model()
    seen = []

    def callback(step, record, m):
        seen.append((step, record["loss"], m is model))
        return step == 5

    hist = fit_svi(model, small_data, seed=5, callback=callback, **SMALL)
    assert [s for s, _, _ in seen] == hist["step"] == list(range(6))
    assert [loss for _, loss, _ in seen] == hist["loss"] and all(same for _, _, same in seen)
    assert hist["stop_reason"] == "callback" and hist["n_steps_run"] == 6
    assert hist["best_step"] == 4                       # the one validation before the stop (eval_every 4)


def test_resume_refuses_a_checkpoint_of_another_fit(small_data, tmp_path):
    fit_svi(_small_model(), small_data, seed=5, checkpoint=tmp_path, **SMALL)
    with pytest.raises(ValueError, match="batch_size"):
        fit_svi(_small_model(), small_data, seed=5, checkpoint=tmp_path, resume=True, **{**SMALL, "batch_size": 2})


def test_early_stopping_keeps_the_best_state(small_data):
    # a learning rate too small to change float32 parameters: the validation ELBO never improves
    hist = fit_svi(_small_model(), small_data, seed=0, **{**SMALL, "lr": 1e-30, "patience": 2, "n_steps": 100})
    assert hist["stop_reason"] == "early_stopping"
    assert hist["n_steps_run"] == 12 and hist["best_step"] == 4


def test_validation_fraction_holds_out_the_end_of_each_trial(small_data):
    hist = fit_svi(_small_model(), small_data, seed=0, validation=0.25, **SMALL)
    assert len(hist["val_elbo"]) == 3 and all(np.isfinite(hist["val_elbo"]))
    assert hist["settings"]["validation"] == 0.25


def test_divergence_is_reported_and_stops_the_fit(small_data):
    model = StateSpaceModel(NaNDynamics(2), Gaussian(3, 2))
    with pytest.warns(RuntimeWarning, match="diverged"):
        hist = fit_svi(model, small_data, seed=0, **SMALL)
    assert hist["stop_reason"] == "diverged" and hist["n_steps_run"] < 12


class NaNGaussian(Gaussian):
    """A likelihood whose value is NaN, as after parameters blown up by a too large step."""

    def log_prob(self, x, z, mask=None):
        return super().log_prob(x, z, mask) * float("nan")


def test_a_nan_observation_term_is_reported_as_divergence_not_a_pyro_error(small_data):
    # pyro's site checks used to raise "Expected parameter log_factor ... Real()" before the
    # loop could see the NaN loss
    model = StateSpaceModel(LinearDynamics(2), NaNGaussian(3, 2))
    with pytest.warns(RuntimeWarning, match="diverged"):
        hist = fit_svi(model, small_data, seed=0, **SMALL)
    assert hist["stop_reason"] == "diverged" and not any(map(math.isfinite, hist["loss"]))


def test_a_huge_learning_rate_diverges_and_returns_the_start_not_the_blown_up_state(small_data):
    model = _small_model()
    start = [p.detach().clone() for p in model.parameters()]
    options = {**SMALL, "lr": 1e3, "clip_norm": None, "eval_every": 50}     # diverges before any evaluation
    with pytest.warns(RuntimeWarning, match="no validation had run yet"):
        hist = fit_svi(model, small_data, seed=0, **options)
    assert hist["stop_reason"] == "diverged" and hist["best_step"] is None
    assert math.isfinite(hist["loss"][0]) and not math.isfinite(hist["loss"][1])   # one update was taken
    for a, b in zip(model.parameters(), start):
        assert torch.equal(a, b)


def test_a_short_fit_that_blows_up_is_reported_not_kept_silently(small_data):
    # 4 steps, NaN from step 2: fewer non-finite losses than the stop needs, and the one validation
    # (at the end) NaN; the blown-up state used to be kept with stop_reason "n_steps" and no warning
    model = _small_model()
    start = [p.detach().clone() for p in model.parameters()]
    options = {**SMALL, "n_steps": 4, "lr": 1e3, "clip_norm": None}
    with pytest.warns(RuntimeWarning, match="no validation ELBO was finite"):
        hist = fit_svi(model, small_data, seed=0, **options)
    assert not math.isfinite(hist["val_elbo"][-1]) and not math.isfinite(hist["loss"][-1])
    assert hist["stop_reason"] == "diverged" and hist["best_step"] is None
    for a, b in zip(model.parameters(), start):
        assert torch.equal(a, b)


def test_divergence_after_an_evaluation_keeps_the_best_state(small_data):
    options = {**SMALL, "lr_schedule": "constant", "kl_anneal": 0}          # steps that do not depend on n_steps
    reference = _small_model()
    fit_svi(reference, small_data, seed=0, **{**options, "n_steps": 4})     # the state evaluated at step 4
    model = _small_model()

    def blow_up(step, record, model):
        if step == 5:
            with torch.no_grad():
                model.dynamics.A.fill_(float("nan"))

    with pytest.warns(RuntimeWarning, match=r"keeps its best state \(step 4\)"):
        hist = fit_svi(model, small_data, seed=0, callback=blow_up, **options)
    assert hist["stop_reason"] == "diverged" and hist["best_step"] == 4
    for a, b in zip(model.parameters(), reference.parameters()):
        assert torch.equal(a, b)


def test_a_validation_set_at_another_step_or_with_other_channels_is_refused(small_data):
    # a validation set built without its dt (as_dataset's default 1.0) was scored with the prior
    # integrated at that step, and picked the "best" state from those scores
    x = small_data["x"].values
    with pytest.raises(ValueError, match=r"`validation` is sampled at dt=1\.0 but the training data at dt=0\.1"):
        fit_svi(_small_model(), small_data, seed=0, validation=as_dataset(x), **SMALL)
    renamed = as_dataset(x, dt=0.1, channel_names=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"`validation` has the channels \['a', 'b', 'c'\] but the training"):
        fit_svi(_small_model(), small_data, seed=0, validation=renamed, **SMALL)
    same = as_dataset(x, dt=0.1 * (1 + 1e-4))            # the same step, as read from a file
    assert fit_svi(_small_model(), small_data, seed=0, validation=same, **SMALL)["stop_reason"] == "n_steps"


def test_continuous_time_dynamics_are_not_fitted_at_another_step_than_the_models(small_data):
    from dsident.dynamics import GatedNODE

    model = StateSpaceModel(GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0), Gaussian(3, 2), dt=0.01)
    with pytest.raises(ValueError, match=r"`data` is sampled at dt=0\.1 but the model's continuous-time dynamics "
                                         r"step with dt=0\.01"):
        fit_svi(model, small_data, seed=0, **SMALL)
    model = StateSpaceModel(GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0), Gaussian(3, 2), dt=0.1)
    assert fit_svi(model, small_data, seed=0, **SMALL)["stop_reason"] == "n_steps"


def test_smoother_sample_counts_are_checked_at_the_door(small_data):
    # n_samples=0 gave all-NaN means, 1 gave variances of exactly 0, -1 a torch error about a
    # negative dimension, and elbo(n_samples=0) an ELBO of 0.0
    model = _small_model()
    fit_svi(model, small_data, seed=0, **SMALL)
    smoother = model.smoother_
    for bad in (0, 1, -1, 2.5):
        with pytest.raises(ValueError, match=rf"`n_samples` must be an integer >= 2 \(a variance needs at least two "
                                             rf"sample paths\); got n_samples={bad!r}"):
            smoother(small_data, n_samples=bad)
    post = smoother(small_data, n_samples=2)
    assert np.isfinite(post["z"].values).all() and (post["z_var"].values > 0).all()
    with pytest.raises(ValueError, match=r"`n_samples` must be an integer >= 1; got n_samples=0"):
        smoother.elbo(small_data, n_samples=0)
    with pytest.raises(ValueError, match=r"`smoother_samples` must be an integer >= 2"):
        fit_svi(_small_model(), small_data, seed=0, smoother_samples=1, **SMALL)
    # the mean-field guide's moments are exact: one "sample" is enough (and unused)
    hist = fit_svi(_small_model(), small_data, seed=0, guide="mean-field", smoother_samples=1, **SMALL)
    assert hist["stop_reason"] == "n_steps"


def test_ragged_trials_with_missing_samples_and_inputs(tmp_path):
    rng = np.random.default_rng(2)
    trials = [rng.normal(size=(30, 3)), rng.normal(size=(17, 3))]
    trials[0][5:9, 1] = np.nan
    inputs = [rng.normal(size=(30, 1)), rng.normal(size=(17, 1))]
    ds = as_dataset(trials, u=inputs, dt=0.1)
    model = StateSpaceModel(LinearDynamics(2, input_dim=1), Gaussian(3, 2))
    hist = fit_svi(model, ds, seed=0, **{**SMALL, "window": 25})
    assert np.isfinite(hist["loss"]).all()
    post = model.smoother_(ds)
    z = post["z"].values
    assert np.isfinite(z[0]).all() and np.isfinite(z[1, :17]).all() and np.isnan(z[1, 17:]).all()
    with pytest.raises(ValueError, match="input_dim=1"):
        fit_svi(StateSpaceModel(LinearDynamics(2, input_dim=1), Gaussian(3, 2)), as_dataset(trials, dt=0.1),
                seed=0, **SMALL)


def test_irregular_sampling_gives_every_transition_its_own_step():
    from dsident.inference.svi.windows import prepare_trials

    times = [np.array([0.0, 0.1, 0.3, 0.35, 0.6, 1.0]), np.array([0.0, 0.2, 0.25, 0.5])]
    rng = np.random.default_rng(3)
    ds = as_dataset([rng.normal(size=(6, 3)), rng.normal(size=(4, 3))], time=times, dt=0.1)
    model = StateSpaceModel(LinearDynamics(2, euler=True), Gaussian(3, 2))
    trials = prepare_trials(ds, model, device=torch.device("cpu"), dtype=torch.float32)
    np.testing.assert_allclose(trials.dt[0, 1:].numpy(), np.diff(times[0]), rtol=1e-6)
    np.testing.assert_allclose(trials.dt[1, 1:4].numpy(), np.diff(times[1]), rtol=1e-6)
    batch = trials.batch(np.array([0, 1]), np.array([2, 0]), 3)            # windows keep their own steps
    np.testing.assert_allclose(batch.dt[0, 1:].numpy(), np.diff(times[0][2:5]), rtol=1e-6)
    hist = fit_svi(model, ds, seed=0, **{**SMALL, "window": 6})
    assert np.isfinite(hist["loss"]).all()


def test_option_errors_name_the_argument(small_data):
    model = _small_model()
    with pytest.raises(ValueError, match=r"`guide` must be one of \['markov', 'mean-field'\]; got guide='dmm'"):
        fit_svi(model, small_data, guide="dmm")
    with pytest.raises(ValueError, match="`guide`"):
        make_guide("kalman", latent_dim=2, obs_dim=3)
    with pytest.raises(ValueError, match="lr_schedule"):
        fit_svi(model, small_data, lr_schedule="step")
    with pytest.raises(ValueError, match="`device`"):
        fit_svi(model, small_data, device="tpu")
    with pytest.raises(ValueError, match="window"):
        fit_svi(model, small_data, window=1)
    with pytest.raises(ValueError, match="resume"):
        fit_svi(model, small_data, resume=True)
    with pytest.raises(ValueError, match="obs_dim=4"):
        fit_svi(StateSpaceModel(LinearDynamics(2), Gaussian(4, 2)), small_data, **SMALL)
    assert sorted(GUIDES) == ["markov", "mean-field"]


def test_fits_do_not_share_parameters(small_data):
    """Guides are modules owned by each fit, not entries of pyro's global parameter store."""
    import pyro

    pyro.clear_param_store()
    a, b = _small_model(), _small_model()
    fit_svi(a, small_data, seed=0, **SMALL)
    fit_svi(b, small_data, seed=1, **SMALL)
    assert len(pyro.get_param_store()) == 0
    assert a.smoother_.guide is not b.smoother_.guide
    assert not any(p is q for p in a.smoother_.guide.parameters() for q in b.smoother_.guide.parameters())


# ---------------------------------------------------------------------------------------------
# Poisson: recover the Lorenz latent from spikes
# ---------------------------------------------------------------------------------------------
def _aligned_correlation(z_hat, z_true):
    """Mean over true dimensions of corr(z_true, affine least-squares prediction from z_hat)."""
    design = np.column_stack([z_hat, np.ones(len(z_hat))])
    coef, *_ = np.linalg.lstsq(design, z_true, rcond=None)
    pred = design @ coef
    return float(np.mean([np.corrcoef(pred[:, i], z_true[:, i])[0, 1] for i in range(z_true.shape[1])]))


def _spike_fit(n_time, n_steps):
    from dsident import datasets

    full = datasets.load("lorenz63_spikes")
    ds = full.isel(time=slice(0, n_time))
    ds["length"] = ("trial", [n_time])
    z_true = ds["z_true"].values[0]
    torch.manual_seed(0)
    model = StateSpaceModel(PLRNN(3, seed=0), Poisson(ds.sizes["channel"], 3), process_noise=0.05,
                            dt=float(ds.attrs["dt"]))
    arr = ds["x"].values
    model.observation.init_from_data(arr, np.isfinite(arr))
    fit_svi(model, ds[["x", "length"]], seed=0, device="cpu", window=100, batch_size=16, n_steps=n_steps, lr=1e-2,
            kl_anneal=n_steps // 4, eval_every=n_steps, patience=None, progress=False, hidden_dim=32,
            combiner_dim=32)
    z_hat = model.smoother_(ds[["x", "length"]], n_samples=32)["z"].values[0]
    return z_hat, z_true


def test_poisson_fit_recovers_the_lorenz_latent_short():
    """PLRNN × Poisson on 1000 bins of 30 neurons, 60 steps (about 5 s of CPU).

    The issue's bar is 0.8; we ask for 0.93. Measured: 0.97 after 60 steps; the same model
    after a single step gives 0.81 (the untrained encoder's random projection of the spikes),
    and a latent unrelated to the truth (time-shuffled) gives about 0.
    """
    z_hat, z_true = _spike_fit(1000, 60)
    r = _aligned_correlation(z_hat, z_true)
    shuffled = _aligned_correlation(np.random.default_rng(0).permutation(z_hat), z_true)
    assert r >= 0.93 and shuffled < 0.2


@pytest.mark.slow
def test_poisson_fit_recovers_the_lorenz_latent():
    """Half of the training recording (5000 bins), 400 steps."""
    z_hat, z_true = _spike_fit(5000, 400)
    assert _aligned_correlation(z_hat, z_true) >= 0.95


# ---------------------------------------------------------------------------------------------
# GPU
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fit_runs_on_the_gpu_and_returns_the_model_home(small_data):
    model = _small_model()
    hist = fit_svi(model, small_data, seed=0, **{**SMALL, "device": "cuda"})
    assert hist["settings"]["device"].startswith("cuda") and np.isfinite(hist["loss"]).all()
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert np.isfinite(model.smoother_(small_data)["z"].values).all()
    auto = fit_svi(_small_model(), small_data, seed=0, **{**SMALL, "device": "auto"})
    assert auto["settings"]["device"].startswith("cuda")


# ---------------------------------------------------------------------------------------------
# the estimator face: every dynamics fits with method="svi"
# ---------------------------------------------------------------------------------------------
ESTIMATOR_ARGS = {"PLRNN": dict(latent_dim=4), "ShallowPLRNN": dict(latent_dim=4, hidden_dim=8),
                  "GatedNODE": dict(latent_dim=4, hidden_dim=8, gate_hidden_dim=8), "LTC": dict(latent_dim=4),
                  "RecurrentFWP": dict(latent_dim=3, n_heads=1, hidden_dim=8), "ORGaNICs": dict(latent_dim=4)}


@pytest.fixture(scope="module")
def lorenz_short():
    from dsident import datasets

    train = datasets.load("lorenz63", split="train").isel(time=slice(0, 300))
    train["length"] = ("trial", [300])
    x = train["x"].values
    return as_dataset((x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True), dt=float(train.attrs["dt"]))


@pytest.mark.parametrize("name", list(ESTIMATOR_ARGS))
def test_every_estimator_fits_with_svi_and_smooths(name, lorenz_short):
    import dsident.models

    est = getattr(dsident.models, name)(seed=0, **ESTIMATOR_ARGS[name])
    est.fit(lorenz_short, method="svi", n_steps=4, window=30, batch_size=4, eval_every=2, progress=False,
            device="auto", hidden_dim=8, combiner_dim=8)
    assert est.history_["engine"] == "svi" and np.isfinite(est.history_["loss"]).all()
    post = est.smooth(lorenz_short)
    assert post["z"].shape == (1, 300, est.model_.latent_dim) and np.isfinite(post["z_var"].values).all()
    assert (post["z_var"].values > 0).all()
    assert est.generate(20, seed=0)["x"].shape == (1, 20, 3)


def test_an_svi_fitted_estimator_is_scored_by_evaluate(lorenz_short):
    from dsident.metrics import evaluate
    from dsident.models import PLRNN as PLRNNEstimator

    est = PLRNNEstimator(latent_dim=4, seed=0).fit(lorenz_short, method="svi", n_steps=4, window=30, batch_size=4,
                                                    eval_every=2, progress=False, hidden_dim=8, combiner_dim=8)
    scores = evaluate(est, lorenz_short, pe_steps=5)
    assert np.isfinite(float(scores["prediction_error"]))
    diverged = bool(np.asarray(scores["diverged"]).any())
    assert diverged or np.isfinite(float(scores["state_space_divergence"]))
