"""The free run beyond the scored stretch (dsident.experiments.late_run) and its table."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dsident import metrics
from dsident.analysis import VERDICTS, free_run_regime
from dsident.data.container import as_dataset
from dsident.dynamics.base import LatentDynamics
from dsident.experiments import runner, tables
from dsident.experiments.late_run import LATE_BURN_IN, analysis_length, late_run_record, point_regime
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian


class DampedRotation(LatentDynamics):
    """z' = r R(θ) z (test-local): a spiral into 0 with both exponents log r per step."""

    def __init__(self, latent_dim: int = 2, r: float = 0.98, theta: float = 0.3) -> None:
        super().__init__()
        self.latent_dim, self.r, self.theta = latent_dim, r, theta

    def step(self, z, u=None, dt=None):
        c, s = math.cos(self.theta), math.sin(self.theta)
        return self.r * torch.stack([c * z[:, 0] - s * z[:, 1], s * z[:, 0] + c * z[:, 1]], dim=1)


def _spiral(r=0.98, dt=0.5):
    return StateSpaceModel(DampedRotation(r=r), Gaussian(2, 2, readout="identity"), dt=dt).double()


def _circle(n=1000, dt=0.5):
    t = np.arange(n) * 0.3
    return as_dataset(np.stack([np.cos(t), np.sin(t)], axis=1), dt=dt)


def test_late_stretch_is_steps_one_and_a_quarter_to_two_and_a_quarter_T_and_the_exponent_is_log_r():
    # r = 0.999: log r = -1e-3 per step, within the zero tolerance 20 / 2000, and not still yet;
    # the run shrinks quarter by quarter, so it reads as what it is, a slow approach to 0
    model, test = _spiral(r=0.999), _circle()
    late = point_regime(model, test, seed=0)
    assert late["regime"] == "fixed point" and late["steps"] == analysis_length(1000) == 2000
    assert late["lambda_max"] == pytest.approx(math.log(0.999) / 0.5, rel=1e-6)
    # the same window cut by hand from one long run from the first test sample
    x = test["x"].values
    t = x.shape[1]
    burn = int(math.floor(LATE_BURN_IN * t))
    run = model.generate(burn + t, x0=x[:, 0], seed=0)["x"].values
    by_hand = metrics.state_space_divergence(x, run[:, burn:burn + t])
    assert late["D_stsp"] == pytest.approx(float(by_hand), rel=1e-9)
    # the scored window [T/4, 5T/4) is another stretch of the same run, and the spiral is wider there
    scored = float(metrics.evaluate(model, test, seed=0)["state_space_divergence"])
    assert late["D_stsp"] >= scored and late["D_stsp"] != pytest.approx(scored)


def test_a_finite_run_beyond_the_scores_divergence_threshold_is_diverged_here_too():
    # r = 1.01: still finite after 2 200 steps (e^22 of the start) but far beyond 1 000 sd of the
    # unit circle, so the score calls it diverged; the verdict beside it used to read its growth
    # (and the free run's own verdict, since session 52, reads its geometric growth as diverged)
    model, test = _spiral(r=1.01), _circle()
    assert bool(metrics.evaluate(model, test, seed=0)["diverged"])
    regime = free_run_regime(model, n_steps=2000, transient=200, x0=test["x"].values[0, 0])
    assert regime.verdict == "diverged" and np.isfinite(regime.latent).all()
    late = point_regime(model, test, seed=0)
    assert late["regime"] == "diverged"
    # the zero tolerance the verdict used, per unit of time: 20 / 2000 per step of 0.5
    assert late["zero_tol"] == pytest.approx(20 / 2000 / 0.5)


def test_a_fast_spiral_stands_still_by_the_end_with_both_exponents_log_r():
    regime = free_run_regime(_spiral(r=0.98), n_steps=2000, transient=200, x0=np.array([1.0, 0.0]))
    assert regime.verdict == "fixed point" and regime.verdict in VERDICTS and regime.cycle_period is None
    np.testing.assert_allclose(regime.lyapunov, [math.log(0.98) / 0.5] * 2, rtol=1e-6)
    assert regime.latent.shape == (2000, 2) and regime.trajectory.sizes["time"] == 2000


@pytest.mark.parametrize("r, verdict", [(1.0, "periodic or quasi-periodic"), (0.9995, "fixed point"),
                                         (0.99995, "periodic or quasi-periodic")])
def test_a_slow_spiral_inside_the_zero_tolerance_is_told_from_a_cycle_by_its_shrinking_extent(r, verdict):
    # all three have |λ1| = |log r| ≤ 20 / 2000 per step. r = 0.9995 shrinks by e^{-0.75} ≈ 0.47
    # over the last three quarters of the run: a slow approach to a fixed point. r = 0.99995
    # (e^{-0.075}) is a cycle as far as 2 000 steps can tell, and stays one.
    regime = free_run_regime(_spiral(r=r), n_steps=2000, transient=200, x0=np.array([1.0, 0.0]))
    assert abs(regime.lyapunov[0] * 0.5) <= regime.zero_tol
    assert regime.verdict == verdict


def test_a_run_handed_over_gives_the_verdict_of_the_run_generated_inside():
    model, x0 = _spiral(r=0.999), np.array([1.0, 0.0])
    inside = free_run_regime(model, n_steps=2000, transient=200, x0=x0, seed=0)
    run = model.generate(2200, x0=x0, seed=0)
    given = free_run_regime(model, n_steps=2000, transient=200, x0=x0, seed=0, run=run)
    assert given.verdict == inside.verdict == "fixed point"
    np.testing.assert_array_equal(given.lyapunov, inside.lyapunov)
    np.testing.assert_array_equal(given.latent, inside.latent)
    with pytest.raises(ValueError, match="`run` must be a generated run with `z` over transient \\+ n_steps = 2200"):
        free_run_regime(model, n_steps=2000, transient=200, x0=x0, run=run.isel(time=slice(1, None)))


def test_data_with_inputs_are_not_analysed_and_say_why():
    test = as_dataset(np.random.default_rng(0).normal(size=(300, 2)), dt=0.5, u=np.zeros((300, 1)))
    late = point_regime(_spiral(), test)
    assert late["regime"] is None and "inputs" in late["reason"] and math.isnan(late["D_stsp"])


def test_a_test_stretch_without_a_full_sample_is_refused_by_name():
    x = np.full((300, 2), np.nan)
    x[::2, 0] = 1.0                        # never both channels at once
    with pytest.raises(ValueError, match="`test`"):
        point_regime(_spiral(), as_dataset(x, dt=0.5))
    # what a grid point records instead: the reason, and the scores stand
    record = late_run_record(_spiral(), as_dataset(x, dt=0.5))
    assert record["regime"] is None and record["reason"].startswith("ValueError: `test`")


def test_regime_cell_counts_verdicts_most_common_first():
    assert tables.regime_cell(["chaotic", "fixed point", "chaotic", ""]) == "chaotic 2/3, fixed point 1/3"
    assert tables.regime_cell(["", ""]) == "–"


def _records():
    recs = []
    late = [("chaotic", 0.9, 1.0), ("chaotic", 1.1, 3.0), ("fixed point", -0.2, 9.0)]
    for seed, (verdict, lam, d) in enumerate(late):
        recs.append({"point_id": f"p{seed}", "status": "done", "fit_time": 1.0,
                     "config": {"dataset": "lorenz63", "model": "rplrnn", "method": "teacher-forcing", "seed": seed},
                     "scores": {"D_stsp": 1.0, "D_H": 0.1, "PE": 0.1, "diverged": 0.0},
                     "late": {"regime": verdict, "lambda_max": lam, "D_stsp": d, "D_H": 0.1}})
    recs.append({"point_id": "old", "status": "done", "fit_time": 1.0,       # written before late runs existed
                 "config": {"dataset": "lorenz63", "model": "shplrnn", "method": "bptt", "seed": 0},
                 "scores": {"D_stsp": 1.0, "D_H": 0.1, "PE": 0.1, "diverged": 0.0}})
    return runner.records_to_dataset(recs)


def test_regime_table_gives_counts_median_exponent_and_late_score_with_the_true_row():
    results = _records()
    assert list(results["regime"].values) == ["chaotic", "chaotic", "fixed point", ""]
    text = tables.regime_table(results, truth={"lorenz63": 0.906}, unit={"lorenz63": "time unit"},
                               truth_verdict={"lorenz63": "chaotic"})
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    row = rows["| rplrnn × teacher-forcing"]
    # λ_max median 0.9 of (-0.2, 0.9, 1.1); late D_stsp median 3 ± MAD 2 of (1, 3, 9)
    assert "chaotic 2/3, fixed point 1/3" in row and "| 0.9 |" in row and "3 ± 2" in row
    assert "| – | – | – |" in rows["| shplrnn × bptt"] and "| chaotic | 0.906 |" in rows["| *true system*"]
    # without a verdict the true row says only the exponent
    bare = tables.regime_table(results, truth={"lorenz63": 0.906})
    assert "| *true system* | – | 0.906 | – |" in bare
    assert "per time unit" in text
    # a recording has no true system: no row of dashes stands for one
    assert "*true system*" not in tables.regime_table(results, truth={"lorenz63": float("nan")}, truth_verdict={})


def test_regime_table_is_empty_when_no_point_was_analysed():
    results = _records().isel(point=[3])
    assert tables.regime_table(results) == ""


class Decay(LatentDynamics):
    """z' = diag(rates) z (test-local): exponents log(rates) per step, in the given order."""

    def __init__(self, rates) -> None:
        super().__init__()
        self.latent_dim, self.rates = len(rates), torch.tensor(rates, dtype=torch.float64)

    def step(self, z, u=None, dt=None):
        return z * self.rates.to(z.dtype)


def test_the_leading_exponent_alone_gives_the_verdict_and_lambda_max_of_the_whole_spectrum():
    # distinct rates, the largest not first: the QR's first column must find it by itself
    rates = [0.9, 0.9995, 0.8, 0.95]
    model = StateSpaceModel(Decay(rates), Gaussian(4, 4, readout="identity"), dt=0.5).double()
    x0 = np.array([1.0, 1.0, 1.0, 1.0])
    full = free_run_regime(model, n_steps=2000, transient=500, x0=x0, seed=0)
    lead = free_run_regime(model, n_steps=2000, transient=500, x0=x0, seed=0, n_exponents=1)
    assert lead.lyapunov.shape == (1,) and full.lyapunov.shape == (4,)
    # |log 0.9995| < 20 / 2000, but every unit decays: a slow approach to the fixed point 0
    assert lead.verdict == full.verdict == "fixed point"
    assert lead.max_lyapunov == pytest.approx(full.max_lyapunov, rel=1e-3)
    assert lead.max_lyapunov == pytest.approx(math.log(0.9995) / 0.5, rel=1e-2)
    np.testing.assert_allclose(full.lyapunov, np.sort(np.log(rates))[::-1] / 0.5, rtol=1e-2)


def test_a_random_plrnn_has_the_same_leading_exponent_by_one_column_or_all():
    from dsident.dynamics.plrnn import PLRNN

    # the PLRNN draws its initialisation from its own `seed` (torch's global seed does not reach
    # it): without one, an occasional draw diverged and the test failed at random
    dyn = PLRNN(latent_dim=12, seed=0)
    with torch.no_grad():
        dyn.W.mul_(2.0)                     # livelier than the initialisation, still bounded
    model = StateSpaceModel(dyn, Gaussian(12, 12, readout="identity"), dt=1.0).double()
    x0 = np.random.default_rng(0).normal(size=12)
    full = free_run_regime(model, n_steps=3000, transient=500, x0=x0, seed=0)
    lead = free_run_regime(model, n_steps=3000, transient=500, x0=x0, seed=0, n_exponents=1)
    assert np.isfinite(full.lyapunov).all() and full.lyapunov[0] > full.lyapunov[-1]
    assert lead.verdict == full.verdict
    assert lead.max_lyapunov == pytest.approx(full.max_lyapunov, rel=1e-6, abs=1e-9)


def test_the_benchmark_late_run_asks_for_the_leading_exponent_only(monkeypatch):
    import dsident.analysis as analysis

    seen = {}
    real = analysis.free_run_regime

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis, "free_run_regime", spy)
    late = point_regime(_spiral(r=1.0), _circle(), seed=0)
    assert seen["n_exponents"] == 1 and late["regime"] == "periodic or quasi-periodic"


def test_n_exponents_is_checked_before_the_run():
    with pytest.raises(ValueError, match=r"`n_exponents` must be an integer in \[1, 2\]"):
        free_run_regime(_spiral(), n_steps=200, transient=0, x0=np.array([1.0, 0.0]), n_exponents=3)
