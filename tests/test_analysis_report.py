"""analyze_dynamics and kaplan_yorke_dimension against maps whose answers are known in closed form."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dsident.analysis import VERDICTS, analyze_dynamics, free_run_regime, kaplan_yorke_dimension
from dsident.dynamics import PLRNN
from dsident.dynamics.base import LatentDynamics
from dsident.experiments.runner import _write_netcdf
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian

GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class LogisticMap(LatentDynamics):
    """z' = r z (1 - z); chaotic at r = 4 with λ = log 2 per step (test-local)."""

    def __init__(self, latent_dim: int = 1, r: float = 4.0) -> None:
        super().__init__()
        self.latent_dim, self.r = latent_dim, r

    def step(self, z, u=None, dt=None):
        return self.r * z * (1.0 - z)


class QuadraticMap(LatentDynamics):
    """z' = 1 - a z² (test-local); at a = 0.9 a stable 2-cycle (1 ± sqrt(4a - 3)) / (2a)."""

    def __init__(self, latent_dim: int = 1, a: float = 0.9) -> None:
        super().__init__()
        self.latent_dim, self.a = latent_dim, a

    def step(self, z, u=None, dt=None):
        return 1.0 - self.a * z ** 2


class PolarMap(LatentDynamics):
    """r' = sqrt(r), φ' = φ + θ (test-local): a quasi-periodic orbit on the unit circle with
    exponents (0, log 1/2) per step."""

    def __init__(self, latent_dim: int = 2, theta: float = 0.1) -> None:
        super().__init__()
        self.latent_dim, self.theta = latent_dim, theta

    def step(self, z, u=None, dt=None):
        r = torch.sqrt(z[:, 0] ** 2 + z[:, 1] ** 2)
        phi = torch.atan2(z[:, 1], z[:, 0]) + self.theta
        return torch.stack([torch.sqrt(r) * torch.cos(phi), torch.sqrt(r) * torch.sin(phi)], dim=1)


def _model(dynamics, *, dt=1.0, start=None):
    m = dynamics.latent_dim
    ssm = StateSpaceModel(dynamics, Gaussian(1, m, readout="identity"), dt=dt).double()
    if start is not None:
        with torch.no_grad():
            ssm.initial_mean.copy_(torch.as_tensor(start, dtype=torch.float64))
    return ssm


# ----------------------------------------------------------------------------- Kaplan-Yorke


@pytest.mark.parametrize("exponents, expected", [
    ([0.905, 0.0, -14.57], 2.0 + 0.905 / 14.57),       # Lorenz-63
    ([-0.1, -2.0], 0.0),                                # a stable fixed point
    ([0.5, 0.2], 2.0),                                  # every partial sum >= 0: the full dimension
    ([0.5, -1.0, -2.0], 1.0 + 0.5 / 1.0),
    ([-1.0, 0.3, 0.1], 2.0 + 0.4 / 1.0),                # order of the input does not matter
])
def test_kaplan_yorke_dimension_matches_the_formula(exponents, expected):
    assert kaplan_yorke_dimension(exponents) == pytest.approx(expected, rel=1e-12)


def test_kaplan_yorke_dimension_counts_exponents_inside_the_tolerance_as_zero():
    # a limit cycle's zero exponent from a finite run (session 47's Van der Pol fit)
    cycle = [-0.005784, -3.347, -49.21]
    assert kaplan_yorke_dimension(cycle) == 0.0
    assert kaplan_yorke_dimension(cycle, zero_tol=0.01) == 1.0
    assert kaplan_yorke_dimension(cycle, zero_tol=0.001) == 0.0        # outside the tolerance it stays
    # Lorenz-63 with a slightly wrong zero exponent gets the textbook value back
    assert kaplan_yorke_dimension([0.905, -0.004, -14.57], zero_tol=0.01) == pytest.approx(2 + 0.905 / 14.57)
    with pytest.raises(ValueError, match="zero_tol"):
        kaplan_yorke_dimension(cycle, zero_tol=-1.0)


def test_kaplan_yorke_dimension_is_nan_for_a_diverged_spectrum_and_refuses_an_empty_one():
    assert math.isnan(kaplan_yorke_dimension([0.1, float("nan")]))
    with pytest.raises(ValueError, match="exponents"):
        kaplan_yorke_dimension([])


# ----------------------------------------------------------------------------- verdicts


def test_affine_plrnn_settles_on_its_one_fixed_point_with_the_analytic_exponents():
    # W = 0: z' = a z + h, one fixed point h / (1 - a), exponents log|a| / dt
    dyn = PLRNN(2)
    a, h, dt = np.array([0.5, -0.8]), np.array([0.3, -0.2]), 0.1
    with torch.no_grad():
        dyn.a.copy_(torch.as_tensor(a))
        dyn.W.zero_()
        dyn.h.copy_(torch.as_tensor(h))
    report = analyze_dynamics(_model(dyn, dt=dt, start=[1.0, 1.0]), n_steps=500, transient=100, max_period=2)
    assert report.verdict == "fixed point" and report.cycle_period is None
    np.testing.assert_allclose(report.lyapunov, np.sort(np.log(np.abs(a)))[::-1] / dt, rtol=1e-6)
    assert report.kaplan_yorke == 0.0 and math.isnan(report.dominant_period)
    assert "- dominant period: none (the run stands still)" in report.to_markdown()
    assert len(report.fixed_points) == 1 and bool(report.fixed_points.stable[0])
    np.testing.assert_allclose(report.fixed_points.points[0, 0], h / (1 - a), rtol=1e-6)
    # an affine map has no 2-cycle: the exact search is run and finds none
    assert [c.period for c in report.cycles] == [2] and len(report.cycles[0]) == 0


def test_logistic_map_at_r4_is_chaotic_with_exponent_log2_and_both_fixed_points():
    report = analyze_dynamics(_model(LogisticMap(), start=[0.3]), n_steps=8_000, transient=100)
    assert report.verdict == "chaotic"
    assert report.lyapunov[0] == pytest.approx(math.log(2.0), abs=0.03)
    assert report.kaplan_yorke == 1.0
    # fixed points 0 (slope 4) and 3/4 (slope -2), both unstable; no cycle search off the PLRNN
    order = np.argsort(report.fixed_points.points[:, 0, 0])
    np.testing.assert_allclose(report.fixed_points.points[order, 0, 0], [0.0, 0.75], atol=1e-8)
    np.testing.assert_allclose(report.fixed_points.eigenvalues[order, 0].real, [4.0, -2.0], atol=1e-6)
    assert not report.fixed_points.stable.any() and report.cycles == []


def test_quadratic_map_settles_on_its_two_cycle_with_the_analytic_multiplier():
    a = 0.9
    x1, x2 = (1 + math.sqrt(4 * a - 3)) / (2 * a), (1 - math.sqrt(4 * a - 3)) / (2 * a)
    report = analyze_dynamics(_model(QuadraticMap(a=a), start=[0.2]), n_steps=2_000, transient=500)
    assert report.verdict == "attracting cycle" and report.cycle_period == 2
    # λ = log|f'(x1) f'(x2)| / 2 = log(4 a² x1 x2) / 2 per step
    assert report.lyapunov[0] == pytest.approx(math.log(4 * a * a * x1 * x2) / 2, rel=1e-6)
    tail = np.sort(report.trajectory["z"].values[0, -2:, 0])
    np.testing.assert_allclose(tail, [x2, x1], atol=1e-9)
    # both fixed points, (-1 ± sqrt(1 + 4a)) / (2a), are unstable (slope -2 a x*: -1.14 and 3.14)
    xs = np.sort([(-1 - math.sqrt(1 + 4 * a)) / (2 * a), (-1 + math.sqrt(1 + 4 * a)) / (2 * a)])
    order = np.argsort(report.fixed_points.points[:, 0, 0])
    np.testing.assert_allclose(report.fixed_points.points[order, 0, 0], xs, atol=1e-8)
    np.testing.assert_allclose(report.fixed_points.eigenvalues[order, 0].real, -2 * a * xs, rtol=1e-8)
    assert not report.fixed_points.stable.any()


def test_quasi_periodic_circle_map_has_a_zero_exponent_and_the_rotation_period():
    theta, dt = 2 * math.pi * GOLDEN / 20, 0.05          # an irrational rotation, ≈ 32.4 steps a turn
    report = analyze_dynamics(_model(PolarMap(theta=theta), dt=dt, start=[0.3, 0.4]), n_steps=20_000,
                              transient=200)
    assert report.verdict == "periodic or quasi-periodic"
    lam_step = report.lyapunov * dt
    assert abs(lam_step[0]) <= report.info["zero_tol"]
    assert lam_step[1] == pytest.approx(math.log(0.5), abs=1e-3)
    turn = 2 * math.pi / theta * dt
    assert report.dominant_period == pytest.approx(turn, rel=0.02)
    assert report.kaplan_yorke == 1.0               # the zero exponent counts as zero: a curve, not a point


def test_diverging_run_is_reported_not_raised():
    dyn = PLRNN(1)
    with torch.no_grad():
        dyn.a.fill_(1.5)
        dyn.h.fill_(0.1)
    with pytest.warns(RuntimeWarning, match="diverged"):
        report = analyze_dynamics(_model(dyn, start=[1.0]).float(), n_steps=500, transient=0, max_period=1)
    assert report.verdict == "diverged" and np.isnan(report.lyapunov).all()
    assert math.isnan(report.kaplan_yorke) and math.isnan(report.dominant_period)
    assert "**diverged**" in report.to_markdown()
    assert report.verdict in VERDICTS


# ----------------------------------------------------------------------------- output and input


def test_fixed_points_are_also_given_in_the_observed_channels():
    # z* = h / (1 - a) read through a linear Gaussian readout: x* = B z* + b, computed here by hand
    dyn = PLRNN(2)
    a, h = np.array([0.5, -0.8]), np.array([0.3, -0.2])
    B, b = np.array([[2.0, -1.0], [0.5, 3.0], [1.0, 1.0]]), np.array([-65.0, 0.1, 4.0])
    with torch.no_grad():
        dyn.a.copy_(torch.as_tensor(a))
        dyn.W.zero_()
        dyn.h.copy_(torch.as_tensor(h))
    obs = Gaussian(3, 2, readout="linear")
    with torch.no_grad():
        obs.B.copy_(torch.as_tensor(B))
        obs.b.copy_(torch.as_tensor(b))
    ssm = StateSpaceModel(dyn, obs, dt=0.1, channel_names=["V", "n", "h"]).double()
    report = analyze_dynamics(ssm, n_steps=300, transient=50, max_period=1)
    expected = B @ (h / (1 - a)) + b
    np.testing.assert_allclose(report.fixed_point_observations, expected[None], rtol=1e-6)
    assert report.channel_names == ["V", "n", "h"]
    ds = report.to_xarray()
    np.testing.assert_allclose(ds["fixed_point_observation"].sel(channel="V").values, [expected[0]], rtol=1e-6)
    assert "observed (V, n, h" in report.to_markdown()


def test_report_round_trips_through_netcdf(tmp_path):
    report = analyze_dynamics(_model(LogisticMap(), start=[0.3]), n_steps=1_000, transient=10)
    path = tmp_path / "analysis.nc"
    _write_netcdf(report.to_xarray(), path)
    import xarray as xr

    back = xr.open_dataset(path, engine="h5netcdf")
    np.testing.assert_array_equal(back["lyapunov_exponent"].values, report.lyapunov)
    np.testing.assert_array_equal(back["fixed_point_state"].values, report.fixed_points.points)
    assert back.attrs["verdict"] == report.verdict and back.attrs["n_steps"] == 1_000
    assert list(back["fixed_point_kind"].values) == report.fixed_points.kind


@pytest.mark.parametrize("kwargs, name", [({"n_steps": 10}, "n_steps"), ({"transient": -1}, "transient"),
                                          ({"max_period": 0}, "max_period"), ({"zero_tol": -1.0}, "zero_tol"),
                                          ({"n_starts": 2.5}, "n_starts")])
def test_bad_settings_are_refused_by_name(kwargs, name):
    with pytest.raises(ValueError, match=name):
        analyze_dynamics(_model(LogisticMap(), start=[0.3]), **kwargs)


def test_an_unfitted_estimator_is_refused():
    from dsident.models import PLRNN as PLRNNEstimator

    with pytest.raises(TypeError, match="fitted"):
        analyze_dynamics(PLRNNEstimator(latent_dim=2))


# ----------------------------------------------------------------------------- the true system


def test_system_spectrum_of_lorenz63_sums_to_the_trace_and_has_the_known_leading_exponent():
    from dsident.analysis import system_lyapunov_spectrum

    lam = system_lyapunov_spectrum("lorenz63", duration=100.0)
    # the Jacobian's trace is the constant -(σ + 1 + β): the exponents must sum to it
    assert lam.sum() == pytest.approx(-(10.0 + 1.0 + 8.0 / 3.0), abs=2e-3)
    assert lam[0] == pytest.approx(0.905, abs=0.1) and abs(lam[1]) < 0.05
    assert np.all(np.diff(lam) <= 0)


def test_system_spectrum_refuses_data_without_a_deterministic_system():
    from dsident.analysis import system_lyapunov_spectrum
    from dsident.data import as_dataset

    with pytest.raises(ValueError, match="provenance"):
        system_lyapunov_spectrum(as_dataset(np.zeros((50, 2)), dt=0.1))
    with pytest.raises(ValueError, match="substeps"):
        system_lyapunov_spectrum("lorenz63", substeps=0)


def test_markdown_lists_at_most_twenty_fixed_points_and_counts_the_rest():
    from dsident.analysis import FixedPoints, classify_eigenvalues

    report = analyze_dynamics(_model(LogisticMap(), start=[0.3]), n_steps=200, transient=0)
    eig = np.full((25, 1), 0.5 + 0j)
    stable, kind = classify_eigenvalues(eig)
    report.fixed_points = FixedPoints(points=np.linspace(0, 1, 25)[:, None, None], eigenvalues=eig, stable=stable,
                                      kind=kind, method="newton")
    text = report.to_markdown()
    assert text.count("| stable node |") == 20 and "… and 5 more" in text


def test_dominant_period_reads_the_most_variable_column_of_the_longest_finite_stretch():
    from dsident.analysis import dominant_period

    dt, t = 0.1, np.arange(1000) * 0.1
    # column 1 is the larger (period 2.5, 40 whole cycles: an exact FFT bin); column 0 is a small period-1 wave
    head = np.stack([0.1 * np.sin(2 * np.pi * t / 1.0), np.sin(2 * np.pi * t / 2.5)], axis=1)
    # after a gap, a shorter, louder stretch at period 0.5 must not be joined to the first
    tail = 5.0 * np.sin(2 * np.pi * np.arange(300) * dt / 0.5)[:, None].repeat(2, axis=1)
    series = np.concatenate([head, np.full((1, 2), np.nan), tail])
    assert dominant_period(series, dt) == pytest.approx(2.5, rel=1e-9)
    assert dominant_period(tail, dt) == pytest.approx(0.5, rel=0.02)
    assert math.isnan(dominant_period(np.ones((50, 2)), dt))
    assert math.isnan(dominant_period(np.full((50, 2), np.nan), dt))


def test_markdown_elides_a_long_spectrum_counts_its_signs_and_names_singular_regions():
    dyn = PLRNN(14, seed=0, penalty="iplrnn")          # W = 0, h = 0
    with torch.no_grad():
        dyn.a.copy_(torch.tensor([1.0] * 4 + [0.5] * 10))  # A's diagonal; exponents 0 (4 times) and log 1/2 (10 times)
    report = analyze_dynamics(_model(dyn), n_steps=300, transient=10, max_period=1)
    np.testing.assert_allclose(np.sort(report.lyapunov), [math.log(0.5)] * 10 + [0.0] * 4, atol=1e-3)
    text = report.to_markdown()
    spectrum = next(line for line in text.splitlines() if line.startswith("- Lyapunov exponents"))
    assert spectrum.count(",") == 11 and "(3 more; all in `to_xarray()`)" in spectrum
    assert "0 positive, 4 zero, 10 negative" in text
    # every region has I - J singular in the four units with A = 1: no isolated fixed point
    assert len(report.fixed_points) == 0
    assert f"none found; {2 ** 14} of the regions searched have a singular" in text
    assert report.to_xarray()["lyapunov_exponent"].size == 14
    # a wide state is cut to its first 8 coordinates in the table (all of them stay in to_xarray)
    from dsident.analysis import FixedPoints, classify_eigenvalues

    eig = np.full((1, 14), 0.5 + 0j)
    stable, kind = classify_eigenvalues(eig)
    report.fixed_points = FixedPoints(points=np.arange(14.0)[None, None], eigenvalues=eig, stable=stable,
                                      kind=kind, method="enumerate")
    row = next(line for line in report.to_markdown().splitlines() if line.startswith("| 0 |"))
    z_cell = row.split("|")[5]
    assert "[0, 1, 2, 3, 4, 5, 6, 7, … (6 more)]" in z_cell and "13" not in z_cell.split("]")[0]
    assert row.split("|")[4].strip() == "–"          # the run stands still: no spread to measure by


def test_progress_bar_names_each_stage_and_stays_silent_without_it(capsys):
    model = _model(PLRNN(3, seed=0))
    quiet = analyze_dynamics(model, n_steps=200, transient=10, max_period=2)
    assert capsys.readouterr().err == ""
    loud = analyze_dynamics(model, n_steps=200, transient=10, max_period=2, progress=True)
    err = capsys.readouterr().err
    # the PLRNN adds one stage a cycle length: 3 in all (the run, fixed points, 2-cycles)
    assert "free run and Lyapunov spectrum" in err and "2-cycles" in err and "/3 " in err
    np.testing.assert_array_equal(loud.lyapunov, quiet.lyapunov)     # the bar changes nothing


@pytest.mark.parametrize("spends, shares", [(False, [24.0, 16.0, 24.0, 48.0]),   # time unused passes on
                                            (True, [24.0, 8.0, 8.0, 8.0])])      # each search spends its part
def test_a_time_budget_is_shared_by_the_searches_and_a_cut_search_is_named(monkeypatch, spends, shares):
    import importlib

    report_module = importlib.import_module("dsident.analysis.report")
    clock, given = type("Clock", (), {"now": 0.0, "perf_counter": lambda self: self.now})(), []
    search = report_module.plrnn_cycles

    def spy(model, k, *, seed, time_budget):
        given.append(time_budget)
        found = search(model, k, seed=seed, time_budget=0.0 if k == 3 else None)
        clock.now += time_budget if spends else 0.0
        return found

    monkeypatch.setattr(report_module, "time", clock)
    monkeypatch.setattr(report_module, "plrnn_cycles", spy)
    report = analyze_dynamics(_model(PLRNN(12, seed=0)), n_steps=200, transient=10, max_period=4, time_budget=48)
    np.testing.assert_allclose(given, shares)
    assert report.info["time_budget"] == 48.0
    assert [c.info["timed_out"] for c in report.cycles] == [False, True, False]
    text = report.to_markdown()
    assert "## 3-cycles: 0 (search stopped at its time budget after 0 regions: may be incomplete)" in text
    assert text.count("time budget") == 1
    monkeypatch.undo()
    with pytest.raises(ValueError, match="time_budget"):
        analyze_dynamics(_model(PLRNN(3, seed=0)), n_steps=200, time_budget=-5)


def test_fixed_points_alone_get_the_whole_budget(monkeypatch):
    import importlib

    report_module = importlib.import_module("dsident.analysis.report")
    assert report_module._share(None, 1, 4) is None
    monkeypatch.setattr(report_module, "time", type("Clock", (), {"perf_counter": lambda self: 100.0})())
    share = report_module._share
    assert share(130.0, 1, 1) == 30.0 and share(130.0, 1, 3) == 15.0 and share(130.0, 3, 3) == 30.0
    assert share(90.0, 2, 3) == 0.0                      # a spent budget gives nothing, not a negative share


def test_fundamental_period_is_the_lowest_strong_line_not_the_strongest_harmonic():
    from dsident.analysis import dominant_period, fundamental_period

    dt, n = 0.5, 4000                        # 40 and 20 samples fit whole numbers of times
    t = np.arange(n)
    # a second harmonic 10 % stronger than the fundamental (a spike train's shape can do this)
    x = np.sin(2 * np.pi * t / 40) + np.sqrt(1.1) * np.sin(2 * np.pi * t / 20)
    assert dominant_period(x, dt) == pytest.approx(10.0)              # the harmonic: half the period
    assert fundamental_period(x, dt) == pytest.approx(20.0)
    # a weak fundamental (a quarter of the harmonic's power) is not the rhythm
    y = 0.5 * np.sin(2 * np.pi * t / 40) + np.sin(2 * np.pi * t / 20)
    assert fundamental_period(y, dt) == pytest.approx(10.0)
    assert fundamental_period(y, dt, share=0.2) == pytest.approx(20.0)
    assert math.isnan(fundamental_period(np.ones(50), dt))
    with pytest.raises(ValueError, match="`share` must be in"):
        fundamental_period(x, dt, share=0.0)
    with pytest.raises(ValueError, match="`min_cycles` must be >= 1"):
        fundamental_period(x, dt, min_cycles=0.5)


def test_a_slow_wander_of_few_cycles_is_not_the_rhythm():
    from dsident.analysis import fundamental_period

    dt, n = 0.5, 4000
    t = np.arange(n)
    # 3 slow cycles over the stretch, 4× the power of the 40-sample oscillation (Lorenz-63's x
    # switching lobes does this on some stretches)
    x = 2.0 * np.sin(2 * np.pi * 3 * t / n) + np.sin(2 * np.pi * t / 40)
    assert fundamental_period(x, dt) == pytest.approx(n * dt / 3)
    assert fundamental_period(x, dt, min_cycles=5) == pytest.approx(20.0)
    # a true rhythm of 5 cycles or more is still found; a stretch too short for any gives NaN
    y = np.sin(2 * np.pi * 6 * t / n)
    assert fundamental_period(y, dt, min_cycles=5) == pytest.approx(n * dt / 6)
    assert math.isnan(fundamental_period(np.sin(np.arange(8.0)), dt, min_cycles=5))


def test_rhythm_period_matches_the_median_taken_at_every_bin():
    """The package takes the surroundings' median at the local maxima only (and over a coarser
    spectrum for long series); the rule read literally takes it at every bin."""
    from scipy.ndimage import gaussian_filter1d

    from dsident import datasets
    from dsident.analysis import rhythm_period

    def literal(x, dt):
        power = gaussian_filter1d(np.abs(np.fft.rfft(x - x.mean())) ** 2, max(1.0, (len(x) // 2 + 1) / 5000.0))
        freq = np.fft.rfftfreq(len(x), d=dt)
        line = [k for k in range(10, len(power) - 1)
                if power[k] >= power[k - 1] and power[k] >= power[k + 1]
                and power[k] >= 10.0 * np.median(power[int(k / 1.5): int(np.ceil(1.5 * k)) + 1])]
        if not line:
            return math.nan
        top = max(power[k] for k in line)
        return 1.0 / freq[next(k for k in line if power[k] >= 0.5 * top)]

    rng = np.random.default_rng(1)
    series = [(np.sin(2 * np.pi * np.arange(30_000) / 40) + rng.standard_normal(30_000), 1.0)]
    for name in ("lorenz63", "bursting_neuron", "ecg"):
        test = datasets.load(name, split="test")
        series += [(test["x"].values[0, :12_000, k], float(test.attrs["dt"])) for k in (0, test.sizes["channel"] - 1)]
    for x, dt in series:
        ours, expected = rhythm_period(x, dt), literal(x, dt)
        assert (math.isnan(ours) and math.isnan(expected)) or ours == pytest.approx(expected, rel=1e-12)


def test_only_a_line_above_its_surroundings_is_a_rhythm():
    from dsident import datasets
    from dsident.analysis import dominant_period, fundamental_period

    rng = np.random.default_rng(0)
    t = np.arange(4000)
    line = np.sin(2 * np.pi * t / 40) + 0.3 * rng.standard_normal(t.size)
    assert fundamental_period(line, 0.5, prominence=10.0) == pytest.approx(20.0)
    assert math.isnan(fundamental_period(rng.standard_normal(t.size), 0.5, prominence=10.0))   # white noise
    # Lorenz-63: x is broadband (lobe switching), z carries the oscillation its strongest bin names
    test = datasets.load("lorenz63", split="test")
    x, z = (test["x"].values[0, :10_000, k] for k in (0, 2))
    dt = float(test.attrs["dt"])
    assert math.isnan(fundamental_period(x, dt, min_cycles=5, prominence=10.0))
    assert fundamental_period(z, dt, min_cycles=5, prominence=10.0) == pytest.approx(dominant_period(z, dt), rel=0.02)
    assert 0.7 < dominant_period(z, dt) < 0.8
    # 100 000 samples: finer bins, whose scatter alone would make a chance "line" of 10× (x at 0.19)
    train = datasets.load("lorenz63", split="train")["x"].values[0]
    assert math.isnan(fundamental_period(train[:, 0], dt, min_cycles=10, prominence=10.0))
    assert 0.7 < fundamental_period(train[:, 2], dt, min_cycles=10, prominence=10.0) < 0.8


def test_fixed_points_outside_the_run_are_measured_and_listed_last():
    """Distances by hand: a run on the corners of [0, 1] x [0, 2] (variances 0.25 and 1)."""
    import xarray as xr

    from dsident.analysis import DynamicsReport, FixedPoints

    corners = np.array([[0.0, 0.0], [1.0, 2.0], [0.0, 2.0], [1.0, 0.0]] * 5)
    trajectory = xr.Dataset({"z": (("trial", "time", "latent"), corners[None])})
    points = np.array([[-1.0, 5.0], [0.5, 1.0], [2.0, 1.0]])[:, None, :]      # outside by (1, 3), 0, (1, 0)
    fps = FixedPoints(points=points, eigenvalues=np.full((3, 2), 0.5 + 0j), stable=np.ones(3, bool),
                      kind=["stable node"] * 3, method="newton")
    report = DynamicsReport(verdict="fixed point", lyapunov=np.array([-1.0, -2.0]), dt=1.0, kaplan_yorke=0.0,
                            cycle_period=None, dominant_period=float("nan"), fixed_points=fps, cycles=[],
                            trajectory=trajectory)
    rms = np.sqrt((0.25 + 1.0) / 2)
    np.testing.assert_allclose(report.outside_run(), [np.sqrt(10) / rms, 0.0, 1.0 / rms])
    text = report.to_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "stable node" in line]
    assert [int(r.split("|")[1]) for r in rows] == [1, 2, 0]         # nearest the run first
    assert "1 of them lie more than 3 sd outside every state of the analysed run" in text
    np.testing.assert_allclose(report.to_xarray()["fixed_point_outside_run"].values, report.outside_run())


def _van_der_pol(t_end, dt=0.01, mu=1.5):
    from scipy.integrate import solve_ivp

    t = np.arange(0.0, 50.0 + t_end, dt)
    y = solve_ivp(lambda _, v: [v[1], mu * (1 - v[0] ** 2) * v[1] - v[0]], (0, t[-1]), [2.0, 0.0], t_eval=t,
                  rtol=1e-9, atol=1e-9).y
    return y[:, t >= 50.0].T                               # (time, 2): x and its derivative, after the transient


def test_a_rhythm_the_stretch_holds_too_few_cycles_of_is_not_read_as_a_harmonic():
    from dsident.analysis import fundamental_period, rhythm_period

    long = _van_der_pol(400.0)
    true = fundamental_period(long[:, 0], 0.01)           # the lowest strong line of 55 cycles
    assert 7.0 < true < 7.4
    assert rhythm_period(long[:, 1], 0.01) == pytest.approx(true, rel=0.02)
    # 30 time units hold 4 cycles: the derivative's 7th harmonic stands out among the lines of
    # 10+ cycles, but it is a harmonic of the stronger 4-cycle line, so no period
    short = _van_der_pol(30.0)
    assert fundamental_period(short[:, 1], 0.01) == pytest.approx(7.5)      # 4 cycles: the lowest strong line
    assert math.isnan(rhythm_period(short[:, 1], 0.01)) and math.isnan(rhythm_period(short[:, 0], 0.01))
    # 7 cycles (50 time units): the line of 10+ cycles is the 3rd harmonic, with no 2nd beneath it
    seven = _van_der_pol(50.0)
    assert math.isnan(rhythm_period(seven[:, 0], 0.01)) and math.isnan(rhythm_period(seven[:, 1], 0.01))
    # 10.4 cycles: enough, but the fundamental spreads over two bins and does not stand out
    # 10× its smoothed surroundings, where the 3rd harmonic does
    ten = _van_der_pol(74.0)
    assert math.isnan(rhythm_period(ten[:, 0], 0.01)) and math.isnan(rhythm_period(ten[:, 1], 0.01))


def test_an_eeg_like_alpha_line_on_a_1_over_f_background_keeps_its_period():
    # the 1/f background is strong at low bins, and its scatter makes local maxima there: none
    # may pass for a fundamental whose harmonic the alpha line would be
    from dsident.analysis import rhythm_period

    n, fs = 2560, 256.0
    f = np.fft.rfftfreq(n, 1 / fs)
    t = np.arange(n) / fs
    for seed in range(10):
        rng = np.random.default_rng(seed)
        spectrum = np.where(f > 0, 1 / np.maximum(f, 1e-9), 0) * np.exp(2j * np.pi * rng.random(len(f)))
        pink = np.fft.irfft(spectrum * np.sqrt(rng.exponential(size=len(f))), n)
        pink /= pink.std()
        assert rhythm_period(pink + 0.3 * np.sin(2 * np.pi * 10 * t), 1 / fs) == pytest.approx(0.1), seed
    # two independent rhythms, a strong 3-cycle one and a 100-cycle one: the fast one is no
    # harmonic (nothing between them), so it keeps its period
    t = np.arange(4000)
    two = 2.0 * np.sin(2 * np.pi * 3 * t / 4000) + np.sin(2 * np.pi * t / 40)
    assert rhythm_period(two, 0.5) == pytest.approx(20.0)


def test_rhythm_period_names_a_bad_step_or_shape():
    from dsident.analysis import find_bursts, rhythm_period

    x = np.sin(np.arange(2000) / 10.0)
    for bad in (0, -1.0, "0.05", float("nan"), True):
        with pytest.raises(ValueError, match="`dt` must be a positive sampling step"):
            rhythm_period(x, bad)
    with pytest.raises(ValueError, match=r"`series` must be \(time,\) or \(time, channel\); got shape \(3, 4, 5\)"):
        rhythm_period(np.zeros((3, 4, 5)), 0.1)
    # numpy scalars are steps like any other (a dt read from an array often is one)
    assert rhythm_period(x, np.float32(0.5)) == pytest.approx(rhythm_period(x, 0.5))
    assert find_bursts(x, np.float32(0.5)) is None


@pytest.mark.parametrize("a", [1.01, 1.05, -1.05])
def test_a_finite_but_geometrically_growing_run_is_diverged_not_periodic_or_chaotic(a):
    # z' = a z, |a| > 1: the run stays finite over 2 200 steps (1.05 ** 2200 ~ 1e46) but grows
    # without bound; its exponent log|a| per step (0.00995 lies inside the zero tolerance 0.01 and
    # read "periodic", 0.0488 read "chaotic")
    dyn = PLRNN(2)
    with torch.no_grad():
        dyn.a.copy_(torch.tensor([a, 0.5]))
        dyn.W.zero_()
        dyn.h.zero_()
    regime = free_run_regime(_model(dyn, start=[1.0, 1.0]), n_steps=2_000, transient=200)
    assert np.isfinite(regime.latent).all()
    np.testing.assert_allclose(regime.lyapunov, [math.log(abs(a)), math.log(0.5)], rtol=1e-6)
    assert regime.verdict == "diverged"
    # a bounded chaotic run is not caught by the growth rule
    assert free_run_regime(_model(LogisticMap(), start=[0.3]), n_steps=2_000, transient=100).verdict == "chaotic"


class RotationWithThirdUnit(LatentDynamics):
    """(z1, z2) turn on the unit circle as PolarMap's; z3' = c z3 + h (test-local). c = 1, h ≠ 0:
    a steady drift beside the turn; c < 1: the third unit settling onto the cycle's plane."""

    def __init__(self, latent_dim: int = 3, c: float = 1.0, h: float = 0.0) -> None:
        super().__init__()
        self.latent_dim, self.c, self.h, self.turn = latent_dim, c, h, PolarMap(theta=0.1)

    def step(self, z, u=None, dt=None):
        return torch.cat([self.turn.step(z[:, :2]), self.c * z[:, 2:] + self.h], dim=1)


def test_a_linear_drift_is_diverged_not_periodic():
    # z' = z + h: every exponent is exactly 0, so the spectrum alone reads "periodic or
    # quasi-periodic"; the run never comes back, so it is no cycle
    dyn = PLRNN(2)
    with torch.no_grad():
        dyn.a.copy_(torch.tensor([1.0, 1.0]))
        dyn.W.zero_()
        dyn.h.copy_(torch.tensor([0.01, -0.02]))
    regime = free_run_regime(_model(dyn, start=[0.0, 0.0]), n_steps=2_000, transient=200)
    np.testing.assert_allclose(regime.lyapunov, [0.0, 0.0], atol=1e-12)
    assert regime.verdict == "diverged"
    # the same drift in one unit beside a turning pair: still no cycle
    drift = free_run_regime(_model(RotationWithThirdUnit(h=0.01), start=[1.0, 0.0, 0.0]), n_steps=2_000,
                            transient=200)
    assert drift.verdict == "diverged"


def test_a_cycle_with_a_unit_still_settling_is_not_a_drift():
    # the turn alone, and the turn with a third unit settling slowly and monotonically onto its
    # plane (exponent log 0.999 per step, inside the zero tolerance): both stay periodic
    for c, start in ((1.0, [1.0, 0.0, 0.0]), (0.999, [1.0, 0.0, 5.0])):
        regime = free_run_regime(_model(RotationWithThirdUnit(c=c), start=start), n_steps=2_000, transient=200)
        assert regime.verdict == "periodic or quasi-periodic", c


class EulerLorenz(LatentDynamics):
    """Lorenz-63 by Euler steps of 0.005 (test-local): chaotic, λ1 ≈ 0.9 per time unit, i.e.
    ≈ 0.0045 per step, inside the zero tolerance 20 / 2000 = 0.01 of a 2 000-step run."""

    def __init__(self, latent_dim: int = 3) -> None:
        super().__init__()
        self.latent_dim = latent_dim

    def step(self, z, u=None, dt=None):
        x, y, w = z[:, 0], z[:, 1], z[:, 2]
        dz = torch.stack([10.0 * (y - x), x * (28.0 - w) - y, x * y - 8.0 / 3.0 * w], dim=1)
        return z + 0.005 * dz


def test_a_short_run_names_the_length_that_would_resolve_a_small_positive_exponent():
    model = _model(EulerLorenz(), start=[1.0, 1.0, 20.0])
    short = analyze_dynamics(model, n_steps=2_000, transient=500, n_starts=20, max_period=1)
    lam1 = float(short.lyapunov[0])
    assert 0.0025 < lam1 <= 0.01 and short.verdict == "periodic or quasi-periodic"
    text = short.to_markdown()
    assert "inside the zero tolerance ±0.01 of this 2000-step run" in text
    needed = int(text.split("`--steps ")[1].split("`")[0])
    assert needed >= 40 / lam1
    # the run it names does tell: chaotic, and no note
    longer = free_run_regime(model, n_steps=needed, transient=500)
    assert longer.verdict == "chaotic"
    # a true cycle's zero exponent gets no note
    cycle = analyze_dynamics(_model(PolarMap(), start=[1.0, 0.0]), n_steps=2_000, transient=200, n_starts=5,
                             max_period=1)
    assert cycle.verdict == "periodic or quasi-periodic" and "note: λ1" not in cycle.to_markdown()
