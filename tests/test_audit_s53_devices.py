"""Audit s53: the `device` argument, float32 / float64 precision and thread counts on a CPU-only machine."""
import numpy as np
import pytest
import torch

from dsident.inference.training import resolve_device
from dsident.models import PLRNN
from dsident.models.candidates import check_n_jobs


def _sine_data(n=400):
    t = np.arange(n) * 0.05
    return np.stack([np.sin(t), np.cos(t), np.sin(2 * t)], 1)


TINY = dict(method="teacher-forcing", n_epochs=1, batch_size=4, batches_per_epoch=2, seq_len=20, eval_every=0,
            progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_a_cuda_torch_device_without_cuda_is_a_clear_error():
    # a torch.device object was passed through unchecked; the fit then failed inside torch
    with pytest.raises(ValueError, match="`device=device\\(type='cuda'\\)` was requested but CUDA is not available"):
        PLRNN(latent_dim=3, seed=0).fit(_sine_data(), device=torch.device("cuda"), **TINY)
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device(torch.device("cuda", 0))


@pytest.mark.parametrize("device", ["gpu", "cudax", "cuda:abc", "mps", torch.device("meta")],
                         ids=["name-gpu", "cudax", "cuda-abc", "mps", "meta"])    # an id "gpu" would mark it a GPU test
def test_a_device_that_is_neither_cpu_nor_cuda_names_the_argument(device):
    # "cudax" / "cuda:abc" were read as CUDA requests (and, with CUDA, failed in torch's parser);
    # torch.device("meta") was accepted and the fit failed deep inside torch
    with pytest.raises(ValueError, match=r"`device` must be 'cpu', 'cuda', 'cuda:<index>', 'auto'"):
        resolve_device(device)


def test_cpu_devices_in_every_spelling_are_the_cpu():
    for device in ("cpu", "cpu:0", torch.device("cpu"), "auto" if not torch.cuda.is_available() else "cpu"):
        assert resolve_device(device).type == "cpu"
    est = PLRNN(latent_dim=3, seed=0).fit(_sine_data(), device=torch.device("cpu"), **TINY)
    assert est.history_["settings"]["device"] == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="'auto' is the CPU only without CUDA")
def test_n_jobs_takes_device_auto_where_auto_is_the_cpu():
    # a laptop script with device="auto" was refused as if it asked for a GPU
    assert check_n_jobs(2, 3, 0, {"device": "auto"}) == 2
    assert check_n_jobs(2, 3, 0, {"device": torch.device("cpu")}) == 2
    with pytest.raises(ValueError, match="one after another"):
        check_n_jobs(2, 3, 0, {"device": torch.device("cuda")})


def _small_ssm(dtype=None):
    from dsident import StateSpaceModel
    from dsident.dynamics import PLRNN as PLRNNDynamics
    from dsident.observations import Gaussian

    model = StateSpaceModel(PLRNNDynamics(3, seed=0), Gaussian(2, 3), dt=0.1)
    return model if dtype is None else model.to(dtype)


@pytest.mark.parametrize("where, error, fragment", [
    ("gpu", ValueError, "`map_location` must be 'cpu', 'cuda'"),       # torch: "don't know how to restore data location"
    (3, TypeError, "got map_location=3"),                               # torch: "'int' object is not callable"
    ("meta", ValueError, "`map_location` must be"),                     # torch: a state_dict size mismatch
])
def test_load_map_location_errors_name_the_argument(tmp_path, where, error, fragment):
    from dsident import StateSpaceModel

    path = _small_ssm().save(tmp_path / "m")
    with pytest.raises(error, match=fragment):
        StateSpaceModel.load(path, map_location=where)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_load_onto_cuda_without_cuda_names_map_location(tmp_path):
    from dsident import StateSpaceModel

    path = _small_ssm().save(tmp_path / "m")
    with pytest.raises(ValueError, match="`map_location='cuda'` was requested but CUDA is not available"):
        StateSpaceModel.load(path, map_location="cuda")
    assert next(StateSpaceModel.load(path, map_location=torch.device("cpu")).parameters()).device.type == "cpu"
    assert next(StateSpaceModel.load(path, map_location=None).parameters()).device.type == "cpu"


def test_a_model_of_float64_components_is_float64_throughout():
    # the model's own parameters (process noise, initial state) took torch's default dtype, so
    # float64 components made a mixed model whose generate failed in a float/double matmul
    from dsident import StateSpaceModel
    from dsident.dynamics import PLRNN as PLRNNDynamics
    from dsident.observations import Gaussian

    model = StateSpaceModel(PLRNNDynamics(3, seed=0).double(), Gaussian(2, 3).double(), dt=0.1)
    assert {p.dtype for p in model.parameters()} == {torch.float64}
    run = model.generate(30, z0=np.array([0.3, -0.2, 0.1]), seed=0)
    # against the same model converted as a whole (the route that already worked)
    whole = StateSpaceModel(PLRNNDynamics(3, seed=0), Gaussian(2, 3), dt=0.1)
    whole.load_state_dict(model.state_dict())
    whole = whole.to(torch.float64)
    np.testing.assert_allclose(run["x"].values, whole.generate(30, z0=np.array([0.3, -0.2, 0.1]), seed=0)["x"].values,
                               rtol=0, atol=1e-12)


def test_components_in_two_precisions_are_refused_by_name():
    from dsident import StateSpaceModel
    from dsident.dynamics import PLRNN as PLRNNDynamics
    from dsident.observations import Gaussian

    # built from parts in two precisions: refused when run, in its own words, not torch's; converted
    # whole (the common idiom), it runs
    mixed = StateSpaceModel(PLRNNDynamics(3, seed=0).double(), Gaussian(2, 3), dt=0.1)
    with pytest.raises(ValueError, match="got dynamics in float64 on cpu, observation in float32 on cpu"):
        mixed.generate(5)
    assert mixed.double().generate(5)["x"].dtype == np.float64


@pytest.fixture
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("kw", [dict(input_dim=1), dict(form="compact"), dict(time_constant=(0.1, 1.0)),
                                dict(form="compact", time_constant=(0.1, 1.0))])
def test_ltc_built_under_float64_holds_every_parameter_in_float64(float64_default, kw):
    # the reversal signs (erev, sensory_erev, reversal) and a spread of time constants were made with
    # .float(): float32 parameters inside a float64 model, trained and saved in float32
    from dsident.dynamics import LTC as LTCDynamics

    dyn = LTCDynamics(4, seed=0, **kw)
    assert {n: p.dtype for n, p in dyn.named_parameters() if p.dtype != torch.float64} == {}
    if "time_constant" in kw:        # the spread itself, at float64 precision: geometric from 0.1 to 1
        caps = torch.nn.functional.softplus(dyn.raw_capacitance if "form" not in kw else dyn.raw_tau)
        want = 0.1 * 10.0 ** (np.arange(4) / 3)
        np.testing.assert_allclose(caps.detach().numpy(), want, rtol=1e-12)


def test_log_joint_takes_a_latent_path_in_the_other_precision():
    # a float64 z (torch.as_tensor of a numpy array) for a float32 model failed in a matmul:
    # "expected m1 and m2 to have the same dtype, but got: double != float"
    model = _small_ssm()
    rng = np.random.default_rng(0)
    z64 = torch.as_tensor(rng.normal(size=(12, 3)), dtype=torch.float64).requires_grad_(True)
    x = rng.normal(size=(12, 2))
    lp = model.log_joint(x, z64)
    z32 = z64.detach().float().requires_grad_(True)
    ref = model.log_joint(x, z32)
    assert lp.dtype == torch.float32 and float(lp.detach()) == float(ref.detach())
    lp.backward()
    ref.backward()
    np.testing.assert_allclose(z64.grad.numpy(), z32.grad.numpy(), rtol=1e-6)
    # and a float64 model against the float32 one: equal to float32 precision
    lp64 = _small_ssm(torch.float64).log_joint(x, z64.detach())
    assert lp64.dtype == torch.float64 and abs(float(lp64.detach()) - float(ref.detach())) <= 1e-5 * abs(float(lp64.detach()))


def test_an_observation_instance_made_in_float32_fits_under_a_float64_default():
    # the estimator built the dynamics in float64 but kept its copy of the instance in float32:
    # a mixed model (refused, or before that a float/double matmul inside the fit)
    from dsident.observations import Gaussian

    obs = Gaussian(2, 3)                             # made before the user switched precision
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        est = PLRNN(latent_dim=3, observation=obs, seed=0).fit(_sine_data()[:, :2], **TINY)
    finally:
        torch.set_default_dtype(previous)
    assert {p.dtype for p in est.model_.parameters()} == {torch.float64}
    assert obs.B.dtype == torch.float32              # the hyperparameter itself is untouched
    assert np.isfinite(est.generate(20)["x"].values).all()


def test_analysis_takes_tensor_starts_that_require_grad():
    # model.initial_mean + 0.1 (or a GPU tensor) raised torch's "Can't call numpy() on Tensor that
    # requires grad" from np.asarray; generate already took such a z0
    from dsident import StateSpaceModel
    from dsident.analysis import lyapunov_spectrum, newton_fixed_points, vector_field_fixed_points
    from dsident.dynamics import GatedNODE as GatedNODEDynamics
    from dsident.dynamics import PLRNN as PLRNNDynamics
    from dsident.observations import Gaussian

    model = StateSpaceModel(PLRNNDynamics(3, seed=1), Gaussian(2, 3), dt=0.1)
    z0 = model.initial_mean + 0.1
    assert z0.requires_grad
    plain = z0.detach().numpy()
    np.testing.assert_allclose(lyapunov_spectrum(model, z0=z0, n_steps=100, transient=10),
                               lyapunov_spectrum(model, z0=plain, n_steps=100, transient=10), rtol=1e-12)
    np.testing.assert_allclose(newton_fixed_points(model, starts=z0[None]).points,
                               newton_fixed_points(model, starts=plain[None]).points, rtol=1e-12)
    ode = StateSpaceModel(GatedNODEDynamics(3, seed=1), Gaussian(2, 3), dt=0.1)
    np.testing.assert_allclose(vector_field_fixed_points(ode, starts=z0[None]).points,
                               vector_field_fixed_points(ode, starts=plain[None]).points, rtol=1e-12)  # the same up to the BLAS's summation order


def test_generate_takes_its_own_step_read_in_float32():
    # dt=np.float32(0.1) (a step read from a float32 file) is 0.10000000149: generate refused it as
    # "another dt" for a discrete map, while prediction_error and newton_fixed_points take it
    model = _small_ssm()
    model.dt = 0.1
    step = np.float32(0.1)
    assert float(step) != 0.1
    run = model.generate(12, z0=np.array([0.2, -0.1, 0.3]), dt=step)
    own = model.generate(12, z0=np.array([0.2, -0.1, 0.3]))
    np.testing.assert_array_equal(run["x"].values, own["x"].values)
    np.testing.assert_allclose(np.diff(run["time"].values), 0.1, rtol=1e-12)     # labelled with its own step
    with pytest.raises(ValueError, match="is a discrete-time map"):
        model.generate(12, dt=0.2)                 # another step is still refused
