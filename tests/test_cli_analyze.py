"""`dsident analyze MODEL_DIR` on a tiny fitted model, in process."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr

from dsident.analysis import lyapunov_spectrum
from dsident.cli import main
from dsident.cli_main_job import load_fitted



def test_analyze_writes_the_report_the_run_and_the_figures(fitted, tmp_path, capsys):
    out = tmp_path / "an"
    assert main(["analyze", str(fitted), "--steps", "600", "--transient", "50", "--out", str(out)]) == 0
    assert "free run and Lyapunov spectrum" in capsys.readouterr().err          # the stages' bar
    assert main(["analyze", str(fitted), "--steps", "600", "--transient", "50", "--out", str(tmp_path / "q"),
                 "--no-progress"]) == 0
    assert "Lyapunov spectrum" not in capsys.readouterr().err
    ds = xr.open_dataset(out / "analysis.nc", engine="h5netcdf")
    run = xr.open_dataset(out / "free_run.nc", engine="h5netcdf")
    assert run.sizes["time"] == 600 and ds.attrs["n_steps"] == 600
    # the exponents are those of the saved model along the same path, recomputed here directly
    est, _ = load_fitted(fitted)
    z0 = est.generate(1, seed=0)["z"].values[0, 0]
    direct = np.sort(lyapunov_spectrum(est, z0=z0, n_steps=600, transient=50))[::-1]
    np.testing.assert_allclose(ds["lyapunov_exponent"].values, direct, rtol=1e-6)
    text = (out / "analysis.md").read_text()
    assert f"**{ds.attrs['verdict']}**" in text and "## Fixed points" in text
    assert "- run started at the initial-state prior's mean" in text and ds.attrs["start"] == "prior mean"
    for png in ("flow.png", "latents.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_analyze_can_start_from_the_data(fitted, tmp_path):
    from dsident import datasets

    out = tmp_path / "an"
    assert main(["analyze", str(fitted), "--steps", "300", "--transient", "0", "--start", "lorenz63",
                 "--out", str(out)]) == 0
    run = xr.open_dataset(out / "free_run.nc", engine="h5netcdf")
    est, _ = load_fitted(fitted)
    x0 = datasets.load("lorenz63", split="test")["x"].values[0, 0]
    # with no transient the run's first state is the encoded first test sample
    np.testing.assert_allclose(run["z"].values[0, 0], est.model_.encode(torch.as_tensor(x0, dtype=torch.float32))
                               .detach().numpy(), rtol=1e-5, atol=1e-6)
    # a simulated set names its system: Lorenz's three fixed points are set beside the model's
    text = (out / "analysis.md").read_text()
    assert "### Fixed points beside the true system's" in text
    assert text.count("| saddle |") >= 3
    # where the run began is written down, in the report and in analysis.nc
    assert "- run started at the first fully observed sample of lorenz63\n- attractor of the free run:" in text
    assert xr.open_dataset(out / "analysis.nc", engine="h5netcdf").attrs["start"] == "lorenz63"


def test_analyze_of_a_recording_has_no_true_fixed_points(fitted, tmp_path):
    rec = tmp_path / "rec.npy"
    np.save(rec, np.random.default_rng(0).normal(size=(300, 3)))
    out = tmp_path / "an"
    assert main(["analyze", str(fitted), "--steps", "200", "--transient", "0", "--start", str(rec),
                 "--dt", "0.01", "--out", str(out)]) == 0
    assert "true system" not in (out / "analysis.md").read_text()


def test_analyze_refuses_bad_dims_and_a_folder_that_is_not_a_fit(fitted, tmp_path, capsys):
    assert main(["analyze", str(fitted), "--steps", "200", "--dims", "0", "7", "--out", str(tmp_path / "a")]) == 2
    assert "--dims" in capsys.readouterr().err
    assert main(["analyze", str(fitted), "--steps", "10", "--out", str(tmp_path / "b")]) == 2
    assert "--steps must be an integer >= 100; got --steps 10" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="config.json"):
        main(["analyze", str(tmp_path)])


def test_analyze_time_budget_reaches_the_searches_and_a_bad_one_names_the_flag(tmp_path, capsys):
    out = tmp_path / "fit"
    assert main(["fit", "lorenz63", "--model", "rplrnn", "--method", "bptt", "--latent-dim", "20",
                 "--train-length", "400", "--eval-length", "300", "--option", "n_epochs=1",
                 "--option", "seq_len=20", "--no-progress", "--out", str(out)]) == 0
    assert main(["analyze", str(out), "--steps", "200", "--transient", "10", "--max-period", "2",
                 "--time-budget", "0", "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    text = (tmp_path / "a" / "analysis.md").read_text()
    # 2^20 regions: both searches run and stop before their first batch
    assert "## Fixed points (0, method search) (search stopped at its time budget after 0 regions" in text
    assert "## 2-cycles: 0 (search stopped at its time budget after 0 regions" in text
    capsys.readouterr()
    assert main(["analyze", str(out), "--steps", "200", "--time-budget", "-1", "--out", str(tmp_path / "b")]) == 2
    assert "--time-budget must be a number >= 0" in capsys.readouterr().err
