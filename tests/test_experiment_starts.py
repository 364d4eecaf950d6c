"""Grid points and fits scored from several starts over the test split (run key ``test_starts``)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from dsident.cli import main
from dsident.experiments import runner, sweep
from dsident.experiments.config import resolve_config
from dsident.experiments.tables import starts_table

#: a teacher-forced shallow PLRNN in a few seconds whose free runs stay on the data's grid
TINY = {"train_length": 2000, "eval_length": 300, "model_params": {"hidden_dim": 20},
        "fit_options": {"n_epochs": 3, "seq_len": 30, "eval_every": 0}}


def _cfg(**extra):
    return resolve_config("lorenz63", "shplrnn", "teacher-forcing", overrides={**TINY, **extra})


def test_test_starts_is_checked_and_absent_when_off():
    assert "test_starts" not in _cfg()
    assert "test_starts" not in _cfg(test_starts=None)
    assert _cfg(test_starts=4)["test_starts"] == 4
    for bad in (1, 0, 2.5, True, "8"):
        with pytest.raises(ValueError, match=r"test_starts.*>= 2.*got test_starts="):
            _cfg(test_starts=bad)


def test_test_starts_does_not_name_another_point():
    assert runner.point_id(_cfg()) == runner.point_id(_cfg(test_starts=5))
    assert runner.point_id(_cfg()) != runner.point_id(_cfg(seed=1))


def test_a_finished_grid_is_scored_from_starts_without_refitting(tmp_path):
    from dsident.experiments.inputs import load_data
    from dsident.experiments.registry import get_estimator_class
    from dsident.metrics import evaluate_starts

    plain = _cfg()
    first = runner.run_grid([plain], tmp_path, progress=False)[0]
    assert first["status"] == "done" and "starts" not in first
    folder = tmp_path / "points" / runner.point_id(plain)
    model_stamp = max(p.stat().st_mtime_ns for p in (folder / "model").rglob("*"))

    again = runner.run_grid([_cfg(test_starts=3)], tmp_path, progress=False)[0]
    assert again["skipped"] and again["fit_time"] == first["fit_time"]          # not refitted
    assert max(p.stat().st_mtime_ns for p in (folder / "model").rglob("*")) == model_stamp
    starts = again["starts"]
    assert starts["requested"] == 3 and starts["n_starts"] == 3 and starts["length"] == 300
    # an independent route: the saved model scored by evaluate_starts on the whole test split
    est = get_estimator_class("shplrnn").load(folder / "model")
    ref = evaluate_starts(est, load_data("lorenz63", split="test"), n_starts=3, length=300, seed=0)
    d = ref["state_space_divergence"].values
    assert np.isfinite(d).all() and d.max() > d.min()            # three different windows
    np.testing.assert_allclose(starts["median_D_stsp"], np.median(d))
    np.testing.assert_allclose(starts["max_D_stsp"], d.max())
    np.testing.assert_allclose(starts["median_D_H"], np.median(ref["power_spectrum_distance"].values))
    saved = xr.open_dataset(folder / "starts.nc", engine="h5netcdf")
    np.testing.assert_allclose(saved["state_space_divergence"].values, d)
    on_disk = json.loads((folder / "result.json").read_text())
    assert on_disk["starts"]["n_starts"] == 3 and "skipped" not in on_disk
    assert json.loads((folder / "config.json").read_text())["test_starts"] == 3

    # the same number of starts again: nothing is rescored
    stamp = (folder / "starts.nc").stat().st_mtime_ns
    runner.run_grid([_cfg(test_starts=3)], tmp_path, progress=False)
    assert (folder / "starts.nc").stat().st_mtime_ns == stamp

    table = runner.records_to_dataset([again])
    np.testing.assert_allclose(table["D_stsp_starts"].values, [np.median(d)])
    np.testing.assert_allclose(table["D_stsp_starts_max"].values, [d.max()])
    assert table["n_starts"].values.tolist() == [3.0]


def test_a_fresh_point_is_scored_from_starts_as_it_is_fitted(tmp_path):
    rec = runner.run_grid([_cfg(seed=1, test_starts=2)], tmp_path, progress=False)[0]
    assert rec["status"] == "done" and rec["starts"]["n_starts"] == 2
    saved = xr.open_dataset(tmp_path / "points" / rec["point_id"] / "starts.nc", engine="h5netcdf")
    d = saved["state_space_divergence"].values
    np.testing.assert_allclose(rec["starts"]["median_D_stsp"], np.median(d[np.isfinite(d)]))
    assert rec["config"]["test_starts"] == 2


def test_a_point_without_its_model_records_why_it_has_no_starts(tmp_path):
    plain = _cfg(seed=2)
    rec = runner.run_point(plain, tmp_path, keep_model=False)
    assert rec["status"] == "done"
    again = runner.run_grid([_cfg(seed=2, test_starts=3)], tmp_path, progress=False)[0]
    assert "no saved model" in again["starts"]["error"]
    assert np.isnan(runner.records_to_dataset([again])["D_stsp_starts"].values[0])


def _results(first, starts, worst, d_h=0.05):
    n = len(first)
    return xr.Dataset(
        {"D_stsp": ("point", np.asarray(first, float)), "D_stsp_starts": ("point", np.asarray(starts, float)),
         "D_stsp_starts_max": ("point", np.asarray(worst, float)), "D_H_starts": ("point", np.full(n, d_h)),
         "n_starts": ("point", np.full(n, 8.0)), "status": ("point", np.array(["done"] * n))},
        coords={"model": ("point", np.array(["shplrnn"] * n)), "method": ("point", np.array(["teacher-forcing"] * n)),
                "dataset": ("point", np.array(["bursting_neuron"] * n))})


def test_starts_table_medians_and_floor_multiple_by_hand():
    res = _results([0.34, 0.48, 0.43], [0.42, 0.57, 0.43], [0.9, 1.2, 0.7])
    text = starts_table(res, floor={"bursting_neuron": {"D_stsp": 0.1}})
    # first stretch: median 0.43, MAD 0.05; starts: median 0.43, MAD 0.01 → 4.30× the floor, no ✓
    assert "| shplrnn × teacher-forcing | 0.43 ± 0.05 | 0.43 ± 0.01 (4.30×) | 0.9 ± 0.2 |" in text
    assert "8 windows" in text
    passing = starts_table(res, floor={"bursting_neuron": {"D_stsp": 0.2}})
    assert "(2.15× ✓)" in passing
    none = _results([0.3], [np.nan], [np.nan])
    assert starts_table(none) == ""


def test_a_sweep_sets_test_starts_once_and_refuses_to_sweep_it():
    configs, _ = sweep.expand_grid({"dataset": "lorenz63", "model": "shplrnn", "test_starts": 3}, {"seed": [0, 1]})
    assert [c["test_starts"] for c in configs] == [3, 3]
    with pytest.raises(ValueError, match=r"\['test_starts'\] cannot be swept"):
        sweep.expand_grid({"dataset": "lorenz63", "model": "shplrnn"}, {"seed": [0], "test_starts": [2, 4]})


def test_sweep_table_gets_the_starts_column_only_when_scored():
    res = _results([0.34, 0.48], [0.42, 0.57], [0.9, 1.2])
    for name in ("D_H", "PE", "diverged", "fit_time"):
        res[name] = ("point", np.zeros(2))
    res = res.assign_coords(alpha=("point", np.array([0.25, 0.25])))
    text = sweep.sweep_table(res, ["alpha"])
    assert "| alpha | seeds done | D_stsp | D_stsp_starts | D_H |" in text
    assert "| 0.25 | 2/2 | 0.41 ± 0.07 | 0.495 ± 0.075 |" in text
    plain = sweep.sweep_table(res.drop_vars(["D_stsp_starts"]), ["alpha"])
    assert "D_stsp_starts" not in plain


def test_fit_starts_flag_writes_the_table_and_starts_nc(tmp_path, capsys):
    out = tmp_path / "fit"
    args = ["fit", "lorenz63", "--model", "shplrnn", "--method", "bptt", "--train-length", "400", "--eval-length",
            "300", "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress"]
    assert main([*args, "--starts", "3", "--out", str(out)]) == 0
    starts = xr.open_dataset(out / "starts.nc", engine="h5netcdf")
    assert starts.sizes["start"] == 3 and int(starts.attrs["length"]) == 300
    text = (out / "fit.md").read_text()
    assert "Free runs from 3 starts" in text
    assert json.loads((out / "config.json").read_text())["test_starts"] == 3
    capsys.readouterr()
    assert main([*args, "--starts", "1", "--out", str(tmp_path / "bad")]) == 2
    assert "`test_starts` must be a whole number of free-run starts >= 2" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()                  # refused before anything was fitted
