"""Auxiliary slow channels (dsident.data.slow_channels) and how scoring, the runner and the CLI treat them."""
import json

import numpy as np
import pytest

from dsident.data import as_dataset
from dsident.data.slow_channels import add_slow_channels, auxiliary_channels

DT = 0.01
F_SLOW, F_FAST = 0.1, 5.0          # cycles per time unit; cutoff 0.5 lies between them


def _two_tone(n: int = 20_000, amp: float = 0.7) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(n) * DT
    x = np.stack([amp * np.sin(2 * np.pi * F_SLOW * t) + 0.3 * np.sin(2 * np.pi * F_FAST * t),
                  np.cos(2 * np.pi * 1.3 * t)], axis=1)
    return x, t


def test_slow_band_and_quadrature_match_the_analytic_components():
    x, t = _two_tone()
    out, settings = add_slow_channels(as_dataset(x, dt=DT), 0.5)
    assert [str(c) for c in out["channel"].values] == ["x0", "x1", "slow(x0)", "slow_q(x0)"]
    assert auxiliary_channels(out) == ["slow(x0)", "slow_q(x0)"]
    # the original channels are untouched
    np.testing.assert_array_equal(out["x"].values[0, :, :2], x)
    scale = settings["scale"]
    # the slow tone's std is amp / sqrt(2); its Hilbert transform is -cos
    assert scale == pytest.approx(0.7 / np.sqrt(2), rel=0.02)
    inner = slice(2_000, -2_000)           # away from the filter's and the Hilbert transform's edges
    slow, quad = out["x"].values[0, inner, 2] * scale, out["x"].values[0, inner, 3] * scale
    np.testing.assert_allclose(slow, 0.7 * np.sin(2 * np.pi * F_SLOW * t[inner]), atol=0.01)
    np.testing.assert_allclose(quad, -0.7 * np.cos(2 * np.pi * F_SLOW * t[inner]), atol=0.02)
    assert np.std(out["x"].values[0, :, 2]) == pytest.approx(1.0, rel=1e-9)


def test_a_given_scale_is_reused_and_ragged_trials_stay_padded():
    x, _ = _two_tone(12_000)
    trials = np.stack([x, x * 2.0])
    trials[1, 9_000:] = np.nan
    ds = as_dataset(trials, dt=DT)
    ds["length"] = ("trial", np.array([12_000, 9_000]))
    out, settings = add_slow_channels(ds, 0.5, channel="x0", scale=0.25)
    assert settings == {"cutoff": 0.5, "channel": "x0", "scale": 0.25, "order": 4, "edges": "predict"}
    first, _ = add_slow_channels(as_dataset(x, dt=DT), 0.5, scale=0.25)
    np.testing.assert_allclose(out["x"].values[0, :, 2:], first["x"].values[0, :, 2:])
    assert np.isnan(out["x"].values[1, 9_000:, 2:]).all() and np.isfinite(out["x"].values[1, :9_000, 2:]).all()


@pytest.mark.parametrize("kwargs, message", [
    ({"cutoff": 60.0}, "below Nyquist"),
    ({"cutoff": 0.0}, "`cutoff`"),
    ({"cutoff": 0.5, "channel": "nope"}, "`channel` must name"),
    ({"cutoff": 0.5, "channel": 5}, "`channel` must be"),
    ({"cutoff": 0.5, "scale": -1.0}, "`scale`"),
    ({"cutoff": 0.001}, "need at least"),
])
def test_bad_arguments_are_named(kwargs, message):
    x, _ = _two_tone(5_000)
    with pytest.raises(ValueError, match=message):
        add_slow_channels(as_dataset(x, dt=DT), **kwargs)


def test_each_stretch_between_gaps_is_filtered_as_a_trial_of_its_own():
    # an independent route: the two stretches cut out by hand as two datasets
    x, _ = _two_tone(20_000)
    gappy = x.copy()
    gappy[8_000:8_100, 0] = np.nan
    with pytest.warns(UserWarning, match=r"filtered over each observed stretch .*trial 0: 2 stretch\(es\), 100 sample"):
        out, _ = add_slow_channels(as_dataset(gappy, dt=DT), 0.5, scale=0.25)
    first, _ = add_slow_channels(as_dataset(x[:8_000], dt=DT), 0.5, scale=0.25)
    second, _ = add_slow_channels(as_dataset(x[8_100:], dt=DT), 0.5, scale=0.25)
    np.testing.assert_allclose(out["x"].values[0, :8_000, 2:], first["x"].values[0, :, 2:], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["x"].values[0, 8_100:, 2:], second["x"].values[0, :, 2:], rtol=1e-12, atol=1e-12)
    assert np.isnan(out["x"].values[0, 8_000:8_100, 2:]).all()                 # masked, not filled
    np.testing.assert_array_equal(out["x"].values[0, :, :2], gappy)             # the data untouched
    # a stretch too short for the cutoff (3 periods: 600 samples here) is left missing too
    short = x[:5_000].copy()
    short[100:110, 0] = np.nan
    with pytest.warns(UserWarning, match="110 sample"):
        out, _ = add_slow_channels(as_dataset(short, dt=DT), 0.5)
    assert np.isnan(out["x"].values[0, :110, 2:]).all() and np.isfinite(out["x"].values[0, 110:, 2:]).all()


def test_gaps_that_leave_no_stretch_long_enough_flat_channels_and_a_second_application_are_refused():
    x, _ = _two_tone(5_000)
    gappy = x.copy()
    gappy[500::550, 0] = np.nan                                                 # no stretch of 600 samples
    with pytest.raises(ValueError, match="no stretch of 600 observed samples between its 9 missing ones "
                                         r"\(the longest has 549\)"):
        add_slow_channels(as_dataset(gappy, dt=DT), 0.5)
    flat = np.column_stack([np.zeros(5_000), x[:, 1]])
    with pytest.raises(ValueError, match="no slow band"):
        add_slow_channels(as_dataset(flat, dt=DT), 0.5)
    once, _ = add_slow_channels(as_dataset(x, dt=DT), 0.5)
    with pytest.raises(ValueError, match="added before"):
        add_slow_channels(once, 0.5)


def test_numpy_scalars_are_accepted_as_cutoff_and_scale():
    # a cutoff read from a numpy array or a float32 file is a number like any other
    x, _ = _two_tone(5_000)
    ref, ref_settings = add_slow_channels(as_dataset(x, dt=DT), 0.5, scale=0.25)
    out, settings = add_slow_channels(as_dataset(x, dt=DT), np.float32(0.5), scale=np.float32(0.25))
    assert settings == ref_settings
    np.testing.assert_allclose(out["x"].values, ref["x"].values)


def test_the_step_is_recorded_and_unzscore_leaves_the_slow_channels_in_their_scale():
    from dsident.data import preprocessing as pp

    x, _ = _two_tone(5_000)
    scored = pp.zscore(as_dataset(x * [3.0, 1.0] + [10.0, 0.0], dt=DT))
    out, settings = add_slow_channels(scored, 0.5)
    steps = pp.preprocessing_steps(out)
    assert [s["step"] for s in steps] == ["zscore", "add_slow_channels"]
    assert steps[-1]["scale"] == settings["scale"] and steps[-1]["channels"] == ["slow(x0)", "slow_q(x0)"]
    back = pp.unzscore(out)["x"].values[0]
    np.testing.assert_allclose(back[:, :2], x * [3.0, 1.0] + [10.0, 0.0])
    np.testing.assert_array_equal(back[:, 2:], out["x"].values[0, :, 2:])


def _small_model(n_channels: int, seed: int = 0):
    from dsident.models import ShallowPLRNN

    est = ShallowPLRNN(latent_dim=n_channels, hidden_dim=8, readout="identity", clip=True, seed=seed)
    x, _ = _two_tone(3_000)
    data, _ = add_slow_channels(as_dataset(x, dt=DT), 0.5)
    est.fit(data, method="bptt", n_epochs=2, seq_len=20, progress=False)
    return est, data


def test_evaluate_scores_only_the_datas_own_channels():
    from dsident import metrics

    est, _ = _small_model(4)
    x, _ = _two_tone(6_000)
    test, _ = add_slow_channels(as_dataset(x, dt=DT), 0.5)
    scores, run = metrics.evaluate(est, test, return_run=True, pe_steps=5)
    assert [str(c) for c in scores["channel"].values] == ["x0", "x1"]
    assert scores.attrs["n_channels"] == 2
    assert [str(c) for c in run["channel"].values] == ["x0", "x1", "slow(x0)", "slow_q(x0)"]
    start = json.loads(run.attrs["start_index"])[0]
    gen = run["x"].values[0, start:]
    true = test["x"].values[0, start:start + gen.shape[0]]
    own = metrics.state_space_divergence(test["x"].values[0, :, :2], gen[:, :2])
    assert float(scores.state_space_divergence) == pytest.approx(own, rel=1e-12)
    # the same run scored on all four channels is another number: the slow pair was left out
    assert metrics.state_space_divergence(test["x"].values[0], gen) != pytest.approx(own, rel=1e-3)
    assert true.shape == gen.shape
    # PE over the data's channels: the all-channel mean splits into the two halves' means
    pe_own = metrics.prediction_error(est, test, n=5, channels=[0, 1])
    pe_aux = metrics.prediction_error(est, test, n=5, channels=[2, 3])
    pe_all = metrics.prediction_error(est, test, n=5)
    assert float(scores.prediction_error) == pytest.approx(pe_own, rel=1e-12)
    assert pe_all == pytest.approx((pe_own + pe_aux) / 2, rel=1e-10)
    with pytest.raises(ValueError, match="`channels`"):
        metrics.prediction_error(est, test, n=5, channels=[4])


def test_runner_adds_the_channels_to_both_splits_with_the_training_scale(tmp_path):
    import xarray as xr

    from dsident.experiments.config import resolve_config
    from dsident.experiments.inputs import load_data
    from dsident.experiments.runner import run_point

    cfg = resolve_config("ecg", "shplrnn", "bptt", overrides={
        "seed": 0, "train_length": 4_000, "eval_length": 2_000, "slow_channels": {"cutoff": 2.0},
        "model_params": {"latent_dim": 7, "hidden_dim": 8, "readout": "identity"},
        "fit_options": {"n_epochs": 1, "seq_len": 20}})
    rec = run_point(cfg, tmp_path)
    assert rec["status"] == "done", rec["error"]
    slow = rec["config"]["slow_channels"]
    train = load_data("ecg", split="train", length=4_000)
    _, expected = add_slow_channels(train, 2.0)
    assert slow == expected                          # the training split's scale, recorded
    point = tmp_path / "points" / rec["point_id"]
    with xr.open_dataset(point / "generated.nc", engine="h5netcdf") as gen, \
            xr.open_dataset(point / "metrics.nc", engine="h5netcdf") as met:
        assert gen.sizes["channel"] == 7 and met.sizes["channel"] == 5
        # which channels the run misses: the scored ones only, never the slow channels it was handed
        assert met["state_space_projections"].shape == (5, 5)
        assert list(met["state_space_projections"]["other_channel"].values) == list(met["channel"].values)
    assert np.isfinite(rec["scores"]["D_stsp"])


def test_config_validation_names_the_key():
    from dsident.experiments.config import resolve_config

    with pytest.raises(ValueError, match="at least `cutoff`"):
        resolve_config("ecg", "shplrnn", overrides={"slow_channels": {"channel": 0}})
    with pytest.raises(ValueError, match="unknown `slow_channels` key"):
        resolve_config("ecg", "shplrnn", overrides={"slow_channels": {"cutoff": 0.6, "band": 2}})


def test_cli_fit_then_evaluate_reproduces_the_score(tmp_path, capsys):
    from dsident.cli import main

    out = tmp_path / "fit"
    args = ["fit", "ecg", "--model", "shplrnn", "--method", "bptt", "--latent-dim", "7", "--param", "hidden_dim=8",
            "--param", "readout=identity", "--train-length", "4000", "--eval-length", "2000",
            "--slow-channels", "2.0", "--option", "n_epochs=1", "--option", "seq_len=20",
            "--out", str(out), "--no-progress"]
    assert main(args) == 0
    saved = json.loads((out / "config.json").read_text())
    assert saved["slow_channels"]["cutoff"] == 2.0 and saved["slow_channels"]["scale"] > 0
    import xarray as xr

    with xr.open_dataset(out / "metrics.nc", engine="h5netcdf") as m:
        fitted = float(m["state_space_divergence"])
    assert main(["evaluate", str(out), "ecg", "--out", str(tmp_path / "ev")]) == 0
    with xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf") as m:
        assert float(m["state_space_divergence"]) == pytest.approx(fitted, rel=1e-12)
        assert m.sizes["channel"] == 5


def test_dry_run_quotes_no_measured_numbers_for_other_channels(capsys):
    from dsident.cli import main

    assert main(["benchmark", "--datasets", "ecg", "--models", "shplrnn", "--dry-run"]) == 0
    plain = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| ecg | shplrnn"))
    assert main(["benchmark", "--datasets", "ecg", "--models", "shplrnn", "--slow-channels", "0.6", "--dry-run"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| ecg | shplrnn"))
    assert "D_stsp" in plain and "| – | – |" not in plain
    assert "| – | – |" in row and '"slow_channels": {"cutoff": 0.6}' in row


def test_teacher_forcing_selection_scores_the_datas_own_channels():
    from dsident import metrics
    from dsident.inference.teacher_forcing import _FreeRunScorer

    est, data = _small_model(4)
    scorer = _FreeRunScorer(data, eval_steps=2_000, burn_in=500)
    run = scorer.free_run(est.model_, 0)
    gen = np.asarray(run["x"].values[0, 500:], dtype=float)
    ref = data["x"].values[0, :2_000]
    d_stsp, d_h = scorer.score(est.model_, 0, run=run)
    assert d_stsp == pytest.approx(metrics.state_space_divergence(ref[:, :2], gen[:, :2]), rel=1e-12)
    assert d_h == pytest.approx(metrics.power_spectrum_distance(ref[:, :2], gen[:, :2]), rel=1e-12)
    assert d_stsp != pytest.approx(metrics.state_space_divergence(ref, gen), rel=1e-3)


def test_the_ecg_cell_breathes_through_slow_channels_and_false_turns_them_off():
    from dsident.experiments.config import resolve_config

    cell = resolve_config("ecg", "shplrnn", "teacher-forcing")
    assert cell["slow_channels"] == {"cutoff": 0.4, "edges": "predict"} and cell["model_params"]["latent_dim"] == 7
    for model in ("gnode", "rplrnn"):        # every ECG cell was measured with forecast ends
        assert resolve_config("ecg", model, "teacher-forcing")["slow_channels"]["edges"] == "predict"
    assert "slow_channels" not in resolve_config("ecg", "shplrnn", "teacher-forcing",
                                                 overrides={"slow_channels": False})
    assert "slow_channels" not in resolve_config("lorenz63", "shplrnn", "teacher-forcing")


def test_before_filters_across_the_start_as_the_concatenated_recording_does():
    x, t = _two_tone(30_000)
    head, tail = as_dataset(x[:20_000], dt=DT), as_dataset(x[20_000:], dt=DT)
    whole, settings = add_slow_channels(as_dataset(x, dt=DT), 0.5)
    joined, _ = add_slow_channels(tail, 0.5, scale=settings["scale"], before=head)
    # independent route: the whole recording filtered at once, then cut
    np.testing.assert_allclose(joined["x"].values[0, :, 2:], whole["x"].values[0, 20_000:, 2:], atol=1e-12)
    alone, _ = add_slow_channels(tail, 0.5, scale=settings["scale"], edges="plain")
    # at the first sample the quadrature is the analytic -amp cos(2π f t) only when filtered across the edge
    truth = -0.7 * np.cos(2 * np.pi * F_SLOW * t[20_000]) / settings["scale"]
    assert abs(joined["x"].values[0, 0, 3] - truth) < 0.05
    assert abs(alone["x"].values[0, 0, 3] - truth) > 0.2


def test_before_must_have_the_datas_channels_and_trials():
    x, _ = _two_tone(5_000)
    data = as_dataset(x, dt=DT)
    with pytest.raises(ValueError, match="`before` must hold .* expected \\['x0', 'x1'\\] × 1"):
        add_slow_channels(data, 0.5, before=as_dataset(x[:, :1], dt=DT))
    with pytest.raises(ValueError, match="`before` must hold"):
        add_slow_channels(data, 0.5, before=as_dataset(np.stack([x, x]), dt=DT))
    gappy = x.copy()
    gappy[:3, 0] = np.nan
    # missing samples at the start of `before`: the stretch after them is filtered on its own
    with pytest.warns(UserWarning, match="3 sample"):
        joined, _ = add_slow_channels(data, 0.5, before=as_dataset(gappy, dt=DT))
    assert np.isfinite(joined["x"].values).all()


def test_load_test_filters_the_ecg_test_split_across_the_training_split():
    from dsident.experiments.inputs import continues, in_fit_units, load_data, load_test, slow_channels_for_fit

    train, test = load_data("ecg", split="train"), load_data("ecg", split="test")
    assert continues(test, train) and not continues(train, test)
    _, slow = slow_channels_for_fit(train, {"cutoff": 0.4})
    cfg = {"dataset": "ecg", "slow_channels": slow}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the preceding stretch is known: no edge warning
        cut = load_test("ecg", cfg, length=3_000)
        full = load_test("ecg", cfg)
    # the first samples do not depend on how much of the split is kept
    np.testing.assert_array_equal(cut["x"].values, full["x"].values[:, :3_000])
    # independent route: both splits joined into one series and filtered at once
    joined = as_dataset(np.concatenate([train["x"].values, test["x"].values], axis=1), dt=train.attrs["dt"],
                        channel_names=[str(c) for c in train["channel"].values])
    ref = in_fit_units(joined, cfg)["x"].values[0, train.sizes["time"]:train.sizes["time"] + 3_000, 5:]
    np.testing.assert_allclose(cut["x"].values[0, :, 5:], ref, atol=1e-9)
    # inside the training range at the start; the test split filtered alone is not
    inner = np.abs(full["x"].values[0, 2_000:-2_000, 5:]).max()
    assert np.abs(cut["x"].values[0, 0, 5:]).max() <= inner
    plain = {"dataset": "ecg", "slow_channels": {**slow, "edges": "plain"}}
    alone = in_fit_units(load_data("ecg", split="test", length=10_000), plain)
    assert np.abs(alone["x"].values[0, 0, 5:]).max() > 2 * inner
    # the scored channels are the data's own, unchanged
    np.testing.assert_array_equal(cut["x"].values[0, :, :5], test["x"].values[0, :3_000])


def test_load_test_without_a_known_preceding_stretch_filters_the_test_alone(tmp_path):
    from dsident.experiments.inputs import in_fit_units, load_data, load_test, slow_channels_for_fit

    x, _ = _two_tone(12_000)
    path = tmp_path / "rec.npy"
    np.save(path, x)
    train = load_data(str(path), dt=DT)
    _, slow = slow_channels_for_fit(train, {"cutoff": 0.5, "edges": "plain"})
    cfg = {"dataset": str(path), "slow_channels": slow}
    with pytest.warns(UserWarning, match="edge effect"):
        got = load_test(str(path), cfg, dt=DT, length=5_000)     # no split bounds: nothing to join
    np.testing.assert_array_equal(got["x"].values, in_fit_units(train, cfg)["x"].values[:, :5_000])
    # with the ends forecast (the default) there is no edge to warn about
    predicted = {"dataset": str(path), "slow_channels": slow_channels_for_fit(train, {"cutoff": 0.5})[1]}
    assert predicted["slow_channels"]["edges"] == "predict"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = load_test(str(path), predicted, dt=DT, length=5_000)
    np.testing.assert_array_equal(got["x"].values, in_fit_units(train, predicted)["x"].values[:, :5_000])


def test_cli_test_fraction_filters_the_held_out_end_across_the_training_part(tmp_path):
    import xarray as xr

    from dsident import metrics
    from dsident.cli import main
    from dsident.cli_main_job import load_fitted

    x, _ = _two_tone(4_000)
    np.save(tmp_path / "rec.npy", x)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", str(DT), "--test-fraction", "0.25", "--slow-channels", "0.5",
                 "--model", "shplrnn", "--method", "bptt", "--latent-dim", "4", "--param", "hidden_dim=8",
                 "--param", "readout=identity", "--option", "n_epochs=1", "--option", "seq_len=20",
                 "--out", str(out), "--no-progress"]) == 0
    est, cfg = load_fitted(out)
    scale = cfg["slow_channels"]["scale"]
    head, tail = as_dataset(x[:3_000], dt=DT), as_dataset(x[3_000:], dt=DT)
    joined, _ = add_slow_channels(tail, 0.5, scale=scale, before=head)
    alone, _ = add_slow_channels(tail, 0.5, scale=scale)
    with xr.open_dataset(out / "metrics.nc", engine="h5netcdf") as saved:
        pe = float(saved["prediction_error"])
    assert pe == pytest.approx(metrics.prediction_error(est, joined, n=20, channels=[0, 1]), rel=1e-9)
    assert pe != pytest.approx(metrics.prediction_error(est, alone, n=20, channels=[0, 1]), rel=1e-6)


def test_cli_evaluate_before_filters_a_test_file_across_the_preceding_recording(tmp_path):
    import warnings

    import xarray as xr

    from dsident import metrics
    from dsident.cli import main
    from dsident.cli_main_job import load_fitted

    x, _ = _two_tone(4_000)
    np.save(tmp_path / "head.npy", x[:3_000])
    np.save(tmp_path / "tail.npy", x[3_000:])
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "head.npy"), "--dt", str(DT), "--slow-channels", "0.5", "--model", "shplrnn",
                 "--method", "bptt", "--latent-dim", "4", "--param", "hidden_dim=8", "--param", "readout=identity",
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--out", str(out), "--no-progress"]) == 0
    est, cfg = load_fitted(out)
    scale = cfg["slow_channels"]["scale"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # the preceding stretch is given: no edge warning
        assert main(["evaluate", str(out), str(tmp_path / "tail.npy"), "--dt", str(DT),
                     "--before", str(tmp_path / "head.npy"), "--out", str(tmp_path / "ev")]) == 0
    joined, _ = add_slow_channels(as_dataset(x[3_000:], dt=DT), 0.5, scale=scale, before=as_dataset(x[:3_000], dt=DT))
    with xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf") as saved:
        pe = float(saved["prediction_error"])
    assert pe == pytest.approx(metrics.prediction_error(est, joined, n=20, channels=[0, 1]), rel=1e-9)
    assert cfg["slow_channels"]["edges"] == "predict"          # the CLI's default: no edge warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["evaluate", str(out), str(tmp_path / "tail.npy"), "--dt", str(DT),
                     "--out", str(tmp_path / "ev2")]) == 0
    with xr.open_dataset(tmp_path / "ev2" / "metrics.nc", engine="h5netcdf") as saved:
        assert float(saved["prediction_error"]) != pytest.approx(pe, rel=1e-6)


@pytest.mark.parametrize("phase", [0.0, 0.3, 0.55, 0.8])
def test_predicted_ends_match_the_analytic_components_where_plain_ones_do_not(phase):
    # a slow tone cut at an arbitrary phase: its band and quadrature are known at every sample
    t = (np.arange(12_000) + phase / (F_SLOW * DT)) * DT
    x = np.stack([0.7 * np.sin(2 * np.pi * F_SLOW * t) + 0.3 * np.sin(2 * np.pi * F_FAST * t),
                  np.cos(2 * np.pi * 1.3 * t)], axis=1)
    truth = np.stack([0.7 * np.sin(2 * np.pi * F_SLOW * t), -0.7 * np.cos(2 * np.pi * F_SLOW * t)], axis=1)
    errors = {}
    for edges in ("predict", "plain"):
        out, settings = add_slow_channels(as_dataset(x, dt=DT), 0.5, edges=edges)
        assert settings["edges"] == edges
        got = out["x"].values[0, :, 2:] * settings["scale"]
        got[:, 0] += truth[:, 0].mean()             # the channels have their mean removed
        errors[edges] = np.abs(got - truth)[[0, -1]].max()
        # away from the ends both agree with the tone
        np.testing.assert_allclose(got[2_000:-2_000], truth[2_000:-2_000], atol=0.03)
    assert errors["predict"] < 0.25 * 0.7
    assert errors["predict"] < errors["plain"] or errors["plain"] < 0.1 * 0.7


def test_predicted_ends_of_the_ecg_training_split_agree_with_the_whole_recording():
    from dsident.experiments.inputs import load_data

    train, test = load_data("ecg", split="train"), load_data("ecg", split="test")
    n = train.sizes["time"]
    whole = as_dataset(np.concatenate([train["x"].values, test["x"].values], axis=1), dt=train.attrs["dt"])
    # independent route: the training split's last sample lies inside the whole recording
    ref, settings = add_slow_channels(whole, 0.4, edges="plain")
    scale = settings["scale"]
    end = {e: add_slow_channels(train, 0.4, scale=scale, edges=e)[0]["x"].values[0, -1, 5:] for e in ("predict", "plain")}
    truth = ref["x"].values[0, n - 1, 5:]
    # the band is compared up to each series' own mean (it is removed per series)
    assert abs(end["predict"][1] - truth[1]) < 0.1 * np.abs(ref["x"].values[0, :, 6]).max()
    assert abs(end["plain"][1] - truth[1]) > 5 * abs(end["predict"][1] - truth[1])


def test_forecast_band_continues_a_tone_and_stays_bounded():
    from dsident.data.slow_channels import burg_ar, forecast_band

    t = np.arange(4_000) * DT
    tone = np.sin(2 * np.pi * F_SLOW * t + 0.4)
    ahead = forecast_band(tone, 1_000, step=25, lags=16)
    future = np.sin(2 * np.pi * F_SLOW * (4_000 + np.arange(1, 1_001)) * DT + 0.4)
    np.testing.assert_allclose(ahead, future, atol=0.02)
    # an AR(2) process: Burg recovers its coefficients, and a long forecast stays within the data's range
    rng = np.random.default_rng(0)
    a = np.array([1.6, -0.8])
    y = np.zeros(20_000)
    for i in range(2, y.size):
        y[i] = a @ y[i - 2:i][::-1] + rng.standard_normal()
    np.testing.assert_allclose(burg_ar(y - y.mean(), 2), a, atol=0.02)
    far = forecast_band(y, 50_000, step=1, lags=2)
    assert np.all(np.isfinite(far)) and np.abs(far).max() <= np.abs(y).max()
    assert np.array_equal(forecast_band(np.full(300, 2.5), 10, step=5, lags=4), np.full(10, 2.5))


def test_an_unknown_edge_mode_is_named():
    from dsident.experiments.inputs import check_slow_channels

    x, _ = _two_tone(5_000)
    with pytest.raises(ValueError, match=r"`edges` must be one of \['predict', 'plain'\]; got edges='mirror'"):
        add_slow_channels(as_dataset(x, dt=DT), 0.5, edges="mirror")
    with pytest.raises(ValueError, match=r"`slow_channels.edges` must be one of .*got 'mirror'"):
        check_slow_channels({"cutoff": 0.5, "edges": "mirror"})


def test_load_test_refuses_test_data_whose_channels_are_not_the_fits(tmp_path):
    from dsident.experiments.inputs import load_data, load_test, slow_channels_for_fit

    x, _ = _two_tone(12_000)
    np.save(tmp_path / "rec.npy", x)
    np.save(tmp_path / "three.npy", np.concatenate([x, x[:, :1]], axis=1))
    train = load_data(str(tmp_path / "rec.npy"), dt=DT)
    fitted, slow = slow_channels_for_fit(train, {"cutoff": 0.5})
    cfg = {"dataset": str(tmp_path / "rec.npy"), "slow_channels": slow}
    names = [str(c) for c in fitted["channel"].values]          # x0, x1 and the two slow channels
    # the slow channels the fit adds are not asked of the test data
    got = load_test(str(tmp_path / "rec.npy"), cfg, dt=DT, channels=names)
    assert [str(c) for c in got["channel"].values] == names
    with pytest.raises(ValueError, match=r"three.npy' have 3 channel\(s\).*fitted on 2: \['x0', 'x1'\] \(and adds"):
        load_test(str(tmp_path / "three.npy"), cfg, dt=DT, channels=names)
    # without slow channels every channel is the data's
    with pytest.raises(ValueError, match=r"have 3 channel\(s\).*fitted on 2: \['x0', 'x1'\]; give"):
        load_test(str(tmp_path / "three.npy"), {}, dt=DT, channels=["x0", "x1"])
    # the slow channels' source channel must be there by name
    renamed = as_dataset(x, dt=DT, channel_names=["a", "b"])
    with pytest.raises(ValueError, match=r"channel 'x0', which the test data lack \(channels \['a', 'b'\]\)"):
        load_test(renamed, cfg, channels=names)


def test_generated_runs_of_a_zscored_fit_with_slow_channels_go_back_to_data_units():
    # `dsident generate` undoes the z-score; the two slow channels after the data's have no data
    # units (a broadcast error before)
    from dsident.experiments.inputs import to_data_units

    cfg = {"zscore": {"channel": ["a", "b"], "mean": [10.0, -2.0], "std": [3.0, 0.5]},
           "slow_channels": {"cutoff": 0.5, "scale": 1.0}}
    z = np.random.default_rng(0).normal(size=(1, 50, 4))
    back = to_data_units(z, cfg)
    np.testing.assert_allclose(back[..., :2], z[..., :2] * [3.0, 0.5] + [10.0, -2.0])
    np.testing.assert_array_equal(back[..., 2:], z[..., 2:])
    assert not np.shares_memory(back, z)
    np.testing.assert_allclose(to_data_units(z[..., :2], cfg), back[..., :2])       # no slow channels
