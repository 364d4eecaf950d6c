"""The main-job verbs of `dsident` (fit, evaluate, generate, benchmark, sweep) on tiny settings, in process."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
import xarray as xr

from dsident.analysis import VERDICTS
from dsident.cli import main
from dsident.experiments.config import MEASURED, MEASURED_EVAL_LENGTH, PAIR_DEFAULTS, default_method

from cli_tiny import TINY  # the tiny fit the CLI tests share (tests/cli_tiny.py)


def _png(path) -> bool:
    return path.is_file() and path.read_bytes()[:4] == b"\x89PNG"


def test_fit_writes_model_config_netcdf_markdown_png(fitted):
    cfg = json.loads((fitted / "config.json").read_text())
    assert cfg["model"] == "shplrnn" and cfg["method"] == "bptt"
    assert cfg["model_params"]["hidden_dim"] == 8 and cfg["fit_options"]["n_epochs"] == 1
    assert cfg["train_length"] == 400 and "dsident_version" in cfg
    from dsident.experiments.machine import cpu_model
    assert cfg["machine"]["cpu"] == cpu_model()                 # the fit time is this machine's
    assert f"s on {cpu_model()} (" in (fitted / "fit.md").read_text()
    assert (fitted / "model").is_dir()
    metrics = xr.open_dataset(fitted / "metrics.nc", engine="h5netcdf")
    assert "state_space_divergence" in metrics
    assert "D_stsp" in (fitted / "fit.md").read_text()
    assert _png(fitted / "reconstruction.png") and _png(fitted / "attractor.png")
    assert (fitted / "history.nc").is_file()
    # the verdict's zero tolerance, per time unit (20 / steps per step of dt 0.01)
    steps = int(re.search(r"free run of (\d+) steps", (fitted / "fit.md").read_text()).group(1))
    assert f"(|λ| ≤ {20 / steps / 0.01:.4g} counts as zero over this many steps)" in (fitted / "fit.md").read_text()


def test_fit_quotes_the_floor_beside_its_scores(fitted):
    from dsident import metrics
    from dsident.experiments.tables import floor_multiple

    scored = xr.open_dataset(fitted / "metrics.nc", engine="h5netcdf")
    n = json.loads(scored.attrs["data_length"])[0]
    # the true system's floor at the scored length, computed here by the metrics themselves
    floor = metrics.floor("lorenz63", length=n)
    d_floor = float(floor.attrs["state_space_divergence_mean"])
    text = (fitted / "fit.md").read_text()
    assert f"| floor (the true system's independent stretches) | {d_floor:.4g} |" in text
    d, h = float(scored["state_space_divergence"]), float(scored["power_spectrum_distance"])
    multiple = floor_multiple(d, h, d_floor).strip(" ()").removesuffix(" ✓")
    assert f"- D_stsp is {multiple} the floor: " in text


def test_evaluate_scores_the_saved_model(fitted, tmp_path):
    out = tmp_path / "ev"
    assert main(["evaluate", str(fitted), "lorenz63", "--eval-length", "250", "--out", str(out)]) == 0
    ds = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert json.loads(ds.attrs["data_length"]) == [250]
    text = (out / "metrics.md").read_text()
    assert "| D_stsp |" in text and _png(out / "reconstruction.png")
    # the model also runs twice as far (at least 2 000 steps) from the first test sample
    from dsident.analysis import free_run_regime
    from dsident.cli_main_job import load_fitted
    from dsident.experiments.inputs import load_data
    est, _ = load_fitted(fitted)
    x0 = load_data("lorenz63", split="test", length=250)["x"].values[0, 0]
    verdict = free_run_regime(est, n_steps=2000, transient=200, x0=x0, seed=0).verdict
    assert "| late stretch [1.25 T, 2.25 T) |" in text and f"free run of 2000 steps from the first test sample: **{verdict}**" in text


def test_evaluate_says_which_channels_and_pairs_the_free_run_misses(fitted, tmp_path):
    out = tmp_path / "ev"
    assert main(["evaluate", str(fitted), "lorenz63", "--eval-length", "250", "--out", str(out)]) == 0
    ds = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    proj = ds["state_space_projections"]
    assert list(proj["channel"].values) == list(ds["channel"].values) and proj.shape == (3, 3)
    # an independent route: the scored test window against the saved free run, one column pair at a time
    from dsident.experiments.inputs import load_data
    from dsident.metrics import state_space_divergence
    x = load_data("lorenz63", split="test", length=250)["x"].values[0]
    g = xr.open_dataset(out / "generated.nc", engine="h5netcdf")["x"].values[0]
    g = g[np.all(np.isfinite(g), axis=1)]
    ref = state_space_divergence(x[:, [0, 1]], g[:, [0, 1]], method="bins")
    assert np.isfinite(ref) and float(proj[0, 1]) == pytest.approx(ref, rel=1e-9)
    # ... and the full D_stsp is not one of the projections (the table adds information)
    assert float(ds["state_space_divergence"]) not in [pytest.approx(v) for v in proj.values.ravel()]
    text = (out / "metrics.md").read_text()
    assert "Which variables the free run misses" in text and "| x | y | z |" in text.replace("'", "")
    i, j = np.unravel_index(np.nanargmax(np.where(np.triu(np.ones((3, 3), bool), 1), proj.values, np.nan)), (3, 3))
    names = [str(c) for c in proj["channel"].values]
    assert f"worst pair: ({names[i]}, {names[j]})" in text
    assert _png(out / "pairs.png")                      # the pairs drawn, each titled with its D_stsp


def test_evaluate_from_many_starts_writes_each_start_scored_like_evaluate(fitted, tmp_path):
    from dsident import metrics
    from dsident.cli_main_job import load_fitted
    from dsident.experiments.inputs import load_data

    out = tmp_path / "ev"
    assert main(["evaluate", str(fitted), "lorenz63", "--eval-length", "250", "--starts", "3", "--out", str(out),
                 "--no-progress"]) == 0
    starts = xr.open_dataset(out / "starts.nc", engine="h5netcdf")
    # windows of the evaluation length spread over the whole test split (100 000 samples)
    np.testing.assert_array_equal(starts["start_index"].values, [0, (100_000 - 250) // 2, 100_000 - 250])
    est, _ = load_fitted(fitted)
    full = load_data("lorenz63", split="test")
    last = metrics.evaluate(est, full.isel(time=slice(100_000 - 250, None)), pe_steps=1)
    assert float(starts["state_space_divergence"][2]) == pytest.approx(float(last["state_space_divergence"]), rel=1e-12,
                                                                       nan_ok=True)
    text = (out / "metrics.md").read_text()
    assert "Free runs from 3 starts" in text and f"| 0, {100_000 - 250} |" in text
    assert "of the runs at rest" in text and "overlap" not in text          # 3 windows of 250 lie apart
    # more starts than windows side by side: the table says their windows overlap
    from dsident.cli_main_job import _starts_table
    with pytest.warns(RuntimeWarning, match="overlap") as caught:
        lines = _starts_table(est, full.isel(time=slice(0, 600)), 5, 250, 0, tmp_path, progress=False)
    # the command line's flags, not evaluate_starts' Python arguments
    said = " ".join(str(w.message) for w in caught)
    assert "(--starts=5) of --eval-length=250 samples" in said and "a shorter --eval-length" in said
    assert "`length`" not in said and "n_starts" not in said and "the test data hold" in said
    assert any(line.startswith("- 4 of the windows overlap the one before them") for line in lines)
    with pytest.raises(SystemExit, match="--starts must be a positive number"):
        main(["evaluate", str(fitted), "lorenz63", "--eval-length", "250", "--starts", "0", "--out", str(out)])


def test_generate_writes_the_requested_number_of_steps(fitted, tmp_path):
    out = tmp_path / "gen"
    assert main(["generate", str(fitted), "--steps", "123", "--seed", "4", "--out", str(out)]) == 0
    gen = xr.open_dataset(out / "generated.nc", engine="h5netcdf")
    assert gen.sizes["time"] == 123 and list(gen["channel"].values) == ["x", "y", "z"]
    assert "123 steps × 1 trial(s), seed 4" in (out / "generated.md").read_text()
    assert "- observations: the observation model's mean" in (out / "generated.md").read_text()
    assert _png(out / "time_series.png")
    # --trials was read and then ignored; with --noise each trial is its own draw
    assert main(["generate", str(fitted), "--steps", "50", "--trials", "3", "--noise", "--out", str(out / "n")]) == 0
    x = xr.open_dataset(out / "n" / "generated.nc", engine="h5netcdf")["x"].values
    assert x.shape == (3, 50, 3) and not np.allclose(x[0], x[1])
    assert main(["generate", str(fitted), "--steps", "50", "--trials", "2", "--out", str(out / "m")]) == 0
    x = xr.open_dataset(out / "m" / "generated.nc", engine="h5netcdf")["x"].values
    np.testing.assert_array_equal(x[0], x[1])                 # the deterministic skeleton, twice
    assert main(["generate", str(fitted), "--steps", "50", "--observations", "draws", "--out", str(out / "d")]) == 0
    drawn = xr.open_dataset(out / "d" / "generated.nc", engine="h5netcdf")["x"].values[0]
    assert not np.allclose(drawn, x[0])
    assert "draws from the observation model" in (out / "d" / "generated.md").read_text()


def test_the_saved_model_folder_stands_for_its_run_and_other_folders_are_refused(fitted, tmp_path):
    out = tmp_path / "gen"
    assert main(["generate", str(fitted / "model"), "--steps", "50", "--out", str(out)]) == 0
    assert xr.open_dataset(out / "generated.nc", engine="h5netcdf").sizes["time"] == 50
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "config.json").write_text(json.dumps({"latent_dim": 3}))
    with pytest.raises(SystemExit, match="names no model"):
        main(["evaluate", str(stray), "lorenz63"])


def test_fit_reads_a_npy_file_with_dt_and_a_toml_config(tmp_path):
    from dsident import datasets

    x = datasets.load("lorenz63", split="train")["x"].values[0, :400]
    np.save(tmp_path / "rec.npy", x)
    conf = tmp_path / "fit.toml"
    conf.write_text('model = "shplrnn"\nmethod = "bptt"\nlatent-dim = 4\n'
                    '[model_params]\nhidden_dim = 6\n[fit_options]\nn_epochs = 1\nseq_len = 20\n')
    out = tmp_path / "npyfit"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--config", str(conf), "--no-progress",
                 "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model_params"] == {**cfg["model_params"], "latent_dim": 4, "hidden_dim": 6}
    assert cfg["dt"] == 0.01
    assert _png(out / "reconstruction.png")       # no test split: free run vs the training data


def test_zscore_constants_of_the_training_file_serve_fit_evaluate_and_generate(tmp_path, capsys):
    from dsident import as_dataset, datasets, metrics
    from dsident.cli_main_job import load_fitted

    scale, offset = np.array([10.0, 20.0, 5.0]), np.array([-65.0, 300.0, 0.0])     # raw units, e.g. mV
    raw_train = datasets.load("lorenz63", split="train")["x"].values[0, :400] * scale + offset
    raw_test = datasets.load("lorenz63", split="test")["x"].values[0, :300] * scale + offset
    np.save(tmp_path / "train.npy", raw_train)
    np.save(tmp_path / "test.npy", raw_test)
    out = tmp_path / "zfit"
    assert main(["fit", str(tmp_path / "train.npy"), "--dt", "0.01", "--zscore", "--test-data",
                 str(tmp_path / "test.npy"), *TINY[:4], *TINY[8:], "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    np.testing.assert_allclose(cfg["zscore"]["mean"], raw_train.mean(0), rtol=1e-12)
    np.testing.assert_allclose(cfg["zscore"]["std"], raw_train.std(0), rtol=1e-12)
    # the fit scored the test file standardised with the *training* constants
    est, _ = load_fitted(out)
    by_hand = (raw_test - raw_train.mean(0)) / raw_train.std(0)
    direct = metrics.evaluate(est, as_dataset(by_hand, dt=0.01), pe_steps=20, seed=0)
    saved = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert float(saved["prediction_error"]) == pytest.approx(float(direct["prediction_error"]), rel=1e-9)
    # `evaluate` on the raw file applies the same constants
    assert main(["evaluate", str(out), str(tmp_path / "test.npy"), "--dt", "0.01", "--out", str(tmp_path / "ev")]) == 0
    again = xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf")
    assert float(again["prediction_error"]) == pytest.approx(float(direct["prediction_error"]), rel=1e-9)
    # `generate` writes the data's units: the model's z-units times std plus mean
    assert main(["generate", str(out), "--steps", "80", "--seed", "3", "--out", str(tmp_path / "gen")]) == 0
    written = xr.open_dataset(tmp_path / "gen" / "generated.nc", engine="h5netcdf")["x"].values
    z_units = est.generate(80, seed=3)["x"].values
    np.testing.assert_allclose(written, z_units * raw_train.std(0) + raw_train.mean(0), rtol=1e-9, atol=1e-9)
    # `analyze` gives the fixed points in the recording's units: the model's readout of them, z-score undone
    assert main(["analyze", str(out), "--steps", "200", "--transient", "10", "--out", str(tmp_path / "an")]) == 0
    analysed = xr.open_dataset(tmp_path / "an" / "analysis.nc", engine="h5netcdf")
    import torch

    assert analysed.sizes["fixed_point"] >= 1
    z_star = torch.as_tensor(analysed["fixed_point_state"].values[:, 0], dtype=torch.float32)
    by_model = est.model_.decode(z_star).detach().double().numpy()
    np.testing.assert_allclose(analysed["fixed_point_observation"].values,
                               by_model * raw_train.std(0) + raw_train.mean(0), rtol=1e-5, atol=1e-4)
    assert analysed["fixed_point_observation"].attrs["units"] == "the data's units"


def test_fit_a_one_channel_recording_delay_embedded_end_to_end(tmp_path):
    from dsident.cli_main_job import load_fitted

    t = np.arange(3000)
    v = 5.0 + 2.0 * np.sin(2 * np.pi * t / 40) + 0.02 * np.random.default_rng(0).standard_normal(t.size)
    np.save(tmp_path / "v.npy", v[:, None])
    out = tmp_path / "emb"
    assert main(["fit", str(tmp_path / "v.npy"), "--dt", "0.1", "--delay-embed", "0,7,13", "--zscore",
                 "--test-fraction", "0.2", *TINY[:4], "--option", "n_epochs=1", "--option", "seq_len=20",
                 "--no-progress", "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["delay_embedding"] == {"delays": [0, 7, 13], "channel": "x0"}
    assert "- delay-embedded: channel 'x0' at delays [0, 7, 13] samples, 3 dimensions" in (out / "fit.md").read_text()
    est, _ = load_fitted(out)
    assert est.model_.observation.obs_dim == 3
    # evaluate: a raw one-channel file gets the fit's z-score and delays
    assert main(["evaluate", str(out), str(tmp_path / "v.npy"), "--dt", "0.1", "--out", str(tmp_path / "ev")]) == 0
    scored = xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf")
    assert list(scored["channel"].values) == ["x0(t+0)", "x0(t+7)", "x0(t+13)"]
    # generate writes every embedded column in the recording's units (the one channel's constants)
    assert main(["generate", str(out), "--steps", "60", "--seed", "2", "--out", str(tmp_path / "gen")]) == 0
    written = xr.open_dataset(tmp_path / "gen" / "generated.nc", engine="h5netcdf")["x"].values
    head = v[:2400]
    np.testing.assert_allclose(written, est.generate(60, seed=2)["x"].values * head.std() + head.mean(),
                               rtol=1e-9, atol=1e-9)
    # a model fitted on the channels themselves cannot go on embedded
    plain = tmp_path / "plain"
    assert main(["fit", str(tmp_path / "v.npy"), "--dt", "0.1", "--test-fraction", "0.2", *TINY[:4],
                 "--option", "n_epochs=1", "--no-progress", "--out", str(plain)]) == 0
    with pytest.raises(ValueError, match="that model was fitted on the data's own channels"):
        main(["--debug", "fit", str(tmp_path / "v.npy"), "--dt", "0.1", "--init", str(plain), "--delay-embed", "auto",
              "--test-fraction", "0.2", "--no-progress", "--out", str(tmp_path / "x")])


def test_evaluate_on_the_fitted_file_scores_its_held_out_end_as_fit_did(tmp_path):
    t = np.arange(2000)
    v = np.column_stack([np.sin(2 * np.pi * t / 40), np.cos(2 * np.pi * t / 55)])
    np.save(tmp_path / "v.npy", v)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "v.npy"), "--dt", "0.1", "--zscore", "--test-fraction", "0.25", *TINY[:4],
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--out", str(out)]) == 0
    fitted = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert main(["evaluate", str(out), str(tmp_path / "v.npy"), "--out", str(tmp_path / "ev")]) == 0
    again = xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf")
    for name in ("state_space_divergence", "power_spectrum_distance", "prediction_error"):
        np.testing.assert_allclose(again[name].values, fitted[name].values, rtol=1e-12, equal_nan=True)
    text = (tmp_path / "ev" / "metrics.md").read_text()
    assert "- test: the last 0.25 of every trial of the file this model was fitted on" in text
    assert "| floor (the recording's other stretches against its test stretch) |" in text
    # --whole-file: all 2 000 samples from the start, training part included
    assert main(["evaluate", str(out), str(tmp_path / "v.npy"), "--whole-file", "--out", str(tmp_path / "w")]) == 0
    whole = xr.open_dataset(tmp_path / "w" / "metrics.nc", engine="h5netcdf")
    assert json.loads(whole.attrs["data_length"]) == [2000] and json.loads(again.attrs["data_length"]) == [500]


def test_test_fraction_scores_the_tail_with_the_heads_constants(tmp_path, capsys):
    from dsident import as_dataset, datasets, metrics
    from dsident.cli_main_job import load_fitted

    raw = datasets.load("lorenz63", split="train")["x"].values[0, :600] * 4.0 + 10.0
    np.save(tmp_path / "rec.npy", raw)
    out = tmp_path / "tail"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--zscore", "--test-fraction", "0.25",
                 *TINY[:4], *TINY[8:], "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    head, tail = raw[:450], raw[450:]                   # floor(600 · 0.25) = 150 held out
    np.testing.assert_allclose(cfg["zscore"]["mean"], head.mean(0), rtol=1e-12)   # the test part stays unseen
    est, _ = load_fitted(out)
    direct = metrics.evaluate(est, as_dataset((tail - head.mean(0)) / head.std(0), dt=0.01), pe_steps=20, seed=0)
    saved = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert float(saved["prediction_error"]) == pytest.approx(float(direct["prediction_error"]), rel=1e-9)
    assert "last 0.25" in (out / "fit.md").read_text()
    assert main(["fit", "lorenz63", "--test-fraction", "0.2", "--out", str(tmp_path / "x")]) == 2
    assert "--test-fraction" in capsys.readouterr().err


def test_test_data_too_short_for_pe_is_refused_before_the_fit(tmp_path, capsys):
    """A held-out tail shorter than PE(n) needs used to raise after the fit, leaving a model and
    no fit.md; it is refused first, and a lower --pe-steps scores it."""
    from dsident import datasets

    np.save(tmp_path / "rec.npy", datasets.load("lorenz63", split="train")["x"].values[0, :60])
    out = tmp_path / "short"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--test-fraction", "0.2",
                 *TINY[:4], *TINY[8:], "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "leaves 12 test sample(s), but PE(20) needs at least 21" in err and "Nothing was fitted" in err
    assert not out.exists()
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--test-fraction", "0.2", "--pe-steps", "5",
                 *TINY[:4], *TINY[8:], "--out", str(out)]) == 0
    assert "PE(5)" in (out / "fit.md").read_text()


@pytest.mark.parametrize("observation", ["poisson", "bernoulli"])
def test_zscore_with_a_count_observation_model_is_refused_before_the_fit(tmp_path, capsys, observation):
    counts = np.random.default_rng(0).poisson(1.0, size=(200, 4)).clip(0, 1)
    np.save(tmp_path / "counts.npy", counts)
    out = tmp_path / "counts"
    assert main(["fit", str(tmp_path / "counts.npy"), "--dt", "0.02", "--zscore", "--model", "rplrnn",
                 "--method", "svi", "--param", f"observation={observation}", "--option", "n_steps=1",
                 "--no-progress", "--out", str(out)]) == 2
    assert f"observation={observation!r} models the raw counts" in capsys.readouterr().err
    assert not out.exists()


def test_param_penalty_none_fits_an_unpenalised_rplrnn(tmp_path):
    """`--param penalty=none` is parsed as None; the PLRNN refused it ("must be one of ...")."""
    from dsident.cli_main_job import load_fitted

    out = tmp_path / "rpl"
    assert main(["fit", "lorenz63", "--model", "rplrnn", "--method", "bptt", "--param", "penalty=none",
                 "--latent-dim", "4", *TINY[4:8], *TINY[10:], "--out", str(out)]) == 0
    est, _ = load_fitted(out)
    assert est.model_.dynamics.penalty == "none"


def test_a_data_file_is_fitted_with_the_recording_defaults_and_fit_md_says_so(tmp_path):
    from dsident import datasets

    np.save(tmp_path / "rec.npy", datasets.load("lorenz63", split="train")["x"].values[0, :400])
    out = tmp_path / "rec"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--model", "rplrnn", "--test-fraction", "0.25",
                 "--latent-dim", "4", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress",
                 "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["method"] == "teacher-forcing" and cfg["model_params"]["readout"] == "linear"
    assert cfg["fit_options"]["alpha"] == 0.1
    assert "a recording's defaults gave the method (teacher-forcing" in (out / "fit.md").read_text()
    # the method given: no such line, and the model's own settings
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--model", "rplrnn", "--method", "bptt",
                 "--test-fraction", "0.25", "--latent-dim", "4", "--option", "n_epochs=1", "--option", "seq_len=20",
                 "--no-progress", "--out", str(tmp_path / "bptt")]) == 0
    assert "recording's defaults" not in (tmp_path / "bptt" / "fit.md").read_text()


def test_a_ragged_history_entry_is_kept_as_json_not_raised():
    """Laplace-EM logs `stage_exit` per annealing stage, one entry per iteration of the stage;
    a stage that stops early makes the lists ragged, and `fit` raised after saving the model
    (session 47, a Rössler recording), leaving no fit.md."""
    from dsident.cli_main_job import _history_dataset

    hist = {"log_likelihood": [-3.0, -2.0, -1.5], "stage_exit": [[5, 7, 9], [4, 6]], "method": "laplace-em"}
    ds = _history_dataset(hist)
    np.testing.assert_array_equal(ds["log_likelihood"].values, [-3.0, -2.0, -1.5])
    assert json.loads(ds.attrs["stage_exit"]) == [[5, 7, 9], [4, 6]]
    assert "stage_exit" not in ds.data_vars and json.loads(ds.attrs["method"]) == "laplace-em"


def test_config_json_and_fit_md_give_the_latent_size_the_data_forced(tmp_path):
    """Five channels through the shallow PLRNN's identity readout need M >= 5: the default M 3 is
    raised. config.json said 3 while the saved model had 5."""
    from dsident.cli_main_job import load_fitted

    x = np.random.default_rng(0).standard_normal((400, 5)).cumsum(axis=0) * 0.1
    np.save(tmp_path / "five.npy", x)
    out = tmp_path / "five"
    assert main(["fit", str(tmp_path / "five.npy"), "--dt", "0.01", "--test-fraction", "0.25", *TINY[:4],
                 *TINY[8:], "--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    est, _ = load_fitted(out)
    assert cfg["model_params"]["latent_dim"] == est.model_.dynamics.latent_dim == 5
    assert "- adapted to the data: latent_dim 3 -> 5 (identity readout)" in (out / "fit.md").read_text()


def test_starts_on_a_short_held_out_tail_use_the_scored_length_and_keep_the_report(tmp_path):
    """--starts after --test-fraction: the held-out tail (150 samples) is shorter than the
    default evaluation length (10 000). The starts used to ask for 10 000-sample windows,
    raise after the fit, and leave no fit.md; they take the length the first stretch was
    scored on."""
    from dsident import datasets

    raw = datasets.load("lorenz63", split="train")["x"].values[0, :600]
    np.save(tmp_path / "rec.npy", raw)
    out = tmp_path / "tail"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--zscore", "--test-fraction", "0.25", "--starts",
                 "2", *TINY[:4], *TINY[8:], "--out", str(out)]) == 0
    starts = xr.open_dataset(out / "starts.nc", engine="h5netcdf")
    assert int(starts.attrs["length"]) == 150
    saved = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert float(starts["state_space_divergence"][0]) == pytest.approx(float(saved["state_space_divergence"]),
                                                                       rel=1e-12, nan_ok=True)
    assert "Free runs from" in (out / "fit.md").read_text()


def test_a_refused_starts_table_becomes_a_line_and_keeps_the_scores(fitted, tmp_path):
    from dsident.cli_main_job import _starts_table, load_fitted
    from dsident.experiments.inputs import load_data

    est, _ = load_fitted(fitted)
    short = load_data("lorenz63", split="test").isel(time=slice(0, 100))
    lines = _starts_table(est, short, 3, 250, 0, tmp_path, progress=False)
    assert len(lines) == 2 and lines[1].startswith("- scores from 3 starts not computed:") and "250" in lines[1]
    assert "--eval-length=250 exceeds every trial" in lines[1] and "pass a shorter --eval-length" in lines[1]
    assert not (tmp_path / "starts.nc").exists()


def test_a_free_run_off_the_data_grid_reads_off_grid_with_the_reason(tmp_path):
    """Data in large units fitted without --zscore: one epoch leaves the model's free run near
    the origin, far off the data's grid around 1000 (yet within 1000 std), so D_stsp is
    undefined. The report says "off grid" and why, the benchmark table's word, not a bare dash."""
    t = np.arange(800) * 0.05
    raw = 1000.0 + 100.0 * np.c_[np.sin(t), np.cos(1.3 * t)]     # 14 std from the origin: off grid, not diverged
    np.save(tmp_path / "far.npy", raw)
    out = tmp_path / "far"
    assert main(["fit", str(tmp_path / "far.npy"), "--dt", "0.05", "--test-fraction", "0.25", *TINY[:4], *TINY[8:],
                 "--out", str(out)]) == 0
    saved = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert np.isnan(float(saved["state_space_divergence"])) and int(saved["diverged"]) == 0
    text = (out / "fit.md").read_text()
    assert "| test (200 samples) | off grid |" in text
    assert "- D_stsp off grid: no sample of the free run falls on the test data's grid" in text


def test_the_report_words_for_a_missing_divergence():
    from dsident.cli_main_job import _fmt_divergence, _off_grid_note

    assert _fmt_divergence(0.123456) == "0.1235"
    assert _fmt_divergence(float("nan")) == "off grid"
    assert _fmt_divergence(float("nan"), diverged=True) == "diverged"
    assert _off_grid_note(0.5, False) == []
    assert "diverged" in _off_grid_note(float("nan"), True)[1]
    assert "off grid" in _off_grid_note(float("nan"), False)[1]


def test_zscore_names_a_constant_channel(tmp_path, capsys):
    x = np.random.default_rng(0).normal(size=(200, 2))
    x[:, 1] = 7.0
    np.save(tmp_path / "flat.npy", x)
    assert main(["fit", str(tmp_path / "flat.npy"), "--dt", "0.1", "--zscore", *TINY, "--out", str(tmp_path / "o")]) == 2
    assert "['x1']" in capsys.readouterr().err


def test_fit_refuses_an_unknown_method_before_announcing_the_fit(tmp_path, capsys):
    out = tmp_path / "f"
    assert main(["fit", "lorenz63", "--method", "tf", "--no-progress", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "Unknown inference method 'tf'; expected one of" in captured.err and "teacher-forcing" in captured.err
    assert "[dsident] fit" not in captured.err + captured.out and not out.exists()


def test_fit_refuses_a_plain_array_without_dt(tmp_path, capsys):
    np.save(tmp_path / "rec.npy", np.zeros((50, 2)))
    assert main(["fit", str(tmp_path / "rec.npy"), "--model", "shplrnn", "--out", str(tmp_path / "o")]) == 2
    assert "dt" in capsys.readouterr().err


def test_benchmark_tiny_grid_with_floor_row(tmp_path, capsys, monkeypatch):
    import dsident.analysis
    from dsident.experiments.best_dynamics import ANALYSIS_TIME_BUDGET_S

    analyze, budgets = dsident.analysis.analyze_dynamics, []

    def spy(*args, **kwargs):
        budgets.append(kwargs.get("time_budget"))
        return analyze(*args, **kwargs)

    monkeypatch.setattr(dsident.analysis, "analyze_dynamics", spy)
    out = tmp_path / "bench"
    args = ["benchmark", "--datasets", "lorenz63", "--models", "shplrnn", "--methods", "bptt", "--seeds", "2",
            "--train-length", "400", "--eval-length", "300", "--param", "hidden_dim=8",
            "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    res = xr.open_dataset(out / "results.nc", engine="h5netcdf")
    assert res.sizes["point"] == 2 and set(res["status"].values) == {"done"}
    table = (out / "results.md").read_text()
    assert "*floor (true system, same length)*" in table and "shplrnn × bptt" in table
    assert _png(out / "summary.png") and _png(out / "lorenz63_best.png")
    # the best point's dynamics beside the true system's, whose spectrum is recomputed here
    from dsident.analysis import system_lyapunov_spectrum
    truth = system_lyapunov_spectrum("lorenz63")
    assert f"(true system {truth[0]:.3g})" in table and "## Dynamics of each dataset's best point" in table
    # where each point's free run ends up at twice the evaluation length, beside the true exponent
    regimes = table.split("### Free runs at twice the evaluation length")[1]
    true_row = next(line for line in regimes.splitlines() if line.startswith("| *true system*"))
    assert f"| chaotic | {truth[0]:.3g} |" in true_row and "/2" in next(line for line in regimes.splitlines()
                                                          if line.startswith("| shplrnn × bptt"))
    assert set(res["regime"].values) <= set(VERDICTS) and res["regime"].values.size == 2
    dynamics = (out / "lorenz63_dynamics.md").read_text()
    assert "Kaplan-Yorke" in dynamics and _png(out / "lorenz63_flow.png")
    assert budgets == [ANALYSIS_TIME_BUDGET_S]          # a wide PLRNN's searches cannot hold the grid up
    # and its fixed points beside Lorenz's three saddles, in the data's z-units
    assert "of 3 true fixed points matched within 0.5 sd" in table
    section = dynamics.split("### Fixed points beside the true system's")[1]
    assert len([r for r in section.splitlines() if r.startswith("| (")]) == 3 and "| saddle |" in section
    points = sorted((out / "points").iterdir())
    assert len(points) == 2 and all((p / "config.json").is_file() for p in points)
    # a dry run of the same grid sees both points finished (a re-run would skip them)
    assert main([*args, "--dry-run"]) == 0
    assert "| lorenz63 | shplrnn | bptt | 0, 1 | 2/2 | 400 |" in capsys.readouterr().out
    # --starts over the finished grid scores the saved models from 3 starts and refits nothing
    assert main([*args, "--starts", "3", "--dry-run"]) == 0
    assert "2 finished point(s) will be scored from their saved models" in capsys.readouterr().out
    fit_times = res["fit_time"].values.copy()
    res.close()
    assert main([*args, "--starts", "3"]) == 0
    again = xr.load_dataset(out / "results.nc", engine="h5netcdf")
    np.testing.assert_array_equal(again["fit_time"].values, fit_times)
    recorded = [json.loads((p / "result.json").read_text())["starts"]["median_D_stsp"] for p in points]
    np.testing.assert_allclose(sorted(again["D_stsp_starts"].values), sorted(recorded))
    assert "### Scored from several starts over the test split" in (out / "results.md").read_text()
    capsys.readouterr()
    assert main([*args, "--starts", "3", "--dry-run"]) == 0
    assert "0 finished point(s) will be scored from their saved models" in capsys.readouterr().out


def test_benchmark_dry_run_lists_the_default_grid_and_writes_nothing(tmp_path, capsys):
    from dsident.experiments.benchmark import DEFAULT_DATASETS, DEFAULT_MODELS
    from dsident.experiments.config import resolve_config
    from dsident.metrics import floor
    from dsident.models.candidates import usable_cores

    out = tmp_path / "never"
    expected = 0.0
    assert main(["benchmark", "--seeds", "2", "--out", str(out), "--dry-run"]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert not out.exists() and "nothing was fitted or written" in captured.err
    plan, glance = text.split("At a glance")
    rows = [line for line in plan.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(DEFAULT_DATASETS) * len(DEFAULT_MODELS)
    # the matrix under the plan: a row per model, a column per dataset, the same measured numbers
    matrix = [line.split(" | ") for line in glance.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r[0] for r in matrix[1:]] == [f"| {m}" for m in DEFAULT_MODELS]
    assert len(matrix[0]) == len(DEFAULT_DATASETS) + 1
    short = {"teacher-forcing": "TF", "laplace-em": "EM", "svi": "SVI", "bptt": "BPTT"}
    for i, model in enumerate(DEFAULT_MODELS, start=1):
        for j, dataset in enumerate(DEFAULT_DATASETS, start=1):
            method = default_method(model, dataset)
            cell = matrix[i][j].rstrip(" |")
            record = MEASURED.get((dataset, model, method))
            assert cell.startswith(short[method] + " ")
            if record is None:
                assert cell.endswith(" –")
            else:
                assert cell.startswith(f"{short[method]} {record['D_stsp']:#.3g} (")
                assert cell.endswith(f" / {record['D_H']:.3g}")
    for dataset in DEFAULT_DATASETS:
        for model in DEFAULT_MODELS:
            method = default_method(model, dataset)
            row = next(r for r in rows if r.startswith(f"| {dataset} | {model} | {method} | 0, 1 | 0/2 |"))
            assert ("measured cell" in row) == ((dataset, model, method) in PAIR_DEFAULTS)
            # what the cell gave when measured, its multiple of a floor computed here, its fit time
            record = MEASURED.get((dataset, model, method))
            if record is None:
                assert "| – | – |" in row
                continue
            ratio = record["D_stsp"] / floor(dataset, length=MEASURED_EVAL_LENGTH).attrs["state_space_divergence_mean"]
            assert f"D_stsp {record['D_stsp']:#.3g} ({float(ratio):.2f}×" in row
            assert ("✓" in row) == (ratio <= 3 and record["D_H"] <= 0.15)
            assert f"| {record['fit_time_s']:.0f} s |" in row
            # a best-of-k cell (measured one candidate after another) trains them on the cores at once
            k = resolve_config(dataset, model, method)["fit_options"].get("best_of", 1)
            rounds = -(-k // min(usable_cores(), k))
            expected += 2 * record["fit_time_s"] * rounds / k
    assert f"points: ≈ {expected / 3600:.1f} h with one worker" in text


def test_measured_numbers_cover_every_measured_cell_and_vanish_when_settings_change(capsys):
    from dsident.experiments.config import PRESET_MEASURED, PRESETS

    assert set(PAIR_DEFAULTS) <= set(MEASURED)
    # the other measured cells are cells of the default grid that run with the engine's defaults
    for dataset, model, method in set(MEASURED) - set(PAIR_DEFAULTS):
        assert default_method(model, dataset) == method
    assert set(PRESET_MEASURED["quick"]) == {k for k in PRESETS["quick"] if isinstance(k, tuple)}
    assert main(["benchmark", "--datasets", "lorenz63", "--models", "gnode", "--latent-dim", "5", "--dry-run"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("| lorenz63 | gnode"))
    assert "| – | – |" in row and "unfinished points: not measured for these settings" in text


def test_expected_fit_time_counts_only_unfinished_points_with_a_measured_time(tmp_path):
    from dsident.experiments.benchmark import benchmark_configs, expected_fit_time
    from dsident.experiments.runner import point_id

    configs = benchmark_configs(["lorenz63"], ["shplrnn", "gnode"], None, 2)
    shplrnn, gnode = (MEASURED[("lorenz63", m, "teacher-forcing")]["fit_time_s"] for m in ("shplrnn", "gnode"))
    assert expected_fit_time(configs, tmp_path) == (2 * shplrnn + 2 * gnode, 0, 4)
    # one shplrnn point finished, one failed (a failed point is run again)
    for cfg, status in zip(configs[:2], ("done", "failed")):
        folder = tmp_path / "points" / point_id(cfg)
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps({"status": status, "scores": {}}))
    assert expected_fit_time(configs, tmp_path) == (shplrnn + 2 * gnode, 0, 3)
    # other settings than the measured ones: no time to expect
    other = benchmark_configs(["lorenz63"], ["gnode"], None, 1, overrides={"model_params": {"latent_dim": 5}})
    assert expected_fit_time(other, tmp_path) == (0.0, 1, 1)


def test_expected_fit_time_of_a_best_of_cell_counts_its_candidates_trained_at_once(tmp_path):
    from dsident.experiments.benchmark import benchmark_configs, expected_fit_time
    from dsident.experiments.config import PRESET_MEASURED

    (cfg,) = benchmark_configs(["lorenz63"], ["shplrnn"], ["teacher-forcing"], 1, quick=True)
    assert cfg["fit_options"]["best_of"] == 3
    sequential = PRESET_MEASURED["quick"][("lorenz63", "shplrnn", "teacher-forcing")]["fit_time_s"]
    # three candidates: one after another, two rounds on 2 cores, one round on 3 or more
    for jobs, rounds in [(1, 3), (2, 2), (3, 1), (16, 1)]:
        seconds, _, _ = expected_fit_time([cfg], tmp_path, quick=True, jobs=jobs)
        assert seconds == pytest.approx(sequential * rounds / 3)
    from dsident.experiments.benchmark import _side_by_side_share

    # a cell's own n_jobs stands; restarts run the candidates one after another
    for options in ({"n_jobs": 1}, {"restarts": 2}):
        assert _side_by_side_share({**cfg, "fit_options": {**cfg["fit_options"], **options}}, 16) == 1.0


def test_sweep_verb_from_a_toml_file(tmp_path):
    out = tmp_path / "sw"
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'dataset = "lorenz63"\nmodel = "shplrnn"\nmethod = "bptt"\ntrain_length = 300\n'
                    f'eval_length = 200\nout = "{out}"\n[fit_options]\nn_epochs = 1\nseq_len = 20\n'
                    '[grid]\nhidden_dim = [4, 6]\nseed = [0]\n')
    assert main(["sweep", str(spec), "--workers", "2", "--no-progress"]) == 0
    res = xr.open_dataset(out / "sweep.nc", engine="h5netcdf")
    assert sorted(res["hidden_dim"].values.tolist()) == [4, 6] and res["hidden_dim"].dtype == np.int64
    assert "| hidden_dim |" in (out / "sweep.md").read_text() and "| 4 | 1/1 |" in (out / "sweep.md").read_text()


def test_a_sweep_with_a_failed_point_finishes_the_others_and_exits_1(tmp_path, capsys):
    out = tmp_path / "sw"
    spec = tmp_path / "sweep.toml"
    # an identity readout of 3 channels needs 3 latent units or more: latent_dim 1 fails
    spec.write_text(f'dataset = "lorenz63"\nmodel = "shplrnn"\nmethod = "bptt"\ntrain_length = 300\n'
                    f'eval_length = 200\nout = "{out}"\n[fit_options]\nn_epochs = 1\nseq_len = 20\n'
                    '[model_params]\nhidden_dim = 4\nreadout = "identity"\n[grid]\nlatent_dim = [3, 1]\nseed = [0]\n')
    assert main(["sweep", str(spec), "--no-progress"]) == 1
    said = "".join(capsys.readouterr())
    assert f"sweep: 2 points, 1 done, 1 failed; sweep.md and sweep.nc in {out}" in said
    table = (out / "sweep.md").read_text()
    assert "| 3 | 1/1 |" in table and "- failed: {'latent_dim': 1} seed 0: ValueError" in table


def test_fit_init_goes_on_from_a_saved_model(tmp_path, capsys):
    import json

    import torch

    from dsident.cli_main_job import load_fitted

    first = tmp_path / "first"
    assert main(["fit", "lorenz63", *TINY, "--out", str(first)]) == 0
    # a second method on the same model, at a learning rate too small to move it: the result must
    # still be the first model (a fresh start would be a different, seeded initialisation)
    second = tmp_path / "second"
    assert main(["fit", "lorenz63", "--init", str(first), "--method", "teacher-forcing", "--train-length", "400",
                 "--eval-length", "300", "--option", "n_epochs=1", "--option", "seq_len=20", "--option", "lr=1e-12",
                 "--option", "lr_end=1e-12", "--option", "eval_every=1", "--option", "eval_steps=200",
                 "--no-progress", "--out", str(second)]) == 0
    a, cfg_a = load_fitted(first)
    b, cfg_b = load_fitted(second)
    assert cfg_b["method"] == "teacher-forcing" and cfg_b["model"] == "shplrnn"
    assert cfg_b["init"] == {"from": str(first), "model": "shplrnn", "method": "bptt"}
    assert cfg_b["model_params"] == cfg_a["model_params"]
    for key, value in a.model_.dynamics.state_dict().items():
        torch.testing.assert_close(b.model_.dynamics.state_dict()[key], value, rtol=1e-6, atol=1e-8)
    fresh = tmp_path / "fresh"
    assert main(["fit", "lorenz63", *TINY[:2], "--method", "teacher-forcing", "--train-length", "400",
                 "--eval-length", "300", "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option",
                 "seq_len=20", "--option", "lr=1e-12", "--option", "lr_end=1e-12", "--option", "eval_every=1",
                 "--option", "eval_steps=200", "--no-progress", "--out", str(fresh)]) == 0
    c, _ = load_fitted(fresh)
    assert any(not torch.allclose(c.model_.dynamics.state_dict()[key], value, rtol=1e-3)
               for key, value in a.model_.dynamics.state_dict().items())
    # without --method it goes on with the saved model's method
    again = tmp_path / "again"
    assert main(["fit", "lorenz63", "--init", str(first), "--train-length", "400", "--eval-length", "300",
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--out", str(again)]) == 0
    assert json.loads((again / "config.json").read_text())["method"] == "bptt"
    capsys.readouterr()


def test_fit_init_refuses_another_model_new_hyperparameters_and_a_new_zscore(tmp_path, capsys):
    first = tmp_path / "first"
    assert main(["fit", "lorenz63", *TINY, "--out", str(first)]) == 0
    capsys.readouterr()
    base = ["fit", "lorenz63", "--init", str(first), "--option", "n_epochs=1", "--no-progress",
            "--out", str(tmp_path / "x")]
    assert main([*base, "--model", "gnode"]) == 2
    assert "holds a shplrnn model, but --model gnode" in capsys.readouterr().err
    assert main([*base, "--param", "hidden_dim=16"]) == 2
    assert "['hidden_dim'] were given" in capsys.readouterr().err
    assert main([*base, "--zscore"]) == 2
    assert "fitted on unstandardised data" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_fit_init_keeps_the_saved_zscore(tmp_path, capsys):
    import json

    rng = np.random.default_rng(1)
    np.save(tmp_path / "rec.npy", rng.normal(loc=[-65.0, 3.0], scale=[10.0, 0.5], size=(600, 2)))
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.1", "--zscore", "--test-fraction", "0.25", *TINY,
                 "--out", str(first)]) == 0
    # the second file is shifted: new constants would differ, the kept ones must not
    np.save(tmp_path / "rec2.npy", np.load(tmp_path / "rec.npy") + 5.0)
    assert main(["fit", str(tmp_path / "rec2.npy"), "--dt", "0.1", "--init", str(first), "--test-fraction", "0.25",
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--out", str(second)]) == 0
    cfg_a = json.loads((first / "config.json").read_text())
    cfg_b = json.loads((second / "config.json").read_text())
    assert cfg_b["zscore"] == cfg_a["zscore"]
    capsys.readouterr()


def test_a_config_file_key_no_command_reads_is_refused_before_anything_runs(tmp_path):
    conf = tmp_path / "fit.toml"
    conf.write_text('model = "shplrnn"\nlatent_dims = 4\n')          # misspelt: latent_dim
    out = tmp_path / "o"
    with pytest.raises(SystemExit, match=r"unknown key\(s\) \['latent_dims'\].*'latent_dim'"):
        main(["fit", "lorenz63", *TINY, "--config", str(conf), "--out", str(out)])
    assert not out.exists()
    # generate reads no run options: a file written for fit is refused there too, by name
    conf.write_text('steps = 40\n[fit_options]\nn_epochs = 1\n')
    with pytest.raises(SystemExit, match=r"generate.*\['fit_options'\]"):
        main(["generate", str(tmp_path), "--config", str(conf)])


def test_threads_in_a_config_file_count_as_the_flag(tmp_path, fitted, monkeypatch):
    import torch

    from dsident.experiments.runner import THREADS_ENV

    monkeypatch.setenv(THREADS_ENV, "1")
    before = torch.get_num_threads()
    conf = tmp_path / "gen.toml"
    conf.write_text("threads = 2\nsteps = 30\n")
    try:
        assert main(["generate", str(fitted), "--config", str(conf), "--out", str(tmp_path / "g")]) == 0
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_generate_refuses_zero_steps_instead_of_taking_the_default(fitted, tmp_path):
    with pytest.raises(SystemExit, match="--steps must be ≥ 2; got 0"):
        main(["generate", str(fitted), "--steps", "0", "--out", str(tmp_path / "g")])
    assert not (tmp_path / "g").exists()


def test_benchmark_refuses_an_unknown_dataset_name_up_front(tmp_path, capsys):
    assert main(["benchmark", "--datasets", "lorenz64", "--models", "shplrnn", "--seeds", "1", "--dry-run",
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "'lorenz64'" in err and "lorenz63" in err


def test_evaluate_names_test_data_with_the_wrong_number_of_channels(fitted, tmp_path, capsys):
    from dsident import datasets

    x = datasets.load("lorenz63", split="test")["x"].values[0, :300, :2]
    np.save(tmp_path / "two.npy", x)
    assert main(["evaluate", str(fitted), str(tmp_path / "two.npy"), "--dt", "0.01", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "two.npy' have 2 channel(s) ['x0', 'x1'], but the model was fitted on 3: ['x', 'y', 'z']" in err
    # a (channel, time) array read as (time, channel): not 3000 names, and the fit says what it may be
    np.save(tmp_path / "wide.npy", np.zeros((3000, 20)).T)
    assert main(["evaluate", str(fitted), str(tmp_path / "wide.npy"), "--dt", "0.01",
                 "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert "have 3000 channel(s) ['x0', 'x1', 'x2', 'x3', 'x4', 'x5', 'x6', ..., 'x2999'] (3000 in all)," in err
    with pytest.warns(UserWarning, match=r"more channels \(3000\) than samples a trial \(20\)"):
        assert main(["fit", str(tmp_path / "wide.npy"), "--dt", "0.01", *TINY, "--out", str(tmp_path / "f")]) == 2


@pytest.mark.parametrize("flags,match", [(["--eval-length", "-4"], "`eval_length` (--eval-length) must be"),
                                         (["--pe-steps", "0"], "`pe_steps` (--pe-steps) must be"),
                                         (["--eval-length", "15"], "`eval_length`=15 leaves no room for PE(20)")])
def test_evaluate_refuses_lengths_it_cannot_score(fitted, tmp_path, capsys, flags, match):
    out = tmp_path / "e"
    assert main(["evaluate", str(fitted), "lorenz63", *flags, "--out", str(out)]) == 2
    assert match in capsys.readouterr().err and not out.exists()


def test_sweep_dry_run_lists_the_grid_and_writes_nothing(tmp_path, capsys):
    conf = tmp_path / "grid.toml"
    conf.write_text('dataset = "lorenz63"\nmodel = "shplrnn"\nmethod = "bptt"\n[grid]\nseed = [0, 1, 2]\n'
                    'hidden_dim = [10]\n')
    assert main(["sweep", str(conf), "--dry-run", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "| 10 | 0, 1, 2 | 0/3 |" in out and "3 points (1 combination)" in out
    assert not (tmp_path / "o").exists()


def test_a_grid_over_a_data_file_holds_out_its_end_from_the_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = np.arange(1200) * 0.05
    np.savez("rec.npz", x=np.stack([np.sin(t), np.cos(t)], -1), other=np.zeros(3), dt=0.05)
    args = ["benchmark", "--datasets", "rec.npz", "lorenz63", "--models", "shplrnn", "--seeds", "1"]
    assert main([*args, "--read", "key=x", "--test-fraction", "0.25", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ("Test data (samples compared) per dataset: rec.npz ≤ 10000 (the last 25 % of every trial of the file, "
            "never seen in training); lorenz63 ≤ 10000 (its test split).") in out
    # the sweep file's own keys: the reader's table and the held-out share
    conf = tmp_path / "grid.toml"
    conf.write_text('dataset = "rec.npz"\nmodel = "shplrnn"\nmethod = "bptt"\nout = "sw"\n'
                    '[read]\nkey = "x"\n[fit_options]\nn_epochs = 1\n[grid]\nseed = [0]\n')
    assert main(["sweep", str(conf), "--dry-run"]) == 0
    assert "rec.npz ≤ 10000 (the last 20 % of every trial of the file" in capsys.readouterr().out
    assert main(["sweep", str(conf), "--no-progress"]) == 0
    capsys.readouterr()
    table = (tmp_path / "sw" / "sweep.md").read_text()
    assert "| 1/1 |" in table and "- test data (samples compared) per dataset: rec.npz 240 (the last 20 %" in table
    # the recording's floor at the compared length
    assert "- floor of rec.npz at 240 samples (the recording's other stretches against its test stretch): D_stsp" \
        in table


@pytest.mark.parametrize("verb", ["benchmark", "sweep"])
def test_a_worker_count_below_one_is_refused(verb, tmp_path):
    conf = tmp_path / "grid.toml"
    conf.write_text('dataset = "lorenz63"\nmodel = "shplrnn"\n[grid]\nseed = [0]\n')
    args = ["benchmark", "--dry-run"] if verb == "benchmark" else ["sweep", str(conf)]
    with pytest.raises(SystemExit, match="--workers must be a positive number of processes; got 0"):
        main([*args, "--workers", "0", "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_fit_init_trains_with_the_saved_seed_unless_seed_is_given(tmp_path, capsys):
    import json

    import torch

    from dsident.cli_main_job import load_fitted

    first = tmp_path / "first"
    assert main(["fit", "lorenz63", *TINY, "--seed", "7", "--out", str(first)]) == 0
    go_on = ["fit", "lorenz63", "--init", str(first), "--train-length", "400", "--eval-length", "300",
             "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress"]
    runs = {}
    for name, extra in (("saved", []), ("seven", ["--seed", "7"]), ("eight", ["--seed", "8"])):
        assert main([*go_on, *extra, "--out", str(tmp_path / name)]) == 0
        runs[name] = load_fitted(tmp_path / name)[0].model_.dynamics.state_dict()
        assert json.loads((tmp_path / name / "config.json").read_text())["seed"] == (8 if name == "eight" else 7)
    for key, value in runs["saved"].items():                 # the saved seed is the fit's own, 7
        torch.testing.assert_close(runs["seven"][key], value, rtol=0, atol=0)
    # another seed draws other windows (it was ignored before session 36)
    assert any(not torch.equal(runs["eight"][key], value) for key, value in runs["saved"].items())
    capsys.readouterr()


def test_fit_init_drops_a_cells_best_of_and_restarts_but_not_the_users(tmp_path):
    """--init goes on from a saved model; a cell whose defaults choose among fresh fits (the bursting
    shallow PLRNN's best_of, the bursting LTC's restarts) used to refuse it."""
    import warnings

    from dsident.experiments.config import resolve_config
    from dsident.experiments.inputs import load_data
    from dsident.experiments.runner import fit_point

    cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing", overrides={
        "train_length": 400, "model_params": {"latent_dim": 3, "hidden_dim": 6},
        "fit_options": {"n_epochs": 1, "seq_len": 20, "batches_per_epoch": 2, "eval_every": 1, "eval_steps": 200}})
    train = load_data("lorenz63", split="train", length=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saved, _, _ = fit_point(cfg, train)
        cell = {**cfg, "fit_options": {**cfg["fit_options"], "best_of": 2, "restarts": 1}}   # as a cell's defaults
        est, _, dropped = fit_point(cell, train, init=saved)
    assert est is saved and {"fit_options.best_of", "fit_options.restarts"} <= set(dropped)
    # the configuration saved with the fit says what it ran with: the dropped keys are gone from
    # their sections (and listed apart), everything else is untouched
    from dsident.experiments.runner import without_dropped
    kept = without_dropped(cell, dropped)
    assert "best_of" not in kept["fit_options"] and "restarts" not in kept["fit_options"]
    assert kept["fit_options"]["n_epochs"] == 1 and kept["model_params"] == cell["model_params"]
    assert cell["fit_options"]["best_of"] == 2                       # the caller's mapping is not changed
    mine = {**cell, "user_keys": {**cell["user_keys"],
                                  "fit_options": [*cell["user_keys"]["fit_options"], "best_of"]}}
    with pytest.raises(ValueError, match="best_of"):
        fit_point(mine, train, init=saved)


def test_a_csv_in_ms_gives_periods_and_exponents_in_ms(tmp_path):
    """A time column named time_ms: fit.md, metrics.nc, config.json and analyze speak of ms, and
    the data's period is the sine's own (20 ms = 40 samples of 0.5 ms)."""
    n = 1600
    t = np.arange(n) * 0.5
    table = np.column_stack([t, np.sin(2 * np.pi * t / 20.0), np.cos(2 * np.pi * t / 20.0)])
    np.savetxt(tmp_path / "rec.csv", table, delimiter=",", header="time_ms,a,b", comments="", fmt="%.8g")
    out = tmp_path / "ms"
    assert main(["fit", str(tmp_path / "rec.csv"), *TINY[:4], "--test-fraction", "0.25", "--eval-length", "400",
                 "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress",
                 "--out", str(out)]) == 0
    text = (out / "fit.md").read_text()
    assert "per ms (|λ| ≤ " in text and "per time unit" not in text
    assert "data 20 ms (40 samples)" in text
    assert json.loads((out / "config.json").read_text())["time_unit"] == "ms"
    with xr.open_dataset(out / "metrics.nc", engine="h5netcdf") as saved:
        assert saved.attrs["period_data"] == pytest.approx(20.0)
        assert saved.attrs["period_channel"] in ("a", "b")
    with xr.open_dataset(out / "generated.nc", engine="h5netcdf") as run:     # the scored free run says ms too
        assert json.loads(run.attrs["provenance"])["time_unit"] == "ms"
        np.testing.assert_allclose(np.diff(run["time"].values), 0.5)
    assert main(["analyze", str(out), "--steps", "400", "--transient", "50", "--max-period", "1",
                 "--no-progress"]) == 0
    report = (out / "analysis" / "analysis.md").read_text()
    assert "Lyapunov exponents (1 / ms)" in report and "time unit" not in report


def test_a_recordings_ltc_fits_the_same_in_seconds_and_in_milliseconds(tmp_path):
    """The LTC's time constants are set in samples for a data file, so the same recording with
    its time column in s or in ms gives the same fit (before: 0.5 time units, 10 samples in ms
    and 10 000 in s; session 48: D_stsp 0.0020 against 14.27)."""
    n = 600
    t_ms = np.arange(n) * 0.05
    x = np.column_stack([np.sin(2 * np.pi * t_ms / 2.0), np.cos(2 * np.pi * t_ms / 2.0)])
    tiny = ["--model", "ltc", "--latent-dim", "4", "--test-fraction", "0.25", "--eval-length", "150",
            "--option", "n_epochs=2", "--option", "seq_len=20", "--option", "eval_starts=1", "--no-progress"]
    runs = {}
    for unit, scale in (("ms", 1.0), ("s", 1e-3)):
        path = tmp_path / f"rec_{unit}.csv"
        np.savetxt(path, np.column_stack([t_ms * scale, x]), delimiter=",", header=f"time_{unit},a,b",
                   comments="", fmt="%.10g")
        out = tmp_path / unit
        assert main(["fit", str(path), *tiny, "--out", str(out)]) == 0
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["model_params"]["time_constant"] == pytest.approx(10 * 0.05 * scale)
        assert f"- adapted to the data: time_constant None -> {10 * 0.05 * scale:g} (10 samples" in \
            (out / "fit.md").read_text()
        with xr.open_dataset(out / "history.nc", engine="h5netcdf") as hist, \
                xr.open_dataset(out / "metrics.nc", engine="h5netcdf") as res:
            runs[unit] = (np.asarray(hist["train_loss"].values, dtype=float), float(res["prediction_error"]))
    # the same start; Adam's steps on the softplus-parametrised capacitance differ slightly in
    # relative size at C = 2.5e-4 and 0.25, hence not to the digit (the old start: 14.27 vs 0.0020)
    np.testing.assert_allclose(runs["s"][0], runs["ms"][0], rtol=0.03)
    assert runs["s"][1] == pytest.approx(runs["ms"][1], rel=0.05)
    from dsident.dynamics import LTC

    z = torch.linspace(-0.5, 0.5, 8).reshape(2, 4)
    steps = [LTC(4, 0, time_constant=10 * dt, seed=0).step(z, dt=dt) for dt in (0.05, 5e-5)]
    torch.testing.assert_close(steps[0], steps[1], rtol=1e-5, atol=1e-6)     # one map, whatever the unit
    # a time constant the user gives is theirs, in the data's unit
    assert main(["fit", str(tmp_path / "rec_s.csv"), *tiny, "--param", "time_constant=0.002",
                 "--out", str(tmp_path / "given")]) == 0
    cfg = json.loads((tmp_path / "given" / "config.json").read_text())
    assert cfg["model_params"]["time_constant"] == 0.002 and "time_constant" not in (cfg.get("adapted") or {})


def test_evaluate_and_analyze_refuse_a_dt_that_disagrees_with_the_fits(tmp_path, capsys):
    from dsident import datasets

    x = datasets.load("lorenz63", split="train")["x"].values[0, :400]
    np.save(tmp_path / "rec.npy", x)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", *TINY, "--eval-length", "100",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    ev = tmp_path / "e"
    assert main(["evaluate", str(out), str(tmp_path / "rec.npy"), "--dt", "0.02", "--out", str(ev)]) == 2
    err = capsys.readouterr().err
    assert "`dt`=0.02 (--dt) disagrees" in err and "dt=0.01" in err and not ev.exists()
    assert main(["analyze", str(out), "--start", str(tmp_path / "rec.npy"), "--dt", "0.02",
                 "--out", str(tmp_path / "a")]) == 2
    assert "`dt`=0.02 (--dt) disagrees" in capsys.readouterr().err
    # the fit's own step, given again, is fine
    assert main(["evaluate", str(out), str(tmp_path / "rec.npy"), "--dt", "0.01", "--out", str(ev)]) == 0


def test_no_floor_says_which_flag_would_give_one(tmp_path):
    t = np.arange(1000) * 0.01
    x = np.column_stack([np.sin(2 * np.pi * t), np.cos(2 * np.pi * t)])
    x[100:300, 0] = np.nan                  # the training part's gap-free runs: 100 and 300 samples
    np.save(tmp_path / "rec.npy", x)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.npy"), "--dt", "0.01", "--test-fraction", "0.4", "--model", "shplrnn",
                 "--method", "bptt", "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20",
                 "--no-progress", "--out", str(out)]) == 0
    text = (out / "fit.md").read_text()
    assert "- no floor: ValueError: need at least two gap-free stretches of length=400" in text
    assert "(their fully observed runs: 400, 300, 100 samples)" in text
    assert "A shorter --eval-length gives one." in text and "`other`" not in text


def test_slow_channels_on_a_train_length_too_short_name_the_flag(tmp_path, capsys):
    # 4000 samples at dt 0.01: 3200 for training, but --train-length 500 keeps too few for a 0.5 cutoff
    t = np.arange(4000) * 0.01
    np.save(tmp_path / "v.npy", np.column_stack([np.sin(2 * np.pi * t), np.cos(2 * np.pi * 0.3 * t)]))
    assert main(["fit", str(tmp_path / "v.npy"), "--dt", "0.01", "--slow-channels", "0.5", "--test-fraction", "0.2",
                 "--train-length", "500", "--no-progress", "--out", str(tmp_path / "fit")]) == 2
    err = capsys.readouterr().err
    assert "--train-length 500" in err and "need at least 600" in err and "the training part has 3200 samples" in err


def test_evaluate_names_test_data_sampled_at_another_step(tmp_path, capsys):
    t = np.arange(1500)
    v = np.column_stack([np.sin(2 * np.pi * t / 40), np.cos(2 * np.pi * t / 55)])
    np.savez(tmp_path / "fit.npz", x=v, dt=0.1)
    np.savez(tmp_path / "other.npz", x=v, dt=0.2)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "fit.npz"), "--test-fraction", "0.25", *TINY, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(out), str(tmp_path / "other.npz"), "--out", str(tmp_path / "ev")]) == 2
    err = capsys.readouterr().err
    assert f"TEST_DATA '{tmp_path / 'other.npz'}' is sampled every 0.2" in err
    assert "fitted at dt = 0.1" in err and "`test`" not in err and "pass `dt`" not in err
