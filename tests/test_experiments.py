"""dsident.experiments: config layers and files, the grid runner (failures, re-runs), sweeps on pools and Dask."""
from __future__ import annotations

import json
import math
import os
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from dsident.experiments import config as cfgmod
from dsident.experiments import benchmark, runner, sweep, tables
from dsident.experiments.config import load_config_file, resolve_config

# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------


def test_resolve_layers_in_order_and_user_wins():
    cfg = resolve_config("lorenz63", "shplrnn", overrides={"seed": 3, "model_params": {"hidden_dim": 7}})
    assert cfg["seed"] == 3
    assert cfg["model_params"]["hidden_dim"] == 7
    # the model layer still supplies what the user did not override
    assert cfg["model_params"]["latent_dim"] == cfgmod.MODEL_DEFAULTS["shplrnn"]["model_params"]["latent_dim"]
    assert cfg["eval_length"] == cfgmod.DATASET_DEFAULTS["lorenz63"]["eval_length"]
    assert cfg["method"] == cfgmod.MODEL_DEFAULTS["shplrnn"]["method"]
    assert cfg["user_keys"]["model_params"] == ["hidden_dim"]


def test_dataset_method_picks_the_measured_cell_and_flags_still_win():
    from dsident.experiments.benchmark import benchmark_configs

    # every per-dataset method names a measured cell of PAIR_DEFAULTS and differs from the
    # model's own method (otherwise the entry would say nothing)
    assert cfgmod.DATASET_METHODS
    for (dataset, model), method in cfgmod.DATASET_METHODS.items():
        assert (dataset, model, method) in cfgmod.PAIR_DEFAULTS
        assert method != cfgmod.MODEL_DEFAULTS[model]["method"]
    (dataset, model), method = next(iter(cfgmod.DATASET_METHODS.items()))
    cfg = resolve_config(dataset, model)
    assert cfg["method"] == method
    cell = cfgmod.PAIR_DEFAULTS[(dataset, model, method)]
    for key, value in cell["model_params"].items():
        assert cfg["model_params"][key] == value
    # the model's own method for a file of counts (no recording layer), and the user's choice wins
    own = cfgmod.MODEL_DEFAULTS[model]["method"]
    counts = {"model_params": {"observation": "poisson"}}
    assert resolve_config("recording.npy", model, overrides=counts)["method"] == own
    assert resolve_config(dataset, model, own)["method"] == own
    assert resolve_config(dataset, model, overrides={"method": own})["method"] == own
    # the benchmark grid without --methods uses the per-dataset method for each dataset
    grid = benchmark_configs([dataset, "recording.npy"], [model], None, 1, overrides=counts)
    assert [c["method"] for c in grid] == [method, own]
    assert f"{dataset} / {model}" in cfgmod.defaults_table()


@pytest.mark.parametrize("model", ["shplrnn", "rplrnn", "gnode", "ltc", "rfwp", "organics"])
def test_a_data_file_gets_the_recording_method_and_cell(model):
    """A user's file with Gaussian observations is filed under RECORDING: the rPLRNN and the
    continuous-time models that won by teacher forcing on every benchmark get it there too."""
    cfg = resolve_config("my_recording.csv", model)
    expected = cfgmod.RECORDING_METHODS.get(model, cfgmod.MODEL_DEFAULTS[model]["method"])
    assert cfg["method"] == expected == cfgmod.default_method(model, "my_recording.csv")
    for key, value in cfgmod.RECORDING_DEFAULTS.get((model, expected), {}).get("model_params", {}).items():
        assert cfg["model_params"][key] == value
    for key, value in cfgmod.RECORDING_DEFAULTS.get((model, expected), {}).get("fit_options", {}).items():
        assert cfg["fit_options"][key] == value
    # the shipped sets keep their own tables, and another method keeps only the generic layers
    assert resolve_config("lorenz63", model)["method"] == cfgmod.default_method(model, "lorenz63")
    other = "svi" if expected != "svi" else "teacher-forcing"
    assert resolve_config("my_recording.csv", model, other)["model_params"] == \
        {**cfgmod.MODEL_DEFAULTS[model].get("model_params", {})}


def test_the_recording_cell_builds_without_dropping_settings():
    for (model, method), cell in cfgmod.RECORDING_DEFAULTS.items():
        est, options, dropped = runner.build_estimator(resolve_config("rec.npy", model, method))
        assert dropped == []
        for key, value in cell.get("model_params", {}).items():
            assert getattr(est, key) == value, key
        for key, value in cell.get("fit_options", {}).items():
            assert options[key] == value, key


def test_quick_preset_overrides_dataset_defaults():
    quick = resolve_config("lorenz63", "shplrnn", "teacher-forcing", preset="quick")
    full = resolve_config("lorenz63", "shplrnn", "teacher-forcing")
    assert quick["train_length"] == cfgmod.PRESETS["quick"]["all"]["train_length"] != full["train_length"]
    assert quick["eval_length"] == cfgmod.PRESETS["quick"]["all"]["eval_length"]


def test_resolve_refuses_unknown_keys_and_presets():
    with pytest.raises(ValueError, match="unknown configuration key"):
        resolve_config("lorenz63", "shplrnn", overrides={"latnet_dim": 3})
    with pytest.raises(ValueError, match="preset"):
        resolve_config("lorenz63", "shplrnn", preset="fastest")


def test_toml_and_yaml_files_give_the_same_settings(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('model = "shplrnn"\nlatent-dim = 5\nseeds = 2\n[fit_options]\nn_epochs = 4\n')
    a = load_config_file(toml)
    assert a == {"model": "shplrnn", "latent_dim": 5, "seeds": 2, "fit_options": {"n_epochs": 4}}
    pytest.importorskip("yaml")
    yml = tmp_path / "c.yaml"
    yml.write_text("model: shplrnn\nlatent-dim: 5\nseeds: 2\nfit_options:\n  n_epochs: 4\n")
    assert load_config_file(yml) == a


def test_config_file_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config_file(tmp_path / "missing.toml")
    bad = tmp_path / "c.ini"
    bad.write_text("x=1")
    with pytest.raises(ValueError, match=r"\.toml, \.yaml"):
        load_config_file(bad)


def test_saved_config_round_trips_with_version(tmp_path):
    from dsident import __version__

    cfg = resolve_config("lorenz63", "rplrnn")
    path = cfgmod.save_config(cfg, tmp_path / "config.json")
    back = json.loads(path.read_text())
    assert back["dsident_version"] == __version__
    assert back["model_params"] == cfg["model_params"]


def test_defaults_table_lists_every_layer():
    text = cfgmod.defaults_table()
    for name in [*cfgmod.DATASET_DEFAULTS, *cfgmod.MODEL_DEFAULTS, "quick"]:
        assert name in text


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------


def _fake_results():
    recs = []
    for seed, (d, h) in enumerate([(1.0, 0.10), (2.0, 0.20), (4.0, 0.30)]):
        recs.append({"point_id": f"p{seed}", "status": "done", "fit_time": 10.0 + seed,
                     "config": {"dataset": "lorenz63", "model": "shplrnn", "method": "teacher-forcing", "seed": seed},
                     "scores": {"D_stsp": d, "D_H": h, "PE": 0.5, "diverged": 0.0}})
    recs.append({"point_id": "p9", "status": "failed", "error": "ValueError: boom", "fit_time": None,
                 "config": {"dataset": "lorenz63", "model": "ltc", "method": "svi", "seed": 0},
                 "scores": {"D_stsp": None, "D_H": None, "PE": None, "diverged": None}})
    return runner.records_to_dataset(recs)


def test_median_mad_by_hand():
    assert tables.median_mad([1.0, 2.0, 4.0, np.nan]) == (2.0, 1.0, 3)
    med, mad, n = tables.median_mad([np.nan])
    assert math.isnan(med) and n == 0


def test_markdown_table_has_floor_row_median_mad_and_failures():
    text = tables.markdown_table(_fake_results(), extra_rows={"floor": {"lorenz63": {"D_stsp": 0.62, "D_H": 0.04}}})
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| model"))
    assert "lorenz63: D_stsp" in header and "lorenz63: PE(20)" in header and "fit time" in header
    row = next(line for line in lines if line.startswith("| shplrnn × teacher-forcing"))
    assert "2 ± 1" in row and "0.2 ± 0.1" in row and "| 11 |" in row
    floor = next(line for line in lines if line.startswith("| *floor*"))
    assert "0.62" in floor
    assert "1/1 failed" in next(line for line in lines if line.startswith("| ltc × svi"))
    assert any("ValueError: boom" in line for line in lines)


def test_d_stsp_cells_say_their_multiple_of_the_floor_and_mark_a_reconstruction():
    # shplrnn × teacher-forcing: D_stsp median 2 of (1, 2, 4), D_H median 0.2 of (0.1, 0.2, 0.3)
    results = _fake_results()
    row = lambda text: next(line for line in text.splitlines() if line.startswith("| shplrnn × teacher-forcing"))
    # 2 / 0.8 = 2.5 floors, but D_H 0.2 > 0.15: no mark
    assert "| 2 ± 1 (2.50×) |" in row(tables.markdown_table(results, floor={"lorenz63": {"D_stsp": 0.8}}))
    # 2 / 0.5 = 4 floors: no mark either
    assert "(4.00×)" in row(tables.markdown_table(results, floor={"lorenz63": {"D_stsp": 0.5}}))
    results["D_H"].values[:3] = [0.05, 0.1, 0.3]       # median 0.1
    text = tables.markdown_table(results, floor={"lorenz63": {"D_stsp": 0.8}})
    assert "| 2 ± 1 (2.50× ✓) |" in row(text) and "✓: a reconstruction" in text
    assert tables.is_reconstruction(3.0, 0.15, 1.0) and not tables.is_reconstruction(3.01, 0.1, 1.0)
    assert not tables.is_reconstruction(1.0, float("nan"), 1.0) and not tables.is_reconstruction(1.0, 0.1, float("nan"))
    # without a floor the cells stay plain
    assert "| 2 ± 1 |" in row(tables.markdown_table(results))


def test_records_to_dataset_round_trips_netcdf(tmp_path):
    ds = _fake_results()
    ds.to_netcdf(tmp_path / "r.nc", engine="h5netcdf")
    back = xr.open_dataset(tmp_path / "r.nc", engine="h5netcdf").load()
    np.testing.assert_array_equal(back["D_stsp"].values, ds["D_stsp"].values)
    assert list(back["status"].values) == ["done", "done", "done", "failed"]


# ---------------------------------------------------------------------------------------------
# the runner's bookkeeping (a stand-in point function; the real fit is tested below)
# ---------------------------------------------------------------------------------------------


def fake_point(cfg, out_root):
    """Writes a result like run_point; fails when the config asks it to (picklable for pools)."""
    import pathlib

    folder = pathlib.Path(out_root) / "points" / runner.point_id(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    calls = pathlib.Path(out_root) / "calls.txt"
    with open(calls, "a") as fh:
        fh.write(runner.point_id(cfg) + "\n")
    ok = not cfg["model_params"].get("explode", False)
    rec = {"point_id": runner.point_id(cfg), "config": cfg, "status": "done" if ok else "failed",
           "error": None if ok else "RuntimeError: asked to fail", "fit_time": 0.1,
           "scores": {"D_stsp": float(cfg["seed"]), "D_H": 0.1, "PE": 0.2, "diverged": 0.0}}
    (folder / "result.json").write_text(json.dumps(rec))
    return rec


#: the tiny sweep of the executor tests: 2 seeds × (a good point, a point that fails)
TINY_SWEEP = {"dataset": "lorenz63", "model": "shplrnn", "method": "teacher-forcing",
              "grid": {"seed": [0, 1], "explode": [False, True]}}


def _grid(explode_second=True):
    base = {k: v for k, v in TINY_SWEEP.items() if k != "grid"}
    grid = {"seed": TINY_SWEEP["grid"]["seed"], "explode": [False, True] if explode_second else [False]}
    return sweep.expand_grid(base, grid)


def test_expand_grid_places_keys_and_counts_points():
    base = {"dataset": "lorenz63", "model": "rplrnn", "method": "laplace-em"}
    configs, keys = sweep.expand_grid(base, {"seed": [0, 1, 2], "tau": [0.0, 10.0], "fit_options.n_iter_lds": [3]})
    assert len(configs) == 6 and keys == ["seed", "tau", "n_iter_lds"]
    assert {c["seed"] for c in configs} == {0, 1, 2}
    assert {c["model_params"]["tau"] for c in configs} == {0.0, 10.0}
    assert all(c["fit_options"]["n_iter_lds"] == 3 for c in configs)
    assert len({runner.point_id(c) for c in configs}) == 6
    with pytest.raises(ValueError, match="non-empty list"):
        sweep.expand_grid(base, {"seed": []})


def test_a_grid_with_an_option_its_method_lacks_is_refused_before_any_fit(tmp_path):
    # the same option is an engine option of Laplace-EM and a typo for teacher forcing
    base = {"dataset": "lorenz63", "model": "rplrnn", "method": "teacher-forcing"}
    with pytest.raises(ValueError, match=r"'teacher-forcing' does not accept the engine option\(s\) \['n_iter_lds'\]"):
        sweep.run_sweep({**base, "grid": {"seed": [0, 1], "fit_options.n_iter_lds": [3]}}, out=tmp_path / "a")
    with pytest.raises(ValueError, match=r"PLRNN does not accept the hyperparameter\(s\) \['taux'\]"):
        sweep.run_sweep({**base, "grid": {"seed": [0], "model_params.taux": [1.0]}}, out=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()      # refused before any folder
    with pytest.raises(ValueError, match=r"does not accept the engine option\(s\) \['n_epoch'\]"):
        benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], 2, overrides={"fit_options": {"n_epoch": 3}})
    # spelt right, the same grid resolves
    assert len(benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], 2,
                                           overrides={"fit_options": {"n_epochs": 3}})) == 2


def test_failed_point_is_recorded_and_rerun_skips_done_points(tmp_path):
    configs, _ = _grid()
    recs = runner.run_grid(configs, tmp_path, progress=False, point_function=fake_point)
    assert [r["status"] for r in recs] == ["done", "failed", "done", "failed"]
    assert len((tmp_path / "calls.txt").read_text().split()) == 4
    recs2 = runner.run_grid(configs, tmp_path, progress=False, point_function=fake_point)
    calls = (tmp_path / "calls.txt").read_text().split()
    assert len(calls) == 6                      # only the two failed points ran again
    assert all(r.get("skipped") for r in recs2 if r["status"] == "done")
    assert len(runner.collect_records(tmp_path)) == 4


def test_sweep_on_a_process_pool(tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    configs, _ = _grid()
    with ProcessPoolExecutor(max_workers=2) as pool:
        recs = runner.run_grid(configs, tmp_path, executor=pool, progress=False, point_function=fake_point)
    assert sorted(r["status"] for r in recs) == ["done", "done", "failed", "failed"]
    assert [r["config"]["seed"] for r in recs] == [c["seed"] for c in configs]   # input order kept


def test_sweep_on_a_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    configs, _ = _grid()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=None) as cluster:
        with distributed.Client(cluster.scheduler_address) as client:
            recs = runner.run_grid(configs, tmp_path, executor=client, progress=False, point_function=fake_point)
    assert sorted(r["status"] for r in recs) == ["done", "done", "failed", "failed"]
    assert cluster.scheduler_address.startswith("tcp://127.0.0.1")


def _point_scores(folder):
    """{point_id: (status, scores)} read back from every point folder of a result folder."""
    out = {}
    for path in sorted((folder / "points").iterdir()):
        rec = json.loads((path / "result.json").read_text())
        assert rec["point_id"] == path.name
        out[path.name] = (rec["status"], rec["scores"])
    return out


def test_sweep_in_submitit_local_mode_matches_the_process_pool(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    import pathlib

    # submitit's local jobs are fresh interpreters: they must import this module to unpickle fake_point
    tests_dir = str(pathlib.Path(__file__).resolve().parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (tests_dir, os.environ.get("PYTHONPATH")) if p))
    configs, _ = _grid()
    expected = {runner.point_id(c) for c in configs}

    pool_ds, _ = sweep.run_sweep({**TINY_SWEEP, "engine": "process", "n_workers": 2}, out=tmp_path / "pool",
                                 progress=False, point_function=fake_point)
    spec = {**TINY_SWEEP, "engine": "submitit-local", "slurm": {"timeout_min": 5, "poll_interval": 0.2}}
    sub_ds, table = sweep.run_sweep(spec, out=tmp_path / "submitit", progress=False, point_function=fake_point)

    pool_points, sub_points = _point_scores(tmp_path / "pool"), _point_scores(tmp_path / "submitit")
    assert set(sub_points) == expected                       # one result folder per grid point
    assert sub_points == pool_points                          # same statuses and scores as the pool
    assert sorted(sub_points[p][0] for p in sub_points) == ["done", "done", "failed", "failed"]
    np.testing.assert_array_equal(sub_ds["D_stsp"].values, pool_ds["D_stsp"].values)
    assert "| False | 2/2 |" in table and "| True | 0/2 |" in table
    # the points really ran as submitit jobs: one pickle + log set per job in OUT/submitit
    logs = list((tmp_path / "submitit" / "submitit").glob("*_result.pkl"))
    assert len(logs) == len(configs)
    assert not (tmp_path / "pool" / "submitit").exists()


class _FakeJob:
    """Mimics submitit's Job: done() after a few polls, result() returns or raises."""

    def __init__(self, fn, args, polls):
        self.fn, self.args, self.polls, self.cancelled = fn, args, polls, False

    def done(self):
        self.polls -= 1
        return self.polls <= 0

    def result(self):
        return self.fn(*self.args)

    def cancel(self, check=True):
        self.cancelled = True


class _FakeSubmitit:
    def __init__(self):
        self.jobs = []

    def submit(self, fn, *args):
        job = _FakeJob(fn, args, polls=3 - len(self.jobs) % 3)   # jobs finish out of submission order
        self.jobs.append(job)
        return job


def _raise_if_exploding(cfg, out_root):
    if cfg["model_params"].get("explode"):
        raise RuntimeError("node lost")
    return fake_point(cfg, out_root)


def test_submitit_jobs_are_waited_on_like_pool_futures(tmp_path):
    configs, _ = _grid()
    fake = _FakeSubmitit()
    pool = sweep.SubmititPool(fake, poll_interval=0.01)
    recs = runner.run_grid(configs, tmp_path, executor=pool, progress=False, point_function=_raise_if_exploding)
    pool.shutdown()
    assert len(fake.jobs) == len(configs) and pool.jobs == fake.jobs
    assert [r["config"]["seed"] for r in recs] == [c["seed"] for c in configs]   # input order kept
    assert [r["status"] for r in recs] == ["done", "failed", "done", "failed"]
    assert "node lost" in recs[1]["error"]                       # a job that raised is recorded, not fatal
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(fake_point, configs[0], str(tmp_path))
    with pytest.raises(ValueError, match="poll_interval"):
        sweep.SubmititPool(fake, poll_interval=0)


def test_make_executor_names_engines_and_extras(monkeypatch):
    with pytest.raises(ValueError, match=r"'process', 'dask', 'slurm'"):
        sweep.make_executor("kubernetes")
    with pytest.raises(ValueError, match="only used by engine 'dask'"):
        sweep.make_executor("process", scheduler="tcp://127.0.0.1:8786")
    with pytest.raises(ValueError, match="only used by engine 'slurm'"):
        sweep.make_executor("process", slurm_options={"timeout_min": 5})
    pool = sweep.make_executor(n_workers=1)
    try:
        assert pool.submit(math.sqrt, 16.0).result() == 4.0      # no engine, no address: a process pool
    finally:
        sweep.close_executor(pool)
    monkeypatch.setitem(sys.modules, "submitit", None)            # as if submitit were not installed
    with pytest.raises(ImportError, match=r"pip install 'dsident\[slurm\]'"):
        sweep.make_executor("slurm", slurm_options={"slurm_partition": "cpu"})


def test_submitit_options_are_checked(tmp_path):
    pytest.importorskip("submitit")
    with pytest.raises(ValueError, match="no_such_option"):
        sweep.make_executor("submitit-local", slurm_options={"no_such_option": 1}, folder=tmp_path)
    with pytest.raises(ValueError, match="cluster"):
        sweep.make_executor("slurm", slurm_options={"cluster": "pbs"}, folder=tmp_path)
    pool = sweep.make_executor("slurm", slurm_options={"cluster": "local", "timeout_min": 3,
                                                       "slurm_partition": "ignored-locally"}, folder=tmp_path)
    assert isinstance(pool, sweep.SubmititPool) and pool.executor.cluster == "local"
    assert pool.executor._executor.parameters["timeout_min"] == 3


def test_cli_engine_and_slurm_options_parse():
    import argparse

    from dsident import cli_main_job

    parser = argparse.ArgumentParser()
    cli_main_job.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "s.toml", "--engine", "SLURM", "--slurm-option", "timeout_min=30",
                              "--slurm-option", "slurm_partition=gpu"])
    assert args.engine == "slurm"
    assert cli_main_job._slurm_options(args, {"timeout_min": 5, "mem_gb": 4}) == \
        {"timeout_min": 30, "slurm_partition": "gpu", "mem_gb": 4}          # the flag wins over the file
    bench = parser.parse_args(["benchmark", "--engine", "dask", "--workers", "2"])
    assert bench.engine == "dask" and bench.workers == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["sweep", "s.toml", "--engine", "pbs"])


def test_sweep_table_pools_seeds(tmp_path):
    configs, keys = _grid()
    recs = runner.run_grid(configs, tmp_path, progress=False, point_function=fake_point)
    ds = runner.records_to_dataset(recs, sweep_keys=["explode"])
    text = sweep.sweep_table(ds, ["explode"])
    assert "| False | 2/2 | 0.5 ± 0.5 |" in text      # seeds 0 and 1 → D_stsp median 0.5, MAD 0.5
    assert "| True | 0/2 |" in text and "asked to fail" in text
    assert text.splitlines()[0].endswith("| free run (2T) |")        # the stand-in records no late run
    regimes = ds["regime"].values.astype(object)
    regimes[ds["status"].values == "done"] = ["chaotic", "fixed point"]      # the two seeds of explode=False
    ds["regime"] = ("point", regimes.astype(str))
    assert "| 0.5 ± 0.5 | 0.1 ± 0 | 0.2 ± 0 | 0.00 | 0.1 | chaotic 1/2, fixed point 1/2 |" in \
        sweep.sweep_table(ds, ["explode"])


# ---------------------------------------------------------------------------------------------
# the real pipeline on a tiny grid: fit → evaluate → save, one bad point among good ones
# ---------------------------------------------------------------------------------------------


def test_run_grid_with_a_real_model_records_a_bad_point_and_skips_done_ones(tmp_path):
    tiny = {"train_length": 300, "eval_length": 200, "fit_options": {"n_epochs": 1, "seq_len": 20}}
    good = resolve_config("lorenz63", "shplrnn", "bptt", overrides={**tiny, "model_params": {"hidden_dim": 4}})
    bad = resolve_config("lorenz63", "shplrnn", "bptt", overrides={**tiny, "model_params": {"hiden_dim": 4}})
    recs = runner.run_grid([good, bad], tmp_path, progress=False)
    assert [r["status"] for r in recs] == ["done", "failed"]
    assert "hiden_dim" in recs[1]["error"] and "hidden_dim" in recs[1]["error"]   # says what it accepts
    assert all(np.isfinite(recs[0]["scores"][k]) for k in ("D_H", "PE"))
    # the coverage is the evaluation's, read back under its stable name and kept in results.nc
    raw = xr.open_dataset(tmp_path / "points" / runner.point_id(good) / "metrics.nc", engine="h5netcdf")
    np.testing.assert_equal(recs[0]["scores"]["coverage"], float(raw["state_space_coverage"]))
    table = runner.records_to_dataset(recs)
    np.testing.assert_equal(table["coverage"].values, [recs[0]["scores"]["coverage"], np.nan])
    # and its free run twice as long, from the first test sample (steps analysed: at least 2 000)
    from dsident.analysis import VERDICTS
    late = recs[0]["late"]
    assert late["regime"] in VERDICTS and late["steps"] == 2000 and "late" not in recs[1]
    # (a one-epoch model: its D_stsp may be NaN, no generated sample inside the data's box)
    assert late["regime"] == "diverged" or (np.isfinite(late["D_H"]) and np.isfinite(late["lambda_max"]))
    folder = tmp_path / "points" / runner.point_id(good)
    saved = json.loads((folder / "config.json").read_text())
    assert saved["model_params"]["hidden_dim"] == 4 and "dsident_version" in saved
    assert (folder / "metrics.nc").is_file() and (folder / "model").is_dir()
    gen = xr.open_dataset(folder / "generated.nc", engine="h5netcdf")
    assert gen.sizes["time"] == 200                                 # the compared window of the protocol
    # which channel pairs the run misses, from that window: an independent route for one pair
    if not recs[0]["scores"]["diverged"]:
        from dsident.experiments.inputs import load_data
        from dsident.metrics import state_space_divergence
        x = load_data("lorenz63", split="test", length=200)["x"].values[0][:, [1, 2]]
        g = gen["x"].values[0][:, [1, 2]]
        ref = state_space_divergence(x, g[np.all(np.isfinite(gen["x"].values[0]), axis=1)], method="bins")
        np.testing.assert_allclose(float(raw["state_space_projections"].sel(channel="y", other_channel="z")), ref)
    stamp = (folder / "result.json").stat().st_mtime_ns
    again = runner.run_grid([good], tmp_path, progress=False)
    assert again[0]["skipped"] and (folder / "result.json").stat().st_mtime_ns == stamp


def test_parse_overrides_builds_the_layer_resolve_config_applies():
    """``--set`` items become the nested overrides layer; resolve_config then shows each value
    where the item put it, and bad items are refused with the key named."""
    from dsident.experiments.config import parse_overrides, resolve_config

    layer = parse_overrides(["fit_options.alpha=adaptive", "fit_options.lr=0.002", "train_length=5000",
                             "model_params.hidden_dim=64", "fit_options.grad_clip=null"])
    assert layer == {"fit_options": {"alpha": "adaptive", "lr": 0.002, "grad_clip": None},
                     "train_length": 5000, "model_params": {"hidden_dim": 64}}
    cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing", overrides=layer)
    assert cfg["fit_options"]["alpha"] == "adaptive" and cfg["fit_options"]["lr"] == 0.002
    assert cfg["train_length"] == 5000 and cfg["model_params"]["hidden_dim"] == 64
    assert parse_overrides(None) == {}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_overrides(["fit_options.alpha"])
    with pytest.raises(ValueError, match="'epochs'"):
        parse_overrides(["epochs=3"])
    with pytest.raises(ValueError, match="dotted key"):
        parse_overrides(["seed.x=1"])


MEASURED_CELLS = sorted(cfgmod.PAIR_DEFAULTS)


@pytest.mark.parametrize("cell", MEASURED_CELLS, ids=["-".join(c) for c in MEASURED_CELLS])
def test_every_measured_cell_builds_without_dropping_settings(cell):
    # a key the estimator or engine does not take would be dropped with a warning, and the
    # benchmark would silently run something other than the measured cell (e.g. `stateful`)
    est, options, dropped = runner.build_estimator(cfgmod.resolve_config(*cell))
    assert dropped == [], f"{cell}: settings not accepted by the estimator or engine: {dropped}"
    for key, value in cfgmod.PAIR_DEFAULTS[cell].get("model_params", {}).items():
        assert getattr(est, key) == value, key
    for key, value in cfgmod.PAIR_DEFAULTS[cell].get("fit_options", {}).items():
        assert options[key] == value, key


@pytest.mark.parametrize("name,text,kind", [("bad.toml", 'datasets = ["lorenz63"\n', "TOML"),
                                            ("bad.json", '{"seeds": 2,}', "JSON"),
                                            ("bad.yaml", "seeds: [1, 2\nmodels: 3\n", "YAML")])
def test_a_config_file_that_does_not_parse_is_named(tmp_path, name, text, kind):
    if kind == "YAML":
        pytest.importorskip("yaml")
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=rf"config file '.*{name}' is not valid {kind}: .*(line|document)"):
        load_config_file(tmp_path / name)


@pytest.mark.parametrize("overrides,match", [
    ({"eval_length": -4}, r"`eval_length` \(--eval-length\) must be a whole number of samples >= 2; got eval_length=-4"),
    ({"train_length": 0}, r"`train_length` \(--train-length\) must be .* got train_length=0"),
    ({"pe_steps": 0}, r"`pe_steps` \(--pe-steps\) must be a whole number of steps ahead >= 1"),
    ({"eval_length": 1000.5}, r"got eval_length=1000.5"),
    ({"eval_length": 20, "pe_steps": 20}, r"`eval_length`=20 leaves no room for PE\(20\)"),
])
def test_lengths_that_cannot_be_scored_are_refused_before_a_fit(overrides, match):
    # a negative length would have cut the series' end off (a slice), and a bad pe_steps was
    # only found when the fitted model was scored
    with pytest.raises(ValueError, match=match):
        resolve_config("lorenz63", "shplrnn", "bptt", overrides=overrides)
    assert resolve_config("lorenz63", "shplrnn", "bptt", overrides={"eval_length": 21, "pe_steps": 20})["eval_length"] == 21


def test_sweep_dry_run_counts_finished_points_and_writes_nothing(tmp_path):
    spec = {"dataset": "lorenz63", "model": "shplrnn", "method": "bptt",
            "grid": {"seed": [0, 1], "hidden_dim": [20, 50], "fit_options.lr": [1e-3]}}
    configs, _ = sweep.expand_grid(spec, spec["grid"])
    # finish the two points with hidden_dim 20 (and nothing else) as a real sweep would
    runner.run_grid([c for c in configs if c["model_params"]["hidden_dim"] == 20], tmp_path, progress=False,
                    point_function=fake_point)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    plan = sweep.plan_sweep(spec, out=tmp_path)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    rows = [line for line in plan.splitlines() if line.startswith("| 20") or line.startswith("| 50")]
    assert rows == ["| 20 | 0.001 | 0, 1 | 2/2 |", "| 50 | 0.001 | 0, 1 | 0/2 |"]
    assert plan.splitlines()[0] == "| hidden_dim | lr | seeds | finished |"
    assert "4 points (2 combinations)" in plan and "the 2 unfinished points" in plan
    # the dry run refuses what the run would refuse
    with pytest.raises(ValueError, match=r"does not accept the engine option\(s\) \['n_epoch'\]"):
        sweep.plan_sweep({**spec, "fit_options": {"n_epoch": 2}}, out=tmp_path)


def test_grid_data_files_are_checked_before_the_first_point(tmp_path, monkeypatch):
    from dsident.experiments.inputs import load_data

    monkeypatch.chdir(tmp_path)
    x = np.sin(np.arange(3000) * 0.05)[:, None] * [1.0, 2.0]
    np.save("plain.npy", x)
    np.savez("with_dt.npz", x=x, dt=0.05)
    np.savez("without_dt.npz", x=x)
    spec = {"model": "shplrnn", "method": "bptt", "grid": {"seed": [0, 1]}}
    for name, match in [("missing.nc", "data file 'missing.nc' does not exist"),
                        ("plain.npy", "'plain.npy' carries no sampling step, and a benchmark or sweep point"),
                        ("without_dt.npz", "'without_dt.npz' carries no sampling step")]:
        with pytest.raises(ValueError, match=match):
            sweep.plan_sweep({**spec, "dataset": name})
        with pytest.raises(ValueError, match=match):
            benchmark.plan_benchmark(datasets=[name], models=["shplrnn"], methods=["bptt"], seeds=1, echo=None)
    # a .npz that stores its step needs no `dt`, in a grid or alone
    assert "2 points" in sweep.plan_sweep({**spec, "dataset": "with_dt.npz"})
    assert load_data("with_dt.npz").attrs["dt"] == 0.05
    with pytest.raises(ValueError, match="carries no sampling step: pass `dt`"):
        load_data("without_dt.npz")


def _two_array_file(path, n=1500, dt=0.05):
    """An .npz holding a 2-channel recording `x` beside an unrelated array (so `read` must pick
    `x`), with its sampling step; returns the recording."""
    t = np.arange(n) * dt
    x = np.stack([np.sin(t), np.cos(1.3 * t)], axis=-1) + 0.01 * np.arange(n)[:, None] / n
    np.savez(path, x=x, other=np.zeros((7, 3)), dt=dt)
    return x


def test_a_grid_on_a_data_file_scores_only_what_its_fit_never_saw(tmp_path, monkeypatch):
    from dsident.experiments.inputs import run_test

    monkeypatch.chdir(tmp_path)
    x = _two_array_file("rec.npz")
    spec = {"dataset": "rec.npz", "model": "shplrnn", "method": "bptt", "read": {"key": "x"},
            "fit_options": {"n_epochs": 1}, "grid": {"seed": [0]}}
    base = {k: v for k, v in spec.items() if k != "grid"}
    (cfg,), _ = sweep.expand_grid(base, spec["grid"])
    assert cfg["test_fraction"] == cfgmod.GRID_TEST_FRACTION           # held out by default
    train, test, _ = runner.point_data(cfg)
    n_test = int(np.floor(len(x) * cfgmod.GRID_TEST_FRACTION))
    # the split in time, checked against slicing the array itself
    np.testing.assert_array_equal(train["x"].values[0], x[: len(x) - n_test])
    np.testing.assert_array_equal(test["x"].values[0], x[len(x) - n_test:])
    np.testing.assert_array_equal(run_test(cfg)["x"].values[0], x[len(x) - n_test:])    # what the starts score
    rec = runner.run_point(cfg, tmp_path / "out", keep_model=False)
    assert rec["status"] == "done", rec["error"]
    assert rec["test"] == {"samples": n_test, "trials": 1, "train_samples": len(x) - n_test, "train_trials": 1}
    assert rec["config"]["read"] == {"key": "x"}
    note = tables.test_data_note([rec])
    assert note == f"test data (samples compared) per dataset: rec.npz {n_test} (the last 20 % of every trial " \
                   "of the file, never seen in training)"
    # an explicit share, or a test file, replaces the default; a shipped set keeps its test split
    (own,), _ = sweep.expand_grid({**base, "test_fraction": 0.5}, spec["grid"])
    assert own["test_fraction"] == 0.5
    (other,), _ = sweep.expand_grid({**base, "test_data": "rec.npz"}, spec["grid"])
    assert "test_fraction" not in other
    assert len(run_test(other)["x"].values[0]) == len(x)                 # the whole test file, read with `read`
    shipped = benchmark.benchmark_configs(["lorenz63", "rec.npz"], ["shplrnn"], ["bptt"], 1,
                                          overrides={"read": {"key": "x"}, "test_fraction": 0.3})
    assert "read" not in shipped[0] and "test_fraction" not in shipped[0]    # the files' settings only
    assert shipped[1]["read"] == {"key": "x"} and shipped[1]["test_fraction"] == 0.3


def test_a_grid_whose_file_cannot_be_read_as_asked_stops_before_any_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _two_array_file("rec.npz", n=1000)
    calls = []
    monkeypatch.setattr(runner, "run_point", lambda *a, **k: calls.append(a))
    with pytest.raises(ValueError, match=r"data file 'rec.npz' with --read \{'key': 'nope'\}: `key`='nope' is not in "
                                         r"'rec.npz'.*Nothing was fitted"):
        benchmark.plan_benchmark(datasets=["rec.npz"], models=["shplrnn"], methods=["bptt"], seeds=1,
                                 overrides={"read": {"key": "nope"}}, echo=None)
    spec = {"dataset": "rec.npz", "model": "shplrnn", "method": "bptt", "read": {"key": "x"},
            "test_fraction": 0.999, "grid": {"seed": [0]}}
    with pytest.raises(ValueError, match=r"`test_fraction`=0.999 leaves fewer than 2 time steps"):
        sweep.plan_sweep(spec, out=tmp_path / "o")
    assert calls == []
    assert "1 point" in sweep.plan_sweep({**spec, "test_fraction": 0.2}, out=tmp_path / "o")


def test_a_recordings_floor_compares_its_other_stretches_with_the_test_stretch(tmp_path, monkeypatch):
    from dsident import metrics
    from dsident.experiments.scoring import recording_floor
    from dsident.experiments.tables import floor_discriminates

    monkeypatch.chdir(tmp_path)
    x = _two_array_file("rec.npz", n=5000)
    cfg = cfgmod.held_out_by_default(resolve_config("rec.npz", "shplrnn", overrides={"read": {"key": "x"},
                                                                                   "eval_length": 400}))
    scores, raw = recording_floor(cfg)
    test = x[4000:4400]                                    # the held-out fifth's first 400 samples
    others = [x[k * 400:(k + 1) * 400] for k in range(5)]  # the training part's first five stretches
    expected = [metrics.state_space_divergence(test, o) for o in others]
    np.testing.assert_allclose(raw["state_space_divergence"].values, expected, rtol=1e-12)
    assert scores["D_stsp"] == pytest.approx(np.mean(expected))
    assert math.isnan(scores["PE"]) and scores["diverged"] == 0.0
    at_rest = metrics.state_space_divergence(test, np.repeat(test.mean(0, keepdims=True), 400, 0))
    assert scores["D_stsp_at_rest"] == pytest.approx(at_rest)
    assert floor_discriminates(scores) == (at_rest > 3 * scores["D_stsp"])
    # a file scored whole has no stretch of its own to compare with
    with pytest.raises(ValueError, match="holds out no test data"):
        recording_floor(resolve_config("rec.npz", "shplrnn", overrides={"read": {"key": "x"}}))


def test_a_floor_discriminates_only_when_a_run_at_rest_scores_well_above_it():
    from dsident.experiments.tables import floor_discriminates

    assert floor_discriminates({"D_stsp": 0.5})                             # a true system's floor
    assert floor_discriminates({"D_stsp": 0.5, "D_stsp_at_rest": 12.0})
    assert not floor_discriminates({"D_stsp": 9.9, "D_stsp_at_rest": 12.4})   # a short stretch
    assert not floor_discriminates({"D_stsp": 1.0, "D_stsp_at_rest": 3.0})     # at the bar: not above it
    assert floor_discriminates({"D_stsp": math.nan, "D_stsp_at_rest": 1.0})   # nothing to judge by


def test_a_delay_embedding_is_chosen_on_the_training_data_and_reused_for_the_test(tmp_path, monkeypatch):
    from dsident import metrics
    from dsident.data import as_dataset, save_dataset
    from dsident.data.preprocessing import auto_embed
    from dsident.experiments.inputs import in_fit_units
    from dsident.experiments.scoring import recording_floor

    monkeypatch.chdir(tmp_path)
    t = np.arange(6000)
    # a 40-sample rhythm, then (the held-out fifth) a 100-sample one: "auto" on the test would differ
    v = np.where(t < 4800, np.sin(2 * np.pi * t / 40), np.sin(2 * np.pi * t / 100))
    v = v + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    save_dataset(as_dataset(v[:, None], dt=0.1, channel_names=["V"]), "v.nc")
    cfg = cfgmod.held_out_by_default(resolve_config("v.nc", "shplrnn", "bptt",
                                                    overrides={"delay_embedding": "auto", "eval_length": 600}))
    train, test, fitted = runner.point_data(cfg)
    expected = auto_embed(as_dataset(v[:4800, None], dt=0.1, channel_names=["V"]), fnn_threshold=0.05)
    delays = fitted["delay_embedding"]["delays"]
    assert [str(c) for c in train["channel"].values] == [str(c) for c in expected["channel"].values]
    assert delays == [int(str(c)[4:-1]) for c in expected["channel"].values]        # "V(t+8)" -> 8
    span = max(delays)
    np.testing.assert_array_equal(train["x"].values[0], np.stack([v[d:4800 - span + d] for d in delays], 1))
    # the test: the held-out samples alone, embedded with the training data's delays
    held = v[4800:]
    np.testing.assert_array_equal(test["x"].values[0], np.stack([held[d:600 + d] for d in delays], 1))
    # evaluate's route (a saved configuration on new data) embeds the same way, and a floor compares
    # embedded stretches, as the models are scored
    again = in_fit_units(as_dataset(held[:, None], dt=0.1, channel_names=["V"]), fitted)
    np.testing.assert_array_equal(again["x"].values[0, :600], test["x"].values[0])
    scores, raw = recording_floor(cfg)
    stretch = lambda a, b: np.stack([v[a + d:b + d] for d in delays], 1)      # noqa: E731
    first = metrics.state_space_divergence(test["x"].values[0], stretch(0, 600))
    assert float(raw["state_space_divergence"][0]) == pytest.approx(first, rel=1e-12)
    assert int(scores["length"]) == 600


@pytest.mark.parametrize("spec, match", [
    ("autox", r"`delay_embedding.delays` must be \"auto\" or two or more distinct whole numbers"),
    ([0, 5, 5], r"must be \"auto\" or two or more distinct whole numbers of samples >= 0"),
    ([3], r"two or more distinct"),
    ({"delays": "auto", "lags": 3}, r"takes only \['delays', 'channel', 'max_lag', 'max_dim', 'fnn_threshold', 'chosen'\]"),
    ({"delays": "auto", "fnn_threshold": 2}, r"`delay_embedding.fnn_threshold` must be a share in \(0, 1\)"),
    (7, r"must be \"auto\", a list of delays in samples or a table"),
])
def test_a_delay_embedding_spec_is_checked_before_any_fit(spec, match):
    with pytest.raises(ValueError, match=match):
        resolve_config("rec.npz", "shplrnn", overrides={"delay_embedding": spec})


def test_a_delay_embedding_names_its_channel_in_a_several_channel_file():
    from dsident.data import as_dataset
    from dsident.experiments.inputs import embedding_for_fit

    two = as_dataset(np.random.default_rng(0).standard_normal((500, 2)), dt=1.0, channel_names=["V", "I"])
    with pytest.raises(ValueError, match=r"embeds one channel; the data have 2 \['V', 'I'\]: name it"):
        embedding_for_fit(two, [0, 3])
    with pytest.raises(ValueError, match=r"`delay_embedding.channel` 'W' is not a channel of the data"):
        embedding_for_fit(two, {"delays": [0, 3], "channel": "W"})
    out, spec = embedding_for_fit(two, {"delays": [0, 3], "channel": "I"})
    assert [str(c) for c in out["channel"].values] == ["I(t+0)", "I(t+3)"] and spec["channel"] == "I"


@pytest.mark.parametrize("settings, match", [
    ({"test_fraction": 0.2}, r"holds out the end of a data file, but the dataset 'lorenz63' is a shipped set"),
    ({"read": {"key": "x"}}, r"passes options to a data file's reader, but the dataset 'lorenz63'"),
])
def test_file_settings_on_a_shipped_set_are_refused(settings, match):
    with pytest.raises(ValueError, match=match):
        resolve_config("lorenz63", "shplrnn", overrides=settings)
    with pytest.raises(ValueError, match=r"apply only to a grid's data files"):
        benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], None, 1, overrides=settings)


@pytest.mark.parametrize("settings, match", [
    ({"test_fraction": 1.0}, r"must be a share in \(0, 1\) of every trial's samples; got test_fraction=1.0"),
    ({"test_fraction": True}, r"must be a share in \(0, 1\)"),
    ({"test_fraction": 0.2, "test_data": "b.nc"}, r"both name the test data; give one of them"),
    ({"test_data": "lorenz"}, r"`test_data` 'lorenz' is neither a shipped set"),
    ({"read": "key=x"}, r"`read` \(--read KEY=VALUE\) must be a table"),
])
def test_test_settings_are_checked_before_any_fit(settings, match):
    with pytest.raises(ValueError, match=match):
        resolve_config("rec.npz", "shplrnn", overrides=settings)


def test_a_fraction_leaving_too_little_is_a_failed_point_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _two_array_file("short.npz", n=8)
    cfg = cfgmod.held_out_by_default(resolve_config("short.npz", "shplrnn", "bptt", overrides={
        "read": {"key": "x"}, "test_fraction": 0.1, "fit_options": {"n_epochs": 1}}))
    rec = runner.run_point(cfg, tmp_path / "out", keep_model=False)
    assert rec["status"] == "failed" and "`test_fraction`=0.1 leaves fewer than 2 time steps" in rec["error"]


# ---------------------------------------------------------------------------------------------
# the free run's period beside the data's
# ---------------------------------------------------------------------------------------------


def _sines(periods_in_samples, n=2000, dt=0.5, amplitudes=None):
    """(1, n, K) sines, one channel per period, on a grid where every period fits a whole number of times."""
    t = np.arange(n)
    amplitudes = amplitudes or [1.0] * len(periods_in_samples)
    x = np.stack([a * np.sin(2 * np.pi * t / p) for p, a in zip(periods_in_samples, amplitudes)], axis=-1)
    from dsident.data import as_dataset

    return as_dataset(x[None], dt=dt, channel_names=[f"c{k}" for k in range(len(periods_in_samples))])


def test_run_periods_compares_the_same_channel_in_time_units():
    from dsident.experiments.scoring import run_periods

    # data: channel c1 varies most (amplitude 2); the run has c1 25 % slower (50 vs 40 samples)
    test = _sines([25, 40], amplitudes=[1.0, 2.0])
    run = _sines([40, 50], amplitudes=[3.0, 0.1])         # the run's own most variable channel is c0
    out = run_periods(test, run)
    assert out["channel"] == "c1"
    assert out["data"] == pytest.approx(40 * 0.5) and out["generated"] == pytest.approx(50 * 0.5)
    assert out["ratio"] == pytest.approx(1.25)
    # a slow channel the scores leave out is not the one compared, however large it is
    test.attrs["auxiliary_channels"] = json.dumps(["c1"])
    assert run_periods(test, run)["channel"] == "c0"
    # a run standing still has no period; flat data give nothing to compare
    still = run.copy(deep=True)
    still["x"][:] = 1.0
    del test.attrs["auxiliary_channels"]
    flat = run_periods(test, still)
    assert math.isnan(flat["generated"]) and math.isnan(flat["ratio"]) and flat["data"] == pytest.approx(20.0)
    assert run_periods(still, run) is None


def test_run_periods_skip_a_broadband_channel_for_one_with_a_rhythm():
    from dsident import datasets
    from dsident.experiments.scoring import run_periods

    test = datasets.load("lorenz63", split="test").isel(time=slice(0, 10_000))
    out = run_periods(test, test)
    # x varies most but wanders between the lobes; z oscillates (≈ 0.76 time units)
    assert out["channel"] == "z" and 0.7 < out["data"] < 0.8 and out["ratio"] == pytest.approx(1.0)


def test_a_swept_slow_channels_setting_is_labelled_as_the_sweep_file_gave_it():
    # a resolved `auto` carries the cutoff it chose; the row must stay "auto" so that a failed
    # point (unresolved) and the finished ones of the same setting share one row
    recs = [{"status": "done", "config": {"dataset": "v.csv", "model": "gnode", "seed": 0}},
            {"status": "done", "config": {"dataset": "v.csv", "model": "gnode", "seed": 0,
                                          "slow_channels": {"cutoff": 0.021, "chosen": "auto", "channel": "V"}}},
            {"status": "failed", "error": "ValueError: no bursts", "config": {
                "dataset": "v.csv", "model": "gnode", "seed": 1, "slow_channels": {"cutoff": "auto"}}},
            {"status": "done", "config": {"dataset": "v.csv", "model": "gnode", "seed": 0,
                                          "slow_channels": {"cutoff": 0.4, "channel": "V"}}}]
    ds = runner.records_to_dataset(recs, sweep_keys=["slow_channels"])
    assert list(ds["slow_channels"].values) == ["off", "auto", "auto", "0.4"]
    text = sweep.sweep_table(ds, ["slow_channels"])
    assert "| auto | 1/2 |" in text and "| off | 1/1 |" in text and "| 0.4 | 1/1 |" in text
    assert "- failed: {'slow_channels': 'auto'} seed 1: ValueError: no bursts" in text


def test_an_unknown_sweep_key_says_where_a_model_setting_or_a_step_goes():
    with pytest.raises(ValueError, match=r"unknown sweep key\(s\) \['dt', 'latent_dim'\].*\[model_params\] "
                                         r"\(latent_dim.*belongs to the data file"):
        sweep._read_sweep({"dataset": "lorenz63", "model": "shplrnn", "dt": 0.05, "latent_dim": 4,
                           "grid": {"seed": [0]}})


def _tiny_recording_point(tmp_path):
    """A 1 200-sample recording saved as rec.npz and the configuration of a one-epoch fit of it."""
    from dsident import datasets
    from dsident.experiments.config import resolve_config

    x = datasets.load("lorenz63", split="train")["x"].values[0, :1200]
    path = tmp_path / "rec.npz"
    np.savez(path, x=x, dt=0.01)
    tiny = {"eval_length": 200, "test_fraction": 0.25, "model_params": {"hidden_dim": 4},
            "fit_options": {"n_epochs": 1, "seq_len": 20}}
    return x, path, resolve_config(str(path), "shplrnn", "bptt", overrides=tiny)


def test_a_finished_point_whose_data_file_changed_is_run_again(tmp_path):
    """Points are skipped by their configuration; a file edited in place keeps its name, so the
    point records its files' digests and is refitted (with a warning) when they differ."""
    from dsident.experiments.data_files import data_digests
    from dsident.experiments.scoring import cached_floor

    x, path, cfg = _tiny_recording_point(tmp_path)
    out = tmp_path / "grid"
    first = runner.run_grid([cfg], out, progress=False)[0]
    assert first["status"] == "done" and first["data_files"] == data_digests(cfg)
    floor = cached_floor(cfg, out)
    assert runner.run_grid([cfg], out, progress=False)[0]["skipped"]             # unchanged: skipped
    np.savez(path, x=x[::-1].copy(), dt=0.01)                                    # the same name, other samples
    assert data_digests(cfg) != first["data_files"]
    with pytest.warns(UserWarning, match=r"1 finished point\(s\) read data file\(s\) .*rec.npz.* run again"):
        again = runner.run_grid([cfg], out, progress=False)[0]
    assert not again.get("skipped") and again["data_files"] == data_digests(cfg)
    assert len(list(out.glob("floor_rec_*.json"))) == 1                          # the old floor is not reused
    cached_floor(cfg, out)
    assert len(list(out.glob("floor_rec_*.json"))) == 2
    assert floor["D_stsp"] >= 0
    # a file not found now (moved, a relative path from elsewhere) leaves the finished point alone
    path.rename(tmp_path / "moved.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = runner.run_grid([cfg], out, progress=False)[0]
    assert kept["skipped"] and kept["status"] == "done" and kept["data_files"] == again["data_files"]


def test_a_dry_run_counts_a_point_whose_data_file_changed_as_unfinished(tmp_path):
    """`sweep --dry-run` and `benchmark --dry-run` count finished points with is_done; it must
    agree with run_grid, which runs a point again when a data file it read was edited."""
    x, path, cfg = _tiny_recording_point(tmp_path)
    out = tmp_path / "grid"
    assert not runner.is_done(cfg, out)
    runner.run_grid([cfg], out, progress=False)
    assert runner.is_done(cfg, out)
    np.savez(path, x=x[::-1].copy(), dt=0.01)                                    # the same name, other samples
    assert not runner.is_done(cfg, out)
