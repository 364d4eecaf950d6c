"""Teacher-forcing engine (GTF / STF): the forced loss against independent routes, the α
estimator, bounded gradients on Lorenz-63, adaptive α, best-by-D_stsp, resume and errors."""
import json
import math
import warnings

import numpy as np
import pytest
import torch

from dsident import StateSpaceModel, datasets
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.dynamics.base import LatentDynamics
from dsident.inference import get_engine
from dsident.inference.forcing_alpha import (AlphaSchedule, alpha_from_norm, estimate_alpha, jacobian_norms,
                                             make_teacher, norm_bound)
from dsident.inference.teacher_forcing import (TrainingDivergedError, _FreeRunScorer, condition_penalty,
                                               fit_teacher_forcing, teacher_forcing_loss)
from dsident.inference.training import TrainingProgress
from dsident.inference.windows import RandomWindows, make_windows
from dsident.observations import Gaussian


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lorenz():
    """The shipped Lorenz-63 training series (z-scored), float64 array (time, 3)."""
    return datasets.load("lorenz63", split="train")["x"].values[0]


def lorenz_windows(series, n_windows, length, seed=0):
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, series.shape[0] - length, size=n_windows)
    return np.stack([series[s:s + length] for s in starts])


def as_batch(windows, dtype=torch.float64):
    x = torch.as_tensor(np.nan_to_num(windows), dtype=dtype)
    return x, torch.as_tensor(np.isfinite(windows))


def periodic_data(n_time=600, dt=0.1):
    t = np.arange(n_time) * dt
    return np.stack([np.sin(t), np.cos(t)], -1)


def masked_mse(pred, target, mask):
    resid = torch.where(mask, pred - target, torch.zeros_like(target))
    return resid.square().sum() / mask.sum()


# ---------------------------------------------------------------------------------------------
# the forced loss against independent routes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("readout", ["identity", "linear"])
def test_full_forcing_every_step_is_one_step_prediction(lorenz, readout):
    dyn = ShallowPLRNN(3, 20, clip=True, seed=1).double()
    obs = Gaussian(3, 3, readout=readout).double()
    if readout == "linear":
        with torch.no_grad():                     # an invertible, non-trivial affine readout
            obs.B.copy_(torch.tensor([[1.0, 0.3, 0.0], [0.2, 0.8, -0.4], [0.0, 0.5, 1.2]]))
            obs.b.copy_(torch.tensor([0.1, -0.2, 0.3]))
    model = StateSpaceModel(dyn, obs)
    x, mask = as_batch(lorenz_windows(lorenz, 4, 30))
    # one-step prediction, computed directly: decode(f(invert(x_{t-1}))) against x_t
    B, b = obs.B.detach(), obs.b.detach()
    z_prev = torch.linalg.solve(B, (x[:, :-1] - b)[..., None])[..., 0]
    pred = model.decode(dyn.step(z_prev.reshape(-1, 3)).reshape(4, 29, 3))
    expected = masked_mse(pred, x[:, 1:], mask[:, 1:])
    gtf, _ = teacher_forcing_loss(model, x, mask, mode="generalized", alpha=1.0)
    stf, _ = teacher_forcing_loss(model, x, mask, mode="sparse", forcing_interval=1)
    torch.testing.assert_close(gtf, expected)
    torch.testing.assert_close(stf, expected)


@pytest.mark.parametrize("latent_dim", [3, 6])
def test_no_forcing_is_free_running_bptt(lorenz, latent_dim):
    model = StateSpaceModel(ShallowPLRNN(latent_dim, 20, clip=True, seed=2).double(),
                            Gaussian(3, latent_dim, readout="identity").double())
    x, mask = as_batch(lorenz_windows(lorenz, 4, 40, seed=1))
    # free run from the first sample: the observed units are x_0, the others start at 0
    z = torch.zeros(4, latent_dim, dtype=torch.float64)
    z[:, :3] = x[:, 0]
    preds = []
    for _ in range(39):
        z = model.dynamics.step(z)
        preds.append(z[:, :3])
    expected = masked_mse(torch.stack(preds, 1), x[:, 1:], mask[:, 1:])
    gtf, _ = teacher_forcing_loss(model, x, mask, mode="generalized", alpha=0.0)
    stf, _ = teacher_forcing_loss(model, x, mask, mode="sparse", forcing_interval=1000)
    torch.testing.assert_close(gtf, expected)
    torch.testing.assert_close(stf, expected)


def test_partial_forcing_with_missing_samples_matches_a_manual_loop(lorenz):
    """Identity readout, M > N: only the observed units are pulled, missing entries are neither
    forced nor scored; sparse forcing replaces them every τ steps."""
    m, alpha, tau = 5, 0.3, 4
    model = StateSpaceModel(ShallowPLRNN(m, 16, clip=True, seed=3).double(), Gaussian(3, m, readout="identity").double())
    w = lorenz_windows(lorenz, 3, 25, seed=2)
    w[0, 5, 1] = np.nan
    w[1, 7:9, :] = np.nan
    w[2, 10, 0] = np.nan
    x, mask = as_batch(w)
    for mode in ("generalized", "sparse"):
        z = torch.zeros(3, m, dtype=torch.float64)
        z[:, :3] = torch.where(mask[:, 0], x[:, 0], 0.0)
        preds = []
        for t in range(1, 25):
            z = model.dynamics.step(z)
            preds.append(z[:, :3])
            a = alpha if mode == "generalized" else float(t % tau == 0)
            pulled = (1 - a) * z[:, :3] + a * x[:, t]
            z = torch.cat([torch.where(mask[:, t], pulled, z[:, :3]), z[:, 3:]], dim=1)
        expected = masked_mse(torch.stack(preds, 1), x[:, 1:], mask[:, 1:])
        got, _ = teacher_forcing_loss(model, x, mask, mode=mode, alpha=alpha, forcing_interval=tau)
        torch.testing.assert_close(got, expected)


def test_linear_readout_forces_the_row_space_only():
    """Linear readout with M > N: z̃ = z + α B⁺(x − b − B z) (the teacher is the pseudo-inverse)."""
    rng = np.random.default_rng(0)
    n, m, alpha = 2, 4, 0.6
    obs = Gaussian(n, m, readout="linear").double()
    with torch.no_grad():
        obs.B.copy_(torch.as_tensor(rng.normal(size=(n, m))))
        obs.b.copy_(torch.as_tensor(rng.normal(size=n)))
    model = StateSpaceModel(ShallowPLRNN(m, 16, clip=True, seed=4).double(), obs)
    x, mask = as_batch(rng.normal(size=(3, 12, n)))
    Bn, bn = obs.B.detach().numpy(), obs.b.detach().numpy()
    pinv = torch.as_tensor(np.linalg.pinv(Bn))
    z = (x[:, 0] - torch.as_tensor(bn)) @ pinv.T
    preds = []
    for t in range(1, 12):
        z = model.dynamics.step(z)
        preds.append(z)
        z = z + alpha * (x[:, t] - torch.as_tensor(bn) - z @ torch.as_tensor(Bn).T) @ pinv.T
    expected = masked_mse(model.decode(torch.stack(preds, 1)), x[:, 1:], mask[:, 1:])
    got, _ = teacher_forcing_loss(model, x, mask, alpha=alpha)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("n", [1, 5, 62, 70])
def test_mask_patterns_are_the_distinct_rows(n):
    from dsident.inference.forcing_alpha import mask_patterns

    gen = torch.Generator().manual_seed(n)
    # few distinct rows among many, as in a window of data with some missing channels
    rows = torch.rand(6, n, generator=gen) > 0.5
    mask = rows[torch.randint(0, 6, (500,), generator=gen)]
    patterns, index = mask_patterns(mask)
    assert patterns.dtype == torch.bool and index.shape == (500,)
    assert torch.equal(patterns[index], mask)
    reference, _ = torch.unique(mask, dim=0, return_inverse=True)
    assert len(patterns) == len(reference)
    assert {tuple(r.tolist()) for r in patterns} == {tuple(r.tolist()) for r in reference}


# ---------------------------------------------------------------------------------------------
# the α estimator
# ---------------------------------------------------------------------------------------------
def test_jacobian_bound_matches_numpy_svd_of_autograd_jacobians():
    dyn = ShallowPLRNN(4, 12, clip=True, seed=5).double()
    z = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    norms = jacobian_norms(dyn, z)
    expected = np.empty((3, 7))
    for b in range(3):
        for t in range(7):
            jac = torch.autograd.functional.jacobian(lambda v: dyn.step(v[None])[0], z[b, t])
            expected[b, t] = np.linalg.svd(jac.numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(norms.numpy(), expected, rtol=1e-10)
    geo = np.exp(np.log(expected).mean(1)).max()
    assert norm_bound(norms, "product_bound") == pytest.approx(geo, rel=1e-12)
    assert norm_bound(norms, "batch_maximum") == pytest.approx(expected.max(), rel=1e-12)
    alpha, bound = estimate_alpha(dyn, z)
    assert bound == pytest.approx(geo, rel=1e-12)
    assert alpha == pytest.approx(max(0.0, 1 - 1 / geo), rel=1e-12)


def test_alpha_rule_and_schedule():
    assert alpha_from_norm(0.5) == 0.0
    assert alpha_from_norm(4.0) == pytest.approx(0.75)
    assert alpha_from_norm(math.inf) == 1.0
    s = AlphaSchedule(initial=0.5, decay=0.9)
    assert s.update(0.5, 0.8) == 0.8                          # a larger estimate is taken at once
    assert s.update(0.5, 0.1) == pytest.approx(0.9 * 0.5 + 0.1 * 0.1)
    assert AlphaSchedule(initial=0.5, adaptive=False).update(0.5, 0.9) == 0.5
    with pytest.raises(ValueError, match="alpha_decay"):
        AlphaSchedule(decay=1.0)
    with pytest.raises(ValueError, match="alpha_method"):
        AlphaSchedule(method="spectral")
    annealed = AlphaSchedule(initial=0.4, adaptive=False, end=0.1, n_epochs=3)
    assert [annealed.at_epoch(e) for e in range(4)] == pytest.approx([0.4, 0.2, 0.1, 0.1])
    with pytest.raises(ValueError, match="anneals a constant"):
        AlphaSchedule(initial=0.4, adaptive=True, end=0.1)


class ScaledLorenzEuler(LatentDynamics):
    """Euler steps of Lorenz-63 in the z-scored coordinates of the shipped data: a perfect
    (chaotic) model of the Lorenz-63 windows, with (sigma, rho, beta) as its parameters."""

    def __init__(self, latent_dim: int = 3, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), step_size: float = 0.01):
        super().__init__()
        self.latent_dim, self.step_size = latent_dim, step_size
        self.mean, self.std = tuple(mean), tuple(std)
        self.sigma = torch.nn.Parameter(torch.tensor(10.0, dtype=torch.float64))
        self.rho = torch.nn.Parameter(torch.tensor(28.0, dtype=torch.float64))
        self.beta = torch.nn.Parameter(torch.tensor(8 / 3, dtype=torch.float64))

    def step(self, z, u=None, dt=None):
        mean, std = torch.tensor(self.mean, dtype=z.dtype), torch.tensor(self.std, dtype=z.dtype)
        x, y, w = (z * std + mean).unbind(-1)
        f = torch.stack([self.sigma * (y - x), x * (self.rho - w) - y, x * y - self.beta * w], -1)
        return z + self.step_size * f / std


def _grad_norm(model, x, mask, alpha):
    model.zero_grad()
    loss, _ = teacher_forcing_loss(model, x, mask, alpha=alpha)
    loss.backward()
    return float(torch.sqrt(sum(p.grad.square().sum() for p in model.dynamics.parameters())))


def test_gradients_stay_bounded_with_alpha_from_the_jacobian_bound():
    """GTF theorem: with α = 1 − 1/G, G bounding every Jacobian on the trajectory, the gradient
    norm does not grow with the window length; without forcing it explodes (chaos)."""
    train = datasets.load("lorenz63", split="train")
    zscore = json.loads(train.attrs["preprocessing"])[0]
    dyn = ScaledLorenzEuler(mean=zscore["mean"], std=zscore["std"], step_size=train.attrs["dt"])
    model = StateSpaceModel(dyn, Gaussian(3, 3, readout="identity").double())
    series = train["x"].values[0]
    norms, alphas = {}, {}
    for length in (50, 400):
        x, mask = as_batch(lorenz_windows(series, 16, length, seed=0))
        teacher = make_teacher(model.observation, x, mask)
        alphas[length], bound = estimate_alpha(dyn, teacher.z_hat[:, :-1], method="batch_maximum")
        assert bound > 1.05                          # expanding steps: the forcing has work to do
        norms[length] = (_grad_norm(model, x, mask, alphas[length]), _grad_norm(model, x, mask, 0.0))
    assert alphas[400] == pytest.approx(alphas[50], abs=0.05)
    forced_ratio = norms[400][0] / norms[50][0]
    free_ratio = norms[400][1] / norms[50][1]
    assert forced_ratio < 2.5
    assert free_ratio > 20.0


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------
def test_adaptive_alpha_decreases_as_the_model_learns_a_periodic_signal():
    """An expanding initial model needs strong forcing; once it has learned the rotation of a
    sine/cosine pair (Jacobian norms near 1) the Jacobian bound, and α with it, fall."""
    dyn = ShallowPLRNN(2, 16, clip=True, seed=1)
    with torch.no_grad():
        dyn.W1.mul_(3.0)                             # start expanding: a large α estimate
    model = StateSpaceModel(dyn, Gaussian(2, 2, readout="identity"), dt=0.1)
    data = periodic_data()
    states = torch.as_tensor(data[None, :100], dtype=torch.float32)

    def one_step_error():
        with torch.no_grad():
            return float((dyn.step(states[0, :-1]) - states[0, 1:]).square().mean())

    alpha_before, error_before = estimate_alpha(dyn, states)[0], one_step_error()
    history = fit_teacher_forcing(model, data, alpha="adaptive", alpha_initial=1.0, alpha_decay=0.8,
                                  alpha_update_every=2, seq_len=20, batch_size=8, batches_per_epoch=10,
                                  n_epochs=4, lr=1e-2, lr_end=2e-3, optimizer="adam", eval_every=0, seed=0,
                                  progress=False)
    alpha_after, error_after = estimate_alpha(dyn, states)[0], one_step_error()
    est, alphas = np.array(history["alpha_estimate"]), np.array(history["alpha_after_update"])
    assert len(est) == len(alphas) == 4 * 10 // 2 and history["alpha_update_batch"][:2] == [2, 4]
    assert error_after < 0.05 * error_before                # the model has learned the signal ...
    assert alpha_before > 0.3
    assert alpha_after < 0.5 * alpha_before                 # ... and needs less forcing
    assert est[-3:].mean() < 0.7 * est[:3].mean()           # the logged estimates fall with it
    assert alphas[-1] < 0.5 * alphas[0]
    assert history["alpha"][-1] == pytest.approx(alphas[-1])


def test_best_state_by_state_space_divergence_is_restored():
    model = StateSpaceModel(ShallowPLRNN(2, 16, clip=True, seed=1), Gaussian(2, 2, readout="identity"), dt=0.1)
    data = periodic_data()
    history = fit_teacher_forcing(model, data, alpha=0.3, seq_len=30, batch_size=8, batches_per_epoch=5,
                                  n_epochs=6, lr=1e-2, optimizer="adam", eval_every=2, eval_steps=300, seed=0,
                                  progress=False)
    scores = np.array(history["state_space_divergence"])
    assert history["eval_epoch"] == [1, 3, 5]
    assert np.isfinite(scores).sum() >= 2
    assert history["best_state_space_divergence"] == np.nanmin(scores)
    assert history["best_epoch"] == history["eval_epoch"][int(np.nanargmin(scores))]
    from dsident.data import as_dataset
    rescored, _ = _FreeRunScorer(as_dataset(data, dt=0.1), 300, burn_in=75).score(model, seed=0)
    assert rescored == pytest.approx(np.nanmin(scores))


@pytest.mark.parametrize("alpha", [0.3, 1.0])
def test_warmup_equals_starting_the_window_later_when_forcing_is_exact(alpha):
    """With every unit read (identity readout, M = N) full forcing replaces the state, so after a
    warm-up of k steps the rollout is the one that starts at sample k: the loss with warmup=k
    on x equals the loss without warm-up on x[:, k:], and the first k samples do not matter."""
    from dsident.inference.teacher_forcing import teacher_forcing_loss

    torch.manual_seed(0)
    model = StateSpaceModel(ShallowPLRNN(2, 8, seed=3), Gaussian(2, 2, readout="identity"), dt=0.1).double()
    x = torch.as_tensor(periodic_data(40)[None].repeat(3, 0)) + 0.05 * torch.randn(3, 40, 2, dtype=torch.float64)
    mask = torch.ones_like(x, dtype=torch.bool)
    k = 7
    with torch.no_grad():
        with_warmup, _ = teacher_forcing_loss(model, x, mask, alpha=alpha, warmup=k)
        later, _ = teacher_forcing_loss(model, x[:, k:], mask[:, k:], alpha=alpha)
    assert float(with_warmup) == pytest.approx(float(later), rel=1e-12)
    shuffled = x.clone()
    shuffled[:, :k] = torch.randn(3, k, 2, dtype=torch.float64)
    with torch.no_grad():
        assert float(teacher_forcing_loss(model, shuffled, mask, alpha=alpha, warmup=k)[0]) == pytest.approx(
            float(with_warmup), rel=1e-12)
        if alpha < 1.0:                                  # without warm-up the early samples do matter
            assert float(teacher_forcing_loss(model, shuffled, mask, alpha=alpha)[0]) != pytest.approx(
                float(teacher_forcing_loss(model, x, mask, alpha=alpha)[0]), rel=1e-6)


def test_warmup_must_leave_steps_to_score():
    model = StateSpaceModel(ShallowPLRNN(2, 8, seed=3), Gaussian(2, 2, readout="identity"), dt=0.1)
    with pytest.raises(ValueError, match="`warmup` must be smaller than seq_len - 1 = 19"):
        get_engine("teacher-forcing")(model, periodic_data(), seq_len=20, warmup=19, n_epochs=1, progress=False)
    with pytest.raises(ValueError, match="warmup"):
        get_engine("teacher-forcing")(model, periodic_data(), seq_len=20, warmup=-1, n_epochs=1, progress=False)


@pytest.mark.parametrize("a, h, label", [(0.0, 5.0, "off grid"), (2.0, 0.0, "diverged")])
def test_free_run_scorer_tells_off_grid_from_diverged(a, h, label):
    """A bounded run that never meets the data's grid (a fixed point at 5 beside data in [-1, 1])
    scores NaN and reads "off grid"; a run that grows without bound scores inf and reads "diverged"."""
    from dsident.data import as_dataset
    from dsident.inference.training import TrainingProgress

    dyn = PLRNN(2, seed=0)
    with torch.no_grad():
        dyn.a.fill_(a)
        dyn.W.zero_()
        dyn.h.fill_(h)
    model = StateSpaceModel(dyn, Gaussian(2, 2, readout="identity"), dt=0.1)
    scorer = _FreeRunScorer(as_dataset(periodic_data(), dt=0.1), 300, burn_in=75)
    result = scorer(model, TrainingProgress())
    assert (math.isnan(result.score) if label == "off grid" else math.isinf(result.score))
    assert result.shown["D_stsp"] == label
    if label == "diverged":
        assert math.isnan(result.values["power_spectrum_distance"])


def test_resume_continues_exactly(tmp_path):
    data = periodic_data(300)
    # a constant learning rate: the decay schedule depends on n_epochs, which differs between the calls
    kwargs = dict(alpha="adaptive", seq_len=20, batch_size=4, batches_per_epoch=3, lr=3e-3, lr_end=None, eval_every=2,
                  eval_steps=100, seed=3, progress=False)

    def fresh():
        return StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=2), Gaussian(2, 2, readout="identity"), dt=0.1)

    straight = fresh()
    h_straight = fit_teacher_forcing(straight, data, n_epochs=4, eval_every=2, **{k: v for k, v in kwargs.items()
                                                                               if k != "eval_every"})
    ckpt = tmp_path / "tf.pt"
    first = fresh()
    fit_teacher_forcing(first, data, n_epochs=2, checkpoint=ckpt, **kwargs)
    resumed = fresh()
    h_resumed = fit_teacher_forcing(resumed, data, n_epochs=4, checkpoint=ckpt, **kwargs)
    assert h_resumed["resumed_from_epoch"] == 2
    assert h_resumed["epoch"] == [0, 1, 2, 3]
    np.testing.assert_allclose(h_resumed["train_loss"], h_straight["train_loss"], rtol=1e-6)
    np.testing.assert_allclose(h_resumed["alpha_after_update"], h_straight["alpha_after_update"], rtol=1e-6)
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


def _alphas_forced_with(monkeypatch) -> list:
    """The α of every teacher_forcing_loss call from now on, in order (a spy on the engine's loss)."""
    import dsident.inference.teacher_forcing as tf
    used = []
    real = tf.teacher_forcing_loss

    def spy(*args, **kwargs):
        used.append(kwargs["alpha"])
        return real(*args, **kwargs)

    monkeypatch.setattr(tf, "teacher_forcing_loss", spy)
    return used


def test_annealed_alpha_follows_its_geometric_schedule_and_forces_with_it(monkeypatch):
    used = _alphas_forced_with(monkeypatch)
    model = StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=0), Gaussian(2, 2, readout="identity"), dt=0.1)
    n_epochs, per_epoch = 4, 3
    history = fit_teacher_forcing(model, periodic_data(300), alpha=0.4, alpha_end=0.05, n_epochs=n_epochs,
                                  batches_per_epoch=per_epoch, batch_size=2, seq_len=20, eval_every=0, seed=0,
                                  progress=False)
    # epoch e: 0.4 · (0.05 / 0.4) ** (e / 3) = 0.4 · 2 ** (−e): 0.4, 0.2, 0.1, 0.05
    expected = [0.4 / 2 ** e for e in range(n_epochs)]
    np.testing.assert_allclose(history["alpha"], expected, rtol=1e-12)
    np.testing.assert_allclose(used, np.repeat(expected, per_epoch), rtol=1e-12)
    assert history["settings"]["alpha_end"] == 0.05


def test_resume_of_an_annealed_alpha_continues_exactly(tmp_path):
    data = periodic_data(300)
    kwargs = dict(alpha=0.5, alpha_end=0.1, n_epochs=4, seq_len=20, batch_size=4, batches_per_epoch=3, lr=3e-3,
                  eval_every=0, seed=3, progress=False)

    def fresh():
        return StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=2), Gaussian(2, 2, readout="identity"), dt=0.1)

    straight = fresh()
    h_straight = fit_teacher_forcing(straight, data, **kwargs)
    ckpt = tmp_path / "tf.pt"
    # stopped after epoch 1 of the same 4-epoch schedule, then resumed
    fit_teacher_forcing(fresh(), data, checkpoint=ckpt, checkpoint_every=1, callback=lambda e, r, m: e == 1, **kwargs)
    resumed = fresh()
    h_resumed = fit_teacher_forcing(resumed, data, checkpoint=ckpt, **kwargs)
    assert h_resumed["resumed_from_epoch"] == 2
    np.testing.assert_allclose(h_resumed["alpha"], h_straight["alpha"], rtol=1e-12)
    np.testing.assert_allclose(h_resumed["train_loss"], h_straight["train_loss"], rtol=1e-6)
    for (name, a), b in zip(straight.state_dict().items(), resumed.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("first, then, expected", [
    ({"alpha": 0.5}, {"alpha": 0.2}, [0.5, 0.5, 0.2, 0.2]),
    # 0.4 → 0.05 over 4 epochs halves α each epoch; resumed at epoch 2 with 0.8 → 0.1: 0.2, 0.1
    ({"alpha": 0.4, "alpha_end": 0.05}, {"alpha": 0.8, "alpha_end": 0.1}, [0.4, 0.2, 0.2, 0.1])])
def test_a_resume_with_another_constant_alpha_forces_with_it(tmp_path, monkeypatch, first, then, expected):
    used = _alphas_forced_with(monkeypatch)
    kwargs = dict(n_epochs=4, seq_len=20, batch_size=2, batches_per_epoch=3, eval_every=0, seed=3, progress=False)
    ckpt = tmp_path / "tf.pt"
    model = StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=2), Gaussian(2, 2, readout="identity"), dt=0.1)
    fit_teacher_forcing(model, periodic_data(300), checkpoint=ckpt, checkpoint_every=1,
                        callback=lambda e, r, m: e == 1, **first, **kwargs)
    used.clear()
    history = fit_teacher_forcing(model, periodic_data(300), checkpoint=ckpt, **then, **kwargs)
    assert history["resumed_from_epoch"] == 2 and history["settings"]["alpha"] == then["alpha"]
    # the α each resumed batch was forced with is the one this call asked for, and the history says so
    np.testing.assert_allclose(used, np.repeat(expected[2:], 3), rtol=1e-12)
    np.testing.assert_allclose(history["alpha"], expected, rtol=1e-12)


def test_checkpoint_of_another_engine_is_refused(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"format": "dsident-training-checkpoint", "engine": "bptt"}, path)
    model = StateSpaceModel(ShallowPLRNN(2, 8, seed=0), Gaussian(2, 2, readout="identity"))
    with pytest.raises(ValueError, match="engine 'bptt'"):
        fit_teacher_forcing(model, periodic_data(100), n_epochs=1, checkpoint=path, progress=False)


def test_divergence_is_detected_and_reported():
    dyn = PLRNN(2, penalty="none", seed=0)
    dyn.set_params(A=np.full(2, 3.0), W=np.zeros((2, 2)), h=np.zeros(2))   # |z| grows as 3^t
    model = StateSpaceModel(dyn, Gaussian(2, 2, readout="identity"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(TrainingDivergedError, match="not finite|became"):
        fit_teacher_forcing(model, periodic_data(300), alpha=0.0, seq_len=200, batches_per_epoch=2, n_epochs=1,
                            eval_every=0, on_divergence="raise", progress=False)
    for k, v in model.state_dict().items():                 # no step was taken with a non-finite loss
        torch.testing.assert_close(v, before[k])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = fit_teacher_forcing(model, periodic_data(300), alpha=0.0, seq_len=200, batches_per_epoch=2,
                                      n_epochs=1, eval_every=0, progress=False)
    assert history["diverged"] and any(issubclass(w.category, RuntimeWarning) for w in caught)


def test_engine_registry_and_estimator_fit():
    assert get_engine("gtf") is fit_teacher_forcing and get_engine("teacher-forcing") is fit_teacher_forcing
    from dsident.models import ShallowPLRNN as ShallowPLRNNEstimator
    est = ShallowPLRNNEstimator(latent_dim=2, hidden_dim=8, clip=True, seed=0)
    est.fit(periodic_data(200), method="gtf", n_epochs=1, batches_per_epoch=2, seq_len=20, eval_every=1,
            eval_steps=50, progress=False)
    assert est.history_["settings"]["engine"] == "teacher-forcing"
    assert np.isfinite(est.history_["state_space_divergence"][0])


@pytest.mark.parametrize("name", ["RecurrentFWP", "ORGaNICs"])
def test_auto_loss_sees_the_gaussian_behind_a_feature_wrapper(name):
    # the ODE-RFWP and ORGaNICs read their Gaussian through LatentFeatureObservation: "auto" must
    # train them on the masked MSE like every other Gaussian model; the same fit with loss="mse"
    # is the independent route
    import dsident.models

    def fit(loss):
        est = getattr(dsident.models, name)(latent_dim=2, seed=0)
        est.fit(periodic_data(200), method="gtf", n_epochs=1, batches_per_epoch=2, seq_len=20, eval_every=0,
                progress=False, loss=loss)
        return est.history_

    auto, mse, nll = fit("auto"), fit("mse"), fit("nll")
    assert auto["settings"]["loss"] == "mse"
    np.testing.assert_allclose(auto["train_loss"], mse["train_loss"], rtol=1e-6)
    assert not np.allclose(auto["train_loss"], nll["train_loss"])


class _Logistic(LatentDynamics):
    """z' = 4 z (1 - z) (test-local): the logistic map at r = 4, chaotic with λ = log 2 per step."""

    def __init__(self) -> None:
        super().__init__()
        self.latent_dim, self.input_dim = 1, 0

    def step(self, z, u=None, dt=None):
        return 4.0 * z * (1.0 - z)


class _Rotation(LatentDynamics):
    """z' = R(0.1) z (test-local): a rotation, both exponents exactly 0; subclasses scale the
    rotated state by :meth:`gain` of its radius."""

    def __init__(self) -> None:
        super().__init__()
        self.latent_dim, self.input_dim = 2, 0

    def gain(self, r):
        return torch.ones_like(r)

    def step(self, z, u=None, dt=None):
        c, s = math.cos(0.1), math.sin(0.1)
        rotated = torch.stack([c * z[:, 0] - s * z[:, 1], s * z[:, 0] + c * z[:, 1]], dim=1)
        return rotated * self.gain(z.norm(dim=1, keepdim=True))


@pytest.mark.parametrize("kind", ["chaotic", "periodic"])
def test_select_regime_scorer_ranks_the_wrong_kind_after_every_right_one(kind):
    """The logistic map at r = 4 reads "chaotic" and a rotation "periodic or quasi-periodic"
    (their exponents are log 2 and 0); only the asked-for kind keeps its D_stsp as its score."""
    from dsident.data import as_dataset
    from dsident.inference.teacher_forcing import _WRONG_REGIME_OFFSET
    from dsident.inference.training import TrainingProgress

    z = [0.3]
    for _ in range(1999):
        z.append(4.0 * z[-1] * (1.0 - z[-1]))
    cases = {"chaotic": (StateSpaceModel(_Logistic(), Gaussian(1, 1, readout="identity"), dt=1.0).double(),
                         as_dataset(np.array(z)[:, None], dt=1.0)),
             "periodic": (StateSpaceModel(_Rotation(), Gaussian(2, 2, readout="identity"), dt=1.0).double(),
                          as_dataset(periodic_data(2000, dt=0.1), dt=1.0))}
    for name, (model, data) in cases.items():
        scorer = _FreeRunScorer(data, 1000, burn_in=250, regime=kind)
        result = scorer(model, TrainingProgress())
        d_stsp = result.values["state_space_divergence"]
        assert math.isfinite(d_stsp)
        assert result.values["free_run_regime"] == ("chaotic" if name == "chaotic" else "periodic or quasi-periodic")
        assert result.score == (d_stsp if name == kind else d_stsp + _WRONG_REGIME_OFFSET)
        # without select_regime the score is D_stsp and no spectrum is computed
        plain = _FreeRunScorer(data, 1000, burn_in=250)(model, TrainingProgress())
        assert plain.score == d_stsp and "free_run_regime" not in plain.values


def _scripted_fit(monkeypatch, answer, **kwargs):
    """A small fit whose free-run verdicts are scripted: ``answer(call index) -> verdict``."""
    calls = []

    def verdict(self, model, seed, x0=None, run=None):
        calls.append(len(calls))
        return answer(len(calls) - 1)

    monkeypatch.setattr(_FreeRunScorer, "verdict", verdict)
    model = StateSpaceModel(ShallowPLRNN(2, 16, clip=True, seed=1), Gaussian(2, 2, readout="identity"), dt=0.1)
    history = fit_teacher_forcing(model, periodic_data(), alpha=0.3, seq_len=30, batch_size=8, batches_per_epoch=5,
                                  n_epochs=8, lr=1e-2, optimizer="adam", eval_every=2, eval_steps=300, seed=0,
                                  progress=False, **kwargs)
    return model, history


def test_select_regime_keeps_the_best_run_of_the_asked_for_kind_else_the_best_run(monkeypatch):
    from dsident.data import as_dataset

    _, plain = _scripted_fit(monkeypatch, lambda i: "chaotic")
    scores = np.array(plain["state_space_divergence"])
    finite = np.flatnonzero(np.isfinite(scores))
    assert finite.size >= 2 and "regime_fallback" not in plain
    # only the worst finite run (a verdict is asked for finite runs only, in order) has the kind
    worst = int(finite[np.argmax(scores[finite])])
    call_of_worst = int(np.flatnonzero(finite == worst)[0])
    model, chosen = _scripted_fit(monkeypatch, lambda i: "periodic or quasi-periodic" if i == call_of_worst
                                  else "chaotic", select_regime="periodic")
    np.testing.assert_array_equal(chosen["state_space_divergence"], scores)        # the same training
    assert chosen["best_epoch"] == chosen["eval_epoch"][worst] != plain["best_epoch"]
    assert chosen["best_state_space_divergence"] == scores[worst] and chosen["regime_fallback"] is False
    assert chosen["free_run_regime"].count("periodic or quasi-periodic") == 1
    rescored, _ = _FreeRunScorer(as_dataset(periodic_data(), dt=0.1), 300, burn_in=75).score(model, seed=0)
    assert rescored == pytest.approx(scores[worst])
    # no run of the kind: the lowest D_stsp, as without the option, and a warning that says so
    with pytest.warns(RuntimeWarning, match="no scored free run settled on that kind"):
        _, fallback = _scripted_fit(monkeypatch, lambda i: "chaotic", select_regime="periodic")
    assert fallback["best_epoch"] == plain["best_epoch"] and fallback["regime_fallback"] is True
    assert fallback["best_state_space_divergence"] == plain["best_state_space_divergence"]


class _TwoBasins(_Rotation):
    """(test-local) A rotation whose radius is pulled to 1 from 0.3 <= r < 1.1, halves below 0.3
    and drops to a fifth from r >= 1.1 (below 0.3 at once): a circle and, beside it, a fixed
    point at the origin."""

    def gain(self, r):
        r = r.clamp_min(1e-12)
        return torch.where(r < 0.3, 0.5 * r, torch.where(r < 1.1, r + 0.5 * (1.0 - r), 0.2 * r)) / r


def test_eval_starts_see_an_attractor_that_one_start_misses():
    """Data: a unit circle, then a circle of radius 1.2. From the first sample the model's run
    stays on the data's circle; from the second half's samples it falls to the origin. One
    start scores it well; two starts (at samples 0 and n/2) score the mean of both runs."""
    from dsident.data import as_dataset
    from dsident.inference.training import TrainingProgress

    n = 2000
    x = periodic_data(n, dt=0.1)
    x[n // 2:] *= 1.2
    data = as_dataset(x, dt=1.0)
    model = StateSpaceModel(_TwoBasins(), Gaussian(2, 2, readout="identity"), dt=1.0).double()
    one = _FreeRunScorer(data, 800, burn_in=200)
    two = _FreeRunScorer(data, 800, burn_in=200, n_starts=2)
    assert one.starts == [0] and two.starts == [0, n // 2]
    np.testing.assert_array_equal(two.reference, one.reference)
    single = one(model, TrainingProgress())
    assert single.score < 0.5 and "worst_state_space_divergence" not in single.values
    # each start scored on its own is the independent route to the mean and the worst
    on_circle, _ = one.score(model, 0, x[0])
    at_origin, _ = one.score(model, 0, x[n // 2])
    assert on_circle == pytest.approx(single.score) and not at_origin < 10 * on_circle
    both = two(model, TrainingProgress())
    np.testing.assert_equal(both.values["state_space_divergence"], np.mean([on_circle, at_origin]))
    np.testing.assert_equal(both.values["worst_state_space_divergence"], at_origin)
    assert not both.score < 5 * single.score
    with pytest.raises(ValueError, match="`eval_starts` asks for 3 free-run starts.*at most 2 fully observed"):
        _FreeRunScorer(as_dataset(np.vstack([x[:2], np.full((5, 2), np.nan)]), dt=1.0), 5, burn_in=0, n_starts=3)


def test_a_longest_trial_without_a_complete_sample_leaves_the_scoring_to_a_trial_that_has_them():
    from dsident.data import as_dataset

    # ragged trials: the longest lacks its second channel throughout; the fit used to stop with
    # "no fully observed sample" though the shorter trial is complete
    x = periodic_data(600)
    gappy = x.copy()
    gappy[:, 1] = np.nan
    ds = as_dataset([gappy, x[:300]], dt=0.1)
    scorer = _FreeRunScorer(ds, 200, burn_in=50)
    # the independent route: the complete trial alone
    alone = _FreeRunScorer(as_dataset(x[:300], dt=0.1), 200, burn_in=50)
    np.testing.assert_array_equal(scorer.reference, alone.reference)
    assert scorer.starts == alone.starts and np.array_equal(scorer.x0s, alone.x0s)
    model = StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=0), Gaussian(2, 2, readout="identity"), dt=0.1)
    history = fit_teacher_forcing(model, ds, n_epochs=1, batches_per_epoch=2, seq_len=20, eval_every=1,
                                  eval_steps=200, seed=0, progress=False)
    assert len(history["state_space_divergence"]) == 1
    with pytest.raises(ValueError, match="`eval_data` has no fully observed sample .* in any trial"):
        _FreeRunScorer(as_dataset([gappy], dt=0.1), 200, burn_in=50)


class _BlowsUpOutside(_Rotation):
    """(test-local) A rotation that grows tenfold a step outside the circle of radius 1.5 (so it
    overflows within ≈ 300 steps) and keeps its radius inside."""

    def gain(self, r):
        return torch.where(r > 1.5, 10.0, 1.0).to(r)


def test_eval_starts_run_as_one_batch_and_keep_their_own_divergence():
    from dsident.data import as_dataset

    n = 1000
    x = periodic_data(n, dt=0.1)
    x[n // 2:] *= 2.0                    # starts in the second half have |z| = 2: they blow up
    data = as_dataset(x, dt=1.0)
    model = StateSpaceModel(_BlowsUpOutside(), Gaussian(2, 2, readout="identity"), dt=1.0).double()
    scorer = _FreeRunScorer(data, 400, burn_in=100, n_starts=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        batched = scorer.free_runs(model, 0)
        one_by_one = [scorer.free_run(model, 0, x0) for x0 in scorer.x0s]
    assert [r.attrs["diverged"] for r in batched] == [r.attrs["diverged"] for r in one_by_one] == [0, 1]
    assert batched[1].attrs["diverged_at"] == one_by_one[1].attrs["diverged_at"] > 0
    for got, want in zip(batched, one_by_one):
        assert got.sizes == want.sizes
        np.testing.assert_array_equal(got["x"].values, want["x"].values)
    assert [scorer.score(model, 0, run=r)[0] for r in batched] == \
        [scorer.score(model, 0, run=r)[0] for r in one_by_one]
    assert math.isfinite(scorer.score(model, 0, run=batched[0])[0])
    assert scorer(model, TrainingProgress()).score == math.inf


def test_eval_starts_in_a_fit():
    from dsident.data import as_dataset

    model = StateSpaceModel(ShallowPLRNN(2, 16, clip=True, seed=1), Gaussian(2, 2, readout="identity"), dt=0.1)
    history = fit_teacher_forcing(model, periodic_data(), alpha=0.3, seq_len=30, batch_size=8, batches_per_epoch=5,
                                  n_epochs=8, lr=1e-2, eval_every=2, eval_steps=300, eval_starts=3, seed=0,
                                  progress=False)
    assert history["settings"]["eval_starts"] == 3
    mean, worst = np.array(history["state_space_divergence"]), np.array(history["worst_state_space_divergence"])
    assert len(worst) == len(mean) == len(history["eval_epoch"]) == 4
    finite = np.isfinite(mean)
    assert finite.any() and np.all(worst[finite] >= mean[finite])
    # the kept state is the lowest mean, and rescoring it from the three starts gives that mean
    scorer = _FreeRunScorer(as_dataset(periodic_data(), dt=0.1), 300, burn_in=75, n_starts=3)
    assert history["best_state_space_divergence"] == np.nanmin(mean)
    rescored = np.mean([scorer.score(model, 0, x0)[0] for x0 in scorer.x0s])
    assert rescored == pytest.approx(np.nanmin(mean))
    driven = StateSpaceModel(ShallowPLRNN(2, 8, input_dim=1, seed=0), Gaussian(2, 2, readout="identity"), dt=0.1)
    with_input = as_dataset(periodic_data(200), dt=0.1, u=np.ones((200, 1)))
    for option, match in (("eval_starts", "`eval_starts` > 1 needs an autonomous model"),
                          ("select_regime", "`select_regime` needs an autonomous model")):
        value = 2 if option == "eval_starts" else "chaotic"
        with pytest.raises(ValueError, match=match):
            fit_teacher_forcing(driven, with_input, n_epochs=1, progress=False, **{option: value})


@pytest.mark.parametrize("kwargs, match", [
    ({"eval_starts": 0}, "`eval_starts` must be an integer >= 1"),
    ({"select_regime": "sometimes"}, "`select_regime` must be one of"),
    ({"select_regime": "chaotic", "eval_every": 0}, "needs eval_every > 0"),
    ({"mode": "dense"}, "`mode`"),
    ({"alpha": 1.5}, "`alpha`"),
    ({"alpha": "auto"}, "`alpha`"),
    ({"alpha": True}, "`alpha` must be a number in"),         # not read as 1.0
    ({"alpha_initial": 2.0}, r"`alpha_initial` \(where the adaptive α starts\) must be a number in \[0, 1\]; got "
                             "alpha_initial=2.0"),
    ({"eval_data": np.zeros((100, 1))}, "`eval_data` has 1 channels"),
    ({"alpha": "adaptive", "alpha_end": 0.1}, "`alpha_end` anneals a constant `alpha`"),
    ({"alpha_end": 0.1, "mode": "sparse"}, "`alpha_end` anneals a constant `alpha`"),
    ({"alpha": 0.3, "mode": "sparse"}, r"sparse forcing .* takes no alpha: got alpha=0.3 with mode='sparse'"),
    ({"alpha": 0.3, "alpha_end": 0.0}, r"`alpha_end` must be a number in \(0, 1\]"),
    ({"alpha": 0.0, "alpha_end": 0.1}, "and `alpha` positive"),
    ({"seq_len": 1}, "`seq_len`"),
    ({"lr": -1.0}, "`lr`"),
    ({"eval_every": -1}, "`eval_every`"),
    ({"loss": "l1"}, "`loss`"),
])
def test_bad_options_are_refused(kwargs, match):
    model = StateSpaceModel(ShallowPLRNN(2, 8, seed=0), Gaussian(2, 2, readout="identity"))
    with pytest.raises(ValueError, match=match):
        fit_teacher_forcing(model, periodic_data(100), n_epochs=1, progress=False, **kwargs)


def test_channel_mismatch_is_refused():
    model = StateSpaceModel(ShallowPLRNN(3, 8, seed=0), Gaussian(3, 3, readout="identity"))
    with pytest.raises(ValueError, match="2 channels"):
        fit_teacher_forcing(model, periodic_data(100), n_epochs=1, progress=False)


# ---------------------------------------------------------------------------------------------
# pieces: the affine-readout penalty, windows of irregular data, other dynamics
# ---------------------------------------------------------------------------------------------
def test_condition_penalty_of_learned_loadings_only():
    obs = Gaussian(2, 3, readout="linear")
    with torch.no_grad():
        obs.B.copy_(torch.tensor([[3.0, 0.0, 0.0], [0.0, 0.5, 0.0]]))   # singular values 3 and 0.5
    assert float(condition_penalty(obs).detach()) == pytest.approx((1 - 3 / 0.5) ** 2, rel=1e-5)
    assert condition_penalty(Gaussian(2, 3, readout="identity")) is None


def test_windows_of_irregular_data_carry_their_sampling_steps():
    from dsident.data import as_dataset
    rng = np.random.default_rng(0)
    times = [np.cumsum(rng.uniform(0.05, 0.15, size=n)) for n in (60, 45)]
    trials = [np.stack([np.sin(t), np.cos(t)], -1) for t in times]
    ds = as_dataset(trials, time=times)
    sampler = RandomWindows(ds, 10, 32, 1, torch.float64, torch.device("cpu"))
    batch = sampler.sample(32, np.random.default_rng(1))
    x, u, dt = batch.x, batch.u, batch.dt
    assert u is None and x.shape == (32, 10, 2) and dt.shape == (32, 10)
    for b in range(32):                     # locate each window in its trial and compare the steps
        trial = next(i for i in range(2) if np.any(np.all(np.isclose(trials[i], x[b, 0].numpy()), -1)))
        start = int(np.argmin(np.abs(trials[trial] - x[b, 0].numpy()).sum(-1)))
        np.testing.assert_allclose(dt[b, 1:].numpy(), np.diff(times[trial][start:start + 10]))


def test_windows_start_only_where_every_channel_is_observed():
    # a window starting on a partly missing sample started that unit at the fill value 0 and
    # scored the predictions from it: with 10 % missing per channel, about a quarter of them
    from dsident.data import as_dataset
    from dsident.inference.windows import ConsecutiveWindows

    rng = np.random.default_rng(0)
    full = np.arange(3 * 400, dtype=float).reshape(400, 3)          # value = position: checkable
    holed = full.copy()
    holed[rng.random(holed.shape) < 0.1] = np.nan
    complete = np.isfinite(holed).all(-1)
    sampler = RandomWindows(as_dataset(holed, dt=0.1), 20, 64, 1, torch.float64, torch.device("cpu"))
    batch = sampler.sample(64, np.random.default_rng(1))
    assert batch.mask[:, 0].all()                                   # so x[:, 0, 0] / 3 is each start's position
    first = (batch.x[:, 0, 0].numpy() / 3).astype(int)
    assert complete[first].all() and len(set(first)) > 20 and (~complete[:381]).sum() > 50
    streams = ConsecutiveWindows(as_dataset(holed, dt=0.1), seq_len=11, batch_size=16, batches_per_epoch=5,
                                 dtype=torch.float64, device=torch.device("cpu"))
    assert next(iter(streams(np.random.default_rng(2)))).mask[:, 0].all()
    # fully observed data draw exactly the windows they always drew: every position allowed
    plain = RandomWindows(as_dataset(full, dt=0.1), 20, 64, 1, torch.float64, torch.device("cpu"))
    assert plain.start_table is None
    drawn = plain.sample(64, np.random.default_rng(1)).x[:, 0, 0].numpy() / 3
    flat = np.random.default_rng(1).integers(0, 400 - 20 + 1, size=64)
    np.testing.assert_array_equal(drawn, flat)
    # a trial without one complete sample keeps its windows, and says so
    dead = np.column_stack([full[:100, :2], np.full(100, np.nan)])
    with pytest.warns(UserWarning, match=r"trial\(s\) \[1\] have no sample with every channel observed"):
        mixed = RandomWindows(as_dataset([full, dead], dt=0.1), 20, 8, 1, torch.float64, torch.device("cpu"))
    assert int(mixed.cum_starts[-1]) == (400 - 20 + 1) + (100 - 20 + 1)


def test_windows_longer_than_every_trial_are_shortened_aloud():
    from dsident.data import as_dataset
    ds = as_dataset([np.random.default_rng(0).normal(size=(n, 2)) for n in (40, 25)], dt=0.1)
    with pytest.warns(UserWarning, match=r"seq_len=100 is longer than the longest trial \(40 samples\)"):
        sampler = RandomWindows(ds, 100, 4, 1, torch.float64, torch.device("cpu"))
    assert sampler.seq_len == 40
    assert sampler.sample(4, np.random.default_rng(1)).x.shape == (4, 40, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # a window that fits says nothing
        assert RandomWindows(ds, 40, 4, 1, torch.float64, torch.device("cpu")).seq_len == 40
    with pytest.warns(UserWarning, match=r"seq_len=100 is longer than the longest trial \(40 samples\)"):
        windows = make_windows(ds, 100)             # BPTT's consecutive windows
    assert windows.x.shape == (2, 40, 2) and windows.mask[1, :25].all() and not windows.mask[1, 25:].any()
    with pytest.raises(ValueError, match=r"seq_len=1\.5"):
        make_windows(ds, 1.5)


def test_continuous_time_dynamics_train_on_irregular_samples():
    from dsident.data import as_dataset
    from dsident.dynamics import GatedNODE
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.05, 0.15, size=300))
    ds = as_dataset([np.stack([np.sin(t), np.cos(t)], -1)], time=[t])
    model = StateSpaceModel(GatedNODE(2, hidden_dim=16, gate_hidden_dim=16, seed=0), Gaussian(2, 2, readout="identity"),
                            dt=0.1)
    history = fit_teacher_forcing(model, ds, alpha="adaptive", seq_len=20, batch_size=8, batches_per_epoch=5,
                                  n_epochs=3, lr=1e-2, optimizer="adam", alpha_update_every=1, eval_every=3,
                                  eval_steps=100, seed=0, progress=False)
    assert history["train_loss"][-1] < history["train_loss"][0]
    assert len(history["alpha_estimate"]) == 15 and all(0 <= a <= 1 for a in history["alpha_estimate"])


# ---------------------------------------------------------------------------------------------
# stateful training: windows that continue one another
# ---------------------------------------------------------------------------------------------
def test_consecutive_windows_continue_one_another():
    from dsident.data import as_dataset
    from dsident.inference.windows import ConsecutiveWindows

    series = np.arange(2 * 300, dtype=float).reshape(300, 2)       # value = position: checkable
    sampler = ConsecutiveWindows(as_dataset(series, dt=0.1), seq_len=11, batch_size=4, batches_per_epoch=5,
                                 dtype=torch.float64, device=torch.device("cpu"))
    batches = list(sampler(np.random.default_rng(0)))
    assert [b.continues for b in batches] == [False, True, True, True, True]
    first = batches[0].x[:, 0, 0].numpy() / 2                       # the streams' start positions
    assert len(set(first)) > 1 and first.max() + 5 * 10 <= 299       # every stream inside the trial
    for k, (prev, nxt) in enumerate(zip(batches, batches[1:])):
        torch.testing.assert_close(nxt.x[:, 0], prev.x[:, -1])      # one shared sample
        np.testing.assert_array_equal(nxt.x[:, :, 0].numpy() / 2,
                                      first[:, None] + (k + 1) * 10 + np.arange(11)[None])
    # the next epoch draws new streams
    other = next(iter(sampler(np.random.default_rng(1))))
    assert not torch.equal(other.x[:, 0], batches[0].x[:, 0])


def test_consecutive_windows_need_a_trial_long_enough():
    from dsident.data import as_dataset
    from dsident.inference.windows import ConsecutiveWindows

    with pytest.raises(ValueError, match=r"batches_per_epoch·\(seq_len − 1\) \+ 1 = 496 samples .* longest has 300"):
        ConsecutiveWindows(as_dataset(periodic_data(300), dt=0.1), seq_len=100, batch_size=2, batches_per_epoch=5,
                           dtype=torch.float64, device=torch.device("cpu"))


def _stateful_model(kind: str) -> StateSpaceModel:
    """Three channels read from the first 3 latent units; the rest the data never force."""
    if kind == "shplrnn":     # M = 5 behind an identity readout: two unforced units
        return StateSpaceModel(ShallowPLRNN(5, 16, clip=True, seed=2), Gaussian(3, 5, readout="identity"),
                               dt=0.1).double()
    # ODE-RFWP: y (3) read directly, one head of dimension 3: its 9 fast weights are unforced
    from dsident.dynamics import RecurrentFWP
    from dsident.models.continuous import LatentFeatureObservation

    dyn = RecurrentFWP(3, n_heads=1, head_dim=3, hidden_dim=16, tau=0.3, method="euler", seed=2)
    obs = LatentFeatureObservation(3, dyn.latent_dim, 3, "identity", "gaussian", {"readout": "identity"}, 0.0)
    return StateSpaceModel(dyn, obs, dt=0.1).double()


@pytest.mark.parametrize("kind, fused", [("shplrnn", True), ("shplrnn", False), ("rfwp", True)])
def test_stateful_windows_equal_one_long_forced_rollout(kind, fused):
    """Windows started from the state the previous window ended in are pieces of one long forced
    rollout: the forced trajectories (the unforced units included) agree with it at every step."""
    torch.manual_seed(0)
    model = _stateful_model(kind)
    length, n_windows = 13, 4
    span = n_windows * (length - 1) + 1
    x = torch.randn(2, span, 3, dtype=torch.float64)
    mask = torch.ones_like(x, dtype=torch.bool)
    with torch.no_grad():
        _, whole = teacher_forcing_loss(model, x, mask, alpha=0.3, fused=fused)
        z0, pieces = None, []
        for k in range(n_windows):
            sl = slice(k * (length - 1), k * (length - 1) + length)
            _, forced = teacher_forcing_loss(model, x[:, sl], mask[:, sl], alpha=0.3, fused=fused, z0=z0)
            pieces.append(forced if k == 0 else forced[:, 1:])
            z0 = forced[:, -1]
        torch.testing.assert_close(torch.cat(pieces, 1), whole, rtol=1e-12, atol=1e-12)
        assert whole[:, 1:, 3:].abs().max() > 1e-3                    # the unforced units do move
        # without the carried state the unforced units restart from the teacher's fill: different
        _, fresh = teacher_forcing_loss(model, x[:, length - 1: 2 * length - 1], mask[:, :length], alpha=0.3,
                                        fused=fused)
        assert not torch.allclose(fresh[:, 1:, 3:], whole[:, length:2 * length - 1, 3:], atol=1e-6)


def test_stateful_fit_hands_each_stream_its_state():
    """The engine's hook starts a continuing batch from the end of the previous one, restarts a
    stream's first window from the data, and records the option."""
    from dsident.data import as_dataset
    from dsident.inference.teacher_forcing import _Forcing
    from dsident.inference.windows import ConsecutiveWindows

    model = StateSpaceModel(ShallowPLRNN(4, 8, clip=True, seed=0), Gaussian(2, 4, readout="identity"),
                            dt=0.1).double()
    sampler = ConsecutiveWindows(as_dataset(periodic_data(400), dt=0.1), 20, 3, 4, torch.float64,
                                 torch.device("cpu"))
    hooks = _Forcing(AlphaSchedule(initial=0.2, adaptive=False), mode="generalized", forcing_interval=1,
                     loss="mse", latent_reg=0.0, obs_reg=0.0, stateful=True)
    ends = []
    for batch in sampler(np.random.default_rng(0)):
        with torch.no_grad():
            _, forced = hooks.loss_fn(model, batch)
        if batch.continues:
            torch.testing.assert_close(forced[:, 0], ends[-1])
        else:
            assert torch.all(forced[:, 0, 2:] == 0)                   # teacher's fill for unforced units
        ends.append(forced[:, -1])
    history = fit_teacher_forcing(model, periodic_data(400), stateful=True, seq_len=20, batches_per_epoch=4,
                                  n_epochs=2, eval_every=0, seed=0, progress=False, alpha=0.2)
    assert history["settings"]["stateful"] is True and len(history["train_loss"]) == 2
    assert all(math.isfinite(v) for v in history["train_loss"])
    with pytest.raises(TypeError, match="`stateful` must be True or False; got stateful='yes'"):
        fit_teacher_forcing(model, periodic_data(400), stateful="yes", n_epochs=1, progress=False)


def test_a_gap_in_the_training_data_keeps_the_scored_runs_d_h():
    # one missing sample used to make every scored epoch's D_H NaN; it is now read, as evaluate
    # reads it, over the longest gap-free stretch of the reference
    import dsident
    from dsident.metrics import power_spectrum_distance
    from dsident.metrics.evaluate import observed_spectrum_distance

    t = np.arange(1600) * 0.05
    x = np.column_stack([np.sin(2 * np.pi * t / 7.0), np.cos(2 * np.pi * t / 7.0)])
    x[1000, 1] = np.nan
    m = dsident.models.ShallowPLRNN(latent_dim=2, hidden_dim=8, seed=0)
    m.fit(dsident.as_dataset(x, dt=0.05), method="teacher-forcing", n_epochs=2, eval_every=1, seq_len=50)
    d_h = m.history_["power_spectrum_distance"]
    assert len(d_h) == 2 and np.isfinite(d_h).all()
    # the route it takes against the direct one on the gap-free stretch [0, 1000)
    run = np.column_stack([np.sin(2 * np.pi * t / 6.0), np.cos(2 * np.pi * t / 6.0)])
    per_channel, n = observed_spectrum_distance(x[None], run[None], np.zeros(1, dtype=int), np.full(1, 1600), 20.0)
    assert n == 1000
    assert float(np.mean(per_channel)) == pytest.approx(power_spectrum_distance(x[:1000], run[:1000]), rel=1e-12)
