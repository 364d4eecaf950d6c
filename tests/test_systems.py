"""Benchmark systems: Jacobians against finite differences, simulate against exact solutions."""
import numpy as np
import pytest
from scipy.linalg import expm
from scipy.signal import find_peaks

from dsident.data.systems import SYSTEMS, System, get_system, rr_process, simulate

ANALYTIC = ["lorenz63", "rossler", "lorenz96", "bursting_neuron"]


def _central_difference(f, x, h):
    jac = np.empty((x.size, x.size))
    for j in range(x.size):
        e = np.zeros_like(x)
        e[j] = h[j]
        jac[:, j] = (f(x + e) - f(x - e)) / (2 * h[j])
    return jac


@pytest.mark.parametrize("name", ANALYTIC)
def test_analytic_jacobian_matches_finite_differences(name):
    system = get_system(name)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = system.default_x0 + system.state_scale * rng.normal(size=system.dim)
        if name == "bursting_neuron":
            x[1:] = np.abs(x[1:])                       # gating variables are fractions
        numeric = _central_difference(lambda y: system.rhs(0.0, y), x, 1e-5 * system.state_scale)
        np.testing.assert_allclose(system.jacobian(x), numeric, rtol=1e-5, atol=1e-7 * np.abs(numeric).max())


def test_ecgsyn_jacobian_is_finite_difference_of_its_rhs():
    system = get_system("ecgsyn", duration=20.0)
    x = np.array([0.6, 0.7, 0.01])
    numeric = _central_difference(lambda y: system.rhs(1.3, y), x, np.full(3, 1e-6))
    np.testing.assert_allclose(system.jacobian(x, t=1.3), numeric, rtol=1e-4, atol=1e-6)


def test_lorenz63_fixed_points_are_zeros_of_the_rhs():
    s = get_system("lorenz63")
    beta, rho = s.params["beta"], s.params["rho"]
    c = np.sqrt(beta * (rho - 1))
    for point in ([0, 0, 0], [c, c, rho - 1], [-c, -c, rho - 1]):
        np.testing.assert_allclose(s.rhs(0.0, np.array(point, dtype=float)), 0.0, atol=1e-12)


def test_lorenz96_uniform_state_is_a_fixed_point():
    s = get_system("lorenz96", n=7, forcing=5.0)
    np.testing.assert_allclose(s.rhs(0.0, np.full(7, 5.0)), 0.0, atol=1e-14)
    assert s.dim == 7 and len(s.channel_names) == 7


def test_bursting_neuron_rhs_at_rest_matches_hand_computation():
    s = get_system("bursting_neuron")
    v, n, h = -60.0, 0.1, 0.05
    p = s.params
    boltz = lambda vh, k: 1 / (1 + np.exp((vh - v) / k))  # noqa: E731
    current = (p["g_L"] * (v - p["E_L"]) + p["g_Na"] * boltz(p["V_hNa"], p["k_Na"]) * (v - p["E_Na"])
               + p["g_K"] * n * (v - p["E_K"]) + p["g_M"] * h * (v - p["E_K"])
               + p["g_NMDA"] / (1 + 0.33 * np.exp(-0.0625 * v)) * (v - p["E_NMDA"]))
    expected = [-current / p["C_m"], (boltz(-25, 5) - n) / 1.0, (boltz(-15, 5) - h) / 200.0]
    np.testing.assert_allclose(s.rhs(0.0, np.array([v, n, h])), expected, rtol=1e-12)


def test_simulate_matches_matrix_exponential_for_a_linear_system():
    a = np.array([[-0.1, 1.0], [-1.0, -0.1]])
    linear = System("linear", 2, {}, lambda t, x: a @ x, lambda x, t=0.0: a, np.array([1.0, 0.0]),
                    ("p", "q"), np.ones(2))
    out = simulate(linear, 50, 0.2, transient=1.0)
    exact = np.stack([expm(a * (1.0 + 0.2 * k)) @ linear.default_x0 for k in range(50)])
    np.testing.assert_allclose(out, exact, atol=1e-9)


def test_simulate_two_solvers_agree_on_lorenz_over_a_short_horizon():
    a = simulate("lorenz63", 300, 0.01, method="DOP853")
    b = simulate("lorenz63", 300, 0.01, method="LSODA", rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_simulate_seed_reproducible_and_distinct():
    a = simulate("lorenz63", 10, 0.01, seed=1)
    np.testing.assert_array_equal(a, simulate("lorenz63", 10, 0.01, seed=1))
    assert not np.allclose(a, simulate("lorenz63", 10, 0.01, seed=2))


def test_simulate_detects_divergence():
    blowup = System("blowup", 1, {}, lambda t, x: x ** 2, lambda x, t=0.0: 2 * x[None], np.array([1.0]),
                    ("x",), np.ones(1))
    with pytest.raises(RuntimeError, match="blowup"):
        simulate(blowup, 30, 0.1)


@pytest.mark.parametrize("kwargs, match", [({"n_steps": 0}, "n_steps"), ({"dt": -1.0}, "dt"),
                                           ({"transient": -1.0}, "transient"), ({"x0": [1.0, 2.0]}, "x0")])
def test_simulate_argument_errors(kwargs, match):
    args = {"n_steps": 5, "dt": 0.01, **kwargs}
    with pytest.raises(ValueError, match=match):
        simulate("lorenz63", args.pop("n_steps"), args.pop("dt"), **args)


def test_get_system_errors_list_choices():
    with pytest.raises(ValueError, match="lorenz63"):
        get_system("lorenz64")
    with pytest.raises(TypeError, match="valid parameters"):
        get_system("lorenz63", gamma=1.0)
    assert set(SYSTEMS) == {"lorenz63", "rossler", "lorenz96", "bursting_neuron", "ecgsyn"}


def test_bursting_neuron_bursts_with_fast_spikes():
    v = simulate("bursting_neuron", 4000, 0.5, transient=500.0)[:, 0]
    peaks, _ = find_peaks(v, height=-30.0)
    isi = np.diff(peaks)
    # spikes a few samples apart inside bursts, and long gaps between bursts (~150 ms = 300 samples)
    assert np.median(isi) < 15 and isi.max() > 100


def test_rr_process_has_requested_mean_and_std():
    _, rr = rr_process(1000.0, hr_mean=75.0, hr_std=2.0, seed=0)
    assert rr.mean() == pytest.approx(60 / 75, rel=1e-9)
    assert rr.std() == pytest.approx(60 * 2.0 / 75 ** 2, rel=1e-9)


def test_ecgsyn_beats_at_the_mean_heart_rate():
    fs = 250.0
    z = simulate(get_system("ecgsyn", duration=40.0, hr_mean=72.0, seed=3), int(30 * fs), 1 / fs, transient=2.0)[:, 2]
    peaks, _ = find_peaks(z, height=z.mean() + 3 * z.std(), distance=int(0.3 * fs))
    assert abs(len(peaks) - 30 * 72 / 60) <= 2
