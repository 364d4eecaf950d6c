"""Lyapunov exponents: Lorenz-63 reference values, linear maps with known spectra, Rosenstein."""
import numpy as np
import pytest

from dsident.analysis.lyapunov import lyapunov_spectrum, max_lyapunov_rosenstein
from dsident.data.systems import get_system, simulate
from linear_helpers import linear_model


def test_lorenz63_spectrum():
    system = get_system("lorenz63")
    spectrum = lyapunov_spectrum(system, n_steps=20_000, dt=0.01, transient=1_000)
    assert spectrum[0] == pytest.approx(0.905, rel=0.05)
    assert spectrum[1] == pytest.approx(0.0, abs=0.05)
    # the sum is the (constant) trace of the Jacobian: -(sigma + 1 + beta)
    assert spectrum.sum() == pytest.approx(-(10 + 1 + 8 / 3), abs=2e-3)
    # the leading exponent alone (one tangent vector) equals the first of the full spectrum
    full = lyapunov_spectrum(system, n_steps=1_000, dt=0.01, transient=100)
    leading = lyapunov_spectrum(system, n_steps=1_000, dt=0.01, transient=100, n_exponents=1)
    assert leading.shape == (1,) and leading[0] == pytest.approx(full[0], rel=1e-8)


def test_rosenstein_on_lorenz_trajectory():
    x = simulate("lorenz63", 10_000, 0.01, transient=20.0, rtol=1e-8, atol=1e-8)
    # documented tolerance: the data-side estimate is biased low by a few per cent; accept 10 %
    assert max_lyapunov_rosenstein(x, 0.01) == pytest.approx(0.905, rel=0.10)
    res = max_lyapunov_rosenstein(x, 0.01, return_curve=True)
    assert res.log_divergence.shape == res.time.shape and res.fit_range[0] < res.fit_range[1]


def test_linear_map_spectrum_is_log_of_singular_growth():
    # z -> M z with M = S diag(2, 0.5, 0.1) S^-1: exponents log 2, log 0.5, log 0.1 (per step, dt = 1)
    rng = np.random.default_rng(0)
    s = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    matrix = s @ np.diag([2.0, 0.5, 0.1]) @ np.linalg.inv(s)
    expected = np.log([2.0, 0.5, 0.1])
    exact = lyapunov_spectrum(lambda z: matrix @ z, np.ones(3), n_steps=400, jacobian_fn=lambda z: matrix, transient=50)
    np.testing.assert_allclose(exact, expected, atol=0.02)
    fd = lyapunov_spectrum(lambda z: matrix @ z, np.ones(3) * 1e-3, n_steps=400, transient=50, dt=0.5)
    np.testing.assert_allclose(fd, expected / 0.5, atol=0.04)


def test_state_space_model_uses_its_jacobian_and_dt():
    # a rotation scaled by 0.9 and a contraction by 0.5: exponents log 0.9, log 0.9, log 0.5 per step
    c, s = np.cos(0.3), np.sin(0.3)
    matrix = np.array([[0.9 * c, -0.9 * s, 0.0], [0.9 * s, 0.9 * c, 0.0], [0.0, 0.0, 0.5]])
    model = linear_model(matrix, dt=0.1)
    spectrum = lyapunov_spectrum(model, np.ones(3), n_steps=300, transient=10)
    np.testing.assert_allclose(spectrum, np.log([0.9, 0.9, 0.5]) / 0.1, atol=1e-6)

    class FittedEstimator:
        model_ = model

    np.testing.assert_allclose(lyapunov_spectrum(FittedEstimator(), np.ones(3), n_steps=300, transient=10, dt=1.0),
                               np.log([0.9, 0.9, 0.5]), atol=1e-7)


def test_diverging_trajectory_returns_nan_with_warning():
    with pytest.warns(RuntimeWarning, match="diverged"):
        out = lyapunov_spectrum(lambda z: z * z + 2.0, np.ones(1), n_steps=50, jacobian_fn=lambda z: 2 * z[None])
    assert np.isnan(out).all()


def test_clear_errors():
    with pytest.raises(ValueError, match="`dt` is required"):
        lyapunov_spectrum(get_system("lorenz63"), n_steps=10)
    with pytest.raises(ValueError, match="`z0` is required"):
        lyapunov_spectrum(lambda z: z, n_steps=10)
    with pytest.raises(ValueError, match="n_exponents"):
        lyapunov_spectrum(lambda z: z, np.ones(2), n_steps=10, n_exponents=3)
    with pytest.raises(TypeError, match="system"):
        lyapunov_spectrum(42, n_steps=10)


def test_uncoupled_directions_still_come_out_largest_first():
    # a diagonal map never mixes its axes: started on the axes, the QR columns would stay there
    # and report log|a_1| first, whatever its size
    a = np.array([0.5, -0.8, 0.9])
    kwargs = dict(z0=np.ones(3), n_steps=2_000, transient=100, jacobian_fn=lambda z: np.diag(a))
    full = lyapunov_spectrum(lambda z: a * z, **kwargs)
    np.testing.assert_allclose(full, np.sort(np.log(np.abs(a)))[::-1], rtol=1e-6)
    leading = lyapunov_spectrum(lambda z: a * z, n_exponents=1, **kwargs)
    assert leading[0] == pytest.approx(np.log(0.9), rel=1e-6)


def _stuart_landau_step(dt: float, omega: float = 2.0):
    """The exact time-dt flow of r' = r (1 - r²), θ' = ω: a limit cycle at r = 1 whose
    exponents are 0 (along the cycle) and -2 (the radial contraction d(r - r³)/dr at r = 1)."""
    def step(z: np.ndarray) -> np.ndarray:
        r, theta = np.hypot(z[0], z[1]), np.arctan2(z[1], z[0])
        e = np.exp(dt)
        r_next = r * e / np.sqrt(1.0 + r * r * (e * e - 1.0))
        return r_next * np.array([np.cos(theta + omega * dt), np.sin(theta + omega * dt)])
    return step


@pytest.mark.parametrize("exponents, tol, verdict", [
    ([0.905, 0.0, -14.57], 0.1, "chaotic"),
    ([0.0, -2.0], 0.1, "periodic or quasi-periodic"),
    ([-0.5, -1.0], 0.1, "fixed point"),
    ([0.1, -1.0], 0.1, "periodic or quasi-periodic"),     # the tolerance itself counts as zero
    ([-0.1, -1.0], 0.1, "periodic or quasi-periodic"),
    ([-1.0, 0.101], 0.1, "chaotic"),                      # order does not matter
])
def test_spectrum_verdict_reads_the_largest_exponent_against_the_zero_tolerance(exponents, tol, verdict):
    from dsident.analysis import spectrum_verdict

    assert spectrum_verdict(exponents, zero_tol=tol) == verdict


def test_spectrum_verdict_of_computed_spectra_of_a_limit_cycle_a_sink_and_lorenz():
    from dsident.analysis import spectrum_verdict

    dt, n = 0.05, 4_000
    cycle = lyapunov_spectrum(_stuart_landau_step(dt), z0=np.array([0.3, 0.0]), n_steps=n, dt=dt, transient=400)
    assert cycle[0] == pytest.approx(0.0, abs=0.01) and cycle[1] == pytest.approx(-2.0, abs=0.02)
    assert spectrum_verdict(cycle, zero_tol=20.0 / (n * dt)) == "periodic or quasi-periodic"
    sink = lyapunov_spectrum(lambda z: np.exp(-0.5 * dt) * z, z0=np.ones(2), n_steps=n, dt=dt, transient=0)
    assert sink == pytest.approx([-0.5, -0.5]) and spectrum_verdict(sink, zero_tol=20.0 / (n * dt)) == "fixed point"
    lorenz = lyapunov_spectrum(get_system("lorenz63"), n_steps=5_000, dt=0.01, transient=500)
    assert spectrum_verdict(lorenz, zero_tol=20.0 / (5_000 * 0.01)) == "chaotic"


@pytest.mark.parametrize("exponents, tol, name", [([], 0.1, "exponents"), ([np.nan, 0.0], 0.1, "exponents"),
                                                  ([0.0], 0.0, "zero_tol"), ([0.0], np.inf, "zero_tol")])
def test_spectrum_verdict_refuses_bad_input_by_name(exponents, tol, name):
    from dsident.analysis import spectrum_verdict

    with pytest.raises(ValueError, match=name):
        spectrum_verdict(exponents, zero_tol=tol)


def test_lapack_qr_step_matches_numpy_and_flags_every_non_finite_entry():
    from dsident.analysis.lyapunov import _qr

    rng = np.random.default_rng(0)
    for m, k in [(1, 1), (3, 3), (6, 4), (16, 16)]:
        a = rng.standard_normal((m, k))
        q, diag_r = _qr(a)
        q_np, r_np = np.linalg.qr(a)
        np.testing.assert_allclose(np.abs(diag_r), np.abs(np.diag(r_np)), rtol=1e-12)
        np.testing.assert_allclose(q * np.sign(diag_r), q_np * np.sign(np.diag(r_np)), atol=1e-12)
    # a NaN above the diagonal of a column whose reflection is skipped never reaches R's
    # diagonal; the step must still report it
    a = np.array([[0.0, 0.0, np.nan], [0.0, 0.0, -1.2], [0.0, 0.0, 0.0]])
    assert _qr(a)[1] is None
    for bad in (np.nan, np.inf, -np.inf):
        a = rng.standard_normal((5, 3))
        a[rng.integers(5), rng.integers(3)] = bad
        assert _qr(a)[1] is None


def test_a_models_own_run_is_used_as_the_path_and_any_other_is_stepped_again():
    import torch

    from dsident import StateSpaceModel
    from dsident.analysis import lyapunov as lyap
    from dsident.dynamics import ShallowPLRNN
    from dsident.observations import Gaussian

    model = StateSpaceModel(ShallowPLRNN(4, 32, clip=True, seed=1), Gaussian(2, 4, readout="identity"))
    run = model.generate(600, seed=0)["z"].values[0]
    stepped = lyapunov_spectrum(model, z0=run[0], n_steps=500, transient=100)
    calls = []
    real_step = model.step

    def counting_step(*args, **kwargs):
        calls.append(1)
        return real_step(*args, **kwargs)

    model.step = counting_step
    given = lyapunov_spectrum(model, z0=run[0], n_steps=500, transient=100, path=run)
    assert len(calls) <= 2                      # the consistency check and the step after the last state
    np.testing.assert_allclose(given, stepped, rtol=1e-12, atol=1e-12)
    # a noisy run of the same model, or one from another start, is not the model's path: stepped again
    noisy = real_step.__self__.generate(600, seed=0, noise=True)["z"].values[0]
    for other in (noisy, run + 0.01):
        calls.clear()
        np.testing.assert_allclose(lyapunov_spectrum(model, z0=run[0], n_steps=500, transient=100, path=other),
                                   stepped, rtol=1e-12, atol=1e-12)
        assert len(calls) >= 600
    assert lyap._usable_path(model, run[:10], torch.as_tensor(run[:1], dtype=torch.float32), 600) is None


def test_model_jacobians_are_evaluated_in_batches_bounded_in_memory(monkeypatch):
    # the same spectrum whether the Jacobians come in batches of 64 or 50 steps or all at once, and no batch
    # the dynamics is asked for exceeds the byte budget (all at once held T·M² doubles: 16 GB for
    # the 22 000-step late run of an M = 300 PLRNN)
    from dsident import StateSpaceModel
    from dsident.analysis import lyapunov as lyap
    from dsident.dynamics import ShallowPLRNN
    from dsident.observations import Gaussian

    model = StateSpaceModel(ShallowPLRNN(4, 32, clip=True, seed=1), Gaussian(2, 4, readout="identity"))
    run = model.generate(700, seed=0)["z"].values[0]
    sizes = []
    real_jacobian = model.dynamics.jacobian

    def recording_jacobian(z, u, dt):
        sizes.append(int(z.shape[0]))
        return real_jacobian(z, u, dt)

    monkeypatch.setattr(model.dynamics, "jacobian", recording_jacobian)
    whole = lyapunov_spectrum(model, z0=run[0], n_steps=600, transient=100, path=run)
    assert sizes == [700]                       # batch_size 4 096 and a budget far above 700·16 doubles
    sizes.clear()
    monkeypatch.setattr(lyap, "_JACOBIAN_BATCH_BYTES", 8 * 4 * 4 * 64)   # 64 Jacobians of 4 × 4
    batched = lyapunov_spectrum(model, z0=run[0], n_steps=600, transient=100, path=run)
    assert max(sizes) == 64 and sum(sizes) == 700
    np.testing.assert_allclose(batched, whole, rtol=1e-12, atol=1e-12)
    sizes.clear()
    np.testing.assert_allclose(lyapunov_spectrum(model, z0=run[0], n_steps=600, transient=100, path=run,
                                                 batch_size=50), whole, rtol=1e-12, atol=1e-12)
    assert max(sizes) == 50
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer; got 0"):
        lyapunov_spectrum(model, z0=run[0], n_steps=600, batch_size=0)


def test_a_non_finite_model_jacobian_is_reported_as_diverged(monkeypatch):
    import torch

    model = linear_model(np.diag([0.9, 0.5]), dt=1.0)
    real_jacobian = model.dynamics.jacobian

    def poisoned(z, u, dt):
        jac = real_jacobian(z, u, dt).clone()
        jac[-1, 0, 1] = torch.nan                  # the last step of each batch
        return jac

    monkeypatch.setattr(model.dynamics, "jacobian", poisoned)
    with pytest.warns(RuntimeWarning, match="diverged"):
        out = lyapunov_spectrum(model, np.ones(2), n_steps=100, transient=10)
    assert np.isnan(out).all()


def test_a_models_start_state_of_the_wrong_shape_or_not_finite_is_named():
    model = linear_model(np.diag([0.5, 0.25]), dt=0.1)
    with pytest.raises(ValueError, match=r"`z0` must be a finite latent state of shape \(2,\) \(latent_dim\); got "
                                         r"shape \(3,\)"):
        lyapunov_spectrum(model, z0=np.zeros(3), n_steps=10)
    with pytest.raises(ValueError, match="with non-finite entries"):
        lyapunov_spectrum(model, z0=np.array([np.nan, 0.0]), n_steps=10)
    np.testing.assert_allclose(lyapunov_spectrum(model, z0=np.ones(2), n_steps=10), np.log([0.5, 0.25]) / 0.1)


def test_a_systems_or_step_functions_bad_start_is_named_not_reported_as_divergence():
    lorenz = get_system("lorenz63")
    # a short start failed inside the vector field ("not enough values to unpack")
    with pytest.raises(ValueError, match=r"`z0` must be a finite state of shape \(3,\)"):
        lyapunov_spectrum(lorenz, z0=[1.0, 2.0], n_steps=10, dt=0.01)
    # a NaN start came back as NaN exponents and a warning that the trajectory diverged
    with pytest.raises(ValueError, match="`z0` must be a finite state"):
        lyapunov_spectrum(lorenz, z0=[np.nan, 1.0, 1.0], n_steps=10, dt=0.01)
    with pytest.raises(ValueError, match="`z0` must be a finite state"):
        lyapunov_spectrum(lambda z: 0.5 * z, z0=[np.nan, 1.0], n_steps=10)
    # a Jacobian of the wrong size failed in matmul's words
    with pytest.raises(ValueError, match=r"`jacobian_fn`\) be \(2, 2\); got \(2,\) and \(3, 3\)"):
        lyapunov_spectrum(lambda z: 0.5 * z, z0=[1.0, 2.0], n_steps=10, jacobian_fn=lambda z: np.eye(3))
    # the same map with a right Jacobian: log 0.5 per step, twice
    np.testing.assert_allclose(lyapunov_spectrum(lambda z: 0.5 * z, z0=[1.0, 2.0], n_steps=10,
                                                 jacobian_fn=lambda z: 0.5 * np.eye(2)), [np.log(0.5)] * 2)


def test_a_models_non_finite_input_is_named_not_reported_as_divergence():
    import torch

    from dsident.dynamics import PLRNN
    from dsident.model import StateSpaceModel
    from dsident.observations import Gaussian

    dyn = PLRNN(2, input_dim=1, penalty="none")
    dyn.set_params(A=np.array([0.5, 0.25]), W=np.zeros((2, 2)), h=np.zeros(2), C=np.ones((2, 1)))
    model = StateSpaceModel(dyn, Gaussian(2, 2, readout="identity"), dt=1.0).double()
    u = np.zeros((60, 1))
    np.testing.assert_allclose(lyapunov_spectrum(model, np.ones(2), n_steps=50, transient=10, u=u), np.log([0.5, 0.25]))
    u[30] = np.nan
    with pytest.raises(ValueError, match="`u` must be finite"):
        lyapunov_spectrum(model, np.ones(2), n_steps=50, transient=10, u=u)
    assert torch.isfinite(next(model.parameters())).all()


def test_rosenstein_refuses_a_non_positive_number_of_reference_points_by_name():
    x = np.sin(0.1 * np.arange(2_000))
    with pytest.raises(ValueError, match="`max_points`"):
        max_lyapunov_rosenstein(x, max_points=0)


def test_inputs_and_a_path_are_refused_for_a_system_or_a_step_function():
    # a System and a step function run from z0 alone: u and path were dropped without a word
    a = np.diag([0.5, 0.9])
    step = lambda z: a @ z                                          # noqa: E731
    expected = np.log([0.9, 0.5])
    np.testing.assert_allclose(lyapunov_spectrum(step, z0=[1.0, 1.0], n_steps=2000, transient=100), expected,
                               atol=1e-3)
    with pytest.raises(ValueError, match=r"`u` apply to a model .* only; got function"):
        lyapunov_spectrum(step, z0=[1.0, 1.0], n_steps=200, u=np.ones((200, 1)))
    with pytest.raises(ValueError, match=r"`u` and `path` apply to a model"):
        lyapunov_spectrum(get_system("lorenz63"), n_steps=10, dt=0.01, u=np.ones((1010, 1)), path=np.ones((1010, 3)))


def test_rosenstein_reads_a_torch_tensor_as_its_array():
    # audit-s53: `getattr(x, "values", x)` took a tensor's `values` *method* and failed with
    # "float() argument must be ... not 'builtin_function_or_method'"
    import torch

    t = np.arange(1500) * 0.01
    x = np.stack([np.sin(3 * t), np.cos(3 * t)], -1)
    expected = max_lyapunov_rosenstein(x, 0.01)
    assert abs(expected) < 0.05                     # a limit cycle: λ_max = 0
    assert max_lyapunov_rosenstein(torch.tensor(x), 0.01) == expected
    assert max_lyapunov_rosenstein(torch.tensor(x, requires_grad=True), 0.01) == expected
    with pytest.raises(TypeError, match=r"`x` must be a numeric array .*; got str\."):
        max_lyapunov_rosenstein("abc", 0.01)


def test_kaplan_yorke_refuses_several_spectra_and_rosenstein_a_constant_series():
    # audit-s53: a (models, M) array was ravelled into one pooled spectrum and given a dimension;
    # a constant series gave a NaN exponent without a word
    from dsident.analysis import kaplan_yorke_dimension

    lorenz = [0.905, 0.0, -14.57]
    assert kaplan_yorke_dimension(lorenz) == pytest.approx(2 + 0.905 / 14.57)   # 2 + λ1 / |λ3|
    assert kaplan_yorke_dimension([lorenz]) == pytest.approx(2 + 0.905 / 14.57)  # one row is one spectrum
    with pytest.raises(ValueError, match=r"`exponents` must be one spectrum, shape \(M,\); got shape \(2, 3\)"):
        kaplan_yorke_dimension([lorenz, [-0.1, -0.2, -0.3]])
    with pytest.raises(ValueError, match=r"`x` is constant over its finite samples"):
        max_lyapunov_rosenstein(np.full((500, 2), 3.0), 0.01)
