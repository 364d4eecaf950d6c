"""The evaluation protocol: divergence detection, recorded settings, summaries, the floor."""
import json

import numpy as np
import pytest
import torch
import xarray as xr

import dsident
from dsident import StateSpaceModel
from dsident.dynamics.base import LatentDynamics
from dsident.metrics import (evaluate, floor, power_spectrum_distance, state_space_coverage, state_space_divergence,
                             summarize)
from linear_helpers import IdentityObservation, linear_model


def _rotation(angle, radius=1.0):
    return radius * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])


def _model(matrix):
    return linear_model(matrix, dt=0.1)


def _orbit(matrix, n, z0=(1.0, 0.0)):
    z = np.empty((n, 2))
    z[0] = z0
    for t in range(1, n):
        z[t] = matrix @ z[t - 1]
    return z


ANGLE = 2 * np.pi / 37.3


def test_true_model_scores_near_floor_and_records_settings():
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 2000), dt=0.1, name="circle")
    res = evaluate(_model(_rotation(ANGLE)), test, seed=3, pe_steps=5)
    assert not bool(res.diverged)
    assert float(res.prediction_error) == pytest.approx(0.0, abs=1e-20)
    assert res.prediction_error_curve.shape == (5,)
    assert float(res.power_spectrum_distance) < 0.05
    assert 0 <= float(res.state_space_divergence) < 0.2
    # the same numbers by hand: the free run from the first test point, burn-in 0.25 T dropped
    gen = _orbit(_rotation(ANGLE), 2500)[500:]
    assert float(res.state_space_divergence) == pytest.approx(state_space_divergence(test, gen), rel=1e-10)
    assert float(res.power_spectrum_distance) == pytest.approx(power_spectrum_distance(test, gen), rel=1e-10)
    assert float(res.state_space_coverage) == pytest.approx(state_space_coverage(test, gen), abs=1e-15)
    assert float(res.state_space_coverage) > 0.9
    for key in ("seed", "burn_in_fraction", "n_bins", "sigma", "pe_steps", "smoothing_alpha", "stsp_method",
                "divergence_threshold", "data_name", "data_length", "dsident_version", "model_config"):
        assert key in res.attrs
    assert res.attrs["seed"] == 3 and res.attrs["data_name"] == "circle"
    assert json.loads(res.attrs["data_length"]) == [2000]
    assert res.attrs["dsident_version"] == dsident.__version__
    assert "MatrixDynamics" in res.attrs["model_config"]


def test_wrong_frequency_model_is_worse():
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 2000), dt=0.1)
    good = evaluate(_model(_rotation(ANGLE)), test, pe_steps=3)
    bad = evaluate(_model(_rotation(3 * ANGLE)), test, pe_steps=3)
    assert float(bad.power_spectrum_distance) > 0.5 > float(good.power_spectrum_distance)
    assert float(bad.prediction_error) > float(good.prediction_error)
    # the faster rotation still traces the data's circle: the geometry is covered, the time scale is not
    assert float(bad.state_space_coverage) > 0.9
    shrunk = evaluate(_model(_rotation(ANGLE, radius=0.999)), test, pe_steps=3)   # spirals inwards off the circle
    assert float(shrunk.state_space_coverage) < 0.5 < float(good.state_space_coverage)


def test_test_data_with_gaps_get_d_h_over_their_longest_observed_stretch():
    # a wrong-frequency model, so D_H is far from 0 and the stretch it is computed on matters
    data = _orbit(_rotation(ANGLE), 2000)
    data[300:310, 0] = np.nan                          # gaps: observed stretches 300, 1190 and 490 long
    data[1500:1510, 1] = np.nan
    test = dsident.as_dataset(data, dt=0.1)
    with pytest.warns(RuntimeWarning, match=r"longest fully observed stretch \(1190 of 2000 samples\)"):
        res = evaluate(_model(_rotation(1.3 * ANGLE)), test, pe_steps=3)
    assert res.attrs["power_spectrum_samples"] == 1190
    # by hand: the model's free run (burn-in 0.25 T dropped) at the stretch's steps 310-1499
    gen = _orbit(_rotation(1.3 * ANGLE), 2500)[500:]
    by_hand = power_spectrum_distance(data[310:1500], gen[310:1500])
    assert float(res.power_spectrum_distance) == pytest.approx(by_hand, rel=1e-10)
    assert 0.1 < by_hand != pytest.approx(power_spectrum_distance(data[:300], gen[:300]))
    # a stretch too short for the smoothing kernel (16 sigma = 320 samples) stays NaN
    short = data.copy()
    short[::250, 0] = np.nan
    with pytest.warns(RuntimeWarning, match="shorter than D_H's 320"):
        res = evaluate(_model(_rotation(ANGLE)), dsident.as_dataset(short, dt=0.1), pe_steps=3)
    assert np.isnan(float(res.power_spectrum_distance)) and res.attrs["power_spectrum_samples"] == 0
    assert np.isfinite(float(res.state_space_divergence))


def test_unstable_model_is_reported_diverged_with_nan_metrics():
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 1000), dt=0.1)
    with pytest.warns(RuntimeWarning, match="diverged"):
        res = evaluate(_model(np.eye(2) * 1.8), test, pe_steps=3)      # overflows to inf
    assert bool(res.diverged)
    assert np.isnan(float(res.state_space_divergence)) and np.isnan(float(res.power_spectrum_distance))
    assert np.isnan(float(res.state_space_coverage))
    assert np.isfinite(float(res.prediction_error))                   # PE does not use the free run


def test_finite_run_leaving_the_data_range_is_diverged():
    # grows by 1.01 per step: finite after 1250 steps (~2.5e5) but beyond 1e3 std of the data
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 1000), dt=0.1)
    with pytest.warns(RuntimeWarning, match="diverged"):
        res = evaluate(_model(_rotation(ANGLE, radius=1.01)), test, pe_steps=2)
    assert bool(res.diverged) and np.isnan(float(res.state_space_divergence))
    relaxed = evaluate(_model(_rotation(ANGLE, radius=1.01)), test, pe_steps=2, divergence_threshold=1e7)
    assert not bool(relaxed.diverged) and np.isfinite(float(relaxed.power_spectrum_distance))
    # after the burn-in the run has left the true grid entirely: D_stsp is NaN by definition
    assert np.isnan(float(relaxed.state_space_divergence))


def test_several_trials_and_estimator_face():
    orbit = _orbit(_rotation(ANGLE), 1600)
    test = dsident.as_dataset(np.stack([orbit[:800], orbit[800:]]), dt=0.1)

    class FittedEstimator:
        model_ = _model(_rotation(ANGLE))

        def get_params(self):
            return {"latent_dim": 2}

    res = evaluate(FittedEstimator(), test, pe_steps=2)
    assert res.attrs["n_trials"] == 2 and not bool(res.diverged)
    assert json.loads(res.attrs["model_config"]) == {"estimator": "FittedEstimator", "params": {"latent_dim": 2}}
    assert float(res.power_spectrum_distance) < 0.1


def test_summarize_over_seeds():
    runs = []
    for seed, (d, div) in enumerate([(1.0, False), (2.0, False), (4.0, False), (np.nan, True)]):
        runs.append(xr.Dataset({"state_space_divergence": d, "power_spectrum_distance": 0.1,
                                "prediction_error": 0.5, "diverged": div}, attrs={"seed": seed, "n_bins": 30}))
    out = summarize(runs)
    stat = out.state_space_divergence.to_series()
    assert stat["median"] == 2.0 and stat["mad"] == 1.0 and stat["n_finite"] == 3
    assert stat["mean"] == pytest.approx(7 / 3)
    assert stat["sem"] == pytest.approx(np.std([1, 2, 4], ddof=1) / np.sqrt(3))
    assert float(out.fraction_diverged) == 0.25 and int(out.n_runs) == 4
    assert json.loads(out.attrs["seeds"]) == [0, 1, 2, 3] and out.attrs["n_bins"] == 30
    combined = summarize(xr.concat(runs, dim="seed"))
    np.testing.assert_allclose(combined.state_space_divergence.values, out.state_space_divergence.values)
    with pytest.raises(ValueError, match="empty"):
        summarize([])


def test_floor_pairs_consecutive_stretches():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5000, 2))
    other = rng.normal(size=(1000, 2))
    res = floor(x, other, length=1000, n_pairs=10)
    assert res.sizes["pair"] == 5                       # 5 stretches of x + 1 of other = 6 stretches
    assert str(res.pair_label.values[-1]) == "data#0[4000:5000] vs other#0[0:1000]"
    assert float(res.state_space_divergence[0]) == pytest.approx(state_space_divergence(x[:1000], x[1000:2000]))
    assert float(res.power_spectrum_distance[2]) == pytest.approx(power_spectrum_distance(x[2000:3000], x[3000:4000]))
    assert res.attrs["state_space_divergence_mean"] == pytest.approx(float(res.state_space_divergence.mean()))
    assert res.attrs["length"] == 1000
    with pytest.raises(ValueError, match="two gap-free stretches"):
        floor(x, length=4000)


def test_a_gap_splits_a_series_into_stretches_instead_of_ending_it():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3000, 2))
    x[500:700, 1] = np.nan                              # one gap early on: 2 300 observed samples after it
    res = floor(x, length=1000)
    assert [str(v) for v in res.pair_label.values] == ["data#1[0:1000] vs data#1[1000:2000]"]
    assert float(res.state_space_divergence[0]) == pytest.approx(state_space_divergence(x[700:1700], x[1700:2700]))
    with pytest.raises(ValueError, match=r"fully observed runs: 2300, 500 samples"):
        floor(x, length=1500)


class _DrivenEvalDynamics(LatentDynamics):
    """z' = A z + C u, for tests."""

    def __init__(self, matrix, input_matrix):
        super().__init__()
        self.matrix, self.input_matrix = matrix, input_matrix
        self.latent_dim, self.input_dim = len(matrix), np.shape(input_matrix)[1]
        self.A = torch.nn.Parameter(torch.tensor(matrix, dtype=torch.float64))
        self.C = torch.nn.Parameter(torch.tensor(input_matrix, dtype=torch.float64))

    def step(self, z, u=None, dt=None):
        return z @ self.A.T + u @ self.C.T


def test_inputs_drive_the_run_without_burn_in():
    rng = np.random.default_rng(1)
    a, c = _rotation(ANGLE, radius=0.95), np.array([[1.0], [0.0]])
    u = rng.normal(size=(600, 1))
    z = np.zeros((600, 2))
    z[0] = [1.0, 0.0]
    for t in range(1, 600):
        z[t] = a @ z[t - 1] + c @ u[t]
    test = dsident.as_dataset(z, u=u, dt=0.1)
    model = StateSpaceModel(_DrivenEvalDynamics(a, c), IdentityObservation(2), dt=0.1).double()
    res = evaluate(model, test, pe_steps=3)
    assert json.loads(res.attrs["burn_in_steps"]) == [0]
    # driven by the same inputs from the same start, the run reproduces the test data exactly
    assert float(res.power_spectrum_distance) == pytest.approx(0.0, abs=1e-9)
    assert float(res.state_space_divergence) == pytest.approx(0.0, abs=1e-9)
    assert float(res.prediction_error) == pytest.approx(0.0, abs=1e-20)


@pytest.mark.filterwarnings("ignore:test trials differ in length")
def test_ragged_trials_with_inputs_are_each_driven_by_their_own_inputs():
    """Trials of unequal length with inputs: a shorter trial's NaN-padded ``u`` is padding, not a
    missing input. Driven by its own inputs from its own start, the true model's run reproduces
    every trial (and its one-step predictions every sample after the first)."""
    rng = np.random.default_rng(2)
    a, c = _rotation(ANGLE, radius=0.95), np.array([[1.0], [0.0]])
    zs, us = [], []
    for n in (400, 250, 120):
        u = rng.normal(size=(n, 1))
        z = np.zeros((n, 2))
        z[0] = rng.normal(size=2)
        for t in range(1, n):
            z[t] = a @ z[t - 1] + c @ u[t]
        zs.append(z)
        us.append(u)
    test = dsident.as_dataset(zs, u=us, dt=0.1)
    model = StateSpaceModel(_DrivenEvalDynamics(a, c), IdentityObservation(2), dt=0.1).double()
    res, run = evaluate(model, test, pe_steps=3, return_run=True)
    assert not bool(res.diverged)
    for i, z in enumerate(zs):
        np.testing.assert_allclose(run["x"].values[i, :len(z)], z, atol=1e-9)
    assert float(res.prediction_error) == pytest.approx(0.0, abs=1e-20)
    pred = model.predict(test, 1)["x"].values
    for i, z in enumerate(zs):
        np.testing.assert_allclose(pred[i, 1:len(z)], z[1:], atol=1e-9)
        assert np.isnan(pred[i, len(z):]).all()


@pytest.mark.filterwarnings("ignore:test trials differ in length")
def test_return_run_is_the_compared_window_in_the_test_layout():
    """``return_run=True`` hands back the run the scores compared: per trial, the steps after
    the burn-in of a free run from the first complete sample, on the test's time axis."""
    matrix = _rotation(ANGLE)
    orbit = _orbit(matrix, 2000)
    first, second = orbit[:800].copy(), orbit[900:1500].copy()
    second[:3] = np.nan                                  # the second trial starts at its 4th sample
    test = dsident.as_dataset([first, second], dt=0.1)
    res, run = evaluate(_model(matrix), test, pe_steps=2, return_run=True)
    assert run["x"].shape == test["x"].shape and run["z"].shape == (2, 800, 2)
    np.testing.assert_array_equal(run["time"].values, test["time"].values)
    for i, (start, length) in enumerate([(0, 800), (3, 600)]):
        window = length - start
        burn = int(np.floor(0.25 * window))
        by_hand = _orbit(matrix, burn + window, z0=test["x"].values[i, start])[burn:]
        np.testing.assert_allclose(run["x"].values[i, start:length], by_hand, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(run["z"].values[i, start:length], by_hand, rtol=1e-9, atol=1e-12)
        assert np.isnan(run["x"].values[i, :start]).all() and np.isnan(run["x"].values[i, length:]).all()
    assert json.loads(run.attrs["start_index"]) == [0, 3]
    assert json.loads(run.attrs["burn_in_steps"]) == [200, 149]
    assert list(run["length"].values) == [800, 600] and run.attrs["diverged"] == 0
    # the scores are those of this run, and the plain call gives the same scores
    assert float(res.state_space_divergence) == pytest.approx(state_space_divergence(test, run), rel=1e-12)
    plain = evaluate(_model(matrix), test, pe_steps=2)
    assert float(plain.power_spectrum_distance) == float(res.power_spectrum_distance)


def _poisson_rotation():
    """A 2-D rotation read out by 4 Poisson neurons at about 3 counts a bin."""
    from dsident.observations import Poisson

    obs = Poisson(4, 2, readout="linear")
    with torch.no_grad():
        obs.B.copy_(torch.tensor([[0.8, 0.0], [0.0, 0.8], [0.5, 0.5], [-0.6, 0.3]]))
        obs.b.copy_(torch.full((4,), float(np.log(3.0))))
    return StateSpaceModel(linear_model(_rotation(ANGLE)).dynamics, obs, dt=0.1).double()


def test_count_models_are_scored_by_draws_like_the_data():
    model = _poisson_rotation()
    data = model.generate(10_000, z0=np.array([1.0, 0.0]), observation_noise=True, seed=1)
    test = dsident.as_dataset(data["x"].values[0], dt=0.1)
    # the independent route: another draw of the same model against the test counts
    other = model.generate(10_000, z0=np.array([1.0, 0.0]), observation_noise=True, seed=2)["x"].values[0]
    like = state_space_divergence(test["x"].values[0][2500:], other[2500:])
    drawn = evaluate(model, test, seed=5, pe_steps=2)
    means = evaluate(model, test, seed=5, pe_steps=2, observation_noise=False)
    assert drawn.attrs["observation_noise"] == 1 and means.attrs["observation_noise"] == 0
    # expected counts sit between the integers the data take: far from the data's distribution
    assert float(means.state_space_divergence) > 2.5 * float(drawn.state_space_divergence)
    assert float(drawn.state_space_divergence) == pytest.approx(like, rel=0.25)
    # the one rule, for an estimator's model too (dsident generate asks it)
    from dsident.observations import draws_observations

    assert draws_observations(model) and not draws_observations(_model(_rotation(ANGLE)))
    assert not draws_observations(object())
    # a Gaussian (continuous) model keeps its mean
    assert evaluate(_model(_rotation(ANGLE)), dsident.as_dataset(_orbit(_rotation(ANGLE), 500), dt=0.1),
                    pe_steps=2).attrs["observation_noise"] == 0


def test_drawing_counts_from_a_diverged_run_keeps_nan():
    from dsident.observations import Bernoulli, Categorical, Poisson

    z = torch.tensor([[0.1, 0.2], [float("nan"), 0.0]], dtype=torch.float64)
    for obs in (Poisson(3, 2), Bernoulli(3, 2), Categorical(3, 2)):
        x = obs.double().sample(z, generator=torch.Generator().manual_seed(0))
        assert torch.isfinite(x[0]).all() and torch.isnan(x[1]).all(), type(obs).__name__


def test_test_data_at_another_step_than_the_models_are_refused_unless_dt_says_which():
    orbit = _orbit(_rotation(ANGLE), 600)
    model = _model(_rotation(ANGLE))                           # dt 0.1
    with pytest.raises(ValueError, match=r"sampled every 0.2 \(attrs\['dt'\]\) but the model steps by 0.1"):
        evaluate(model, dsident.as_dataset(orbit, dt=0.2), pe_steps=2)
    same = float(evaluate(model, dsident.as_dataset(orbit, dt=0.1), pe_steps=2).state_space_divergence)
    assert float(evaluate(model, dsident.as_dataset(orbit, dt=0.1005), pe_steps=2).state_space_divergence) == same
    assert float(evaluate(model, orbit, pe_steps=2).state_space_divergence) == same      # a plain array: no step


@pytest.mark.parametrize("setting", [{"n_bins": 0}, {"stsp_method": "bogus"}, {"sigma": -1.0}, {"direction": "up"},
                                     {"smoothing_alpha": -1e-5}, {"gmm_points": 0}, {"mc_samples": 2.5},
                                     {"gmm_scaling": "1"}, {"seed": 1.7}])
def test_invalid_metric_settings_are_refused_even_when_the_run_diverges(setting):
    # a diverged run computes no D_stsp/D_H, so its settings were recorded unchecked (or seed 1.7 run as 1)
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 400), dt=0.1)
    name = next(iter(setting))
    with pytest.raises(ValueError, match=f"`{name if name != 'stsp_method' else 'method'}`"):
        evaluate(_model(np.eye(2) * 1.8), test, pe_steps=2, **setting)


class _FixedRun:
    """A duck-typed model whose free run is a given array (trial, step, channel); PE uses identities."""

    def __init__(self, x):
        self.x = x

    def generate(self, n_steps, **kwargs):
        return xr.Dataset({"x": (("trial", "time", "channel"), self.x[:, :n_steps])})

    def encode(self, x):
        return x

    def step(self, z, u, dt):
        return z

    def decode(self, z):
        return z


def test_a_run_of_the_wrong_shape_is_refused_by_name():
    # a run of too few steps or channels hit numpy's "could not broadcast" inside evaluate
    x = np.random.default_rng(0).normal(size=(400, 2))
    good = np.concatenate([np.zeros((100, 2)), x])[None]         # burn-in 0.25·400 = 100 steps, then the data
    assert float(evaluate(_FixedRun(good), x, pe_steps=1).state_space_divergence) == 0.0
    for bad, got in [(good[:, :450], r"\(1, 450, 2\)"), (np.concatenate([good, good], axis=2), r"\(1, 500, 4\)")]:
        expected = r"_FixedRun.generate\(500, n_trials=1, .*\(1, 500, 2\).*got x of shape "
        with pytest.raises(ValueError, match=expected + got):
            evaluate(_FixedRun(bad), x, pe_steps=1)


@pytest.mark.parametrize("n_pairs", [0, -2, 2.7])
def test_floor_refuses_a_bad_number_of_pairs(n_pairs):
    # max(1, int(n_pairs)) ran 0 or -2 as one pair and 2.7 as two
    x = np.random.default_rng(0).normal(size=(3000, 2))
    with pytest.raises(ValueError, match=f"`n_pairs` must be a positive integer; got {n_pairs!r}"):
        floor(x, length=500, n_pairs=n_pairs)


def test_the_recorded_step_is_the_one_the_run_was_generated_at():
    # a plain array carries no step: the result said dt=1.0 (as_dataset's default) for a run at 0.1
    x = _orbit(_rotation(ANGLE), 400)
    res, run = evaluate(_model(_rotation(ANGLE)), x, pe_steps=1, return_run=True)
    assert res.attrs["dt"] == run.attrs["dt"] == 0.1
    assert evaluate(_FixedRun(np.concatenate([x[:100], x])[None]), x, pe_steps=1).attrs["dt"] == 1.0
    on_data = dsident.as_dataset(x, dt=0.1005)          # within the 1 % a step may differ by
    assert evaluate(_FixedRun(np.concatenate([x[:100], x])[None]), on_data, pe_steps=1).attrs["dt"] == 0.1005


def test_summarize_refuses_results_of_different_settings():
    # the summary's attrs said n_bins=30 for results half of which were binned with 50
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 400), dt=0.1)
    model = _model(_rotation(ANGLE))
    runs = [evaluate(model, test, pe_steps=1, seed=s) for s in range(2)]
    assert summarize(runs).attrs["n_bins"] == 30
    with pytest.raises(ValueError, match=r"different settings: n_bins=30 in result 0, 50 in result 2"):
        summarize(runs + [evaluate(model, test, pe_steps=1, seed=2, n_bins=50)])


def test_a_constant_test_channel_does_not_make_every_run_diverge():
    # a constant 0.1 has a round-off std of 1e-17, so 1e3 of them flagged a run off by 1e-6 as diverged
    x = np.column_stack([_orbit(_rotation(ANGLE), 400)[:, 0], np.full(400, 0.1)])
    run = np.concatenate([x[:100], x])[None].copy()
    run[..., 1] += 1e-6
    res = evaluate(_FixedRun(run), x, pe_steps=1)
    assert not bool(res.diverged) and float(res.state_space_divergence) == 0.0
    run[0, 50, 1] = 0.1 + 1.01e3                          # beyond 1e3 × the unit scale of a constant channel
    with pytest.warns(RuntimeWarning, match="diverged"):
        assert bool(evaluate(_FixedRun(run), x, pe_steps=1).diverged)


def test_a_negative_seed_is_refused_before_the_free_run():
    # audit-s53: seed=-1 ran the free run and then reached numpy's seeding in the GMM D_stsp
    class Watch:
        dt = 1.0
        generated = False

        def generate(self, *args, **kwargs):
            Watch.generated = True
            raise AssertionError("the free run started")

    with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer; got -1\."):
        evaluate(Watch(), np.random.default_rng(0).normal(size=(100, 2)), seed=-1)
    assert not Watch.generated


def test_summarize_names_results_that_are_not_evaluation_datasets():
    # audit-s53: a string or a list of non-Datasets failed with "'str' object has no attribute 'attrs'"
    for bad, fragment in (("results.nc", "got str"), (3.0, "got float"), (["a"], "entry 0 is a str"),
                          ([xr.Dataset({"state_space_divergence": 1.0}), {"x": 1}], "entry 1 is a dict")):
        with pytest.raises(TypeError, match=f"`results` must .*{fragment}"):
            summarize(bad)
    one = xr.Dataset({"state_space_divergence": 2.0, "diverged": False}, attrs={"seed": 0})
    assert float(summarize([one, one])["state_space_divergence"].sel(statistic="median")) == 2.0


def test_flags_that_are_no_bool_are_refused_not_read_as_truthy():
    # audit-s53: noise="no", per_channel="no", curve="no" are truthy strings: a noisy run, an
    # array of distances, a PE curve where the caller asked for none of them
    model = _model(_rotation(ANGLE))
    test = dsident.as_dataset(_orbit(_rotation(ANGLE), 300), dt=0.1)
    x = test["x"].values[0]
    calls = {"noise": lambda v: evaluate(model, test, noise=v),
             "observation_noise": lambda v: evaluate(model, test, observation_noise=v),
             "return_run": lambda v: evaluate(model, test, return_run=v),
             "per_channel": lambda v: power_spectrum_distance(x, x, per_channel=v),
             "curve": lambda v: dsident.metrics.prediction_error(model, x, 2, curve=v)}
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"`{name}` must be True or False.*; got {name}='no'"):
            call("no")
    for name in ("noise", "observation_noise"):
        with pytest.raises(TypeError, match=f"`{name}` must be True or False; got {name}=1"):
            model.generate(5, **{name: 1})
    assert power_spectrum_distance(x, x, per_channel=np.bool_(True)).shape == (2,)
    assert evaluate(model, test, observation_noise=None).attrs["observation_noise"] in (0, False)
