"""Audit s53 (sweeps and grids): a sweep's `zscore`, settings of the wrong kind refused by name,
off-grid D_stsp counted in the tables, and the sweep table's rows in numeric order."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dsident.experiments import runner, sweep, tables
from dsident.experiments.config import resolve_config


def _offset_recording(path, n=1200, dt=0.01):
    """Two channels far from zero mean and unit spread (a voltage in mV, a current in pA)."""
    t = np.arange(n) * dt
    x = np.stack([-65.0 + 12.0 * np.sin(2.1 * t), 300.0 + 40.0 * np.cos(0.7 * t) * np.sin(1.3 * t)], axis=-1)
    np.savez(path, x=x, dt=dt)
    return x


TINY = {"model": "shplrnn", "method": "bptt", "eval_length": 200, "model_params": {"hidden_dim": 4},
        "fit_options": {"n_epochs": 1, "seq_len": 20}}


def test_a_sweep_zscores_each_point_with_its_training_split_as_fit_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = _offset_recording("rec.npz")
    spec = {"dataset": "rec.npz", **TINY, "zscore": True, "grid": {"seed": [0]}}
    (cfg,), _ = sweep.expand_grid({k: v for k, v in spec.items() if k != "grid"}, spec["grid"])
    assert cfg["zscore"] is True
    train, test, used = runner.point_data(cfg)
    n_test = int(np.floor(len(x) * cfg["test_fraction"]))
    raw_train, raw_test = x[: len(x) - n_test], x[len(x) - n_test:]
    mean, std = raw_train.mean(axis=0), raw_train.std(axis=0)          # numpy on the raw split
    np.testing.assert_allclose(used["zscore"]["mean"], mean)
    np.testing.assert_allclose(used["zscore"]["std"], std)
    np.testing.assert_allclose(train["x"].values[0], (raw_train - mean) / std)
    # the held-out end in the training split's units, not its own
    np.testing.assert_allclose(test["x"].values[0], ((raw_test - mean) / std)[:200])
    rec = runner.run_point(cfg, tmp_path / "out", keep_model=False)
    assert rec["status"] == "done", rec["error"]
    saved = json.loads((tmp_path / "out" / "points" / runner.point_id(cfg) / "config.json").read_text())
    np.testing.assert_allclose(saved["zscore"]["std"], std)
    # the saved configuration runs the same point again: the same constants, the same scores
    again = runner.run_point(saved, tmp_path / "again", keep_model=False)
    assert again["status"] == "done", again["error"]
    np.testing.assert_allclose([again["scores"][k] for k in ("D_H", "PE")], [rec["scores"][k] for k in ("D_H", "PE")])
    # `zscore = false` is the point without it; true is another point
    (plain,), _ = sweep.expand_grid({k: v for k, v in spec.items() if k not in ("grid", "zscore")}, spec["grid"])
    (off,), _ = sweep.expand_grid({**{k: v for k, v in spec.items() if k != "grid"}, "zscore": False}, spec["grid"])
    assert runner.point_id(off) == runner.point_id(plain) != runner.point_id(cfg)
    assert not np.allclose(runner.point_data(plain)[0]["x"].values[0], train["x"].values[0])


def test_a_sweep_can_grid_over_zscore_and_refuses_it_for_counts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _offset_recording("rec.npz")
    _, configs, swept = sweep._read_sweep({"dataset": "rec.npz", **TINY, "grid": {"zscore": [False, True]}})
    assert swept == ["zscore"] and ["zscore" in c for c in configs] == [False, True]
    with pytest.raises(ValueError, match=r"`zscore` must be true .* or false.*got zscore='yes'"):
        sweep._read_sweep({"dataset": "rec.npz", **TINY, "zscore": "yes", "grid": {"seed": [0]}})
    with pytest.raises(ValueError, match=r"observation='poisson' models the raw counts.*drop zscore"):
        resolve_config("lorenz63_spikes", "rplrnn", "laplace-em",
                       overrides={"zscore": True, "model_params": {"observation": "poisson"}})


BASE = {"dataset": "lorenz63", "model": "shplrnn", "method": "bptt"}


@pytest.mark.parametrize("spec, match", [
    # a list meant for [grid] at the top level: a TypeError from int() inside every point before
    ({**BASE, "seed": [0, 1], "grid": {"latent_dim": [3]}}, r"`seed` must be a whole number >= 0; got seed=\[0, 1\] "
                                                           r"\(to run several, put `seed = \[0, 1, 2\]` in .*\[grid\]"),
    # a fractional seed was seeded as int(0.5) = 0 under the name seed0.5; a string as int("0")
    ({**BASE, "grid": {"seed": [0.5]}}, r"`seed` must be a whole number >= 0; got seed=0.5"),
    ({**BASE, "grid": {"seed": ["0", "1"]}}, r"got seed='0'"),
    ({**BASE, "grid": {"seed": [True]}}, r"got seed=True"),
    ({**BASE, "model": ["shplrnn", "gnode"], "grid": {"seed": [0]}},        # was "unhashable type: 'list'"
     r"`model` must be one name.*got model=\['shplrnn', 'gnode'\] \(to run several, list them in .*\[grid\]"),
    ({**BASE, "method": ["bptt"], "grid": {"seed": [0]}}, r"`method` must be one name"),
    ({**BASE, "model_params": [4], "grid": {"seed": [0]}},                  # was a dict() TypeError
     r"`model_params` must be a table of named settings.*got model_params=\[4\]"),
    ({**BASE, "fit_options": "n_epochs=3", "grid": {"seed": [0]}}, r"`fit_options` must be a table.*'n_epochs=3'"),
    # the same setting twice: one value silently won and the table had two columns of one name
    ({**BASE, "grid": {"latent_dim": [3], "model_params.latent_dim": [4]}},
     r"grid entries \['latent_dim', 'model_params.latent_dim'\] share the name \['latent_dim'\]"),
    # a sweep file's executor settings, checked with the file (a dry run too), not in the pool's constructor
    ({**BASE, "n_workers": "2", "grid": {"seed": [0]}}, r"`n_workers` must be a whole number of processes >= 1; "
                                                        r"got n_workers='2'"),
    ({**BASE, "engine": "dusk", "grid": {"seed": [0]}}, r"`engine` must be one of \['process', 'dask'"),
])
def test_sweep_settings_of_the_wrong_kind_are_refused_by_name(spec, match):
    with pytest.raises(ValueError, match=match):
        sweep._read_sweep(spec)
    with pytest.raises(ValueError, match=match):
        sweep.plan_sweep(spec)


def test_an_empty_yaml_table_is_no_settings_and_make_executor_checks_its_worker_count(tmp_path):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, "grid": {"seed": [0]}}) + "model_params:\nfit_options:\n")
    _, (cfg,), _ = sweep._read_sweep(path)
    assert cfg["fit_options"] == resolve_config("lorenz63", "shplrnn", "bptt")["fit_options"]
    with pytest.raises(ValueError, match=r"`n_workers` must be a whole number of processes >= 1; got n_workers=2.0"):
        sweep.make_executor("process", n_workers=2.0)


def _record(latent_dim, seed, d_stsp, diverged=0.0, status="done"):
    return {"point_id": f"p{latent_dim}_{seed}", "status": status, "fit_time": 1.0,
            "error": None if status == "done" else "RuntimeError: boom",
            "config": {"dataset": "lorenz63", "model": "shplrnn", "method": "bptt", "seed": seed,
                       "model_params": {"latent_dim": latent_dim}},
            "scores": {"D_stsp": d_stsp, "D_H": 0.1, "PE": 0.2, "diverged": diverged}}


def _rows(text, first):
    return [line for line in text.splitlines() if line.startswith(f"| {first} |")]


def test_sweep_rows_count_off_grid_seeds_and_come_in_numeric_order():
    nan = float("nan")
    recs = [_record(16, 0, nan), _record(16, 1, nan),                        # both runs off the data's grid
            _record(8, 0, 0.5), _record(8, 1, nan), _record(8, 2, nan),       # one scored, two off grid
            _record(100, 0, 2.0), _record(100, 1, nan, diverged=1.0),         # a diverged run is not off grid
            _record(100, 2, nan, status="failed")]
    ds = runner.records_to_dataset(recs, sweep_keys=["latent_dim"])
    text = sweep.sweep_table(ds, ["latent_dim"])
    # numbers in numeric order, not as text ("100" < "16" < "8")
    order = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and
             line.split("|")[1].strip().isdigit()]
    assert order == ["8", "16", "100"]
    assert "| 8 | 3/3 | 0.5 (2/3 off grid) |" in text           # the median of the one scored seed, said so
    assert "| 16 | 2/2 | off grid |" in text                     # was "–", as if no seed had been scored
    row = _rows(text, 100)[0]
    assert "| 100 | 2/3 | 2 |" in row and "off grid" not in row and "| 0.50 |" in row     # diverged: its own column
    assert "off grid: no sample of that many seeds' free runs fell on the test data's grid" in text
    # the benchmark table says the same of its cells
    bench = tables.markdown_table(runner.records_to_dataset([_record(8, 0, 0.5), _record(8, 1, nan),
                                                             _record(8, 2, 1.5)]))
    assert "| shplrnn × bptt | 1 ± 0.5 (1/3 off grid) |" in bench and "off grid: no sample" in bench
    clean = tables.markdown_table(runner.records_to_dataset([_record(8, 0, 0.5), _record(8, 1, 1.5)]))
    assert "off grid" not in clean


def test_a_relative_data_path_beside_the_sweep_file_is_named_from_another_folder(tmp_path, monkeypatch):
    (tmp_path / "proj").mkdir()
    (tmp_path / "elsewhere").mkdir()
    _offset_recording(tmp_path / "proj" / "rec.npz")
    path = tmp_path / "proj" / "sweep.toml"
    path.write_text('dataset = "rec.npz"\nmodel = "shplrnn"\nmethod = "bptt"\n[grid]\nseed = [0]\n')
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match=r"`dataset` 'rec.npz' of the sweep file .* is not in the working directory "
                                         r".*elsewhere.*beside the file: run the sweep from .*proj"):
        sweep.plan_sweep(path)
    monkeypatch.chdir(tmp_path / "proj")        # from the file's folder the same file reads
    assert "1 point (1 combination)" in sweep.plan_sweep(path)


class _InlineExecutor:
    """``submit`` runs the point here and hands back a finished future (no pool to pickle for)."""

    def submit(self, fn, *args):
        from concurrent.futures import Future

        fut = Future()
        fut.set_result(fn(*args))
        return fut


def _guide_point(cfg, out_root):
    """A stand-in point whose D_stsp is its SVI guide's width (fit_options.hidden_dim) over 100."""
    return {"point_id": runner.point_id(cfg), "config": cfg, "status": "done", "error": None, "fit_time": 0.1,
            "scores": {"D_stsp": cfg["fit_options"]["hidden_dim"] / 100 + cfg["seed"] / 100, "D_H": 0.1,
                       "PE": 0.2, "diverged": 0.0}}


def test_a_swept_engine_option_is_read_from_fit_options_not_the_model_setting_of_its_name(tmp_path):
    # SVI's guide has a hidden_dim, and so has the gnODE: the grid sweeps the guide's
    spec = {"dataset": "lorenz63", "model": "gnode", "method": "svi", "model_params": {"hidden_dim": 100},
            "grid": {"fit_options.hidden_dim": [32, 64], "seed": [0, 1]}}
    ds, text = sweep.run_sweep(spec, out=tmp_path, executor=_InlineExecutor(), progress=False,
                               point_function=_guide_point)
    np.testing.assert_array_equal(ds["hidden_dim"].values, [32, 32, 64, 64])     # was 100 for every point
    assert "| 32 | 2/2 | 0.325 ± 0.005 |" in text and "| 64 | 2/2 | 0.645 ± 0.005 |" in text


def test_a_yaml_file_reads_1e_minus_3_as_the_number_a_toml_file_does(tmp_path):
    yaml = pytest.importorskip("yaml")
    from dsident.experiments.config import load_config_file

    (tmp_path / "s.toml").write_text('model = "shplrnn"\nlabel = "1e-3"\n[fit_options]\nlr = 1e-3\nlr_end = 5E+2\n'
                                     '[grid]\n"fit_options.alpha" = [1e-4, 2.5e-1]\n')
    (tmp_path / "s.yaml").write_text('model: shplrnn\nlabel: "1e-3"\nfit_options:\n  lr: 1e-3\n  lr_end: 5E+2\n'
                                     'grid:\n  fit_options.alpha: [1e-4, 2.5e-1]\n')
    toml, yml = load_config_file(tmp_path / "s.toml"), load_config_file(tmp_path / "s.yaml")
    assert yml == toml and yml["fit_options"]["lr"] == 0.001 and yml["grid"]["fit_options.alpha"] == [1e-4, 0.25]
    assert yml["label"] == "1e-3"                       # quoted text stays text
    assert yaml.safe_load("lr: 1e-3") == {"lr": "1e-3"}  # PyYAML's own loader is left as it is


def test_benchmark_seed_starts_the_seed_count_instead_of_being_dropped():
    from dsident.experiments import benchmark

    configs = benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], 2, overrides={"seed": 5})
    assert [c["seed"] for c in configs] == [5, 6]            # was [0, 1]: --seed 5 dropped without a word
    assert [c["seed"] for c in benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], 2)] == [0, 1]
    with pytest.raises(ValueError, match=r"`seed` \(--seed 5\) and a list of seeds \[1, 2\] both name the seeds"):
        benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], [1, 2], overrides={"seed": 5})
    with pytest.raises(ValueError, match=r"`seed` must be a whole number >= 0; got seed=-1"):
        benchmark.benchmark_configs(["lorenz63"], ["shplrnn"], ["bptt"], 2, overrides={"seed": -1})


def test_a_grid_mixing_words_and_numbers_lists_the_numbers_by_size():
    recs = []
    for i, alpha in enumerate(["adaptive", 10.0, 2.5, 0.25]):
        rec = _record(8, 0, 1.0)
        rec["point_id"], rec["config"]["fit_options"] = f"p{i}", {"alpha": alpha}
        recs.append(rec)
    ds = runner.records_to_dataset(recs, sweep_keys=["fit_options.alpha"])
    rows = [line.split("|")[1].strip() for line in sweep.sweep_table(ds, ["alpha"]).splitlines()[2:6]]
    assert rows == ["0.25", "2.5", "10.0", "adaptive"]          # as text: 0.25, 10.0, 2.5, adaptive


def test_a_scheduler_given_to_the_sweep_wins_over_the_files_engine(tmp_path):
    """`dsident sweep FILE --scheduler ADDRESS` implies --engine dask; a file saying engine = "process"
    made it fail with "a scheduler address ... is only used by engine 'dask'"."""
    distributed = pytest.importorskip("distributed")
    spec = {"dataset": "lorenz63", "model": "gnode", "method": "svi", "engine": "process",
            "grid": {"fit_options.hidden_dim": [32], "seed": [0, 1]}}
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=None) as cluster:
        ds, _ = sweep.run_sweep(spec, out=tmp_path, scheduler=cluster.scheduler_address, progress=False,
                                point_function=_guide_point)
    assert list(ds["status"].values) == ["done", "done"]


def test_a_zscored_grid_on_a_file_with_a_constant_channel_stops_before_any_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = _offset_recording("rec.npz")
    x[:, 1] = 5.0
    np.savez("flat.npz", x=x, dt=0.01)
    spec = {"dataset": "flat.npz", **TINY, "grid": {"seed": [0, 1]}}
    with pytest.raises(ValueError, match=r"data file 'flat.npz': channel\(s\) \['x1'\] are constant.*Nothing was fitted"):
        sweep.plan_sweep({**spec, "zscore": True})
    assert "2 points" in sweep.plan_sweep(spec)           # without zscore the file is fine


def test_a_grid_value_listed_twice_is_refused():
    # seed = [0, 0] made one point twice: two pool workers writing one folder, the row counting it twice
    with pytest.raises(ValueError, match=r"grid entry 'seed' lists 0 more than once; got \[0, 1, 0\]"):
        sweep.expand_grid(BASE, {"seed": [0, 1, 0]})
    configs, _ = sweep.expand_grid(BASE, {"seed": [0, 1], "latent_dim": [3, 4]})
    assert len({runner.point_id(c) for c in configs}) == 4
