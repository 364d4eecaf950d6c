"""StateSpaceModel: generation, log joint (hand computation), prediction, smoothing hook, save/load."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats
from torch import nn

import dsident.model as model_module
from dsident.dynamics import PLRNN
from dsident.dynamics.base import LatentDynamics
from dsident.model import FORMAT_VERSION, StateSpaceModel
from dsident.observations import Gaussian, Poisson


class LinearTestDynamics(LatentDynamics):
    """z_t = A z_{t-1} + C u_t + h (test-local; registers itself for load())."""

    def __init__(self, latent_dim: int, input_dim: int = 0, scale: float = 0.9) -> None:
        super().__init__()
        self.latent_dim, self.input_dim, self.scale = latent_dim, input_dim, scale
        g = torch.Generator().manual_seed(0)
        q, _ = torch.linalg.qr(torch.randn(latent_dim, latent_dim, generator=g))
        self.A = nn.Parameter(scale * q)
        self.h = nn.Parameter(0.1 * torch.randn(latent_dim, generator=g))
        self.C = nn.Parameter(torch.randn(latent_dim, input_dim, generator=g))

    def step(self, z, u=None, dt=None):
        out = z @ self.A.T + self.h
        return out if u is None else out + u @ self.C.T


def _linear_gaussian(m=3, n=2, k=0, readout="linear"):
    obs = Gaussian(n, m, readout=readout)
    with torch.no_grad():
        obs.log_var.copy_(torch.tensor([-1.0, 0.5, 0.2][:n]))
        obs.b.copy_(torch.tensor([0.3, -0.2, 0.1][:n])) if obs.learned_loadings else None
    model = StateSpaceModel(LinearTestDynamics(m, k), obs, process_noise=0.05, initial_var=2.0, dt=0.1).double()
    with torch.no_grad():
        model.initial_mean.copy_(torch.tensor([0.5, -1.0, 0.25][:m], dtype=torch.float64))
    return model


# -- construction -------------------------------------------------------------------------------
def test_constructor_validates():
    with pytest.raises(ValueError, match="latent_dim=4.*latent_dim=3"):
        StateSpaceModel(LinearTestDynamics(3), Gaussian(2, 4))
    with pytest.raises(TypeError, match="dynamics"):
        StateSpaceModel(nn.Linear(2, 2), Gaussian(2, 2))
    with pytest.raises(TypeError, match="observation"):
        StateSpaceModel(LinearTestDynamics(2), nn.Linear(2, 2))
    with pytest.raises(ValueError, match="process_noise"):
        StateSpaceModel(LinearTestDynamics(2), Gaussian(2, 2), process_noise=-1.0)
    with pytest.raises(ValueError, match="initial_var"):
        StateSpaceModel(LinearTestDynamics(2), Gaussian(2, 2), initial_var=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="dt"):
        StateSpaceModel(LinearTestDynamics(2), Gaussian(2, 2), dt=0.0)
    with pytest.raises(ValueError, match="channel_names"):
        StateSpaceModel(LinearTestDynamics(2), Gaussian(2, 2), channel_names=["a"])
    model = StateSpaceModel(LinearTestDynamics(2), Gaussian(2, 2), process_noise=[0.1, 0.2])
    torch.testing.assert_close(model.process_var, torch.tensor([0.1, 0.2]))
    json.dumps(model.config())


# -- generate -----------------------------------------------------------------------------------
def test_generate_shapes_coords_and_attrs():
    model = StateSpaceModel(PLRNN(4, seed=0), Gaussian(2, 4, readout="relu"), dt=0.5, channel_names=["a", "b"])
    run = model.generate(30, n_trials=3, seed=1)
    assert run["x"].dims == ("trial", "time", "channel") and run["x"].shape == (3, 30, 2)
    assert run["z"].shape == (3, 30, 4)
    assert list(run["channel"].values) == ["a", "b"]
    np.testing.assert_allclose(run["time"].values, np.arange(30) * 0.5)
    assert run.attrs["dt"] == 0.5 and run.attrs["seed"] == 1 and run.attrs["diverged"] == 0
    # noise-free runs from the same start are identical across trials
    np.testing.assert_array_equal(run["z"].values[0], run["z"].values[2])


def test_generate_is_batched_and_seeded():
    model = _linear_gaussian()
    z0 = np.array([[0.0, 1.0, 2.0], [1.0, -1.0, 0.5]])
    batch = model.generate(20, z0=z0)
    for i in range(2):
        single = model.generate(20, z0=z0[i])
        np.testing.assert_allclose(batch["z"].values[i], single["z"].values[0])
    # the hand recursion
    A, h = model.dynamics.A.detach().numpy(), model.dynamics.h.detach().numpy()
    z = z0[1]
    for _ in range(19):
        z = A @ z + h
    np.testing.assert_allclose(batch["z"].values[1, -1], z)
    a = model.generate(20, n_trials=2, noise=True, observation_noise=True, seed=3)
    b = model.generate(20, n_trials=2, noise=True, observation_noise=True, seed=3)
    c = model.generate(20, n_trials=2, noise=True, observation_noise=True, seed=4)
    np.testing.assert_array_equal(a["x"].values, b["x"].values)
    assert not np.allclose(a["x"].values, c["x"].values)
    assert not np.allclose(a["z"].values[0], a["z"].values[1])     # trials get their own noise


def test_generate_from_x0_encodes_it():
    model = _linear_gaussian(m=3, n=2)
    x0 = np.array([[1.0, 2.0], [-0.5, 0.25]])
    run = model.generate(5, x0=x0)
    np.testing.assert_allclose(run["x"].values[:, 0], x0, atol=1e-10)


def test_generate_names_a_start_state_that_is_no_array():
    # audit-s53: a Dataset as x0 failed with xarray's "cannot directly convert an xarray.Dataset",
    # and a string with numpy's "could not convert string to float"
    import dsident

    model = _linear_gaussian(m=3, n=2)
    ds = dsident.as_dataset(np.array([[1.0, 2.0], [0.5, 0.1], [0.0, 0.3]]))
    with pytest.raises(TypeError, match=r"`x0` must be an array of shape \(2,\) or \(trial, 2\); got a Dataset\. "
                                        r"For the first samples of data use x0=ds\['x'\]\.isel\(time=0\)"):
        model.generate(5, x0=ds)
    run = model.generate(5, x0=ds["x"].isel(time=0))             # the advice works: it encodes x(0)
    np.testing.assert_allclose(run["x"].values[0, 0], [1.0, 2.0], atol=1e-10)
    with pytest.raises(TypeError, match=r"`z0` must be a numeric array of shape \(3,\) or \(trial, 3\); got str"):
        model.generate(5, z0="zeros")


def test_generate_from_a_partly_missing_x0_warns_and_matches_the_observed_entries():
    model = _linear_gaussian(m=3, n=2)
    x0 = np.array([[1.0, np.nan], [-0.5, 0.25]])
    with pytest.warns(UserWarning, match=r"misses 1 of its 4 entries \(NaN\) in row\(s\) \[0\]"):
        run = model.generate(5, x0=x0)
    np.testing.assert_allclose(run["x"].values[0, 0, 0], 1.0, atol=1e-8)       # the observed entry is met
    np.testing.assert_allclose(run["x"].values[1, 0], x0[1], atol=1e-8)
    with pytest.raises(ValueError, match="`x0` contains infinite values"):
        model.generate(5, x0=np.array([np.inf, 0.0]))


def test_generate_with_inputs():
    model = _linear_gaussian(m=3, n=2, k=1)
    u = np.zeros((2, 10, 1))
    u[1, 4, 0] = 1.0
    run = model.generate(10, n_trials=2, u=u)
    diff = run["z"].values[1] - run["z"].values[0]
    np.testing.assert_allclose(diff[:4], 0.0)
    np.testing.assert_allclose(diff[4], model.dynamics.C.detach().numpy()[:, 0])   # the pulse enters at step 4
    assert "u" in run and run["u"].shape == (2, 10, 1)
    with pytest.raises(ValueError, match="input_dim=1"):
        model.generate(10)
    with pytest.raises(ValueError, match=r"\(10, 1\)"):
        model.generate(10, u=np.zeros((10, 3)))


def test_generate_argument_errors():
    model = _linear_gaussian()
    with pytest.raises(ValueError, match="n_steps"):
        model.generate(0)
    with pytest.raises(ValueError, match="not both"):
        model.generate(5, z0=np.zeros(3), x0=np.zeros(2))
    for bad in ("0.1", True, 0.0, np.nan):        # a step read as text from a config file is not a step
        with pytest.raises(ValueError, match=r"`dt` must be a positive finite number \(the sampling step\)"):
            model.generate(5, dt=bad)
    with pytest.raises(ValueError, match="z0"):
        model.generate(5, z0=np.zeros(4))
    with pytest.raises(ValueError, match="n_trials=3"):
        model.generate(5, z0=np.zeros((2, 3)), n_trials=3)
    # inputs given to a model without any: said so, not "must have shape (5, 0)"
    with pytest.raises(ValueError, match=r"`u` was given \(shape \(5, 1\)\) but the dynamics take no inputs"):
        model.generate(5, u=np.ones((5, 1)))


class ExplodingDynamics(LatentDynamics):
    def __init__(self, latent_dim: int = 2) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.gain = nn.Parameter(torch.tensor(1e3))

    def step(self, z, u=None, dt=None):
        return z * self.gain


def test_divergence_is_reported_per_trial():
    model = StateSpaceModel(ExplodingDynamics(), Gaussian(2, 2, readout="identity"))
    with pytest.warns(RuntimeWarning, match="1 of 2 trial") as caught:
        run = model.generate(40, z0=np.array([[0.0, 0.0], [1.0, 1.0]]))
    assert caught[0].filename == __file__        # the warning points at the caller, not torch's wrapper
    assert run.attrs["diverged"] == 1 and run.attrs["diverged_at"] > 0
    assert np.isfinite(run["x"].values[0]).all()                     # the quiet trial is untouched
    assert np.isnan(run["z"].values[1, run.attrs["diverged_at"]:]).all()
    assert not np.isinf(run["z"].values).any()


def test_a_run_in_which_every_trial_diverges_stops_early():
    calls = []

    class Counting(ExplodingDynamics):
        def step(self, z, u=None, dt=None):
            calls.append(1)
            return super().step(z, u, dt)

    model = StateSpaceModel(Counting(), Gaussian(2, 2, readout="identity"))
    with pytest.warns(RuntimeWarning, match="2 of 2 trial"):
        run = model.generate(10_000, z0=np.array([[1.0, 1.0], [2.0, 2.0]]))
    # float32 overflows after ≈ 13 steps of ×1000; the run stops at the next check
    assert len(calls) == 50
    assert run.attrs["diverged_at"] < 50 and np.isnan(run["z"].values[:, 50:]).all()


def _stepped(dynamics, z0, n_steps):
    """The reference: step() called in a plain loop (what generate did before rollout existed)."""
    with torch.no_grad():
        zs, z = [z0], z0
        for _ in range(n_steps - 1):
            z = dynamics.step(z)
            zs.append(z)
        return torch.stack(zs, dim=1)


@pytest.mark.parametrize("kind", ["plrnn", "shallow clipped", "shallow", "linear (the base class's loop)"])
def test_rollout_gives_the_numbers_of_step_exactly(kind):
    from dsident.dynamics import ShallowPLRNN

    if kind == "plrnn":
        dyn = PLRNN(6, penalty="none", seed=1)
    elif kind.startswith("shallow"):
        dyn = ShallowPLRNN(3, 40, clip=kind == "shallow clipped", seed=1)
    else:
        dyn = LinearTestDynamics(3)
    z0 = torch.randn(4, dyn.latent_dim, generator=torch.Generator().manual_seed(0))
    fast, slow = dyn.rollout(z0, 3_000), _stepped(dyn, z0, 3_000)
    assert fast.shape == (4, 3_000, dyn.latent_dim) and not fast.requires_grad
    assert torch.isfinite(slow).all() and slow[:, 1:].std() > 0
    assert (slow[:, 1:] > 0).any() and (slow[:, 1:] < 0).any()     # the relu's kink is exercised
    assert torch.equal(fast, slow)   # bit for bit: the same operations in the same order
    model = StateSpaceModel(dyn, Gaussian(dyn.latent_dim, dyn.latent_dim, readout="identity"))
    np.testing.assert_array_equal(model.generate(3_000, z0=z0)["z"].values, slow.double().numpy())


# -- log joint ----------------------------------------------------------------------------------
def test_log_joint_matches_a_hand_computation():
    model = _linear_gaussian(m=3, n=2, k=1)
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 6, 3))
    x = rng.standard_normal((2, 6, 2))
    u = rng.standard_normal((2, 6, 1))
    x[0, 2, 1] = np.nan                                   # a missing sample
    length = np.array([6, 4])                             # a ragged second trial
    got = model.log_joint(x, torch.as_tensor(z), u=u, length=length).detach().numpy()

    p = {k: v.detach().numpy() for k, v in model.named_parameters()}
    A, h, C = p["dynamics.A"], p["dynamics.h"], p["dynamics.C"]
    B, b, var_x = p["observation.B"], p["observation.b"], np.exp(p["observation.log_var"])
    mu0, var0, var_z = p["initial_mean"], np.exp(p["log_initial_var"]), np.exp(p["log_process_var"])
    expected = []
    for i in range(2):
        total = stats.multivariate_normal(mu0, np.diag(var0)).logpdf(z[i, 0])
        for t in range(length[i]):
            if t > 0:
                total += stats.multivariate_normal(A @ z[i, t - 1] + C @ u[i, t] + h, np.diag(var_z)).logpdf(z[i, t])
            for n in range(2):
                if np.isfinite(x[i, t, n]):
                    total += stats.norm(B[n] @ z[i, t] + b[n], np.sqrt(var_x[n])).logpdf(x[i, t, n])
        expected.append(total)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    # a 2-D call is one trial
    np.testing.assert_allclose(model.log_joint(x[0], torch.as_tensor(z[0]), u=u[0]).item(), expected[0], rtol=1e-10)


def test_log_joint_is_differentiable_and_checks_shapes():
    model = _linear_gaussian()
    z = torch.zeros(1, 5, 3, dtype=torch.float64, requires_grad=True)
    model.log_joint(np.zeros((1, 5, 2)), z).sum().backward()
    assert z.grad is not None and torch.isfinite(z.grad).all()
    with pytest.raises(ValueError, match="same trials and times"):
        model.log_joint(np.zeros((1, 4, 2)), z)
    with pytest.raises(ValueError, match="length"):
        model.log_joint(np.zeros((1, 5, 2)), z, length=[7])


# -- predict / smooth ---------------------------------------------------------------------------
def test_predict_is_exact_on_noise_free_data_of_the_model():
    model = _linear_gaussian(m=2, n=2, readout="identity")   # encode(x_t) = z_t exactly
    data = model.generate(15, z0=np.array([[1.0, -1.0], [0.5, 2.0]]))
    data = data.assign(x=data["z"].rename(latent="channel").assign_coords(channel=["x0", "x1"]))
    pred = model.predict(data, 3)
    assert np.isnan(pred["x"].values[:, :3]).all()
    np.testing.assert_allclose(pred["x"].values[:, 3:], data["x"].values[:, 3:], atol=1e-10)
    with pytest.raises(ValueError, match="n"):
        model.predict(data, 0)


def test_predict_blanks_missing_starts_and_ragged_ends():
    import dsident

    model = _linear_gaussian(m=3, n=2)
    x = np.random.default_rng(0).standard_normal((2, 8, 2))
    x[0, 1] = np.nan                                       # a fully missing start
    ds = dsident.as_dataset([x[0], x[1, :6]], dt=0.1)      # the second trial has 6 steps
    pred = model.predict(ds, 2)["x"].values
    assert np.isnan(pred[0, 3]).all() and np.isfinite(pred[0, [2, 4, 7]]).all()
    assert np.isfinite(pred[1, 2:6]).all() and np.isnan(pred[1, 6:]).all()
    # a prediction from a partly observed start uses the observed channel only
    x_part = x.copy()
    x_part[0, 0, 1] = np.nan
    pred_part = model.predict(dsident.as_dataset(x_part, dt=0.1), 1)["x"].values
    z_part = model.encode(torch.as_tensor(x_part[0, :1]))
    np.testing.assert_allclose(pred_part[0, 1], model.decode(model.step(z_part)).detach().numpy()[0])


def test_predict_integrates_continuous_dynamics_over_the_actual_gaps_of_irregular_samples(irregular_gnode):
    # it stepped by the model's dt whatever the sample times said
    model, times, trials, ds = irregular_gnode
    assert ds.attrs["dt"] == pytest.approx(0.1)
    for n in (1, 2):
        pred = model.predict(ds, n)["x"].values
        for r, (t, x) in enumerate(zip(times, trials)):
            for i in range(len(t) - n):           # the independent route: one free run per gap
                z = x[i]
                for k in range(n):
                    z = model.generate(2, z0=z, dt=t[i + k + 1] - t[i + k])["z"].values[0, 1]
                np.testing.assert_allclose(pred[r, i + n], z, rtol=1e-10, atol=1e-12)
            assert np.isnan(pred[r, len(t):]).all()


def test_data_with_the_models_channels_in_another_order_are_refused(tmp_path):
    # a reloaded model scored / predicted data whose channels were its own names reordered,
    # reading each channel as another one without a word
    from dsident import as_dataset
    from dsident.metrics import evaluate

    model = _linear_gaussian(n=3)
    model.channel_names = ["V", "n", "h"]
    loaded = StateSpaceModel.load(model.save(tmp_path / "m"))
    x = model.generate(60, noise=True, seed=0)["x"].values[0]
    ordered = as_dataset(x, dt=0.1, channel_names=["V", "n", "h"])
    swapped = ordered.isel(channel=[2, 0, 1])
    with pytest.raises(ValueError, match=r"`data` has the model's channels in another order.*\['h', 'V', 'n'\]"):
        loaded.predict(swapped, 2)
    with pytest.raises(ValueError, match="`test` has the model's channels in another order"):
        evaluate(loaded, swapped, pe_steps=2)
    # the order the message asks for is the model's own, and other names are read by position
    by_name = loaded.predict(swapped.sel(channel=["V", "n", "h"]), 2)["x"].values
    np.testing.assert_array_equal(by_name, loaded.predict(x, 2)["x"].values)


def test_smooth_needs_an_attached_smoother():
    model = _linear_gaussian()
    x = np.zeros((1, 5, 2))
    with pytest.raises(RuntimeError, match="laplace-em.*svi"):
        model.smooth(x)
    model.smoother_ = lambda ds: ds.assign(z=ds["x"] * 0 + 1)
    assert float(model.smooth(x)["z"].mean()) == 1.0


# -- save / load --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_save_load_gives_identical_generation(tmp_path, dtype):
    model = StateSpaceModel(PLRNN(4, seed=2), Poisson(3, 4, link="softplus", readout="relu", bin_size=0.1),
                            dt=0.1, channel_names=["n1", "n2", "n3"]).to(dtype)
    with torch.no_grad():
        model.initial_mean.add_(0.3)
        model.observation.B.mul_(3.0)
    model.save(tmp_path / "m")
    loaded = StateSpaceModel.load(tmp_path / "m")
    assert loaded.log_process_var.dtype == dtype
    a = model.generate(50, n_trials=2, noise=True, observation_noise=True, seed=7)
    b = loaded.generate(50, n_trials=2, noise=True, observation_noise=True, seed=7)
    np.testing.assert_array_equal(a["x"].values, b["x"].values)
    np.testing.assert_array_equal(a["z"].values, b["z"].values)
    assert list(b["channel"].values) == ["n1", "n2", "n3"]
    assert loaded.config() == model.config()


def test_save_load_custom_dynamics_and_metadata(tmp_path):
    model = _linear_gaussian(k=1)
    model.save(tmp_path / "m", metadata={"note": "hello"})
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["format_version"] == FORMAT_VERSION and config["metadata"] == {"note": "hello"}
    assert config["dynamics"]["class"] == "LinearTestDynamics" and len(config["tensors"]["sha256"]) == 64
    loaded = StateSpaceModel.load(tmp_path / "m")
    z = torch.randn(2, 4, 3, dtype=torch.float64)
    x, u = np.zeros((2, 4, 2)), np.ones((2, 4, 1))
    torch.testing.assert_close(loaded.log_joint(x, z, u=u), model.log_joint(x, z, u=u))


def test_a_fast_weight_model_loads_in_a_fresh_interpreter(tmp_path):
    # ODE-RFWP and ORGaNICs fits read their latent through dsident.models' LatentFeatureObservation;
    # StateSpaceModel.load in a session that never imported dsident.models called it unknown
    import subprocess
    import sys

    from dsident.dynamics.rfwp import RecurrentFWP
    from dsident.models import LatentFeatureObservation

    dyn = RecurrentFWP(3, n_heads=2, hidden_dim=8, seed=0)
    obs = LatentFeatureObservation(2, dyn.latent_dim, dyn.observed_latent_dim)
    model = StateSpaceModel(dyn, obs, dt=0.1, channel_names=["a", "b"])
    path = model.save(tmp_path / "m")
    expected = model.generate(20, seed=0)["x"].values
    script = ("import sys, numpy as np; from dsident import StateSpaceModel; "
              "m = StateSpaceModel.load(sys.argv[1]); np.save(sys.argv[2], m.generate(20, seed=0)['x'].values)")
    done = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "x.npy")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), expected)


def test_tampered_tensor_file_is_refused(tmp_path):
    path = _linear_gaussian().save(tmp_path / "m")
    payload = bytearray((path / "tensors.pt").read_bytes())
    payload[-30] ^= 0xFF
    (path / "tensors.pt").write_bytes(bytes(payload))
    with pytest.raises(ValueError, match="sha256.*modified or corrupted"):
        StateSpaceModel.load(path)


def test_wrong_format_version_and_non_model_paths(tmp_path):
    path = _linear_gaussian().save(tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    config["format_version"] = FORMAT_VERSION + 1
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"format version {FORMAT_VERSION + 1}.*reads format version {FORMAT_VERSION}"):
        StateSpaceModel.load(path)
    with pytest.raises(ValueError, match="config.json is missing"):
        StateSpaceModel.load(tmp_path / "nothing")
    config["format_version"], config["dynamics"]["class"] = FORMAT_VERSION, "NoSuchDynamics"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="NoSuchDynamics.*known classes"):
        StateSpaceModel.load(path)


@pytest.mark.parametrize("key, value", [("tensors", None), ("dt", None), ("dynamics", None),
                                        ("observation", {"config": {}}), ("dtype", "float16x"), ("metadata", [])])
def test_a_damaged_config_is_refused_naming_the_entry(tmp_path, key, value):
    # a config.json with its format marker but a missing or mangled entry raised a bare KeyError,
    # TypeError or AttributeError from inside load
    path = _linear_gaussian().save(tmp_path / "m")
    config = json.loads((path / "config.json").read_text())
    if value is None:
        del config[key]
    else:
        config[key] = value
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=f"damaged: `{key}` must be"):
        StateSpaceModel.load(path)


def test_a_fit_output_folder_points_to_its_model(tmp_path):
    # `dsident fit --out run` writes run/config.json (the run's settings) beside run/model; loading
    # `run` said only that its config.json was "not a dsident model configuration"
    run = tmp_path / "run"
    _linear_gaussian().save(run / "model")
    (run / "config.json").write_text(json.dumps({"model": "plrnn", "zscore": {"mean": [0.0], "std": [2.0]}}))
    with pytest.raises(ValueError, match=r"`dsident fit` output folder.*run[/\\]model'.*z-units"):
        StateSpaceModel.load(run)
    assert StateSpaceModel.load(run / "model").config() == _linear_gaussian().config()


def test_save_is_atomic_and_keeps_the_previous_save(tmp_path, monkeypatch):
    model = _linear_gaussian()
    path = model.save(tmp_path / "m")
    before = {f.name: f.read_bytes() for f in path.iterdir()}
    calls = {"n": 0}
    real_write = model_module._write_synced

    def failing_write(target: Path, payload: bytes) -> None:
        calls["n"] += 1
        if target.name == "config.json":                 # fail after the tensors were written
            raise OSError("disk full")
        real_write(target, payload)

    monkeypatch.setattr(model_module, "_write_synced", failing_write)
    with torch.no_grad():
        model.initial_mean.add_(1.0)
    with pytest.raises(OSError, match="disk full"):
        model.save(path)
    with pytest.raises(OSError, match="disk full"):
        model.save(tmp_path / "fresh")
    assert calls["n"] == 4
    assert {f.name: f.read_bytes() for f in path.iterdir()} == before        # the old save is intact
    assert not (tmp_path / "fresh").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]                 # no temporary leftovers
    monkeypatch.undo()
    model.save(path)                                                          # overwriting a save works
    torch.testing.assert_close(StateSpaceModel.load(path).initial_mean, model.initial_mean)


def test_save_refuses_to_overwrite_other_things(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a saved dsident model"):
        _linear_gaussian().save(tmp_path / "data")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a saved dsident model"):
        _linear_gaussian().save(tmp_path / "file")
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_model_runs_on_the_gpu_like_on_the_cpu(tmp_path):
    cpu = StateSpaceModel(PLRNN(4, seed=0), Poisson(3, 4, readout="relu"), dt=0.1).double()
    gpu = StateSpaceModel.load(cpu.save(tmp_path / "m"), map_location="cuda")
    assert gpu.log_process_var.is_cuda
    a = cpu.generate(30, n_trials=2, noise=True, seed=0)
    b = gpu.generate(30, n_trials=2, noise=True, seed=0)
    np.testing.assert_allclose(a["x"].values, b["x"].values, rtol=1e-9)
    x = torch.as_tensor(a["x"].values).round()
    z = torch.as_tensor(a["z"].values)
    torch.testing.assert_close(gpu.log_joint(x.cuda(), z.cuda()).cpu(), cpu.log_joint(x, z))
    torch.testing.assert_close(gpu.observation.hess_log_prob(x.cuda(), z.cuda()).cpu(),
                               cpu.observation.hess_log_prob(x, z))
    torch.testing.assert_close(gpu.encode(x.cuda()).cpu(), cpu.encode(x))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("kind", ["plrnn", "shallow clipped"])
def test_rollout_on_cuda_gives_the_numbers_of_step_there_and_the_cpu_run(kind):
    from dsident.dynamics import ShallowPLRNN

    dyn = (PLRNN(6, penalty="none", seed=1) if kind == "plrnn" else ShallowPLRNN(3, 40, clip=True, seed=1)).double()
    z0 = torch.randn(4, dyn.latent_dim, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    on_cpu = dyn.rollout(z0, 500)
    dyn.cuda()
    fast, slow = dyn.rollout(z0.cuda(), 500), _stepped(dyn, z0.cuda(), 500)
    assert fast.is_cuda and torch.equal(fast, slow)
    # a short run, so that the chaotic models' device round-off has not grown yet
    torch.testing.assert_close(fast[:, :50].cpu(), on_cpu[:, :50], rtol=1e-9, atol=1e-9)


def test_a_discrete_time_map_refuses_another_step_and_an_ode_integrates_at_it():
    from dsident.dynamics import GatedNODE

    model = _linear_gaussian()                                   # a map, dt 0.1
    with pytest.raises(ValueError, match=r"`dt`=0.2: LinearTestDynamics is a discrete-time map"):
        model.generate(10, dt=0.2)
    assert model.generate(10, dt=0.1).sizes["time"] == 10       # its own step is fine
    ode = StateSpaceModel(GatedNODE(2, hidden_dim=8), Gaussian(2, 2, readout="identity"), dt=0.1).double()
    a = ode.generate(20, z0=np.array([1.0, -0.5]), dt=0.05)["z"].values[0]
    b = ode.generate(10, z0=np.array([1.0, -0.5]))["z"].values[0]
    assert not np.allclose(a[2], b[2])                          # half the step: not the same states
    assert np.allclose(a[::2][:5], b[:5], atol=0.05)            # but the same flow, sampled twice as often
