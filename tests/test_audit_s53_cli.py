"""The command line as a first-time user meets it (session 53 audit): output folders, Ctrl-C,
a folder fitted into twice."""
from __future__ import annotations

import json

import pytest

from dsident.cli import main
from cli_tiny import TINY


def _no_fit(*args, **kwargs):
    raise AssertionError("the fit ran although its --out was refused")


@pytest.mark.parametrize("under", [False, True])
def test_fit_refuses_an_out_that_is_a_file_before_fitting(tmp_path, monkeypatch, capsys, under):
    # was: FileExistsError / NotADirectoryError with a traceback, after the whole fit
    monkeypatch.setattr("dsident.experiments.runner.fit_point", _no_fit)
    (tmp_path / "notes.txt").write_text("mine")
    out = tmp_path / "notes.txt" / "run" if under else tmp_path / "notes.txt"
    assert main(["fit", "lorenz63", *TINY, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "notes.txt" in err and "Traceback" not in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_fit_does_not_delete_a_users_model_folder(tmp_path, capsys):
    # was: `shutil.rmtree(out / "model")` after the fit, whatever that folder held
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mine.py").write_text("x = 1\n")
    assert main(["fit", "lorenz63", *TINY, "--out", str(tmp_path)]) == 2
    assert "holds a `model` entry that is not a model saved by dsident" in capsys.readouterr().err
    assert (tmp_path / "model" / "mine.py").read_text() == "x = 1\n"


@pytest.mark.parametrize("verb", ["evaluate", "generate", "analyze", "inspect"])
def test_other_commands_refuse_an_out_that_is_a_file(fitted, tmp_path, capsys, verb):
    (tmp_path / "taken").write_text("mine")
    argv = {"evaluate": ["evaluate", str(fitted), "lorenz63", "--eval-length", "300"],
            "generate": ["generate", str(fitted), "--steps", "50"],
            "analyze": ["analyze", str(fitted), "--steps", "50", "--transient", "10"],
            "inspect": ["inspect", "lorenz63"]}[verb]
    assert main([*argv, "--no-progress", "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dsident: error: --out") and "is an existing file" in err
    assert (tmp_path / "taken").read_text() == "mine"


def test_ctrl_c_during_a_fit_is_one_line_with_status_130_and_leaves_no_model(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("dsident.experiments.runner.fit_point", interrupted)
    out = tmp_path / "run"
    assert main(["fit", "lorenz63", *TINY, "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dsident fit: interrupted") and not any("Traceback" in line for line in err)
    assert not (out / "model").exists() and not (out / "config.json").exists()
    with pytest.raises(KeyboardInterrupt):          # --debug keeps the traceback
        main(["--debug", "fit", "lorenz63", *TINY, "--out", str(out)])


def test_a_refit_into_the_same_folder_leaves_none_of_the_earlier_fits_files(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["fit", "lorenz63", *TINY, "--starts", "2", "--out", str(out)]) == 0
    assert (out / "starts.nc").is_file()
    assert main(["generate", str(out), "--steps", "50", "--no-progress"]) == 0
    first = json.loads((out / "config.json").read_text())
    with pytest.warns(UserWarning, match="were written from the model this fit replaces"):
        assert main(["fit", "lorenz63", *TINY, "--seed", "1", "--out", str(out)]) == 0
    # said before the work: `fit DATA --method svi` after `--method bptt` goes to the same default --out
    assert "holds an earlier fit: this one replaces it" in capsys.readouterr().err
    # the starts table of the first model is not this one's (this fit scored no starts)
    assert not (out / "starts.nc").exists()
    assert "starts" not in (out / "fit.md").read_text()
    cfg = json.loads((out / "config.json").read_text())
    assert (first["seed"], cfg["seed"]) == (0, 1)
    assert not list(out.glob("model.partial*")) and not list(out.glob(".model*"))
    assert main(["evaluate", str(out), "lorenz63", "--eval-length", "300", "--no-progress"]) == 0


@pytest.mark.parametrize("text, said", [
    ('noise = "false"\n', "--noise is a switch: write true or false"),      # was: the string, a true value
    ("steps = 50.7\n", "--steps takes a whole number"),                       # was: 50 steps without a word
    ('threads = "two"\n', "--threads takes a whole number"),                  # was: int()'s "invalid literal"
    ('observations = "Mean"\n', "--observations takes one of auto, mean, draws"),
])
def test_config_values_are_read_as_their_flags_read_them(fitted, tmp_path, capsys, text, said):
    (tmp_path / "gen.toml").write_text(text)
    out = tmp_path / "gen"
    assert main(["generate", str(fitted), "--config", str(tmp_path / "gen.toml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert said in err and "gen.toml" in err
    assert not (out / "generated.nc").exists()


def test_config_values_in_flag_spelling_are_taken(fitted, tmp_path):
    # a quoted number and an upper-case model name read as `--steps 60`, `--model shplrnn` would
    (tmp_path / "gen.toml").write_text('steps = "60"\nnoise = false\n')
    out = tmp_path / "gen"
    assert main(["generate", str(fitted), "--config", str(tmp_path / "gen.toml"), "--no-progress",
                 "--out", str(out)]) == 0
    assert "60 steps" in (out / "generated.md").read_text()
    assert "deterministic" in (out / "generated.md").read_text()


def test_every_option_of_every_command_is_explained_in_its_help():
    # was: `evaluate --seed` and `generate --seed` listed bare, `fit --out` without its default
    import argparse

    from dsident.cli import build_parser

    parser = build_parser(["--help"])
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"fit", "evaluate", "generate", "analyze", "inspect", "benchmark", "sweep"} <= set(verbs)
    bare = [f"{verb} {'/'.join(a.option_strings) or a.dest}" for verb, sub in verbs.items() for a in sub._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not (a.help or "").strip()]
    assert bare == []
    helps = {verb: {a.dest: a.help for a in sub._actions} for verb, sub in verbs.items()}
    assert "default" in helps["fit"]["out"] and "default: the fit's" in helps["evaluate"]["seed"]


def test_a_fits_config_json_given_to_config_says_what_it_is(fitted, tmp_path):
    # was: "unknown key(s) ['data_units', 'dataset', ..., 'machine', 'user_keys']", as for a misspelt key
    with pytest.raises(SystemExit, match=r"is the record a run wrote .* not a --config file.* --init MODEL_DIR"):
        main(["fit", "lorenz63", "--config", str(fitted / "config.json"), "--out", str(tmp_path / "again")])
    assert not (tmp_path / "again").exists()


def test_evaluate_says_which_length_was_the_fits(fitted, capsys):
    # --pe-steps 400 alone: the eval_length that leaves no room is the fit's 300, not one the user typed
    assert main(["evaluate", str(fitted), "lorenz63", "--pe-steps", "400", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "PE(400)" in err and "--eval-length 300 is the fit's (its config.json)" in err
    assert "--pe-steps 400 is the fit's" not in err


def test_datasets_make_refuses_a_folder_that_is_a_file_before_simulating(tmp_path, monkeypatch, capsys):
    import dsident.datasets

    monkeypatch.setattr(dsident.datasets, "make", lambda *a, **k: pytest.fail("simulated into a file"))
    (tmp_path / "taken").write_text("mine")
    assert main(["datasets", "make", "lorenz63", "--folder", str(tmp_path / "taken")]) == 2
    assert "--folder" in capsys.readouterr().err and (tmp_path / "taken").read_text() == "mine"


def test_outputs_of_a_fit_given_by_its_model_folder_go_beside_the_model_not_into_it(fitted, tmp_path):
    # `dsident generate RUN/model` (load_fitted takes either) wrote RUN/model/generated: into the
    # model's save, which the next fit into RUN replaces whole, results and all
    import shutil

    run = tmp_path / "run"
    shutil.copytree(fitted, run)
    assert main(["generate", str(run / "model"), "--steps", "30", "--no-progress"]) == 0
    assert (run / "generated" / "generated.nc").is_file()
    assert sorted(p.name for p in (run / "model").iterdir()) == sorted(p.name for p in (fitted / "model").iterdir())


def test_python_dash_m_dsident_runs_the_command():
    # was: "No module named dsident.__main__; 'dsident' is a package and cannot be directly executed"
    import subprocess
    import sys

    from dsident import __version__

    done = subprocess.run([sys.executable, "-m", "dsident", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"dsident {__version__}"
    done = subprocess.run([sys.executable, "-m", "dsident", "fitt"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'fitt'" in done.stderr


def test_an_evaluation_without_starts_removes_an_earlier_ones_starts_table(fitted, tmp_path):
    # was: the starts.nc of `evaluate RUN DATA --starts 3` stood beside the metrics of a later
    # `evaluate RUN OTHER` into the same folder, as if scored on OTHER
    out = tmp_path / "ev"
    base = ["evaluate", str(fitted), "lorenz63", "--eval-length", "300", "--no-progress", "--out", str(out)]
    assert main([*base, "--starts", "3"]) == 0
    assert (out / "starts.nc").is_file()
    assert main(base) == 0
    assert not (out / "starts.nc").exists() and (out / "metrics.nc").is_file()
