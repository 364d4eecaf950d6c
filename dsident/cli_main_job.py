"""The main-job verbs of the ``dsident`` command: fit, evaluate, generate, benchmark, sweep.

Each verb maps its options onto public functions (:mod:`dsident.experiments`,
:mod:`dsident.plotting`) and writes NetCDF + Markdown + PNG into its output folder::

    dsident fit DATA --model shplrnn --method teacher-forcing [--latent-dim 3] --out DIR
    dsident evaluate MODEL_DIR TEST_DATA [--out DIR]
    dsident generate MODEL_DIR --steps N [--out DIR]
    dsident benchmark [--datasets ...] [--models ...] [--seeds N] [--quick] [--out DIR] [--engine ...]
    dsident sweep CONFIG [--engine process|dask|slurm] [--scheduler ADDRESS] [--slurm-option K=V] [--out DIR]

``--config FILE`` (TOML, or YAML with PyYAML) gives any flag's value; a flag on the command
line wins over the file. File keys are the flag names (``latent-dim`` or ``latent_dim``) plus
the tables ``[model_params]`` and ``[fit_options]`` for anything without a flag.

:func:`register` adds the verbs to the ``dsident`` parser (``dsident/cli.py``); :func:`main`
runs them stand-alone (``python -m dsident.cli_main_job benchmark --quick``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

#: flag dest -> run-configuration key (config files may use either spelling)
_FLAG_TO_KEY = {"latent_dim": ("model_params", "latent_dim"), "seed": ("seed",),
                "train_length": ("train_length",), "eval_length": ("eval_length",), "pe_steps": ("pe_steps",),
                "starts": ("test_starts",)}


# ---------------------------------------------------------------------------------------------
# shared option handling
# ---------------------------------------------------------------------------------------------

def _parse_value(text: str) -> Any:
    """'3' -> 3, '0.1' -> 0.1, 'true' -> True, '[1,2]' -> [1, 2], else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        low = text.lower()
        return {"true": True, "false": False, "none": None}.get(low, text)


def _key_values(items: Sequence[str] | None, flag: str) -> dict[str, Any]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"dsident: {flag} expects KEY=VALUE; got {item!r}.")
        key, _, value = item.partition("=")
        out[key.strip().replace("-", "_")] = _parse_value(value.strip())
    return out


#: config-file keys every command reads besides its flags (``--no-progress``, ``--threads``)
_COMMON_FILE_KEYS = ("progress", "threads")
#: config-file keys of the commands that take the run options (``fit``, ``benchmark``)
_RUN_FILE_KEYS = ("model_params", "fit_options", "slow_channels", "slow_cutoff", "test_starts", "delay_embedding",
                  "delay_embed", *_FLAG_TO_KEY)


def _settings(args: argparse.Namespace, names: Sequence[str], file_keys: Sequence[str] = ()) -> dict[str, Any]:
    """Merge ``--config FILE`` and the explicit flags ``names`` (flags win); None = not given.

    The file may hold ``names``, :data:`_COMMON_FILE_KEYS` and ``file_keys`` (what only a file
    gives, e.g. ``fit``'s ``data``); any other key is refused, since a misspelt one would
    otherwise be dropped without a word.
    """
    from .experiments.config import load_config_file

    merged: dict[str, Any] = {}
    if getattr(args, "config", None):
        try:
            from_file = load_config_file(args.config)
        except ValueError as err:
            raise SystemExit(f"dsident: {err}") from err
        accepted = sorted(set(names) | set(_COMMON_FILE_KEYS) | set(file_keys))
        unknown = sorted(set(from_file) - set(accepted))
        if unknown and "dsident_version" in unknown:
            raise SystemExit(f"dsident {getattr(args, 'command', '')}: {args.config!r} is the record a run wrote "
                             f"(its resolved settings, version and machine: {unknown}), not a --config file. To go "
                             "on from that model use `dsident fit --init MODEL_DIR`; to fit afresh with its settings, "
                             "copy the keys this command accepts into a .toml file: "
                             f"{sorted(set(from_file) - set(unknown))}.")
        if unknown:
            raise SystemExit(f"dsident {getattr(args, 'command', '')}: the config file {args.config!r} has the unknown key(s) "
                             f"{unknown}; this command accepts {accepted}.")
        merged.update({key: _file_value(args, key, value) for key, value in from_file.items()})
    for name in names:
        value = getattr(args, name, None)
        if value is not None and name != "read":
            merged[name] = value
    if "read" in names:     # a file's `read` table, then --read KEY=VALUE on top
        read = {**(merged.get("read") or {}), **_key_values(getattr(args, "read", None), "--read")}
        merged.pop("read", None)
        if read:
            merged["read"] = read
    merged["model_params"] = {**merged.get("model_params", {}), **_key_values(getattr(args, "param", None), "--param")}
    merged["fit_options"] = {**merged.get("fit_options", {}), **_key_values(getattr(args, "option", None), "--option")}
    return merged


def _file_value(args: argparse.Namespace, key: str, value: Any) -> Any:
    """A ``--config`` value read as its flag reads its text: a whole number for an ``int`` flag (a
    string "3" or a float 3.0 too, not 2.5), ``true`` / ``false`` for a switch (not the string
    "false", which is a true value), one of the flag's choices; anything else is refused with
    the key, the flag and the value. Keys without a flag of their own pass unchanged."""
    parser = getattr(args, "_parser", None)
    action = next((a for a in getattr(parser, "_actions", ()) if a.dest == key and a.option_strings), None)
    if action is None or key in ("read", "param", "option", "slurm_option"):
        return value
    flag = max(action.option_strings, key=len)
    where = f"the config file {str(getattr(args, 'config', ''))!r}"
    if action.nargs == 0:               # a switch: --zscore, --no-progress, --quick
        if not isinstance(value, bool):
            raise ValueError(f"{where} gives {key} = {value!r}, but {flag} is a switch: write true or false "
                             "(unquoted).")
        return value
    if isinstance(value, list) and action.nargs not in (None, "?"):
        return [_file_scalar(action, flag, key, v, where) for v in value]
    return _file_scalar(action, flag, key, value, where)


def _file_scalar(action: argparse.Action, flag: str, key: str, value: Any, where: str) -> Any:
    kind = action.type
    takes = (f"one of {', '.join(map(str, action.choices))}" if action.choices else
             {int: "a whole number", float: "a number"}.get(kind, "a value as on the command line"))
    wrong = ValueError(f"{where} gives {key} = {value!r}, but {flag} takes {takes}.")
    if isinstance(value, bool) and kind in (int, float):
        raise wrong
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise wrong from None
        if not isinstance(value, int):
            raise wrong
    elif kind is float:
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise wrong from None
        if not isinstance(value, (int, float)):
            raise wrong
    elif kind is not None and isinstance(value, str):
        try:
            value = kind(value)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            raise wrong from None
    if action.choices and value not in action.choices:
        raise wrong
    return value


def _run_overrides(settings: dict[str, Any]) -> dict[str, Any]:
    """The run-configuration part of merged settings (flags mapped to their keys)."""
    out: dict[str, Any] = {"model_params": dict(settings.get("model_params", {})),
                           "fit_options": dict(settings.get("fit_options", {}))}
    if settings.get("test_starts") is not None:     # a config file's own spelling of --starts
        out["test_starts"] = settings["test_starts"]
    for flag, path in _FLAG_TO_KEY.items():
        if settings.get(flag) is not None:
            if len(path) == 2:
                out[path[0]][path[1]] = settings[flag]
            else:
                out[path[0]] = settings[flag]
    if settings.get("slow_channels") is not None:
        out["slow_channels"] = dict(settings["slow_channels"]) if isinstance(settings["slow_channels"], dict) \
            else settings["slow_channels"]
    if settings.get("slow_cutoff") is not None:
        out["slow_channels"] = {**(out.get("slow_channels") or {}), "cutoff": settings["slow_cutoff"]}
    if settings.get("delay_embedding") is not None:     # a config file's table
        out["delay_embedding"] = settings["delay_embedding"]
    if settings.get("delay_embed") is not None:         # --delay-embed auto | 0,20,68
        out["delay_embedding"] = _parse_delays(settings["delay_embed"])
    return out


def _parse_delays(text: Any) -> Any:
    """``--delay-embed``: ``auto`` or comma-separated delays in samples (``0,20,68``)."""
    if not isinstance(text, str) or text.strip().lower() == "auto":
        return text.strip().lower() if isinstance(text, str) else text
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--delay-embed must be `auto` or comma-separated whole numbers of samples (0,20,68); "
                         f"got {text!r}.") from None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="TOML/YAML file giving any of these options")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                   help="hide progress bars")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads per fit (default 1: small recurrent models only lose time to "
                        "intra-op threads; run grid points in parallel with --workers instead)")
    p.set_defaults(_parser=p)     # a --config file's values are read as these flags read theirs


def _threads(args: argparse.Namespace) -> None:
    """Apply --threads (default 1) here and, through the environment, in worker processes."""
    import os

    from .experiments.runner import THREADS_ENV, apply_thread_limit

    n = getattr(args, "threads", None)
    if n is None and getattr(args, "config", None):
        from .experiments.config import load_config_file

        try:
            n = load_config_file(args.config).get("threads")
        except ValueError:
            n = None                   # _settings reports the unreadable file
        if n is not None:
            n = _file_value(args, "threads", n)
        # int() read 1.5 as 1 and true as 1 without a word, and "two" as a bare "invalid literal"
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise SystemExit(f"dsident: `threads` in the config file {str(args.config)!r} must be a whole number "
                             f"of torch threads >= 1; got threads={n!r}.")
    n = 1 if n is None else int(n)
    if n < 1:
        raise SystemExit(f"dsident: --threads must be >= 1; got {n}.")
    os.environ[THREADS_ENV] = str(n)
    apply_thread_limit(n)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--latent-dim", type=int, help="latent state size M (default per dataset and model; "
                   "docs/main_job.md's defaults table)")
    p.add_argument("--seed", type=int, help="random seed (default 0; with --init, the saved fit's own seed; "
                   "benchmark: the first of --seeds N)")
    p.add_argument("--train-length", type=int, help="fit on the first N training samples (default per dataset "
                   "and model, e.g. 50000 for a shipped set; a data file of yours: all of it)")
    p.add_argument("--eval-length", type=int, help="evaluate on N test samples (SPEC-metrics §4; default 10000, "
                   "or all the test data if shorter)")
    p.add_argument("--pe-steps", type=int, help="n of the n-step prediction error (default 20)")
    p.add_argument("--starts", type=int, metavar="K",
                   help="also score each model from K starts spread over the whole test split, each on a window "
                        "of the evaluation length (K >= 2; run key test_starts): a steadier number than the first "
                        "stretch alone; over a finished benchmark it scores the saved models, refitting nothing")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="any model hyperparameter")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="any inference-engine option")
    p.add_argument("--delay-embed", metavar="auto|D0,D1,...",
                   help="fit a one-channel recording delay-embedded: `auto` (the delay at the first minimum of the "
                        "average mutual information, the dimension by false nearest neighbours, chosen on the "
                        "training data) or delays in samples (0,20,68); the test data get the same delays; a "
                        "`delay_embedding` table in --config names the channel of a several-channel file")
    p.add_argument("--slow-channels", type=_slow_cutoff, metavar="HZ|auto", dest="slow_cutoff",
                   help="add channel 0's band below HZ and its quadrature as two observed, unscored channels "
                        "(the ECG's breathing: 0.4); HZ is in cycles per unit of the data's time (Hz for times "
                        "in s, 0.0004 for 0.4 Hz in ms: `dsident inspect` names the unit); `auto`: twice the "
                        "burst frequency of a bursting voltage, read from its spikes in the training data; a "
                        "`slow_channels` table in --config sets the channel too")


def _slow_cutoff(text: str) -> float | str:
    """``--slow-channels``'s value: a positive frequency or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive frequency (cycles per time unit) or `auto`; "
                                         f"got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive frequency (cycles per time unit) or `auto`; "
                                         f"got {text!r}")
    return value


def _say(text: str) -> None:
    print(text, file=sys.stderr if text.startswith("[") else sys.stdout, flush=True)


def _check_out(out: Any, flag: str = "--out") -> Path:
    """Refuse an output folder that cannot be one before any work: an existing file, or a path
    under a file (``mkdir`` would fail only after a fit of hours, with a traceback)."""
    import os

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {str(out)!r} is an existing file, not a folder; give a folder (it is created "
                         "if missing).")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent != out and not parent.is_dir():
        raise ValueError(f"{flag} {str(out)!r} lies under {str(parent)!r}, which is a file, not a folder; give a "
                         "folder.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {str(out)!r}: {str(parent)!r} is not writable; give a folder you can write to.")
    return out


# ---------------------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------------------

def cmd_fit(args: argparse.Namespace) -> int:
    """``dsident fit DATA``: fit one model, save it, score it and draw it."""
    _threads(args)
    from .experiments import registry
    from .experiments.config import COUNT_OBSERVATIONS, observation_name, resolve_config, save_config
    from .experiments.inputs import (channels_for_fit, cut, held_out_split, in_fit_units, is_path_like, load_data,
                                     load_test, zscore_for_fit, zscored_as_fit)
    from .experiments.machine import machine_info, machine_label
    from .experiments.runner import _write_netcdf, adapt_to_data, fit_point, without_dropped

    s = _settings(args, ["model", "method", "out", "dt", "test_data", "test_fraction", "progress", "zscore", "init",
                         "slow_cutoff", "read", "delay_embed", *_FLAG_TO_KEY], file_keys=("data", *_RUN_FILE_KEYS))
    data = args.data or s.get("data")
    if not data:
        raise SystemExit("dsident fit: give DATA (a shipped set name or a file) or `data` in --config.")
    start, start_cfg = _initial_model(s)
    model = registry.check_model_name(s.get("model") or (start_cfg or {}).get("model") or "shplrnn")
    out = _check_fit_out(Path(s.get("out") or f"dsident-results/fit-{Path(str(data)).stem}-{model}"))
    method = s.get("method") or (start_cfg or {}).get("method")     # --init goes on as it was fitted
    cfg = resolve_config(str(data), model, method, overrides={**_run_overrides(s), **(
        {"seed": s["seed"]} if s.get("seed") is not None else {})})
    if start_cfg is not None:
        given = sorted(cfg.get("user_keys", {}).get("model_params", ()))
        if given:
            raise ValueError(f"--init {s['init']!r} goes on with the saved model as it is; its hyperparameters "
                             f"cannot change, but {given} were given (--latent-dim / --param); drop them, or fit "
                             "afresh.")
        # the model is the saved one: its hyperparameters, not this dataset's defaults, describe it
        cfg["model_params"] = dict(start_cfg.get("model_params") or {})
        cfg["init"] = {"from": str(s["init"]), "model": start_cfg["model"], "method": start_cfg.get("method")}
        # the saved estimator draws the windows with its own seed unless --seed names another;
        # either way config.json records the seed the training used
        if s.get("seed") is not None:
            start.seed = int(s["seed"])
        cfg["seed"] = start.seed
    if s.get("dt") is not None:
        cfg["dt"] = float(s["dt"])
    if s.get("read"):
        cfg["read"] = dict(s["read"])     # the reader's options; config.json keeps them for evaluate
    read = cfg.get("read")
    progress = s.get("progress", True) is not False
    from .inference import get_engine

    get_engine(cfg["method"])       # an unknown --method is refused before the line announcing the fit
    _say(f"[dsident] fit {model} × {cfg['method']} on {data} → {out}")
    held_out = None
    if s.get("test_fraction") is not None:
        if s.get("test_data") or not is_path_like(str(data)):
            raise ValueError("--test-fraction holds out the end of a recording file; it cannot be combined with "
                             f"--test-data or a shipped set (which has its test split); got DATA={data!r}"
                             + (f", --test-data {s['test_data']!r}." if s.get("test_data") else "."))
        cfg["test_fraction"] = s["test_fraction"]
        train, held_out = held_out_split(cfg, argname="--test-fraction")
        recorded_before = train     # the held-out end continues this (slow channels filter across)
        uncut_length = int(train.sizes["time"])
        if cfg.get("train_length"):
            train = cut(train, int(cfg["train_length"]))
    else:
        train = load_data(data, split="train", length=cfg.get("train_length"), dt=cfg.get("dt"), read=read)
        uncut_length = None
    if train.sizes["channel"] > train.sizes["time"]:       # said before a fit that would fail or be meaningless
        from .data.summary import transposed_note

        warnings.warn(transposed_note(train.sizes["time"], train.sizes["channel"]), UserWarning, stacklevel=2)
    if observation_name(cfg) == "gaussian" and start_cfg is None:
        from .data.summary import counts_note

        note = counts_note(train)
        if note is not None:            # a continuous likelihood for spike counts fits, but models the wrong thing
            warnings.warn(note, UserWarning, stacklevel=2)
    if start_cfg is not None and start_cfg.get("zscore"):
        # a model fitted in z-units goes on in the same units: its constants, not new ones
        cfg["zscore"] = start_cfg["zscore"]
        train = zscored_as_fit(train, cfg)
    elif s.get("zscore"):
        observation = observation_name(cfg)
        if observation in COUNT_OBSERVATIONS:
            raise ValueError(f"--zscore standardises continuous signals, but observation={observation!r} models the "
                             "raw counts (non-negative integers) that z-scoring would destroy; drop --zscore.")
        if start_cfg is not None:
            raise ValueError(f"--zscore with --init {s['init']!r}: that model was fitted on unstandardised data, "
                             "so it cannot go on in z-units; drop --zscore, or fit afresh.")
        # the test data, `evaluate`, `analyze --start` and `generate` reuse these constants
        train, cfg["zscore"] = zscore_for_fit(train)
    if start_cfg is not None and cfg.get("delay_embedding") is not None and not start_cfg.get("delay_embedding"):
        raise ValueError(f"--delay-embed with --init {s['init']!r}: that model was fitted on the data's own channels, "
                         "so it cannot go on with embedded ones; drop --delay-embed, or fit afresh.")
    for key in ("delay_embedding", "slow_channels"):     # the same delays, the same channels and scale
        if start_cfg is not None and start_cfg.get(key):
            cfg[key] = start_cfg[key]
    # one channel delay-embedded (delays chosen on the training data, or given), then a slow band of
    # one channel and its quadrature as two more observed channels (not scored)
    burst_hint = _burst_hint(train, cfg, str(data))
    try:
        train, cfg = channels_for_fit(train, cfg)
    except ValueError as err:
        # "trial 0 has 1000 samples" read as the file's length when --train-length had cut it so
        if cfg.get("train_length") and cfg.get("slow_channels") is not None and "need at least" in str(err):
            whole = f" (the training part has {uncut_length} samples)" if uncut_length else ""
            raise ValueError(f"--slow-channels on the first {int(cfg['train_length'])} training samples "
                             f"(--train-length {int(cfg['train_length'])}): {err} Raise --train-length{whole}, or "
                             "lower the cutoff.") from err
        raise
    # the test data before the fit, so that one too short to score is refused before the work
    test_spec = s.get("test_data") or (None if is_path_like(str(data)) else data)
    test, test_line = None, None
    if held_out is not None:
        test_line = (f"- test: the last {s['test_fraction']:g} of every trial ({held_out.sizes['time']} samples "
                     "in the longest), never seen in training")
        test = in_fit_units(held_out, cfg, before=recorded_before)
        test = test if not cfg.get("eval_length") else cut(test, int(cfg["eval_length"]))
    elif test_spec is not None:
        test = load_test(test_spec, cfg, length=cfg.get("eval_length"), dt=cfg.get("dt"), read=read)
    if test is not None:
        _check_test_length(test, int(cfg.get("pe_steps", 20)),
                           f"--test-fraction {s['test_fraction']:g}" if held_out is not None else
                           f"the test data {test_spec!r}")
    from ._threads import usable_cores

    # settings the data decide (an identity readout's M), applied here so that config.json and
    # fit.md give the model that is fitted
    cfg = adapt_to_data(cfg, train)
    # one fit on this machine: a best_of cell trains its candidates on all the cores at once
    est, fit_time, dropped = fit_point(cfg, train, progress=progress, init=start, jobs=usable_cores())
    cfg = {**without_dropped(cfg, dropped), "dropped_defaults": dropped}   # config.json: what the fit ran with
    out.mkdir(parents=True, exist_ok=True)
    # an earlier fit's record goes first, so that a run stopped between the two never leaves
    # this model beside that fit's config.json (its z-score, its channels): evaluate would use them
    _remove_stale_fit_files(out)
    est.save(out / "model")         # atomic, and it replaces only an earlier dsident save
    machine = machine_info()                # the fit time is this machine's
    from .data.time_units import time_unit

    unit = time_unit(train)             # analyze's periods and exponents say it
    data_units = train.attrs.get("units")   # generate writes its runs in them
    save_config({**cfg, "fit_time": fit_time, "machine": machine, "data": str(data),
                 **({"time_unit": unit} if unit else {}),
                 **({"data_units": str(data_units)} if data_units else {})}, out / "config.json")
    fit_history = getattr(est, "history_", None)
    history = _history_dataset(fit_history)
    lines = [f"# dsident fit: {model} × {cfg['method']} on {data}", "",
             f"- fit time: {fit_time:.1f} s on {machine_label(machine)}",
             f"- training samples: {train.sizes['time']} × {train.sizes['trial']} trial(s)",
             f"- settings: `{json.dumps({k: cfg[k] for k in ('model_params', 'fit_options')}, default=str)}`"]
    lines += [f"- adapted to the data: {key} {change}" for key, change in (cfg.get("adapted") or {}).items()]
    lines += _embedding_line(cfg.get("delay_embedding"))
    lines += _slow_line(cfg.get("slow_channels"), unit) + burst_hint
    lines += _defaults_line(str(data), model, cfg, method_given=bool(s.get("method")) or start_cfg is not None)
    if cfg.get("zscore"):
        lines.append("- z-scored with the training data's constants (`zscore` in config.json; scores and "
                     "figures here are in z-units)")
    if history is not None:
        _write_netcdf(history, out / "history.nc")
    if isinstance(fit_history, dict):
        from .plotting_training import plot_training_history

        lines += _best_of_lines(fit_history) + _polish_lines(fit_history) + _trend_lines(fit_history)

        try:
            plot_training_history(fit_history, title=f"{model} × {cfg['method']} on {data}",
                                  save=out / "history.png")
        except ValueError as err:      # a history without a loss series: the fit itself is saved
            lines.append(f"- no history.png: {err}")
    if test_line:
        lines.append(test_line)
    if test is not None:
        lines += _evaluate_and_draw(est, test, out, cfg, label=f"{model} × {cfg['method']}", floor_of=test_spec)
        if cfg.get("test_starts"):        # the same protocol from K starts over the whole test data
            full = in_fit_units(held_out, cfg, before=recorded_before) if held_out is not None else \
                load_test(test_spec, cfg, dt=cfg.get("dt"), read=read)
            lines += _starts_table(est, full, int(cfg["test_starts"]), _starts_length(cfg, test),
                                   int(cfg.get("seed", 0)), out, progress=progress)
    else:
        from .observations.base import draws_observations

        # counts and classes as draws, as `dsident generate` writes and `evaluate` scores them
        gen = est.generate(min(int(train.sizes["time"]), 20_000), seed=int(cfg.get("seed", 0)),
                           **({"observation_noise": True} if draws_observations(est) else {}))
        _write_netcdf(gen, out / "generated.nc")
        from . import plotting

        plotting.plot_reconstruction(train, gen, title=f"{model} × {cfg['method']} (train data)",
                                     save=out / "reconstruction.png")
        lines.append("- no test split: figure compares a free run with the training data")
    (out / "fit.md").write_text("\n".join(lines) + "\n")
    _say("\n".join(lines))
    return 0


#: the files ``dsident fit`` writes beside ``model/`` (not every fit writes all of them)
_FIT_FILES = ("fit.md", "metrics.nc", "generated.nc", "history.nc", "history.png", "starts.nc", "reconstruction.png",
              "attractor.png", "pairs.png")
#: the default output folders of the commands that read a fit folder (they describe its model)
_FIT_SUBFOLDERS = ("evaluation", "generated", "analysis")


def _check_fit_out(out: Path) -> Path:
    """``fit --out``: a folder (see :func:`_check_out`) whose ``model`` entry, if any, is an
    earlier dsident save that the new model may replace, checked before the fit."""
    from .model import _is_saved_model

    _check_out(out)
    model = out / "model"
    if model.exists() and not (model.is_dir() and (_is_saved_model(model) or not any(model.iterdir()))):
        raise ValueError(f"--out {str(out)!r} holds a `model` entry that is not a model saved by dsident; fit writes "
                         "its model there, so give another --out (nothing was fitted).")
    if _is_saved_model(model):      # said before the fit: the default --out of one DATA and --model is one folder
        _say(f"[dsident] {str(out)!r} holds an earlier fit: this one replaces it (another --out keeps both)")
    return out


def _remove_stale_fit_files(out: Path) -> None:
    """Before a fit writes into ``out``: remove an earlier fit's files there (a ``starts.nc`` or
    ``pairs.png`` this fit does not write would otherwise stand beside its model as if its own),
    and warn of the folders ``evaluate`` / ``generate`` / ``analyze`` wrote from the earlier model.
    Nothing is removed from a folder that holds no earlier fit (no ``model`` save)."""
    from .model import _is_saved_model

    if not _is_saved_model(out / "model"):
        return
    for name in ("config.json", *_FIT_FILES):
        (out / name).unlink(missing_ok=True)
    old = [str(out / name) for name in _FIT_SUBFOLDERS if (out / name).is_dir()]
    if old:
        warnings.warn(f"{', '.join(old)} were written from the model this fit replaces in {str(out)!r}; they no "
                      "longer describe it (run evaluate / generate / analyze again, or remove them).",
                      UserWarning, stacklevel=2)


def _best_of_lines(history: dict[str, Any]) -> list[str]:
    """fit.md's account of ``best_of``: every candidate's training score and the one kept."""
    if "best_of" not in history:
        return []
    scores = ", ".join(f"seed {c['seed']}: {_training_score(c['best_state_space_divergence'])}"
                       for c in history["best_of"])
    processes = int(history.get("best_of_processes", 1))
    together = f", trained {processes} at a time" if processes > 1 else ""
    return [f"- best of {len(history['best_of'])} fits{together}, chosen by the training D_stsp of each kept free "
            f"run ({scores}): the model from seed {history['seed_used']} is kept"]


def _polish_lines(history: dict[str, Any]) -> list[str]:
    """fit.md's account of ``polish``: the training D_stsp before and after, and which state stands."""
    if "polish" not in history:
        return []
    rec = history["polish"]
    outcome = ("its state is kept" if rec["kept"] else "no better, so the fit's kept state stands")
    return [f"- polished ({json.dumps(rec['options'])}): training D_stsp {_training_score(rec['score_before'])} → "
            f"{_training_score(rec['score_after'])}, {outcome}"]


def _trend_lines(history: dict[str, Any]) -> list[str]:
    """fit.md's reading of the scored free runs: the kept epoch, and whether the fit was still improving."""
    from .inference.training_trend import training_trend

    trend = training_trend(history)
    return [] if trend is None else [f"- training: {trend['message']}"]


def _training_score(value: float | None) -> str:
    """A kept epoch's training D_stsp for fit.md; "–" when it has none (null in saved JSON) or it is not finite."""
    return "–" if value is None or not math.isfinite(value) else f"{value:.3g}"


def _history_dataset(history: Any):
    """The engine's history dict as an xarray Dataset (per-iteration series along ``iteration``)."""
    import numpy as np
    import xarray as xr

    if history is None:
        return None
    if isinstance(history, xr.Dataset):
        return history
    if not isinstance(history, dict):
        return None
    series, attrs = {}, {}
    for key, value in history.items():
        try:
            arr = np.asarray(value) if isinstance(value, (list, tuple, np.ndarray)) else None
        except ValueError:      # ragged (e.g. one list per annealing stage): kept as JSON in attrs
            arr = None
        if arr is not None and arr.ndim == 1 and arr.size > 0 and arr.dtype.kind in "fiub":
            series[str(key)] = arr.astype(float)
        else:
            attrs[str(key)] = json.dumps(value, default=str)
    longest = max((len(v) for v in series.values()), default=0)
    # series logged every iteration share one dim; sparser ones (e.g. periodic evaluations) get their own
    data = {k: ("iteration" if len(v) == longest else f"{k}_index", v) for k, v in series.items()}
    return xr.Dataset(data, attrs=attrs)


def _defaults_line(data: str, model: str, cfg: dict[str, Any], *, method_given: bool) -> list[str]:
    """Say where a data file's method and settings came from when the recording defaults chose them."""
    from .experiments.config import RECORDING, RECORDING_METHODS, data_key, recording_cell

    observation = (cfg.get("model_params") or {}).get("observation")
    if data_key(data, observation) != RECORDING:
        return []
    parts = []
    if not method_given and RECORDING_METHODS.get(model) == cfg["method"]:
        parts.append(f"the method ({cfg['method']}, `RECORDING_METHODS`)")
    if recording_cell(data, model, cfg["method"], observation) is not None:
        parts.append("the settings of its recording cell (`RECORDING_DEFAULTS`)")
    if not parts:
        return []
    return [f"- a recording's defaults gave {' and '.join(parts)}: what reconstructed the simulated recordings "
            "of docs/main_job.md \"Session 47\" and \"Session 48\"; `--method` / `--param` / `--option` choose "
            "otherwise"]



def _check_test_length(test: Any, pe_steps: int, what: str) -> None:
    """Refuse test data too short for PE(``pe_steps``), the score that needs the most samples."""
    n = int(test.sizes["time"])
    if n < pe_steps + 1:
        raise ValueError(f"{what} leaves {n} test sample(s), but PE({pe_steps}) needs at least {pe_steps + 1}; "
                         "hold out a longer stretch (a larger --test-fraction or longer --test-data) or lower "
                         "--pe-steps. Nothing was fitted.")


def _embedding_line(spec: Any) -> list[str]:
    """fit.md's line on the delay embedding the model was fitted on (none without one)."""
    from .experiments.inputs import EMBEDDING_FNN_THRESHOLD

    if not isinstance(spec, dict):
        return []
    how = (" (chosen on the training data: the delay at the first minimum of the average mutual information, "
           "the dimension where false nearest neighbours fall below "
           f"{100 * float(spec.get('fnn_threshold', EMBEDDING_FNN_THRESHOLD)):g} %)" if spec.get("chosen") == "auto"
           else "")
    return [f"- delay-embedded: channel {spec['channel']!r} at delays {spec['delays']} samples, "
            f"{len(spec['delays'])} dimensions{how}; the test data and `dsident evaluate` / `analyze --start` embed "
            "theirs the same way"]


def _slow_line(spec: Any, unit: str | None) -> list[str]:
    """fit.md's line on the slow channels the model was fitted with (none without them); ``unit``:
    the data's time unit (None: unnamed)."""
    if not isinstance(spec, dict):
        return []
    from .analysis.bursts import CUTOFF_PER_BURST

    how = (f" (`auto`: {CUTOFF_PER_BURST:g}× the burst frequency; the training data's bursts are "
           f"{spec['burst_period']:.4g} {unit or 'time units'} apart in the median)" if spec.get("chosen") == "auto"
           else "")
    return [f"- slow channels: channel {spec['channel']!r} below {spec['cutoff']:.4g} cycles per {unit or 'time unit'} "
            f"and its quadrature, observed and generated but not scored{how}"]


def _burst_hint(train: Any, cfg: dict[str, Any], data: str) -> list[str]:
    """fit.md's hint for a one-channel recording fitted without slow channels whose training data
    fire in bursts (:func:`dsident.analysis.bursts.find_bursts`): ``--slow-channels auto``."""
    from .analysis.bursts import SLOW_CHANNELS_EVIDENCE, bursts_described, find_bursts
    from .data.time_units import time_unit
    from .experiments.config import RECORDING, data_key

    if (cfg.get("slow_channels") is not None or data_key(data, (cfg.get("model_params") or {}).get("observation"))
            != RECORDING or train.sizes["channel"] != 1):
        return []
    series = train["x"].values[0, : int(train["length"].values[0]) if "length" in train else None, 0]
    bursts = find_bursts(series, float(train.attrs.get("dt", 1.0)))
    if bursts is None:
        return []
    said = bursts_described(bursts.n_bursts, bursts.spikes_per_burst, bursts.period, bursts.period_cv,
                            dt=float(train.attrs.get("dt", 1.0)), unit=time_unit(train) or "time units",
                            where="the first training trial")
    return [f"- the one channel fires in bursts ({said}), and what starts and ends them is not recorded: "
            f"`--slow-channels auto` hands the burst cycle to the model as two observed, unscored channels. "
            f"{SLOW_CHANNELS_EVIDENCE}"]


def _fit_floor(cfg: dict[str, Any], test_spec: Any, n_samples: int) -> tuple[dict[str, float] | None, str]:
    """The floor a fit's test scores compare with, at the ``n_samples`` they were scored on, and
    what it compares (:func:`~dsident.experiments.scoring.run_floor`); ``(None, why)`` when
    there is none (another test file for a shipped set, a file scored whole, a failure)."""
    from .experiments.inputs import is_path_like
    from .experiments.scoring import run_floor

    dataset = str(cfg["dataset"])
    if is_path_like(dataset) and cfg.get("test_fraction") is None and test_spec is None:
        return None, ""
    if not is_path_like(dataset) and test_spec is not None and str(test_spec) != dataset:
        return None, ""
    try:
        return run_floor({**cfg, "eval_length": n_samples,
                          **({"test_data": test_spec} if is_path_like(dataset) and test_spec is not None else {})})
    except Exception as err:      # the scores stand without it
        return None, f"no floor: {type(err).__name__}: {_as_flags(str(err), _FLOOR_FLAGS)}"


def _floor_lines(scores: dict[str, float], floor: dict[str, float] | None, what: str) -> tuple[list[str], list[str]]:
    """The floor's row for fit.md's score table and the line under it: the D_stsp's multiple of the
    floor and whether it is a reconstruction, or why the floor cannot tell."""
    from .experiments.tables import (RECONSTRUCTION_FLOOR_RATIO, RECONSTRUCTION_MAX_DH, floor_discriminates,
                                     floor_multiple)

    if floor is None:
        return [], ([f"- {what}"] if what else [])
    row = [f"| floor ({what}) | {_fmt4(floor['D_stsp'])} | {_fmt4(floor['D_H'])} | – | – |"]
    if not floor_discriminates(floor):
        return row, [f"- no multiple of the floor: on this test stretch a run at rest at the data's mean scores "
                     f"D_stsp {_fmt4(floor['D_stsp_at_rest'])}, within {RECONSTRUCTION_FLOOR_RATIO:g}× the floor, so "
                     "D_stsp cannot tell a reconstruction from a fixed point; hold out a longer stretch"]
    multiple = floor_multiple(scores["D_stsp"], scores["D_H"], floor["D_stsp"]).strip(" ()")
    if not multiple:
        return row, []
    verdict = ("a reconstruction" if multiple.endswith("✓") else "not a reconstruction")
    return row, [f"- D_stsp is {multiple.removesuffix(' ✓')} the floor: {verdict} (D_stsp ≤ "
                 f"{RECONSTRUCTION_FLOOR_RATIO:g}× the floor and D_H ≤ {RECONSTRUCTION_MAX_DH:g})"]


def _evaluate_and_draw(model: Any, test: Any, out: Path, cfg: dict[str, Any], *, label: str,
                       floor_of: Any = False) -> list[str]:
    """Score ``model`` on ``test``, then run it twice as far (:mod:`dsident.experiments.late_run`);
    write metrics.nc, generated.nc and the figures; return text lines. ``floor_of``: the test
    spec of a fit (None: the dataset's own test data) to quote the floor of (:func:`_fit_floor`);
    False for none."""
    from . import plotting
    from .experiments.late_run import late_run_record
    from .experiments.runner import _write_netcdf
    from .data.time_units import per_time
    from .experiments.scoring import evaluate_model, run_bursts, run_periods

    seed = int(cfg.get("seed", 0))
    t0 = time.perf_counter()
    scores, raw, gen = evaluate_model(model, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=seed,
                                      return_run=True)
    projections = raw.get("state_space_projections")
    periods = run_periods(test, gen)
    if periods is not None:
        raw.attrs.update({f"period_{k}": v for k, v in periods.items() if k != "ratio"})
    bursts = run_bursts(test, gen)
    if bursts is not None:
        raw.attrs.update({"bursts_channel": bursts["channel"]} | {
            f"bursts_{who}_{key}": getattr(bursts[who], key) if bursts[who] is not None else math.nan
            for who in ("data", "generated") for key in ("period", "spikes_per_burst")})
    _write_netcdf(raw, out / "metrics.nc")
    if cfg.get("zscore"):       # scored as fitted: a run near 0 is not one near 0 mV
        gen.attrs["units"] = ("z-units: the fit's z-score (config.json `zscore`; `dsident generate` writes "
                              "the data's units)")
    from .data.time_units import time_unit

    if time_unit(test):             # its time axis is the test data's, in their unit (as `generate` says)
        gen.attrs["provenance"] = json.dumps({"source": "dsident evaluate", "time_unit": time_unit(test)})
    _write_netcdf(gen, out / "generated.nc")
    shown = {k: v for k, v in scores.items() if k != "diverged"}
    plotting.plot_reconstruction(test, gen, scores=shown, title=label, save=out / "reconstruction.png")
    if test.sizes["channel"] >= 2:
        plotting.plot_attractor(test, gen, title=label, save=out / "attractor.png")
    if projections is not None:
        scored = {"channel": projections["channel"].values}     # the channels it scores, not the slow ones
        plotting.plot_attractor_pairs(test.sel(scored), gen.sel(scored), projections=projections,
                                      title=f"{label}: where the free run misses", save=out / "pairs.png")
    pe = int(cfg.get("pe_steps", 20))
    diverged = bool(scores["diverged"])
    lines = ["", f"| {label} | D_stsp | D_H | PE({pe}) | diverged |", "|---|---|---|---|---|",
             f"| test ({test.sizes['time']} samples) | {_fmt_divergence(scores['D_stsp'], diverged)} | " + " | ".join(
                 _fmt4(scores[k]) for k in ("D_H", "PE", "diverged")) + " |"]
    floor_row, floor_note = ([], []) if floor_of is False else \
        _floor_lines(scores, *_fit_floor(cfg, floor_of, int(test.sizes["time"])))
    lines += floor_row
    late = late_run_record(model, test, seed=seed)
    if late.get("regime"):
        late_diverged = late["regime"] == "diverged"
        lines += [f"| late stretch [1.25 T, 2.25 T) | {_fmt_divergence(late['D_stsp'], late_diverged)} "
                  f"| {_fmt4(late['D_H'])} | – | – |"]
    lines += _off_grid_note(scores["D_stsp"], diverged)
    lines += [""] + floor_note if floor_note else []
    if late.get("regime"):
        lines += ["",
                  f"- free run of {late['steps']} steps from the first test sample: **{late['regime']}**, "
                  f"λ_max = {_fmt4(late['lambda_max'])} {per_time(test)}"
                  + (f" (|λ| ≤ {_fmt4(late['zero_tol'])} counts as zero over this many steps)"
                     if math.isfinite(late.get("zero_tol", math.nan)) else "")
                  + "; a late D_stsp well above the scored one means the scored stretch was a transient"]
    elif late.get("reason"):
        lines += ["", f"- late free run not analysed: {late['reason']}"]
    lines += _period_line(periods, test, diverged)
    lines += _burst_line(bursts, test, diverged)
    if projections is not None:
        lines += _projections_table(projections)
    return lines + ["", f"(evaluation took {time.perf_counter() - t0:.1f} s)"]


def _period_line(periods: dict[str, Any] | None, test: Any, diverged: bool) -> list[str]:
    """Markdown: the free run's fundamental period beside the data's (:func:`run_periods`)."""
    from .data.time_units import time_unit

    if periods is None or diverged or not math.isfinite(periods["data"]):
        return []
    unit = time_unit(test) or "time units"
    run = (f"{_fmt4(periods['generated'])} {unit}" if math.isfinite(periods["generated"])
           else "no rhythm (it stands still, or its spectrum has no line)")
    line = (f"- period of {periods['channel']} (its fundamental): free run {run}, data {_fmt4(periods['data'])} {unit}"
            f" ({round(periods['data'] / float(test.attrs['dt']))} samples)")
    if math.isfinite(periods["ratio"]):
        line += f", {periods['ratio']:.2f}× the data's"
        if abs(math.log(periods["ratio"])) > math.log(1.1):
            line += (": the free run's rhythm is off by more than 10 %, which D_H, smoothed over 20 frequency "
                     "bins, may not show")
    return ["", line]


def _burst_line(bursts: dict[str, Any] | None, test: Any, diverged: bool) -> list[str]:
    """Markdown: the free run's bursts beside the data's (:func:`~dsident.experiments.scoring.run_bursts`)."""
    from .data.time_units import time_unit

    if bursts is None or diverged:
        return []
    unit = time_unit(test) or "time units"

    def said(b: Any) -> str:
        return (f"{b.n_bursts} bursts of {b.spikes_per_burst:g} spikes, {_fmt4(b.period)} {unit} apart "
                f"(CV {b.period_cv:.2f})")

    run = said(bursts["generated"]) if bursts["generated"] is not None else "no bursts"
    return ["", f"- bursts of {bursts['channel']} (medians; `dsident.analysis.find_bursts`): free run {run}; "
                f"data {said(bursts['data'])}"]


def _projections_table(projections: Any) -> list[str]:
    """Markdown: the D_stsp of each channel (diagonal) and pair, and the worst pair named."""
    import numpy as np

    from .metrics.projections import worst_pair

    names = [str(c) for c in projections["channel"].values]
    d = projections.values
    lines = ["", "Which variables the free run misses: the binned D_stsp of each channel alone (diagonal) and "
                 "of each pair (`dsident.metrics.state_space_projections`; 0 = the same distribution, in nats):", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for i, name in enumerate(names):
        lines.append(f"| {name} | " + " | ".join(_fmt_divergence(float(d[i, j])) if j >= i else ""
                                                 for j in range(len(names))) + " |")
    pair = worst_pair(d)
    if pair is not None:
        i, j = pair
        worst = int(np.nanargmax(np.diag(d)))
        lines += ["", f"- worst pair: ({names[i]}, {names[j]}) {_fmt4(float(d[i, j]))}; "
                      f"worst single channel: {names[worst]} {_fmt4(float(d[worst, worst]))}"]
    return lines


def _starts_length(cfg: dict[str, Any], test: Any) -> int | None:
    """The starts' window: the evaluation length, but no longer than the stretch the first score
    used (a held-out tail can be shorter); None (evaluate_starts' 10 000 or the whole data if
    shorter) when no evaluation length is set."""
    length = cfg.get("eval_length")
    return None if length is None else min(int(length), int(test.sizes["time"]))


def _starts_table(model: Any, data: Any, n_starts: int, length: int | None, seed: int, out: Path, *,
                  progress: bool) -> list[str]:
    """``evaluate --starts K``: the protocol from K starts spread over the whole test data
    (:func:`dsident.metrics.evaluate_starts`) on windows of ``length`` samples (the length the
    first stretch was scored on; None: 10 000 or the whole data if shorter), written to
    starts.nc; returns a Markdown table. A refusal of the starts becomes a line of the table's
    place instead of an error, so the scores and figures already computed are not lost."""
    from .experiments.runner import _write_netcdf
    from .metrics import evaluate_starts

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = evaluate_starts(model, data, n_starts=n_starts, length=length, seed=seed, progress=progress)
    except ValueError as err:
        _say(f"[dsident] scores from {n_starts} starts not computed: {_as_flags(str(err))}")
        return ["", f"- scores from {n_starts} starts not computed: {_as_flags(str(err))}"]
    for w in caught:        # evaluate_starts speaks of its Python arguments; here they are flags
        warnings.warn(_as_flags(str(w.message)), w.category, stacklevel=2)
    _write_netcdf(res, out / "starts.nc")
    n_run = res.sizes["start"]
    lines = ["", f"Free runs from {n_run} start{'s' if n_run != 1 else ''} spread over the test data "
                 f"({res.attrs['length']} samples each; `dsident.metrics.evaluate_starts`):", "",
             "| start (trial, sample) | D_stsp | D_H | coverage | settled |", "|---|---|---|---|---|"]
    for k in range(res.sizes["start"]):
        state = "diverged" if bool(res.diverged[k]) else ("at rest" if bool(res.at_rest[k]) else "moving")
        lines.append(f"| {int(res.trial[k])}, {int(res.start_index[k])} "
                     f"| {_fmt_divergence(float(res.state_space_divergence[k]), bool(res.diverged[k]))} "
                     f"| {_fmt4(float(res.power_spectrum_distance[k]))} | {_fmt4(float(res.state_space_coverage[k]))} "
                     f"| {state} |")
    lines += ["", f"- median D_stsp {_fmt4(res.attrs['median_D_stsp'])}, worst {_fmt4(res.attrs['max_D_stsp'])}; "
                  f"{res.attrs['fraction_at_rest']:.0%} of the runs at rest, {res.attrs['fraction_diverged']:.0%} diverged"]
    if res.attrs["n_overlapping"]:
        lines.append(f"- {res.attrs['n_overlapping']} of the windows overlap the one before them (more starts than the "
                     "test data hold side by side): they share samples, so the spread understates the data's own")
    return lines


#: evaluate_starts' argument names in its messages, and the flags of `dsident evaluate` that set them
_STARTS_FLAGS = (("`n_starts`", "--starts"), ("n_starts <=", "--starts <="), ("`length`", "--eval-length"),
                 ("a shorter length", "a shorter --eval-length"), ("`data`", "the test data"))


#: metrics.floor's advice, and what sets it on the command line
_FLOOR_FLAGS = (("Pass a shorter `length` or a second series as `other`.", "A shorter --eval-length gives one."),)


def _as_flags(text: str, pairs: Sequence[tuple[str, str]] = _STARTS_FLAGS) -> str:
    """A message of the Python API (:func:`dsident.metrics.evaluate_starts` by default) with its
    argument names turned into the flags that set them on the command line (``length`` is
    ``--eval-length``, ``data`` the test data)."""
    for name, flag in pairs:
        text = text.replace(name, flag)
    return text


def _fmt4(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.4g}"


def _fmt_divergence(value: float, diverged: bool = False) -> str:
    """A D_stsp cell: "diverged" for a free run that became non-finite or left the data's range,
    "off grid" for one none of whose samples falls on the test data's grid (the divergence is
    then undefined, SPEC-metrics §1), else four digits: the words the training progress bar
    uses (:func:`~dsident.inference.teacher_forcing.free_run_label`)."""
    from .inference.teacher_forcing import free_run_label

    label = free_run_label(math.inf if diverged else value)
    return label if isinstance(label, str) else f"{label:.4g}"


def _off_grid_note(d_stsp: float, diverged: bool) -> list[str]:
    """A line saying why a D_stsp is missing, or nothing when it is a number."""
    if diverged:
        return ["", "- the free run diverged (it became non-finite or left 1000 std of the data's range), so its "
                    "scores are undefined (SPEC-metrics §4); `reconstruction.png` shows where it went"]
    if not math.isfinite(d_stsp):
        return ["", "- D_stsp off grid: no sample of the free run falls on the test data's grid (each channel's range "
                    "± 0.1 std, SPEC-metrics §1), so the divergence is undefined; the run lives elsewhere in state "
                    "space (a fixed point or cycle away from the data, or data in large units fitted without "
                    "`--zscore`). `reconstruction.png` shows where it went"]
    return []


# ---------------------------------------------------------------------------------------------
# evaluate / generate
# ---------------------------------------------------------------------------------------------

def _initial_model(s: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """``--init MODEL_DIR``: the saved estimator and its configuration (None, None without it);
    refuses a ``--model`` that names another family."""
    if not s.get("init"):
        return None, None
    est, cfg = load_fitted(s["init"])
    if s.get("model") and s["model"] != cfg["model"]:
        raise ValueError(f"--init {s['init']!r} holds a {cfg['model']} model, but --model {s['model']} was given; "
                         f"drop --model, or give a {s['model']} fit to --init.")
    return est, cfg


def _fit_folder(model_dir: str | Path) -> Path:
    """The folder ``dsident fit`` wrote, given it or the ``model`` folder inside it (where the
    default output folders of evaluate / generate / analyze go: not into the model's save,
    which the next fit into that folder replaces whole)."""
    model_dir = Path(model_dir)
    if model_dir.name == "model" and (model_dir.parent / "config.json").is_file():
        return model_dir.parent         # the saved model's own folder: use the run around it
    return model_dir


def load_fitted(model_dir: str | Path) -> tuple[Any, dict[str, Any]]:
    """The estimator saved by ``dsident fit`` and its run configuration.

    ``model_dir`` is the folder given to ``dsident fit --out`` (or a benchmark point's folder), or
    the ``model`` folder inside it.
    """
    from .experiments.registry import get_estimator_class

    model_dir = _fit_folder(model_dir)
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise SystemExit(f"dsident: {str(model_dir)!r} is not a `dsident fit` output folder (no config.json).")
    cfg = json.loads(cfg_path.read_text())
    if "model" not in cfg or not (model_dir / "model").is_dir():
        raise SystemExit(f"dsident: {str(model_dir)!r} is not a `dsident fit` output folder (its config.json "
                         "names no model, or the `model` folder is missing); pass the folder given to --out.")
    cls = get_estimator_class(cfg["model"])
    return cls.load(model_dir / "model"), cfg


def fit_dt(given: Any, cfg: dict[str, Any], model_dir: Any) -> float | None:
    """The sampling step for plain array files given to a fitted model: ``--dt`` (``given``), else
    the fit's (``cfg["dt"]``). The model learned at the fit's step, so a ``--dt`` that disagrees
    with it (beyond 1 %, as :func:`dsident.as_dataset` allows against sample times) is refused
    rather than used: it would put the test data on a time axis the model never saw."""
    fitted = cfg.get("dt")
    if given is None or fitted is None:
        return fitted if given is None else float(given)
    from .data.container import steps_agree

    if not steps_agree(float(given), float(fitted)):
        raise ValueError(f"`dt`={float(given)!r} (--dt) disagrees with the step of the fit in {str(model_dir)!r}, "
                         f"dt={float(fitted)!r} (its config.json); give --dt {float(fitted):g}, or leave --dt out "
                         "to take the fit's.")
    return float(given)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``dsident evaluate MODEL_DIR TEST_DATA``."""
    _threads(args)
    from .experiments.inputs import load_data, load_test, read_options_for, run_test

    s = _settings(args, ["out", "dt", "eval_length", "pe_steps", "seed", "starts", "progress", "before", "read",
                         "whole_file"])
    if s.get("starts") is not None and (isinstance(s["starts"], bool) or not isinstance(s["starts"], int)
                                        or s["starts"] < 1):
        raise SystemExit(f"dsident: --starts must be a positive number of starts; got {s['starts']!r}.")
    from .experiments.config import check_run_lengths

    est, cfg = load_fitted(args.model_dir)
    cfg = {**cfg, **{k: s[k] for k in ("eval_length", "pe_steps", "seed") if s.get(k) is not None}}
    try:
        check_run_lengths({k: cfg.get(k) for k in ("eval_length", "pe_steps")})
    except ValueError as err:       # say which of the two came from the fit, not from this command line
        fits = [f"{flag} {cfg[key]} is the fit's (its config.json)" for key, flag in
                (("eval_length", "--eval-length"), ("pe_steps", "--pe-steps")) if s.get(key) is None and key in cfg]
        raise ValueError(_as_flags(str(err), (("give eval_length > pe_steps", "give --eval-length > --pe-steps"),))
                         + (f" ({'; '.join(fits)}.)" if fits else "")) from None
    dt = fit_dt(s.get("dt"), cfg, args.model_dir)
    out = _check_out(s.get("out") or _fit_folder(args.model_dir) / "evaluation")
    out.mkdir(parents=True, exist_ok=True)
    read = s.get("read") or read_options_for(cfg, args.test_data)
    # the file the model was fitted on, its end held out: score that end, as fit did
    held_out = (cfg.get("test_fraction") is not None and not s.get("whole_file")
                and _same_file(args.test_data, cfg.get("dataset")))
    if held_out and s.get("before"):
        raise ValueError(f"--before with {args.test_data!r}, the file this model was fitted on: its held-out end "
                         "is scored after its training part already; drop --before (or --whole-file to score it all).")
    before = load_data(s["before"], split="train", dt=dt, read=read) if s.get("before") else None
    channels = getattr(est, "channel_names_", None) or None
    if held_out:
        test = run_test(cfg, length=cfg.get("eval_length"))
    else:
        test = load_test(args.test_data, cfg, length=cfg.get("eval_length"), dt=dt, before=before,
                         channels=channels, read=read)
    _check_test_step(test, est, cfg, args.test_data, args.model_dir)
    _say(f"[dsident] evaluate {args.model_dir} on {args.test_data} ({test.sizes['time']} samples) → {out}")
    if (out / "metrics.md").is_file():     # an earlier evaluation here: its files this one may not write
        for name in ("starts.nc", "attractor.png", "pairs.png"):
            (out / name).unlink(missing_ok=True)
    lines = [f"# dsident evaluate: {cfg['model']} × {cfg['method']} on {args.test_data}"]
    if held_out:
        lines += ["", f"- test: the last {cfg['test_fraction']:g} of every trial of the file this model was fitted "
                      "on, never seen in training, as `dsident fit` scored it (--whole-file scores all of it, its "
                      "training part included)"]
    lines += _evaluate_and_draw(est, test, out, cfg, label=f"{cfg['model']} × {cfg['method']}",
                                floor_of=None if held_out else False)
    if s.get("starts") is not None:
        full = run_test(cfg) if held_out else load_test(args.test_data, cfg, dt=dt, before=before, read=read)
        lines += _starts_table(est, full, int(s["starts"]), _starts_length(cfg, test), int(cfg.get("seed", 0)), out,
                               progress=s.get("progress", True) is not False)
    (out / "metrics.md").write_text("\n".join(lines) + "\n")
    _say("\n".join(lines))
    return 0


def _check_test_step(test: Any, est: Any, cfg: dict[str, Any], spec: Any, model_dir: Any) -> None:
    """Refuse test data sampled at another step than the fit, in the command's words (the library's
    refusal names its `test` argument and a `dt` the command line cannot pass)."""
    from .data.container import check_model_step
    from .data.time_units import time_unit

    fitted = getattr(getattr(est, "model_", None), "dt", None)
    try:
        check_model_step(test, fitted, argname="test")        # the library's test, said in the command's words
    except ValueError:
        unit, fit_unit = time_unit(test), cfg.get("time_unit")
        slip = (f" (its times are in {unit}, the fit's in {fit_unit})" if unit and fit_unit and unit != fit_unit
                else "")
        raise ValueError(f"TEST_DATA {str(spec)!r} is sampled every {float(test.attrs['dt']):g}"
                         f"{' ' + unit if unit else ''}{slip}, but the model in {str(model_dir)!r} was fitted at "
                         f"dt = {float(fitted):g}{' ' + fit_unit if fit_unit else ''}; give test data sampled at the "
                         "fit's step (dsident.data.preprocessing.resample resamples a recording).") from None


def _same_file(a: Any, b: Any) -> bool:
    """Whether two data specs name the same existing file (a WFDB record by its ``.hea`` or its
    ``.dat``, either way)."""
    from .data.importers.physionet import wfdb_record_of
    from .experiments.inputs import is_path_like

    if not (isinstance(a, (str, Path)) and isinstance(b, (str, Path)) and is_path_like(str(a)) and is_path_like(str(b))):
        return False
    try:
        if not Path(a).is_file():
            return False
        record_a, record_b = wfdb_record_of(a), wfdb_record_of(b)
        if record_a is not None and record_b is not None:
            return record_a.resolve() == record_b.resolve()
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def cmd_generate(args: argparse.Namespace) -> int:
    """``dsident generate MODEL_DIR --steps N``."""
    _threads(args)
    import numpy as np

    from . import plotting
    from .experiments.inputs import to_data_units
    from .experiments.runner import _write_netcdf

    s = _settings(args, ["out", "steps", "seed", "trials", "observations", "noise"])
    steps = int(s["steps"]) if s.get("steps") is not None else 10_000
    if steps < 2:
        raise SystemExit(f"dsident generate: --steps must be ≥ 2; got {steps}.")
    trials = int(s["trials"]) if s.get("trials") is not None else 1
    if trials < 1:
        raise SystemExit(f"dsident generate: --trials must be ≥ 1; got {trials}.")
    how = s.get("observations") or "auto"
    if how not in ("auto", "mean", "draws"):
        raise SystemExit(f"dsident generate: observations must be auto, mean or draws; got {how!r}.")
    est, cfg = load_fitted(args.model_dir)
    out = _check_out(s.get("out") or _fit_folder(args.model_dir) / "generated")
    out.mkdir(parents=True, exist_ok=True)
    seed = int(s.get("seed") if s.get("seed") is not None else cfg.get("seed", 0))
    _say(f"[dsident] generate {steps} steps from {args.model_dir} → {out}")
    t0 = time.perf_counter()
    from .observations.base import draws_observations

    discrete = draws_observations(est)
    draws = how == "draws" or (how == "auto" and discrete)
    noise = bool(s.get("noise"))
    gen = est.generate(steps, n_trials=trials, seed=seed, noise=noise, observation_noise=draws)
    if cfg.get("zscore"):
        # a fit on z-scored data generates z-units; a user wants the recording's units back
        gen["x"] = gen["x"].copy(data=to_data_units(gen["x"].values, cfg))
        gen.attrs["units"] = "the data's (the fit's z-score undone)"
    if cfg.get("data_units") and not cfg.get("slow_channels"):
        gen.attrs["units"] = cfg["data_units"]          # the recording's own ("mV"); slow channels have none
    if cfg.get("time_unit"):                          # the time axis in the data's unit, as fit's figures
        gen.attrs["provenance"] = json.dumps({"source": "dsident generate", "time_unit": cfg["time_unit"]})
    _write_netcdf(gen, out / "generated.nc")
    x = gen["x"].values
    diverged = int(gen.attrs.get("diverged", int(not np.isfinite(x).all())))
    plotting.plot_time_series(gen, None, title=f"generated by {cfg['model']} × {cfg['method']}",
                              label="generated", save=out / "time_series.png")
    if gen.sizes["channel"] >= 2:
        plotting.plot_attractor(gen, None, title="generated", save=out / "attractor.png")
    if "z" in gen:
        plotting.plot_latent_trajectories(gen, save=out / "latents.png")
    lines = [f"# dsident generate: {steps} steps × {trials} trial(s), seed {seed}", "",
             "- observations: " + ("draws from the observation model" if draws else "the observation model's mean")
             + (" (counts or classes, as `evaluate` scores them)" if how == "auto" and discrete else ""),
             "- latent run: " + ("with the fitted process noise, each trial from its own initial draw" if noise
                                 else "deterministic, from the prior mean"), "",
             "| channel | mean | std | min | max |", "|---|---|---|---|---|"]
    for i, ch in enumerate(gen["channel"].values):
        xi = x[..., i]
        lines.append(f"| {ch} | {np.nanmean(xi):.3g} | {np.nanstd(xi):.3g} | {np.nanmin(xi):.3g} | {np.nanmax(xi):.3g} |")
    lines += ["", f"- diverged: {bool(diverged)}", f"- took {time.perf_counter() - t0:.1f} s"]
    if cfg.get("zscore"):
        lines.append("- in the data's units: the fit's z-score is undone")
    (out / "generated.md").write_text("\n".join(lines) + "\n")
    _say("\n".join(lines))
    return 0


# ---------------------------------------------------------------------------------------------
# benchmark / sweep
# ---------------------------------------------------------------------------------------------

def cmd_benchmark(args: argparse.Namespace) -> int:
    """``dsident benchmark [--datasets ...] [--models ...] [--seeds N] [--quick]``."""
    _threads(args)
    from .experiments.benchmark import run_benchmark
    from .experiments.sweep import close_executor, make_executor

    s = _settings(args, ["datasets", "models", "methods", "seeds", "quick", "out", "scheduler", "workers",
                         "engine", "progress", "slow_cutoff", "read", "test_fraction", "delay_embed", *_FLAG_TO_KEY],
                  file_keys=("slurm", *_RUN_FILE_KEYS))
    _check_workers(s.get("workers"))
    overrides = _run_overrides(s)
    overrides.update({k: s[k] for k in ("read", "test_fraction") if s.get(k) is not None})   # the data files'
    overrides = {k: v for k, v in overrides.items() if v not in ({}, None)}
    quick = bool(s.get("quick"))
    out = s.get("out") or ("dsident-results/quick" if quick else "dsident-results/benchmark")
    _check_out(out)
    if getattr(args, "dry_run", False):
        from .experiments.benchmark import plan_benchmark

        _say(plan_benchmark(datasets=_as_list(s.get("datasets")), models=_as_list(s.get("models")),
                            methods=_as_list(s.get("methods")), seeds=s.get("seeds"), quick=quick, out=out,
                            overrides=overrides or None, echo=_say))
        _say(f"[dsident] dry run: nothing was fitted or written (results would go to {out})")
        return 0
    executor = None
    slurm = _slurm_options(args, s.get("slurm"))
    if s.get("engine") or s.get("scheduler") or (s.get("workers") or 1) > 1 or slurm:
        folder = slurm.pop("folder", None)
        if s.get("engine") in ("slurm", "submitit-local"):
            folder = folder or Path(out) / "submitit"
        try:
            executor = make_executor(s.get("engine"), s.get("scheduler"), s.get("workers"),
                                     slurm_options=slurm or None, folder=folder)
        except (ValueError, ImportError) as err:
            raise SystemExit(f"dsident: {err}") from err
    try:
        res = run_benchmark(datasets=_as_list(s.get("datasets")), models=_as_list(s.get("models")),
                            methods=_as_list(s.get("methods")), seeds=s.get("seeds"), quick=quick, out=out,
                            overrides=overrides or None, executor=executor,
                            progress=s.get("progress", True) is not False, echo=_say)
    finally:
        if executor is not None:
            close_executor(executor)
    _say(f"[dsident] results: {res['out'] / 'results.md'}, {res['out'] / 'results.nc'}, figures *.png "
         f"({res['wall_time']:.0f} s)")
    return 0


def _check_workers(workers: Any) -> None:
    """Refuse a worker count below 1 (0 used to mean one process without a word)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SystemExit(f"dsident: --workers must be a positive number of processes; got {workers!r}.")


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    out = []
    for v in value:
        out += _as_list(v) or []
    return out


def _slurm_options(args: argparse.Namespace, from_file: Any) -> dict[str, Any]:
    """submitit options: a ``[slurm]`` table from ``--config`` overlaid by ``--slurm-option KEY=VALUE``."""
    if from_file is not None and not isinstance(from_file, dict):
        raise SystemExit(f"dsident: the config's `slurm` must be a table of submitit options; got {from_file!r}.")
    return {**(from_file or {}), **_key_values(getattr(args, "slurm_option", None), "--slurm-option")}


def cmd_sweep(args: argparse.Namespace) -> int:
    """``dsident sweep CONFIG [--engine process|dask|slurm] [--scheduler ADDRESS]``."""
    _threads(args)
    _check_workers(args.workers)
    from .experiments.sweep import plan_sweep, run_sweep

    if getattr(args, "dry_run", False):
        _say(plan_sweep(args.sweep_config, out=args.out))
        _say("[dsident] dry run: nothing was fitted or written")
        return 0
    try:
        results, table = run_sweep(args.sweep_config, out=args.out, scheduler=args.scheduler,
                                   n_workers=args.workers, engine=args.engine,
                                   slurm_options=_slurm_options(args, None) or None,
                                   progress=args.progress is not False)
    except ImportError as err:   # a missing extra: say which one, without a traceback
        raise SystemExit(f"dsident: {err}") from err
    _say(table)
    n = results.sizes.get("point", 0)
    failed = int((results["status"].values != "done").sum()) if n else 0
    out = results.attrs.get("out") or args.out or "the folder named in the sweep file"
    _say(f"[dsident] sweep: {n} points, {n - failed} done, {failed} failed; sweep.md and sweep.nc in {out}"
         + ("; a re-run retries the failed points and skips the done ones" if failed else ""))
    # the sweep goes on past a failed point, but a script running it must be able to tell
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# wiring
# ---------------------------------------------------------------------------------------------

def _build_fit(p: argparse.ArgumentParser) -> None:
    from .experiments.registry import METHOD_NAMES, MODEL_NAMES

    p.add_argument("data", nargs="?", help="a shipped set name (lorenz63, ...) or a data file: NetCDF, "
                   ".npy/.npz/.csv/.tsv/.txt/.h5/.mat arrays (with --dt, unless they carry their step: a csv "
                   "`time` column, an npz `dt`), NWB, MNE (.edf, .fif, .vhdr, ...), Neo (.abf, .smr, .nev, ...) "
                   "or a PhysioNet WFDB record (.hea)")
    p.add_argument("--model", type=str.lower, choices=sorted(MODEL_NAMES), help="model family (default shplrnn)")
    p.add_argument("--method", help=f"inference method: {', '.join(METHOD_NAMES)} (default per dataset and model)")
    p.add_argument("--dt", type=float, help="sampling step of a plain array file, in its time unit (a text table whose header names a `time` column takes its step from the times)")
    p.add_argument("--read", action="append", metavar="KEY=VALUE",
                   help="an option of the data file's reader (dsident.data.load_any), e.g. key=trials (the array of "
                        "an HDF5 / MAT / NPZ file holding several), series=membrane_potential or bin_size=0.01 "
                        "(NWB), picks=eeg (MNE), time_column=false (a text table); kept in config.json and used "
                        "again by evaluate on a file of the same format")
    p.add_argument("--test-data", help="held-out data to score on (default: the shipped set's test split)")
    p.add_argument("--test-fraction", type=float, metavar="F",
                   help="hold out the last F (0 < F < 1) of every trial of a data file as its test data")
    p.add_argument("--zscore", action="store_true", default=None,
                   help="standardise each channel with the training data's mean and std (kept in config.json and "
                        "reused by evaluate, analyze --start and generate, which writes the data's units)")
    p.add_argument("--init", metavar="MODEL_DIR",
                   help="continue from a model saved by `dsident fit` (its model, settings and z-score) instead "
                        "of a fresh start: more epochs, or another --method (e.g. teacher forcing after svi)")
    p.add_argument("--out", help="output folder (default dsident-results/fit-NAME-MODEL; an earlier fit there is "
                                  "replaced)")
    _add_run_options(p)
    _add_common(p)


def _build_evaluate(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="folder written by `dsident fit`")
    p.add_argument("test_data", help="shipped set name (its test split) or a data file")
    p.add_argument("--dt", type=float, help="sampling step of a plain array file, in its time unit (a text table whose header names a `time` column takes its step from the times)")
    p.add_argument("--read", action="append", metavar="KEY=VALUE",
                   help="an option of TEST_DATA's reader (as fit's --read; default: the fit's own, for a file of "
                        "the same format)")
    p.add_argument("--eval-length", type=int, help="evaluate on N test samples (default: the fit's)")
    p.add_argument("--pe-steps", type=int, help="n of PE(n), the n-step prediction error (default: the fit's)")
    p.add_argument("--seed", type=int, help="seed of the scored free run and the starts (default: the fit's)")
    p.add_argument("--starts", type=int, metavar="K",
                   help="also score free runs from K starts spread over the whole test data, each on a window "
                        "of the evaluation length (starts.nc and a table; finds models that settle from some states)")
    p.add_argument("--before", metavar="DATA",
                   help="the recording just before TEST_DATA (a file, or a shipped set's train split): a model "
                        "fitted with slow channels gets them filtered across it, so the free run's start is not "
                        "the filter's edge (shipped test splits find theirs)")
    p.add_argument("--whole-file", action="store_true", default=None,
                   help="score all of TEST_DATA when it is the file the model was fitted on with --test-fraction "
                        "(by default its held-out end, as fit scored it)")
    p.add_argument("--out", help="output folder (default MODEL_DIR/evaluation)")
    _add_common(p)


def _build_generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", help="folder written by `dsident fit`")
    p.add_argument("--steps", type=int, help="number of time steps (default 10000)")
    p.add_argument("--trials", type=int, help="number of trajectories (default 1); without --noise each starts at "
                                               "the prior mean, so they differ only by observation draws")
    p.add_argument("--noise", action="store_true", default=None,
                   help="add the fitted process noise at every step, each trial from its own draw of the "
                        "initial-state prior")
    p.add_argument("--observations", choices=("auto", "mean", "draws"),
                   help="write the observation model's mean or draws from it (default auto: draws for counts "
                        "and classes, as evaluate scores them; the mean otherwise)")
    p.add_argument("--seed", type=int, help="seed of the draws and the noise (default: the fit's)")
    p.add_argument("--out", help="output folder (default MODEL_DIR/generated)")
    _add_common(p)


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    from .experiments.sweep import EXECUTOR_ENGINES

    p.add_argument("--engine", type=str.lower, choices=list(EXECUTOR_ENGINES),
                   help="where grid points run: local processes (default), a Dask cluster (extra "
                        "`distributed`), SLURM jobs via submitit (extra `slurm`) or submitit's local mode")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="Dask scheduler address (implies --engine dask; without it dask starts a local cluster)")
    p.add_argument("--workers", type=int, help="number of local processes (process pool or local Dask cluster)")
    p.add_argument("--slurm-option", action="append", metavar="KEY=VALUE",
                   help="submitit/SLURM parameter, repeatable: timeout_min=60, slurm_partition=gpu, "
                        "cpus_per_task=2, mem_gb=8 (a [slurm] table in the config file works too)")


def _build_benchmark(p: argparse.ArgumentParser) -> None:
    from .experiments.config import GRID_TEST_FRACTION

    p.add_argument("--datasets", nargs="+",
                   help="shipped set names (default lorenz63 bursting_neuron ecg) or data files that carry their "
                        "sampling step (NetCDF, HDF5, .npz with `dt`, a table with a `time` column, ...)")
    p.add_argument("--read", action="append", metavar="KEY=VALUE",
                   help="an option of the data files' reader, as for `dsident fit` (key=trials, series=..., "
                        "picks=...); used for every data file of the grid")
    p.add_argument("--test-fraction", type=float, metavar="F",
                   help="score each data file's points on the last F (0 < F < 1) of its every trial, never "
                        f"seen in training (default {GRID_TEST_FRACTION:g}; shipped sets have their test split)")
    p.add_argument("--models", nargs="+", help="model names (default: every available model)")
    p.add_argument("--methods", nargs="+",
                   help="inference methods (default: per dataset and model, see docs/main_job.md)")
    p.add_argument("--seeds", type=int, help="number of seeds (default 3; --quick: 1)")
    p.add_argument("--quick", action="store_true", default=None,
                   help="the quick preset: a Lorenz-63 reconstruction in minutes on a laptop")
    p.add_argument("--out", help="result folder (re-running skips finished points)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the grid (cells, seeds, finished points, resolved settings) and stop")
    _add_engine_options(p)
    _add_run_options(p)
    _add_common(p)


def _build_sweep(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep_config", metavar="CONFIG", help="TOML/YAML sweep file with a [grid] table")
    p.add_argument("--dry-run", action="store_true",
                   help="list the grid's combinations, the points already finished in the result folder and the "
                        "expected fitting time, without fitting or writing anything")
    _add_engine_options(p)
    p.add_argument("--out", help="result folder (default: the file's `out`)")
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None, help="hide progress bars")
    p.add_argument("--threads", type=int, default=None, help="torch threads per grid point (default 1)")


#: verb -> (help, parser builder, handler)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "fit": ("fit a model to data and save it", _build_fit, cmd_fit),
    "evaluate": ("score a fitted model on test data (D_stsp, D_H, PE)", _build_evaluate, cmd_evaluate),
    "generate": ("run a fitted model freely", _build_generate, cmd_generate),
    "benchmark": ("models × datasets × seeds, with the floor; --quick for the main job", _build_benchmark,
                  cmd_benchmark),
    "sweep": ("a grid sweep from a config file, on local processes, Dask or SLURM", _build_sweep, cmd_sweep),
}


def register(subparsers: Any) -> None:
    """Add the main-job verbs to an ``argparse`` subparsers object (handler in ``args.func``)."""
    for name, (help_text, build, handler) in COMMANDS.items():
        p = subparsers.add_parser(name, help=help_text, description=help_text)
        build(p)
        p.set_defaults(func=handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry: ``python -m dsident.cli_main_job VERB ...``."""
    parser = argparse.ArgumentParser(prog="dsident", description="dsident main-job commands")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
