"""Observation models: analytic derivatives vs autograd, oracles vs scipy, masks, support, init/invert."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from dsident.observations import (OBSERVATION_REGISTRY, OBSERVATIONS, Bernoulli, Categorical, Gaussian,
                                  ObservationModel, Poisson, make_observation)

N, M = 4, 5

CASES = [
    ("gaussian", {"readout": "linear"}),
    ("gaussian", {"readout": "relu"}),
    ("gaussian", {"readout": "identity"}),
    ("poisson", {"readout": "linear", "link": "exp", "bin_size": 0.5}),
    ("poisson", {"readout": "relu", "link": "softplus", "bin_size": 2.0}),
    ("poisson", {"readout": "identity", "link": "softplus"}),
    ("bernoulli", {"readout": "linear"}),
    ("bernoulli", {"readout": "relu"}),
    ("categorical", {"readout": "linear"}),
    ("categorical", {"readout": "relu"}),
]
IDS = [f"{name}-{'-'.join(str(v) for v in kw.values())}" for name, kw in CASES]


def _model(name, kw, seed=0):
    obs = make_observation(name, N, M, **kw).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():                      # random, non-trivial parameters
        if obs.learned_loadings:
            obs.B.copy_(torch.randn(N, M, generator=g, dtype=torch.float64) * 0.7)
            obs.b.copy_(torch.randn(N, generator=g, dtype=torch.float64) * 0.3)
        if isinstance(obs, Gaussian):
            obs.log_var.copy_(torch.randn(N, generator=g, dtype=torch.float64) * 0.3)
    return obs


def _data(obs, n_rows=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n_rows, M, generator=g, dtype=torch.float64)
    z = z + 0.05 * torch.sign(z)               # keep relu kinks away from the test points
    x = obs.sample(z, generator=g)
    return x, z


def _autograd_hessian(obs, x, z, mask):
    rows = []
    for i in range(z.shape[0]):
        mi = None if mask is None else mask[i]
        rows.append(torch.autograd.functional.hessian(lambda zi: obs.log_prob(x[i], zi, mi), z[i]))
    return torch.stack(rows)


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
@pytest.mark.parametrize("masked", [False, True], ids=["full", "masked"])
def test_gradient_and_hessian_match_autograd(name, kw, masked):
    obs = _model(name, kw)
    x, z = _data(obs)
    mask = None
    if masked:
        mask = torch.rand(x.shape, generator=torch.Generator().manual_seed(3)) > 0.3
        mask[0] = True                          # one fully observed row
    zz = z.clone().requires_grad_(True)
    (g_auto,) = torch.autograd.grad(obs.log_prob(x, zz, mask).sum(), zz)
    torch.testing.assert_close(obs.grad_log_prob(x, z, mask), g_auto, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(obs.hess_log_prob(x, z, mask), _autograd_hessian(obs, x, z, mask),
                               rtol=1e-9, atol=1e-10)
    assert g_auto.abs().max() > 1e-3           # the comparison is not between two zeros


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_fisher_is_expected_negative_hessian(name, kw):
    # every Hessian here is affine in x, so E_x[-H] is -H evaluated at x = E[x | z]
    obs = _model(name, kw)
    _, z = _data(obs)
    fisher = obs.fisher_information(z)
    if name == "categorical":                 # the softmax Hessian does not depend on x at all
        expected = -obs.hess_log_prob(obs.sample(z, generator=torch.Generator().manual_seed(0)), z)
    else:                                     # E[x] need not be a valid count: use the formula directly
        jac = obs.predictor_jacobian(z)
        d2 = obs._channel_hess(obs.mean(z), obs.predictor(z))
        expected = -torch.einsum("rnm,rn,rnk->rmk", jac, d2, jac)
    torch.testing.assert_close(fisher, expected, rtol=1e-9, atol=1e-10)
    eig = torch.linalg.eigvalsh(fisher)
    assert (eig > -1e-10).all()


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_masked_fisher_leaves_out_the_masked_channels_and_checks_the_mask(name, kw):
    obs = _model(name, kw)
    _, z = _data(obs)
    mask = torch.ones(z.shape[0], N, dtype=torch.bool)
    mask[0, 1] = mask[3, 0] = False
    masked = obs.fisher_information(z, mask)
    if name == "categorical":                 # a step is one draw: a masked channel drops the row
        want = obs.fisher_information(z) * mask.all(-1).to(z.dtype)[:, None, None]
    else:                                     # independent route: the sum of one-channel informations
        jac = obs.predictor_jacobian(z)
        per_channel = obs._channel_fisher(obs.predictor(z)) * mask.to(z.dtype)
        want = torch.einsum("rnm,rn,rnk->rmk", jac, per_channel, jac)
    torch.testing.assert_close(masked, want, rtol=1e-12, atol=1e-12)
    # the mask is checked as log_prob checks it (an int mask used to crash inside torch.where or,
    # for the categorical, be taken as truthy; a wrong shape gave an expand error)
    with pytest.raises(TypeError, match="`mask` must be boolean"):
        obs.fisher_information(z, mask.long())
    with pytest.raises(ValueError, match=r"`mask` shape \(6, 2\) does not match"):
        obs.fisher_information(z, mask[:, :2])


def test_log_prob_matches_scipy():
    z = torch.randn(7, M, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    g = _model("gaussian", {"readout": "relu"})
    x = g.sample(z, generator=torch.Generator().manual_seed(1)).detach()
    mu = (torch.relu(z) @ g.B.T + g.b).detach().numpy()
    sd = g.log_var.exp().sqrt().detach().numpy()
    np.testing.assert_allclose(g.log_prob(x, z).detach().numpy(), stats.norm.logpdf(x.numpy(), mu, sd).sum(-1))

    p = _model("poisson", {"readout": "linear", "link": "softplus", "bin_size": 0.25})
    counts = p.sample(z, generator=torch.Generator().manual_seed(2))
    rate = np.log1p(np.exp((z @ p.B.T + p.b).detach().numpy())) * 0.25
    np.testing.assert_allclose(p.log_prob(counts, z).detach().numpy(), stats.poisson.logpmf(counts.numpy(), rate).sum(-1))

    b = _model("bernoulli", {"readout": "linear"})
    xb = b.sample(z, generator=torch.Generator().manual_seed(3))
    pb = 1 / (1 + np.exp(-(z @ b.B.T + b.b).detach().numpy()))
    np.testing.assert_allclose(b.log_prob(xb, z).detach().numpy(), stats.bernoulli.logpmf(xb.numpy(), pb).sum(-1))

    c = _model("categorical", {"readout": "linear"})
    xc = c.sample(z, generator=torch.Generator().manual_seed(4))
    logits = (z @ c.B.T + c.b).detach().numpy()
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(c.log_prob(xc, z).detach().numpy(), (xc.numpy() * logp).sum(-1))
    assert (xc.sum(-1) == 1).all()


@pytest.mark.parametrize("name,kw", [c for c in CASES if c[0] != "categorical"],
                         ids=[i for i, c in zip(IDS, CASES) if c[0] != "categorical"])
def test_masked_entries_change_nothing(name, kw):
    obs = _model(name, kw)
    x, z = _data(obs)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[:, 1] = False
    mask[2, :] = False
    other = x.clone()
    other[~mask] = 3.0                          # arbitrary values at masked entries
    nan = x.clone()
    nan[~mask] = float("nan")                   # NaN alone marks missing samples
    ref = obs.log_prob(x, z, mask)
    for variant, m in ((other, mask), (nan, None), (nan, mask)):
        torch.testing.assert_close(obs.log_prob(variant, z, m), ref)
        torch.testing.assert_close(obs.grad_log_prob(variant, z, m), obs.grad_log_prob(x, z, mask))
        torch.testing.assert_close(obs.hess_log_prob(variant, z, m), obs.hess_log_prob(x, z, mask))
    # the value is the sum over the observed channels only
    per_channel = torch.stack([obs.log_prob(x[:, [n]].expand(-1, N), z, _only(n, mask)) for n in range(N)], -1)
    torch.testing.assert_close(ref, per_channel.sum(-1))
    assert ref[2] == 0.0
    zz = z.clone().requires_grad_(True)
    obs.log_prob(nan, zz).sum().backward()
    assert torch.isfinite(zz.grad).all()


def _only(n, mask):
    m = torch.zeros_like(mask)
    m[:, n] = mask[:, n]
    return m


def test_categorical_row_with_a_missing_channel_is_unobserved():
    obs = _model("categorical", {"readout": "linear"})
    x, z = _data(obs)
    x[1, 0] = float("nan")
    lp = obs.log_prob(x, z)
    assert lp[1] == 0.0 and (lp[[0, 2, 3]] < 0).all()
    assert obs.grad_log_prob(x, z)[1].abs().max() == 0.0


@pytest.mark.parametrize("obs,bad,match", [
    (Poisson(2, 3), [[1.0, -1.0]], "non-negative"),
    (Poisson(2, 3), [[1.5, 0.0]], "integer"),
    (Bernoulli(2, 3), [[1.0, 2.0]], "0 or 1"),
    (Categorical(2, 3), [[1.0, 1.0]], "one-hot"),
    (Gaussian(2, 3), [[1.0, float("inf")]], "infinite"),
])
def test_support_errors_are_clear(obs, bad, match):
    z = torch.zeros(1, 3)
    with pytest.raises(ValueError, match=match):
        obs.log_prob(torch.tensor(bad), z)
    with pytest.raises(ValueError, match=match):
        obs.init_from_data(np.array(bad * 3))


def test_support_error_ignores_masked_entries():
    obs = Poisson(2, 3)
    x = torch.tensor([[1.0, -1.0]])
    assert torch.isfinite(obs.log_prob(x, torch.zeros(1, 3), torch.tensor([[True, False]]))).all()


def test_dimension_and_option_errors():
    with pytest.raises(ValueError, match="obs_dim <= latent_dim"):
        Gaussian(5, 3, readout="identity")
    with pytest.raises(ValueError, match=r"\['identity', 'linear', 'relu'\]"):
        Gaussian(2, 3, readout="tanh")
    with pytest.raises(ValueError, match="link"):
        Poisson(2, 3, link="log")
    with pytest.raises(ValueError, match="bin_size"):
        Poisson(2, 3, bin_size=0.0)
    with pytest.raises(ValueError, match="obs_dim"):
        Gaussian(0, 3)
    with pytest.raises(ValueError, match="latent_dim=3"):
        Gaussian(2, 3).log_prob(torch.zeros(1, 2), torch.zeros(1, 4))
    with pytest.raises(ValueError, match="obs_dim=2"):
        Gaussian(2, 3).log_prob(torch.zeros(1, 5), torch.zeros(1, 3))


def test_make_observation_names_and_instances():
    with pytest.raises(ValueError, match="bernoulli.*categorical.*gaussian.*poisson"):
        make_observation("gamma", 2, 3)
    with pytest.raises(TypeError, match="name"):
        make_observation(3, 2, 3)
    inst = Poisson(2, 3)
    assert make_observation(inst, 2, 3) is inst
    with pytest.raises(ValueError, match="obs_dim=2"):
        make_observation(inst, 4, 3)
    assert isinstance(make_observation("Gaussian", 2, 3, readout="relu"), Gaussian)
    assert set(OBSERVATIONS.values()) <= set(OBSERVATION_REGISTRY.values())
    assert "ReadoutObservation" not in OBSERVATION_REGISTRY


@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_config_rebuilds_the_model(name, kw):
    obs = _model(name, kw)
    clone = type(obs)(**obs.config()).double()
    clone.load_state_dict(obs.state_dict())
    x, z = _data(obs)
    torch.testing.assert_close(clone.log_prob(x, z), obs.log_prob(x, z))


def test_sampling_is_seeded():
    obs = _model("poisson", {"readout": "linear", "link": "exp"})
    z = torch.randn(10, M, dtype=torch.float64)
    a = obs.sample(z, generator=torch.Generator().manual_seed(5))
    b = obs.sample(z, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and torch.equal(a, a.round()) and (a >= 0).all()


def _low_rank_data(n_rows=400, rank=2, seed=0):
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((n_rows, rank))
    loadings = rng.standard_normal((N, rank))
    return scores @ loadings.T + np.array([1.0, -2.0, 0.5, 3.0]) + 0.01 * rng.standard_normal((n_rows, N))


def test_gaussian_init_is_pca_and_invert_reconstructs():
    x = _low_rank_data()
    obs = Gaussian(N, M, readout="linear").double().init_from_data(x)
    np.testing.assert_allclose(obs.b.detach().numpy(), x.mean(0))
    cov = np.cov(x.T, bias=True)
    B = obs.B.detach().numpy()
    np.testing.assert_allclose(B @ B.T, cov, atol=1e-10)      # M >= N: all components are kept
    xt = torch.as_tensor(x)
    torch.testing.assert_close(obs.mean(obs.invert(xt)), xt)


def test_relu_init_represents_signed_scores():
    x = _low_rank_data()
    obs = Gaussian(N, M, readout="relu").double().init_from_data(x)
    B = obs.B.detach().numpy()
    np.testing.assert_allclose(B[:, 0], -B[:, 1])              # pairs (v, -v)
    z = obs.invert(torch.as_tensor(x))
    assert (z >= 0).all()
    # 2 pairs capture the 2 main components: the reconstruction error is the small residual
    resid = (obs.mean(z).detach().numpy() - x)
    assert np.sqrt((resid ** 2).mean()) < 0.05 * x.std()


def test_invert_with_missing_channels_fits_the_observed_ones():
    x = torch.as_tensor(_low_rank_data(n_rows=20))
    obs = Gaussian(N, 2, readout="linear").double().init_from_data(x)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[:5, 0] = False
    z = obs.invert(x, mask)
    # oracle: dense least squares on the observed channels of each row
    B, b = obs.B.detach(), obs.b.detach()
    for i in range(5):
        sol = torch.linalg.lstsq(B[1:], (x[i, 1:] - b[1:])[:, None]).solution[:, 0]
        torch.testing.assert_close(z[i], sol, rtol=1e-6, atol=1e-8)
    x_nan = x.clone()
    x_nan[~mask] = float("nan")
    torch.testing.assert_close(obs.invert(x_nan), z)


def test_identity_readout_invert_is_the_first_units():
    obs = Gaussian(2, 4, readout="identity").double()
    x = torch.tensor([[1.0, 2.0], [float("nan"), -1.0]], dtype=torch.float64)
    z = obs.invert(x)
    torch.testing.assert_close(z, torch.tensor([[1.0, 2.0, 0, 0], [0.0, -1.0, 0, 0]], dtype=torch.float64))
    assert not obs.learned_loadings and "B" not in dict(obs.named_parameters())


def test_init_from_data_skips_missing_samples():
    x = _low_rank_data()
    x_missing = x.copy()
    x_missing[::7, 2] = np.nan
    obs = Gaussian(N, M).double().init_from_data(x_missing[None])    # (trial, time, channel)
    np.testing.assert_allclose(obs.b.detach().numpy(), np.nanmean(x_missing, 0))
    assert torch.isfinite(obs.B).all() and torch.isfinite(obs.log_var).all()
    with pytest.raises(ValueError, match="no observed samples"):
        Gaussian(2, 3).init_from_data(np.array([[1.0, np.nan], [2.0, np.nan]]))


def test_poisson_init_uses_log_rates_and_invert_recovers_rates():
    rng = np.random.default_rng(0)
    t = np.arange(600) * 0.05
    log_rate = np.stack([np.sin(t), np.cos(t), 0.5 * np.sin(t) + 1.0, -np.cos(t)], -1) + 2.0
    counts = rng.poisson(np.exp(log_rate))
    obs = Poisson(N, M, link="exp").double().init_from_data(counts)
    np.testing.assert_allclose(obs.b.detach().numpy(), np.log(counts + 0.5).mean(0))
    rates = obs.mean(obs.invert(torch.as_tensor(counts, dtype=torch.float64))).detach().numpy()
    np.testing.assert_allclose(rates, counts + 0.5, rtol=1e-6)     # exact: the full log-rate space is spanned


def test_bernoulli_and_categorical_init_and_invert_run():
    rng = np.random.default_rng(1)
    xb = (rng.random((200, N)) < 0.3).astype(float)
    bern = Bernoulli(N, M).double().init_from_data(xb)
    np.testing.assert_allclose(torch.sigmoid(bern.b).detach().numpy().mean(), 0.75 * 0.3 + 0.25 * 0.7, atol=0.05)
    assert (bern.mean(bern.invert(torch.as_tensor(xb))).detach().numpy().round() == xb).all()
    xc = np.eye(N)[rng.integers(0, N, 200)]
    cat = Categorical(N, M).double().init_from_data(xc)
    pred = cat.mean(cat.invert(torch.as_tensor(xc))).detach().numpy()
    assert (pred.argmax(-1) == xc.argmax(-1)).all()


class PlainGaussian(ObservationModel):
    """A likelihood that only defines log_prob (test-local): the base class supplies derivatives."""

    def __init__(self, obs_dim: int, latent_dim: int) -> None:
        super().__init__()
        self.obs_dim, self.latent_dim = obs_dim, latent_dim
        self.B = torch.nn.Parameter(torch.randn(obs_dim, latent_dim, dtype=torch.float64,
                                                generator=torch.Generator().manual_seed(0)))

    def mean(self, z):
        return torch.relu(z) @ self.B.T

    def log_prob(self, x, z, mask=None):
        lp = -0.5 * (x - self.mean(z)).square() - 0.5 * math.log(2 * math.pi)
        return (lp if mask is None else lp * mask).sum(-1)


def test_base_class_autograd_fallback_warns_and_agrees():
    plain = PlainGaussian(N, M)
    ref = Gaussian(N, M, readout="relu", noise_var=1.0).double()
    with torch.no_grad():
        ref.B.copy_(plain.B)
        ref.b.zero_()
    x, z = _data(ref)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[0, 1] = False
    with pytest.warns(RuntimeWarning, match="no analytic Hessian"):
        hess = plain.hess_log_prob(x, z, mask)
    with pytest.warns(RuntimeWarning, match="no analytic gradient"):
        grad = plain.grad_log_prob(x, z, mask)
    torch.testing.assert_close(hess, ref.hess_log_prob(x, z, mask))
    torch.testing.assert_close(grad, ref.grad_log_prob(x, z, mask))
    with pytest.warns(RuntimeWarning):
        torch.testing.assert_close(plain.fisher_information(z), ref.fisher_information(z))
