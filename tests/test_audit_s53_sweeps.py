"""Audit s53 (sweeps and grids): a sweep's `zscore`, and settings of the wrong kind refused by name."""
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

