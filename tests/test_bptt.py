"""BPTT engine, the shared training loop, and the addition/multiplication tasks."""
import json

import numpy as np
import pytest
import torch

from dsident.data.container import as_dataset
from dsident.data.tasks import addition_problem, fraction_correct, multiplication_problem
from dsident.dynamics import PLRNN, ShallowPLRNN
from dsident.inference import get_engine
from dsident.inference.bptt import fit_bptt, free_run, make_bptt_loss
from dsident.inference.training import TrainingDivergedError
from dsident.inference.windows import make_windows, split_windows, to_batch
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian


def linear_rotation_data(n_trials=6, n_time=60, seed=0):
    """A damped rotation superimposed on a relaxation to (1.5, -1), observed directly."""
    rng = np.random.default_rng(seed)
    angle, decay = 0.3, 0.8
    rot = decay * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    target = np.array([1.5, -1.0])
    x = np.empty((n_trials, n_time, 2))
    x[:, 0] = rng.normal(size=(n_trials, 2)) * 2
    for t in range(1, n_time):
        x[:, t] = target + (x[:, t - 1] - target) @ rot.T
    return as_dataset(x, dt=0.1)


def small_model(m=4, seed=0, penalty="none", **kw):
    return StateSpaceModel(PLRNN(m, seed=seed, penalty=penalty, **kw), Gaussian(2, m, readout="identity"), dt=0.1)


def _val_mse(model, ds, seq_len, seed):
    _, val = split_windows(make_windows(ds, seq_len), 0.1, np.random.default_rng(seed))
    batch = to_batch(val, torch.float32, torch.device("cpu"))
    with torch.no_grad():
        z = free_run(model, batch, "invert")
        return float(((model.decode(z) - batch.x) ** 2 * batch.mask).sum() / batch.mask.sum())


def test_loss_decreases_and_best_state_is_restored():
    model, ds = small_model(), linear_rotation_data()
    untrained = _val_mse(model, ds, 20, 0)
    hist = fit_bptt(model, ds, n_epochs=6, seq_len=20, batch_size=6, lr=2e-2, seed=0, progress=False, device="cpu")
    assert hist["n_epochs_run"] == 6 and not hist["diverged"]
    assert hist["best_loss"] < 0.5 * untrained
    assert hist["best_loss"] == min(hist["val_loss"])
    assert hist["settings"]["initial_state"] == "invert" and hist["settings"]["loss"] == "mse"
    # the model now holds the best state (same split, same windows): its validation loss is the recorded best
    assert _val_mse(model, ds, 20, 0) == pytest.approx(hist["best_loss"], rel=1e-4)


def test_engine_registry_and_generic_dynamics():
    fit = get_engine("bptt")
    model = StateSpaceModel(ShallowPLRNN(3, 8, seed=0), Gaussian(2, 3, readout="linear"), dt=0.1)
    hist = fit(model, linear_rotation_data(), n_epochs=3, seq_len=15, batch_size=8, seed=1, progress=False)
    assert len(hist["train_loss"]) == 3 and np.all(np.isfinite(hist["train_loss"]))


def test_missing_samples_are_masked_not_filled():
    ds = linear_rotation_data()
    x = ds["x"].values.copy()
    x[:, 5:9, 1] = np.nan
    windows = make_windows(as_dataset(x, dt=0.1), 20)
    first = windows.x[::3]                         # 60 steps -> 3 windows per trial; the holes are in the first
    assert np.isnan(first[:, 5:9, 1]).all() and not windows.mask[::3, 5:9, 1].any()   # kept missing
    model = small_model()
    loss_fn = make_bptt_loss("mse", "invert")
    batch = to_batch(windows, torch.float32, torch.device("cpu"))
    garbage = to_batch(windows, torch.float32, torch.device("cpu"))
    garbage.x[~garbage.mask] = 1e6                # whatever sits under the mask must not matter
    with torch.no_grad():
        assert float(loss_fn(model, batch)) == pytest.approx(float(loss_fn(model, garbage)))
        # and an observed value does matter
        garbage.mask[0, 5, 1] = True
        assert float(loss_fn(model, garbage)) > 1e6 / garbage.mask.sum()
    hist = fit_bptt(model, as_dataset(x, dt=0.1), n_epochs=2, seq_len=20, seed=0, progress=False)
    assert np.all(np.isfinite(hist["train_loss"]))


def test_checkpoint_resume_continues_from_saved_epoch(tmp_path):
    data = linear_rotation_data()
    opts = dict(seq_len=20, batch_size=4, lr=5e-3, seed=3, progress=False)
    straight = small_model(seed=1)
    h_straight = fit_bptt(straight, data, n_epochs=5, **opts)
    path = tmp_path / "ckpt.pt"
    first = small_model(seed=1)
    h_first = fit_bptt(first, data, n_epochs=2, checkpoint=path, **opts)
    assert path.exists() and h_first["n_epochs_run"] == 2
    resumed = small_model(seed=1)
    h_resumed = fit_bptt(resumed, data, n_epochs=5, checkpoint=path, **opts)
    assert h_resumed["resumed_from_epoch"] == 2
    assert h_resumed["epoch"] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(h_resumed["train_loss"], h_straight["train_loss"], rtol=1e-5)
    for p, q in zip(straight.parameters(), resumed.parameters()):
        torch.testing.assert_close(p, q)
    # a foreign file is refused with a clear message
    bad = tmp_path / "bad.pt"
    torch.save({"something": torch.zeros(1)}, bad)
    with pytest.raises(ValueError, match="not a dsident training checkpoint"):
        fit_bptt(small_model(), data, n_epochs=1, checkpoint=bad, **opts)


def _exploding_model():
    model = small_model(seed=0, penalty="none")
    model.dynamics.set_params(A=np.full(4, 3.0), W=np.zeros((4, 4)), h=np.zeros(4))
    return model


def test_divergence_is_detected_and_best_state_kept():
    data = linear_rotation_data(n_time=200)
    model = _exploding_model()                                    # |3^100| overflows float32
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.warns(RuntimeWarning, match="training loss became"):
        hist = fit_bptt(model, data, n_epochs=3, seq_len=100, seed=0, progress=False)
    assert hist["diverged"] and hist["n_epochs_run"] == 0
    for p, q in zip(before, model.parameters()):
        torch.testing.assert_close(p, q)
    with pytest.raises(TrainingDivergedError, match="no state had been scored yet"):
        fit_bptt(_exploding_model(), data, n_epochs=3, seq_len=100, seed=0, progress=False, on_divergence="raise")


@pytest.mark.parametrize("kwargs, match", [
    ({"initial_state": "zeros"}, "initial_state"),
    ({"loss": "l1"}, "loss"),
    ({"val_fraction": 1.0}, "val_fraction"),
    ({"on_divergence": "ignore"}, "on_divergence"),
    ({"n_epochs": 0}, "n_epochs"),
    ({"lr": -1.0}, "lr"),
    ({"device": "tpu"}, "device"),
])
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_bptt(small_model(), linear_rotation_data(n_trials=2), progress=False, **{"n_epochs": 1, **kwargs})


def test_incompatible_data_is_refused():
    with pytest.raises(ValueError, match="obs_dim"):
        fit_bptt(small_model(), as_dataset(np.zeros((50, 3))), n_epochs=1, progress=False)
    with pytest.raises(ValueError, match="input_dim"):
        fit_bptt(small_model(), as_dataset(np.zeros((50, 2)), u=np.zeros((50, 1))), n_epochs=1, progress=False)


def test_the_settings_record_the_device_the_fit_ran_on_not_the_request():
    from dsident.inference.training import resolve_device

    model = small_model()
    hist = fit_bptt(model, linear_rotation_data(n_trials=2), n_epochs=1, device="auto", progress=False, seed=0)
    # as teacher forcing records it: "auto" says nothing about where the numbers came from
    assert hist["settings"]["device"] == str(resolve_device("auto")) != "auto"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_request_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="CUDA is not available"):
        fit_bptt(small_model(), linear_rotation_data(n_trials=2), n_epochs=1, device="cuda", progress=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_fit_on_gpu_returns_model_on_cpu():
    model = small_model()
    hist = fit_bptt(model, linear_rotation_data(), n_epochs=2, seq_len=20, device="cuda", progress=False, seed=0)
    assert len(hist["train_loss"]) == 2 and next(model.parameters()).device.type == "cpu"


def test_windows_cover_trials_and_pad_with_missing():
    x = [np.arange(10.0)[:, None], np.arange(5.0)[:, None]]
    w = make_windows(as_dataset(x), 4)
    # trial 0 -> [0..3], [4..7], [8, 9]; trial 1 -> [0..3], [4] is dropped (a single step)
    assert len(w) == 4
    np.testing.assert_array_equal(w.x[2, :2, 0], [8.0, 9.0])
    assert not w.mask[2, 2:].any()
    train, val = split_windows(w, 0.25, np.random.default_rng(0))
    assert len(train) == 3 and len(val) == 1


# -- the tasks ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make, combine", [(addition_problem, np.add), (multiplication_problem, np.multiply)])
def test_task_targets_combine_the_two_marked_values(make, combine):
    ds = make(200, 40, seed=3)
    u, x = ds["u"].values, ds["x"].values
    assert u.shape == (200, 41, 2) and x.shape == (200, 41, 1)
    np.testing.assert_array_equal(u[:, 0], 0.0)                  # index 0 is the initial state
    markers = u[:, 1:, 1]
    assert np.all(markers.sum(axis=1) == 2)
    for trial in range(200):
        t1, t2 = np.flatnonzero(markers[trial])
        assert t1 < 20 and t2 < 20 and min(t1, t2) < 10         # one marker < 10, the other < T/2
        assert x[trial, -1, 0] == pytest.approx(combine(u[trial, 1 + t1, 0], u[trial, 1 + t2, 0]))
    assert np.all(np.isnan(x[:, :-1]))                            # only the last step is scored
    assert np.all((u[:, 1:, 0] >= 0) & (u[:, 1:, 0] < 1))
    assert json.loads(ds.attrs["task"])["seq_len"] == 40


def test_tasks_are_seeded_and_validate_arguments():
    a, b, c = addition_problem(5, 30, seed=1), addition_problem(5, 30, seed=1), addition_problem(5, 30, seed=2)
    np.testing.assert_array_equal(a["u"].values, b["u"].values)
    assert not np.array_equal(a["u"].values, c["u"].values)
    assert fraction_correct(np.array([1.0, 1.05, 0.5]), np.array([1.01, 1.0, 0.45])) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="seq_len"):
        addition_problem(3, 10)
    with pytest.raises(ValueError, match="n_trials"):
        addition_problem(0, 30)


def test_exact_two_unit_addition_solution_solves_the_task():
    # seed 004, Suppl. 6.1.1: A = diag(1, 0), W = [[0, 1], [0, 0]], h = (0, -1), C = [[0, 0], [1, 1]], B = (1 0)
    dyn = PLRNN(2, input_dim=2, penalty="none").double()
    dyn.set_params(A=np.array([1.0, 0.0]), W=np.array([[0.0, 1.0], [0.0, 0.0]]), h=np.array([0.0, -1.0]),
                   C=np.array([[0.0, 0.0], [1.0, 1.0]]))
    obs = Gaussian(1, 2, readout="identity").double()
    model = StateSpaceModel(dyn, obs).double()
    with torch.no_grad():
        model.initial_mean.zero_()
    ds = addition_problem(50, 60, seed=0)
    batch = to_batch(make_windows(ds, None), torch.float64, torch.device("cpu"))
    with torch.no_grad():
        pred = model.decode(free_run(model, batch, "learned"))[:, -1, 0].numpy()
    # the sum appears one step after the second marker is read; reading it at the end needs the memory unit
    assert fraction_correct(pred, ds["x"].values[:, -1, 0]) == 1.0


# -- the rPLRNN on the addition problem (seed 004, Fig. 2 and Theorem 2) -------------------------
def _jacobian_product_norm(dyn, data, n_time):
    """||dz_T / dz_1|| = ||prod_t J(z_t)|| along free runs driven by the task inputs, per trial."""
    u = torch.as_tensor(data["u"].values, dtype=torch.float32)
    z = torch.zeros(u.shape[0], dyn.latent_dim)
    prod = torch.eye(dyn.latent_dim).expand(u.shape[0], -1, -1)
    with torch.no_grad():
        for t in range(1, n_time):
            prod = dyn.jacobian(z) @ prod
            z = dyn.step(z, u[:, t])
    return torch.linalg.matrix_norm(prod, ord=2).numpy()


def test_regularized_units_carry_gradients_over_the_whole_sequence():
    # Theorem 2: with the first M_reg rows of A + W equal to the identity, ||dz_T/dz_t|| >= 1 for all T - t;
    # a vanilla PLRNN initialised as contracting lets them vanish: why it cannot learn T = 50.
    data = addition_problem(20, 50, seed=0)
    regularized = _jacobian_product_norm(PLRNN(40, input_dim=2, seed=0), data, 51)
    vanilla = _jacobian_product_norm(PLRNN(40, input_dim=2, seed=0, penalty="none"), data, 51)
    assert np.all(regularized >= 1.0 - 1e-5)
    assert np.all(vanilla < 0.1)


@pytest.mark.slow
def test_rplrnn_learns_addition_at_T50_and_vanilla_plrnn_does_not():
    train, test = addition_problem(2000, 50, seed=0), addition_problem(500, 50, seed=1)
    opts = dict(n_epochs=12, seq_len=None, batch_size=50, lr=5e-3, seed=0, progress=False, device="cpu")
    target = test["x"].values[:, -1, 0]
    batch = to_batch(make_windows(test, None), torch.float32, torch.device("cpu"))
    errors = {}
    for penalty in ("manifold", "none"):
        dyn = PLRNN(40, input_dim=2, penalty=penalty, tau=5.0, reg_normalization="mean", seed=0)
        model = StateSpaceModel(dyn, Gaussian(1, 40))
        fit_bptt(model, train, **opts)
        with torch.no_grad():
            pred = model.decode(free_run(model, batch, "learned"))[:, -1, 0].numpy()
        errors[penalty] = float(np.mean((pred - target) ** 2))
    # chance level (predicting the mean) is about 0.167 (seed 004, section 4.1)
    assert errors["manifold"] < 0.03
    assert errors["none"] > 0.1


def test_checkpoint_of_another_model_and_dt_mismatch_are_refused(tmp_path):
    data = linear_rotation_data()
    path = tmp_path / "ckpt.pt"
    fit_bptt(small_model(m=4), data, n_epochs=1, seq_len=20, checkpoint=path, progress=False, seed=0)
    with pytest.raises(ValueError, match="does not fit this model"):
        fit_bptt(small_model(m=5), data, n_epochs=2, seq_len=20, checkpoint=path, progress=False, seed=0)
    with pytest.raises(ValueError, match="dt=0.5"):
        fit_bptt(small_model(), as_dataset(data["x"].values, dt=0.5), n_epochs=1, progress=False)
