"""The `dsident` command: --version, datasets list/show/make, the verb registry."""
import subprocess
import sys

import pytest

import dsident
from dsident import cli


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"dsident {dsident.__version__}"


def test_datasets_list_names_every_set(capsys):
    assert cli.main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("lorenz63", "bursting_neuron", "ecg", "lorenz63_spikes"):
        assert name in out
    assert "train/test/short" in out


def test_datasets_show_prints_the_card(capsys):
    assert cli.main(["datasets", "show", "lorenz63"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# lorenz63") and "DOP853" in out and "zscore: mean" in out


def test_datasets_show_unknown_name_is_a_clean_error(capsys):
    assert cli.main(["datasets", "show", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsident: error: unknown dataset 'nope'") and "lorenz63" in err


def test_debug_flag_lets_the_error_propagate_with_its_traceback(capsys):
    # one line for a user, the exception itself for a bug report
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        cli.main(["--debug", "datasets", "show", "nope"])
    assert capsys.readouterr().err == ""


def test_datasets_make_writes_into_the_given_folder(tmp_path, monkeypatch, capsys):
    import dataclasses

    from dsident.data import benchmarks

    spec = benchmarks.DATASETS["lorenz63_spikes"]
    monkeypatch.setitem(benchmarks.DATASETS, "lorenz63_spikes",
                        dataclasses.replace(spec, settings={"n_train": 100, "n_test": 100}))
    assert cli.main(["datasets", "make", "lorenz63_spikes", "--folder", str(tmp_path)]) == 0
    assert "lorenz63_spikes: wrote" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lorenz63_spikes_test.nc", "lorenz63_spikes_train.nc"]


def test_datasets_without_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["datasets"])
    assert exit_info.value.code == 2


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "datasets" in capsys.readouterr().out


def test_verb_registry_discovers_cli_modules_and_builtin_datasets():
    verbs = cli.discover_verbs()
    assert verbs["datasets"] == "dsident.cli:register_datasets"
    assert all(entry.count(":") == 1 for entry in verbs.values())


def test_console_entry_runs_as_a_process():
    done = subprocess.run([sys.executable, "-m", "dsident.cli", "datasets", "list"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "lorenz63" in done.stdout
