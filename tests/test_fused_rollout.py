"""The fused forced rollout of the shallow PLRNN and the PLRNN against autograd through the
step-by-step rollout and against finite differences."""
import numpy as np
import pytest
import torch

from dsident import StateSpaceModel
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.inference import fused_rollout
from dsident.inference.forcing_alpha import TeacherSignal, make_teacher
from dsident.inference.fused_rollout import _ForcedRollout, _Forcing, _PLRNNCell, _ShallowCell, can_fuse
from dsident.inference.teacher_forcing import fit_teacher_forcing, forced_rollout, teacher_forcing_loss
from dsident.observations import Gaussian


def _model(clip, latent_dim=5, obs_dim=3, hidden=24, seed=0):
    dyn = ShallowPLRNN(latent_dim, hidden, clip=clip, seed=seed)
    return StateSpaceModel(dyn, Gaussian(obs_dim, latent_dim, readout="identity")).double()


def _data(n_batch=4, length=30, channels=3, missing=0.2, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batch, length, channels, generator=gen, dtype=torch.float64)
    mask = torch.rand(n_batch, length, channels, generator=gen) > missing
    return torch.where(mask, x, torch.nan), mask


def _gradients(model, teacher, fused, **kwargs):
    model.zero_grad()
    predicted, forced = forced_rollout(model, teacher, None, None, fused=fused, **kwargs)
    # a loss that reaches both outputs, so that both incoming gradients are exercised
    loss = predicted.square().sum() + 0.1 * forced.pow(3).sum()
    loss.backward()
    return predicted.detach(), forced.detach(), {n: p.grad.clone() for n, p in model.dynamics.named_parameters()
                                                 if p.grad is not None}


@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("options", [dict(mode="generalized", alpha=0.3, forcing_interval=1, warmup=0),
                                     dict(mode="generalized", alpha=0.15, forcing_interval=1, warmup=4),
                                     dict(mode="sparse", alpha=0.0, forcing_interval=4, warmup=2)])
def test_fused_rollout_matches_autograd_through_the_steps(clip, options):
    model = _model(clip)
    x, mask = _data()
    teacher = make_teacher(model.observation, x, mask)
    assert can_fuse(model, teacher, None)
    fused = _gradients(model, teacher, True, **options)
    stepped = _gradients(model, teacher, False, **options)
    torch.testing.assert_close(fused[0], stepped[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused[1], stepped[1], rtol=1e-12, atol=1e-12)
    assert fused[2].keys() == stepped[2].keys() == {"a", "W1", "W2", "h1", "h2"}
    for name in fused[2]:
        torch.testing.assert_close(fused[2][name], stepped[2][name], rtol=1e-10, atol=1e-12, msg=name)


def test_fused_rollout_with_one_weight_per_sample_matches_the_steps():
    model = _model(True, latent_dim=3, obs_dim=3)
    x, _ = _data(channels=3, missing=0.0)
    gen = torch.Generator().manual_seed(1)
    weight = (torch.rand(4, 30, 1, generator=gen) > 0.3).double()       # (B, L, 1): whole state or nothing
    teacher = TeacherSignal(z_hat=x, weight=weight)
    fused = _gradients(model, teacher, True, mode="generalized", alpha=0.4, forcing_interval=1)
    stepped = _gradients(model, teacher, False, mode="generalized", alpha=0.4, forcing_interval=1)
    torch.testing.assert_close(fused[1], stepped[1], rtol=1e-12, atol=1e-12)
    for name in fused[2]:
        torch.testing.assert_close(fused[2][name], stepped[2][name], rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("clip", [True, False])
def test_fused_backward_agrees_with_finite_differences(clip):
    dyn = ShallowPLRNN(3, 6, clip=clip, seed=2).double()
    gen = torch.Generator().manual_seed(3)
    z0 = torch.randn(2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    keep = torch.rand(2, 7, 3, generator=gen, dtype=torch.float64)
    drive = torch.randn(2, 7, 3, generator=gen, dtype=torch.float64)
    params = [p.detach().clone().requires_grad_(True) for p in (dyn.a, dyn.W1, dyn.W2, dyn.h1, dyn.h2)]
    assert torch.autograd.gradcheck(
        lambda z, *p: _ForcedRollout.apply(z, _Forcing(keep=keep, drive=drive), _ShallowCell(clip), *p),
        (z0, *params), eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("forcing", ["projector", "weights", "none"])
def test_fused_plrnn_backward_agrees_with_finite_differences(forcing):
    gen = torch.Generator().manual_seed(4)
    m, length = 4, 7
    z0 = torch.randn(2, m, generator=gen, dtype=torch.float64, requires_grad=True)
    drive = torch.randn(2, length, m, generator=gen, dtype=torch.float64)
    if forcing == "projector":
        loadings = torch.randn(2, m, generator=gen, dtype=torch.float64)
        rule = _Forcing(projector=torch.linalg.pinv(loadings) @ loadings, alphas=[0.0, 0.3, 0.3, 1.0, 0.3, 0.0, 0.3],
                        drive=drive)
    elif forcing == "weights":
        rule = _Forcing(keep=torch.rand(2, length, m, generator=gen, dtype=torch.float64), drive=drive)
    else:
        rule = _Forcing(length=length)
    params = (0.9 * torch.rand(m, generator=gen, dtype=torch.float64),
              0.5 * torch.randn(m, m, generator=gen, dtype=torch.float64),
              0.1 * torch.randn(m, generator=gen, dtype=torch.float64))
    params = [p.requires_grad_(True) for p in params]
    assert torch.autograd.gradcheck(lambda z, *p: _ForcedRollout.apply(z, rule, _PLRNNCell(), *p), (z0, *params),
                                    eps=1e-6, atol=1e-6, rtol=1e-5)


def test_other_models_and_driven_data_are_not_fused():
    x, mask = _data()
    shallow = _model(True)
    linear = StateSpaceModel(ShallowPLRNN(5, 24, seed=0).double(), Gaussian(3, 5, readout="linear").double())
    plrnn = StateSpaceModel(PLRNN(5, seed=0).double(), Gaussian(3, 5, readout="linear").double())
    complete = torch.ones_like(mask)
    assert can_fuse(shallow, make_teacher(shallow.observation, x, mask), None)
    assert not can_fuse(shallow, make_teacher(shallow.observation, x, mask), torch.zeros(4, 30, 1))
    # a linear readout with every channel observed has one projector; missing channels make several
    assert can_fuse(linear, make_teacher(linear.observation, x.nan_to_num(), complete), None)
    assert can_fuse(plrnn, make_teacher(plrnn.observation, x.nan_to_num(), complete), None)
    assert not can_fuse(linear, make_teacher(linear.observation, x, mask), None)
    assert not can_fuse(plrnn, make_teacher(plrnn.observation, x, mask), None)
    from dsident.dynamics import GatedNODE
    gnode = StateSpaceModel(GatedNODE(3, seed=0).double(), Gaussian(3, 3, readout="identity").double())
    assert not can_fuse(gnode, make_teacher(gnode.observation, x, mask), None)
    assert not can_fuse(gnode, None, None)


def test_a_teacher_forcing_fit_of_the_shallow_plrnn_runs_fused(monkeypatch):
    calls = []
    real = fused_rollout.fused_forced_rollout

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    import dsident.inference.teacher_forcing as tf
    monkeypatch.setattr(tf, "fused_forced_rollout", counting)
    t = np.arange(300) * 0.1
    data = np.stack([np.sin(t), np.cos(t)], -1)
    model = StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=0), Gaussian(2, 2, readout="identity"))
    fit_teacher_forcing(model, data, alpha=0.3, n_epochs=2, batches_per_epoch=3, seq_len=20, eval_every=0, seed=0,
                        progress=False)
    assert len(calls) == 6
    x = torch.as_tensor(data[None, :40])
    mask = torch.ones_like(x, dtype=torch.bool)
    with torch.no_grad():
        fused_loss, _ = teacher_forcing_loss(model.double(), x, mask, alpha=0.3)
        stepped_loss, _ = teacher_forcing_loss(model, x, mask, alpha=0.3, fused=False)
    assert fused_loss.item() == pytest.approx(stepped_loss.item(), rel=1e-12)


@pytest.mark.parametrize("initial_state", ["invert", "learned"])
def test_fused_free_run_of_bptt_matches_the_steps(initial_state):
    from dsident.inference.bptt import free_run
    from dsident.inference.windows import Batch

    model = _model(True)
    x, mask = _data(missing=0.0)
    batch = Batch(x=x, mask=mask, u=None, dt=None)
    grads = []
    for fused in (True, False):
        model.zero_grad()
        z = free_run(model, batch, initial_state, fused=fused)
        (model.decode(z) - x).square().sum().backward()
        grads.append((z.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-12, atol=1e-12)
    # with a learned initial state its gradient flows back through the fused node too
    assert ("initial_mean" in grads[0][1]) == (initial_state == "learned") == ("initial_mean" in grads[1][1])
    assert grads[0][1].keys() == grads[1][1].keys()
    for name in grads[0][1]:
        torch.testing.assert_close(grads[0][1][name], grads[1][1][name], rtol=1e-10, atol=1e-12, msg=name)


@pytest.mark.parametrize("engine", ["teacher-forcing", "bptt"])
def test_fused_false_gives_the_step_by_step_route_and_is_recorded(monkeypatch, engine):
    calls = []
    import dsident.inference.bptt as bptt
    import dsident.inference.teacher_forcing as tf
    for module, name in ((tf, "fused_forced_rollout"), (bptt, "fused_free_run")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    t = np.arange(300) * 0.1
    data = np.stack([np.sin(t), np.cos(t)], -1)
    options = (dict(alpha=0.3, batches_per_epoch=3, seq_len=20, eval_every=0) if engine == "teacher-forcing"
               else dict(seq_len=20))
    fit = tf.fit_teacher_forcing if engine == "teacher-forcing" else bptt.fit_bptt
    losses = {}
    for fused in (True, False):
        calls.clear()
        model = StateSpaceModel(ShallowPLRNN(2, 8, clip=True, seed=0), Gaussian(2, 2, readout="identity")).double()
        history = fit(model, data, n_epochs=2, seed=0, progress=False, fused=fused, **options)
        assert history["settings"]["fused"] is fused
        assert (len(calls) > 0) is fused
        losses[fused] = history["train_loss"]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-9)


def test_a_silent_hidden_unit_gets_exactly_zero_gradient_as_in_the_steps():
    # Adam turns any round-off left in a zero gradient into a full-size step, so the fused route
    # must keep the exact zeros of the step-by-step one (float32, the training dtype)
    model = StateSpaceModel(ShallowPLRNN(3, 20, clip=False, seed=0), Gaussian(3, 3, readout="identity"))
    with torch.no_grad():
        model.dynamics.W2[:5] = 0.0
        model.dynamics.h2[:5] = -50.0            # relu(0 − 50) = 0 for every state
    x = torch.randn(4, 30, 3, generator=torch.Generator().manual_seed(0))
    teacher = make_teacher(model.observation, x, torch.ones_like(x, dtype=torch.bool))
    for fused in (True, False):
        model.zero_grad()
        predicted, _ = forced_rollout(model, teacher, None, None, mode="generalized", alpha=0.3,
                                      forcing_interval=1, fused=fused)
        predicted.square().sum().backward()
        assert torch.count_nonzero(model.dynamics.W1.grad[:, :5]) == 0
        assert torch.count_nonzero(model.dynamics.W1.grad[:, 5:]) > 0


def _plrnn_model(readout, latent_dim=6, obs_dim=3, seed=0):
    return StateSpaceModel(PLRNN(latent_dim, seed=seed, penalty="none"),
                           Gaussian(obs_dim, latent_dim, readout=readout)).double()


@pytest.mark.parametrize("readout", ["linear", "identity"])
@pytest.mark.parametrize("options", [dict(mode="generalized", alpha=0.1, forcing_interval=1, warmup=0),
                                     dict(mode="generalized", alpha=0.3, forcing_interval=1, warmup=3),
                                     dict(mode="sparse", alpha=0.0, forcing_interval=4, warmup=0)])
def test_fused_plrnn_rollout_matches_autograd_through_the_steps(readout, options):
    model = _plrnn_model(readout)
    with torch.no_grad():          # a coupling strong enough that units cross zero inside the window
        model.dynamics.W.mul_(4.0)
    x, mask = _data(missing=0.0 if readout == "linear" else 0.2)
    teacher = make_teacher(model.observation, x, mask)
    assert (teacher.projector is not None) == (readout == "linear")
    assert can_fuse(model, teacher, None)
    fused = _gradients(model, teacher, True, **options)
    stepped = _gradients(model, teacher, False, **options)
    torch.testing.assert_close(fused[0], stepped[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(fused[1], stepped[1], rtol=1e-12, atol=1e-12)
    assert fused[2].keys() == stepped[2].keys() >= {"a", "W", "h"}
    for name in fused[2]:
        torch.testing.assert_close(fused[2][name], stepped[2][name], rtol=1e-10, atol=1e-12, msg=name)
    # the coupling's diagonal is masked out of the model, so it gets no gradient either way
    assert torch.count_nonzero(torch.diagonal(fused[2]["W"])) == 0


def test_fused_plrnn_loss_gives_the_readout_the_same_gradient():
    # the linear readout's loadings B are learned through the prediction x̂ = B z (outside the node)
    model = _plrnn_model("linear")
    x, mask = _data(missing=0.0)
    grads = []
    for fused in (True, False):
        model.zero_grad()
        teacher = make_teacher(model.observation, x, mask)
        loss, _ = teacher_forcing_loss(model, x, mask, alpha=0.2, teacher=teacher, fused=fused)
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert any("observation" in name for name in grads[0])
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-10, atol=1e-12, msg=name)


def test_fused_free_run_of_the_plrnn_matches_the_steps():
    from dsident.inference.bptt import free_run
    from dsident.inference.windows import Batch

    model = _plrnn_model("identity", latent_dim=3)
    x, mask = _data(missing=0.0)
    runs = []
    for fused in (True, False):
        model.zero_grad()
        z = free_run(model, Batch(x=x, mask=mask, u=None, dt=None), "invert", fused=fused)
        (model.decode(z) - x).square().sum().backward()
        runs.append((z.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    torch.testing.assert_close(runs[0][0], runs[1][0], rtol=1e-12, atol=1e-12)
    for name in runs[0][1]:
        torch.testing.assert_close(runs[0][1][name], runs[1][1][name], rtol=1e-10, atol=1e-12, msg=name)


# ---------------------------------------------------------------------------------------------
# GPU: the same node on CUDA (run where a device is lent; skipped elsewhere)
# ---------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["shallow, weights", "plrnn, projector"])
def test_fused_rollout_on_cuda_gives_the_cpu_numbers(kind):
    model = _model(True) if kind.startswith("shallow") else _plrnn_model("linear")
    x, mask = _data(missing=0.2 if kind.startswith("shallow") else 0.0)
    options = dict(mode="generalized", alpha=0.2, forcing_interval=1, warmup=2)
    on_cpu = _gradients(model, make_teacher(model.observation, x, mask), True, **options)
    model.cuda()
    teacher = make_teacher(model.observation, x.cuda(), mask.cuda())
    assert can_fuse(model, teacher, None)
    on_gpu = _gradients(model, teacher, True, **options)
    assert on_gpu[0].is_cuda
    torch.testing.assert_close(on_gpu[0].cpu(), on_cpu[0], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(on_gpu[1].cpu(), on_cpu[1], rtol=1e-10, atol=1e-12)
    assert on_gpu[2].keys() == on_cpu[2].keys()
    for name in on_cpu[2]:
        torch.testing.assert_close(on_gpu[2][name].cpu(), on_cpu[2][name], rtol=1e-8, atol=1e-10, msg=name)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dynamics", ["plrnn", "shallow"])
def test_a_teacher_forcing_fit_on_cuda_tracks_the_cpu_fit_and_returns_home(dynamics):
    # float64, so that the two devices' round-off stays far below the tolerance over 3 epochs
    t = np.arange(600) * 0.05
    data = np.stack([np.sin(t), np.cos(t), np.sin(2 * t)], -1)
    kwargs = dict(alpha=0.2, n_epochs=3, batches_per_epoch=4, seq_len=30, eval_every=1, eval_steps=200,
                  eval_starts=3, seed=0, progress=False)
    hists = []
    for device in (None, "cuda"):                   # None: the default, the CPU even where CUDA is seen
        model = (_plrnn_model("linear", latent_dim=5) if dynamics == "plrnn" else
                 StateSpaceModel(ShallowPLRNN(3, 16, clip=True, seed=0), Gaussian(3, 3, readout="identity")).double())
        hists.append(fit_teacher_forcing(model, data, **({} if device is None else {"device": device}), **kwargs))
        assert all(p.device.type == "cpu" for p in model.parameters())
    assert hists[0]["settings"]["device"] == "cpu" and hists[1]["settings"]["device"].startswith("cuda")
    np.testing.assert_allclose(hists[1]["train_loss"], hists[0]["train_loss"], rtol=1e-6)
    assert np.isfinite(hists[1]["train_loss"]).all()
