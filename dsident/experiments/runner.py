"""Run a grid of (dataset, model, method, seed, ...) points: one result folder per point.

Each point is a resolved run configuration (:mod:`dsident.experiments.config`). Running it
fits the estimator on the train split, evaluates it on the test split with the protocol of
SPEC-metrics §4, and writes, into ``OUT/points/<point_id>/``::

    config.json      the resolved configuration (+ package version)
    result.json      status ("done" | "failed"), scores, fit time, error and traceback
    metrics.nc       the evaluation result (when the metrics return a Dataset)
    model/           the fitted model (estimator ``save``), when the estimator can save
    generated.nc     a free-running trajectory of the evaluation length (for the figures)

A point whose ``result.json`` says "done" is skipped on a re-run, unless a data file it read has
changed since (:mod:`.data_files`: it is run again, with a warning); a failed point is recorded
with its error, does not stop the grid, and is tried again on the next run. Files appear
atomically: a point is written into a temporary folder that is renamed when complete.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
import traceback
import warnings
from concurrent.futures import Executor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import xarray as xr

from .._text import listed
from .._threads import set_blas_threads
from ..inference.training_trend import training_trend
from .config import SCORING_KEYS, save_config
from .data_files import changed_files, data_digests
from .machine import machine_info, record_machine

#: result.json status values
DONE, FAILED = "done", "failed"


# ---------------------------------------------------------------------------------------------
# one point
# ---------------------------------------------------------------------------------------------

def point_id(cfg: Mapping[str, Any]) -> str:
    """Folder name of a run configuration: readable prefix + a hash of everything else."""
    # what only changes how the fitted model is scored (SCORING_KEYS) does not name another fit
    core = json.dumps({k: v for k, v in cfg.items() if k not in ("user_keys", "dropped_defaults", *SCORING_KEYS)},
                      sort_keys=True, default=str)
    digest = hashlib.sha1(core.encode()).hexdigest()[:8]
    dataset = Path(str(cfg.get("dataset", "data"))).stem
    return f"{dataset}__{cfg.get('model')}__{cfg.get('method')}__seed{cfg.get('seed', 0)}__{digest}"


def _filter_defaults(given: Mapping[str, Any], accepted: set[str] | None, user_keys: Iterable[str],
                     what: str, owner: str) -> tuple[dict[str, Any], list[str]]:
    """Drop default keys ``owner`` does not accept; a user key it does not accept is an error."""
    if accepted is None:
        return dict(given), []
    user_keys = set(user_keys)
    bad_user = sorted(k for k in given if k in user_keys and k not in accepted)
    if bad_user:
        raise ValueError(f"{owner} does not accept the {what} {bad_user}; it accepts {sorted(accepted)}.")
    dropped = sorted(k for k in given if k not in accepted)
    return {k: v for k, v in given.items() if k in accepted}, dropped


def _engine_option_names(method: str) -> set[str] | None:
    """Keyword names the engine for ``method`` accepts (None = anything / unknown)."""
    import inspect

    from ..inference import engine_option_names, get_engine
    from ..models.base import LatentModelEstimator

    names = engine_option_names(get_engine(method))
    if names is None:
        return None
    # the estimator's own fit options (e.g. `restarts`) travel in fit_options too
    own = {n for n, p in inspect.signature(LatentModelEstimator.fit).parameters.items() if p.kind is p.KEYWORD_ONLY}
    return (own | names) - {"seed"}      # the estimator passes its own seed


def build_estimator(cfg: Mapping[str, Any]) -> tuple[Any, dict[str, Any], list[str]]:
    """The estimator of a run configuration, its engine options and the default keys dropped."""
    from .registry import estimator_param_names, get_estimator_class

    cls = get_estimator_class(cfg["model"])
    user = cfg.get("user_keys", {})
    params, dropped_p = _filter_defaults(cfg.get("model_params", {}), estimator_param_names(cls),
                                         user.get("model_params", ()), "hyperparameter(s)", cls.__name__)
    if "seed" in estimator_param_names(cls) and "seed" not in params:
        params["seed"] = int(cfg.get("seed", 0))
    options, dropped_o = _filter_defaults(cfg.get("fit_options", {}), _engine_option_names(cfg["method"]),
                                          user.get("fit_options", ()), "engine option(s)",
                                          f"inference method {cfg['method']!r}")
    return cls(**params), options, [f"model_params.{k}" for k in dropped_p] + [f"fit_options.{k}" for k in dropped_o]


def check_run_options(configs: Iterable[Mapping[str, Any]]) -> None:
    """Refuse, before anything is fitted, a grid whose configurations name a hyperparameter or
    engine option their model or method does not take (:func:`build_estimator`'s check): a typo
    such as ``n_epoch`` would otherwise fail every point of the grid one by one."""
    seen: set[tuple] = set()
    for cfg in configs:
        user = cfg.get("user_keys", {})
        key = (cfg["model"], cfg["method"], tuple(sorted(user.get("model_params", ()))),
               tuple(sorted(user.get("fit_options", ()))))
        if key not in seen:
            seen.add(key)
            build_estimator(cfg)


def adapt_to_data(cfg: Mapping[str, Any], data: xr.Dataset) -> dict[str, Any]:
    """Settings that depend on the data: an identity readout needs ``latent_dim`` ≥ channels;
    a recording's time constants are set in samples (:data:`.config.RECORDING_TIME_CONSTANTS`);
    a recording's shallow PLRNN with slow channels is clipped (:data:`.config.RECORDING_SLOW_CLIPPED`).

    Only *default* values change (each change noted under ``adapted``); a value the user gave
    is left alone, so that the estimator reports a conflict itself.
    """
    from .config import RECORDING, RECORDING_SLOW_CLIPPED, RECORDING_TIME_CONSTANTS, data_key

    out = dict(cfg)
    params = dict(out.get("model_params", {}))
    n_channels = int(data.sizes["channel"])
    user = set(out.get("user_keys", {}).get("model_params", ()))
    adapted = dict(out.get("adapted") or {})
    if params.get("readout") == "identity" and "latent_dim" not in user and int(params.get("latent_dim", 0)) < n_channels:
        adapted["latent_dim"] = f"{params.get('latent_dim')} -> {n_channels} (identity readout)"
        params["latent_dim"] = n_channels
    scaled = RECORDING_TIME_CONSTANTS.get(str(out.get("model")))
    if (scaled is not None and data_key(out.get("dataset"), params.get("observation")) == RECORDING
            and scaled[0] not in user and params.get(scaled[0]) is None and not out.get("init")):
        # a time in the data's unit would make the fit depend on whether the file counts in s or ms
        name, steps = scaled
        dt = float(data.attrs["dt"])
        params[name] = float(f"{steps * dt:.12g}")
        adapted[name] = f"None -> {params[name]:g} ({steps:g} samples of dt {dt:g})"
    if (str(out.get("model")) in RECORDING_SLOW_CLIPPED and out.get("slow_channels") is not None
            and data_key(out.get("dataset"), params.get("observation")) == RECORDING
            and "clip" not in user and not params.get("clip") and not out.get("init")):
        # unclipped, one of two seeds diverged on a bursting voltage with its burst cycle handed over
        params["clip"] = True
        adapted["clip"] = "False -> True (slow channels on a recording: bounded hidden units)"
    if adapted:
        out["adapted"] = adapted
    out["model_params"] = params
    return out


def point_data(cfg: Mapping[str, Any]) -> tuple[xr.Dataset, xr.Dataset, dict[str, Any]]:
    """The training and test data of a grid point, and ``cfg`` as fitted.

    With ``slow_channels`` (:func:`dsident.data.add_slow_channels`) both splits get the slow
    channels, scaled by the training split's ``scale``, which the returned configuration records
    so that ``dsident evaluate`` and the figures can add the same channels to other data. The
    test split's are filtered across the training split it continues (:func:`.inputs.load_test`),
    so the free runs do not start on the filter's edge effect. With ``delay_embedding`` the training
    data are embedded first, with the delays chosen on them, and the test data with the same
    delays. With ``zscore`` (true) every channel is standardised with the training split's mean
    and std, which the returned configuration records and the test split reuses. A data file with ``test_fraction``
    (a benchmark or sweep on a file: :func:`.config.held_out_by_default`) is split in time
    (:func:`.inputs.run_test`): the fit never sees its held-out ends.
    """
    from .inputs import channels_for_fit, cut, held_out_split, load_data, run_test, zscore_for_fit, zscored_as_fit

    cfg = dict(cfg)
    # a data file's held-out ends (`test_fraction`): the rest is the training data, and the
    # recording the test stretch continues
    held = held_out_split(cfg) if cfg.get("test_fraction") is not None else None
    train = held[0] if held is not None else load_data(cfg["dataset"], split="train", dt=cfg.get("dt"),
                                                       read=cfg.get("read"))
    if cfg.get("train_length"):
        train = cut(train, int(cfg["train_length"]))
    if isinstance(cfg.get("zscore"), Mapping):     # a saved configuration: its fit's constants
        train = zscored_as_fit(train, cfg)
    elif cfg.get("zscore"):                        # as `dsident fit --zscore`: the training data's constants,
        train, cfg["zscore"] = zscore_for_fit(train)   # which the test data (run_test) and config.json reuse
    train, cfg = channels_for_fit(train, cfg)      # the delays and scale chosen here, kept for the test's
    test = run_test(cfg, length=cfg.get("eval_length"), held=held)
    return train, test, cfg


def fit_point(cfg: Mapping[str, Any], train: xr.Dataset, *, progress: bool = False,
              init: Any = None, jobs: int = 1) -> tuple[Any, float, list[str]]:
    """Fit the estimator of ``cfg`` on ``train``; returns (estimator, fit seconds, dropped defaults).

    ``jobs``: processes this fit may use. A ``best_of`` fit whose options do not set ``n_jobs``
    trains up to that many candidates at once (:mod:`dsident.models.candidates`; the kept
    model is the same). It is how the fit runs, not what it is, so it stays out of ``cfg``
    and the point's id.

    ``init``: a fitted estimator to go on from (``fit(..., warm_start=True)``) with the engine
    options of ``cfg``; its own hyperparameters stand, ``cfg``'s model parameters are not used,
    and the defaults in :data:`dsident.models.restarts.REFIT_OPTIONS` are dropped (and listed as dropped).
    """
    est, options, dropped = build_estimator(adapt_to_data(cfg, train))
    import inspect

    fit_params = inspect.signature(est.fit).parameters
    if "progress" in fit_params or any(p.kind is p.VAR_KEYWORD for p in fit_params.values()):
        options.setdefault("progress", progress)
    if init is not None:
        est = init
        options["warm_start"] = True
        # choosing among fits built afresh (`best_of`, `restarts`) cannot go on from a saved model:
        # a cell's defaults give way to `init`; a user's own meet the estimator's refusal
        from ..models.restarts import REFIT_OPTIONS

        user = set(cfg.get("user_keys", {}).get("fit_options", ()))
        for key in REFIT_OPTIONS:
            if key in options and key not in user:
                del options[key]
                dropped = [*dropped, f"fit_options.{key}"]
    if jobs > 1 and int(options.get("best_of", 1)) > 1 and "n_jobs" not in options:
        options["n_jobs"] = min(int(jobs), int(options["best_of"]))
    t0 = time.perf_counter()
    est.fit(train, method=cfg["method"], **options)
    return est, time.perf_counter() - t0, dropped


def without_dropped(cfg: Mapping[str, Any], dropped: Sequence[str]) -> dict[str, Any]:
    """``cfg`` without the ``"section.key"`` entries of ``dropped`` (what :func:`fit_point` did
    not use), so a saved configuration says what the fit ran with; the caller lists them
    under ``dropped_defaults``."""
    out = dict(cfg)
    for entry in dropped:
        section, _, key = entry.partition(".")
        if isinstance(out.get(section), Mapping) and key in out[section]:
            out[section] = {k: v for k, v in out[section].items() if k != key}
    return out


def run_point(cfg: Mapping[str, Any], out_root: str | Path, *, progress: bool = False,
              keep_model: bool = True, jobs: int = 1) -> dict[str, Any]:
    """Fit, evaluate and save one grid point; never raises for a failed fit (records it).

    Parameters
    ----------
    cfg : mapping
        Resolved run configuration.
    out_root : path
        Result folder of the whole grid; the point goes to ``out_root/points/<point_id>``.
    progress : bool
        Show the engine's progress bar.
    keep_model : bool
        Save the fitted model under ``model/``.
    jobs : int
        Processes the fit may use (:func:`fit_point`; the grid gives a point run alone in this
        process the machine's cores).

    Returns
    -------
    dict
        The record written to ``result.json``: ``point_id``, ``status``, ``scores``, ``fit_time``,
        ``error``, ``config``, ``test`` (the scored test data's ``samples`` and ``trials``, and the
        training data's ``train_samples`` / ``train_trials``), ``machine`` (:func:`.machine.machine_info`: the CPU, cores, torch
        threads, GPU and versions the fit time was measured with), ``restarts`` (with
        ``fit_options.restarts``: the abandoned attempts and the kept attempt's seed), ``best_of``
        (with ``fit_options.best_of``: every candidate's training score and the seed kept),
        ``polish`` (with ``fit_options.polish``: the training scores before and after the second
        stage, and whether it was kept), ``trend``
        (:func:`~dsident.inference.training_trend.training_trend`, for a fit that scored free runs:
        whether it was still improving when it stopped), and ``late``
        (:func:`.late_run.point_regime`: the verdict, largest exponent and late-stretch scores of
        a free run twice the evaluation length), and with ``test_starts`` in ``cfg`` ``starts``
        (:func:`.starts.score_starts`: the scores from that many starts over the whole
        test split; per start in ``starts.nc``).
    """
    apply_thread_limit()
    out_root = Path(out_root)
    pid = point_id(cfg)
    final = out_root / "points" / pid
    (out_root / "points").mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{pid}.", dir=out_root / "points"))
    record: dict[str, Any] = {"point_id": pid, "config": dict(cfg), "status": FAILED, "error": None,
                              "traceback": None, "fit_time": math.nan,
                              "scores": {k: math.nan for k in ("D_stsp", "D_H", "PE", "diverged")},
                              "machine": machine_info()}
    try:
        seed = int(cfg.get("seed", 0))
        # what the files held: a re-run refits this point if they are edited in place
        record["data_files"] = data_digests(cfg)
        train, test, cfg = point_data(cfg)
        # what was scored: the tables say how long a stretch, and whether the fit saw it
        record["test"] = {"samples": int(test.sizes["time"]), "trials": int(test.sizes["trial"]),
                          "train_samples": int(train.sizes["time"]), "train_trials": int(train.sizes["trial"])}
        used = adapt_to_data(cfg, train)
        est, fit_time, dropped = fit_point(used, train, progress=progress, jobs=jobs)
        record["fit_time"] = fit_time
        record["config"] = {**without_dropped(used, dropped), "dropped_defaults": dropped}
        history = getattr(est, "history_", None) or {}
        if "restarts" in history:          # fit(restarts=...): what was abandoned, which seed was kept
            record["restarts"] = {"abandoned": history["restarts"], "seed_used": history["seed_used"]}
        if "best_of" in history:           # fit(best_of=...): every candidate's training score, the seed kept
            record["best_of"] = {"candidates": history["best_of"], "seed_used": history["seed_used"],
                                 "processes": history.get("best_of_processes", 1)}
        if "polish" in history:            # fit(polish=...): the training scores before and after, and which stands
            record["polish"] = {k: history["polish"][k] for k in ("score_before", "score_after", "kept", "best_epoch")}
        trend = training_trend(history)
        if trend is not None:              # was the fit still improving when it stopped?
            record["trend"] = {k: v for k, v in trend.items() if k != "message"}
        from .late_run import late_run_record
        from .scoring import evaluate_model

        scores, raw, gen = evaluate_model(est, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=seed,
                                          return_run=True)
        record["scores"] = scores
        record["late"] = late_run_record(est, test, seed=seed)
        if cfg.get("test_starts"):         # also from K starts over the whole test split
            from .starts import score_starts

            record["starts"] = score_starts(est, record["config"], tmp)
        _write_netcdf(raw, tmp / "metrics.nc")
        _write_netcdf(gen, tmp / "generated.nc")
        if keep_model and hasattr(est, "save"):
            try:
                est.save(tmp / "model")
            except Exception as err:  # saving is a convenience; the scores stand without it
                record["save_error"] = f"{type(err).__name__}: {err}"
        record["status"] = DONE
    except Exception as err:
        record["error"] = f"{type(err).__name__}: {err}"
        record["traceback"] = traceback.format_exc()
    save_config(record["config"], tmp / "config.json")
    (tmp / "result.json").write_text(json.dumps(_jsonable(record), indent=2) + "\n")
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return record


#: environment variable with the number of torch threads per grid point (set by the CLI)
THREADS_ENV = "DSIDENT_TORCH_THREADS"


def apply_thread_limit(n_threads: int | None = None) -> None:
    """Limit torch's intra-op and numpy's BLAS threads (``n_threads`` or ``$DSIDENT_TORCH_THREADS``).

    The recurrent models here are small (tens to hundreds of units): intra-op threads only add
    synchronisation, and on a shared or busy machine they thrash. The same holds for the small
    LAPACK calls of a point's analysis (the late run's Lyapunov QR, scoring), whose BLAS would
    otherwise start a thread per core in every worker. Parallelism comes from running grid
    points side by side instead. Setting the variable makes pool and Dask workers follow; with
    neither set, nothing changes.
    """
    import os

    source = "n_threads" if n_threads is not None else f"${THREADS_ENV}"
    value = n_threads if n_threads is not None else os.environ.get(THREADS_ENV)
    if value is None or value == "":
        return
    try:
        n = int(value) if not isinstance(value, (bool, float)) else None
    except ValueError:                 # int("two") said only "invalid literal for int()"
        n = None
    if n is None or n < 1:
        raise ValueError(f"`{source}` must be a whole number of torch threads >= 1; got {value!r}.")
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    set_blas_threads(n)


def _write_netcdf(ds: xr.Dataset, path: Path) -> None:
    """Write a Dataset to NetCDF, turning attrs NetCDF cannot hold (dicts, bools, None) into strings."""
    out = ds.copy()
    out.attrs = {k: _netcdf_attr(v) for k, v in ds.attrs.items()}
    for name in out.variables:
        out[name].attrs = {k: _netcdf_attr(v) for k, v in out[name].attrs.items()}
    out.to_netcdf(path, engine="h5netcdf")


def _netcdf_attr(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return str(value) if value is None else int(value)
    if isinstance(value, (str, int, float, np.integer, np.floating)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)) and all(isinstance(v, (int, float, np.number)) for v in np.ravel(value)):
        return np.asarray(value)
    return json.dumps(value, default=str)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    return str(obj)


def read_record(folder: str | Path) -> dict[str, Any] | None:
    """The ``result.json`` of a point folder (None when absent or unreadable)."""
    path = Path(folder) / "result.json"
    try:
        rec = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    rec["scores"] = {k: (math.nan if v is None else v) for k, v in rec.get("scores", {}).items()}
    if rec.get("fit_time") is None:
        rec["fit_time"] = math.nan
    return rec


def is_done(cfg: Mapping[str, Any], out_root: str | Path) -> bool:
    """True when the point of ``cfg`` already has a successful result under ``out_root`` whose
    data files are unchanged: the points :func:`run_grid` skips."""
    rec = read_record(Path(out_root) / "points" / point_id(cfg))
    return rec is not None and rec.get("status") == DONE and not changed_files(rec.get("data_files"), cfg)


# ---------------------------------------------------------------------------------------------
# the grid
# ---------------------------------------------------------------------------------------------

def run_grid(configs: Sequence[Mapping[str, Any]], out_root: str | Path, *,
             executor: Executor | Any | None = None, progress: bool = True, skip_done: bool = True,
             point_function: Callable[..., dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run every configuration; returns one record per configuration (in input order).

    Parameters
    ----------
    configs : sequence of mapping
        Resolved run configurations.
    out_root : path
        Result folder.
    executor : object with ``submit(fn, *args, **kwargs)`` returning futures with ``result()``, optional
        A ``concurrent.futures`` pool or a ``dask.distributed.Client``. None runs in this process,
        one point at a time, and a point that keeps the best of several fits (``best_of``)
        trains them at once on this machine's cores (:mod:`dsident.models.candidates`).
    progress : bool
        tqdm bar over the points (and, in this process, the engine's).
    skip_done : bool
        Skip points whose folder already holds a successful result (their record is re-read),
        unless a data file the point read has changed since (it is run again, with a warning).
    point_function : callable, optional
        Replaces :func:`run_point` (``fn(cfg, out_root) -> record``); must be picklable for a pool.
    """
    from tqdm.auto import tqdm

    from .starts import add_starts, needs_starts

    out_root = Path(out_root)
    out_root.mkdir(parents=True, exist_ok=True)
    if point_function is not None:
        fn = point_function
    elif executor is None:
        from .._threads import usable_cores

        cores = usable_cores()

        def fn(cfg: dict[str, Any], root: str) -> dict[str, Any]:
            # one point at a time in this process: show the engine's bar, and let a best_of fit
            # train its candidates on the cores that would otherwise idle
            return run_point(cfg, root, progress=progress, jobs=cores)
    else:
        fn = run_point
    records: list[dict[str, Any] | None] = [None] * len(configs)
    todo = []
    rescore = []
    stale: dict[str, list[str]] = {}
    for i, cfg in enumerate(configs):
        rec = read_record(out_root / "points" / point_id(cfg)) if skip_done else None
        changed = changed_files(rec.get("data_files"), cfg) if rec is not None else []
        if changed:
            stale[point_id(cfg)] = changed
        if rec is not None and rec.get("status") == DONE and not changed:
            rec["skipped"] = True
            records[i] = rec
            if needs_starts(rec, cfg):      # test_starts asked of a finished point: score its saved model
                rescore.append(i)
        else:
            todo.append(i)
    if stale:
        files = sorted({f for names in stale.values() for f in names})
        warnings.warn(f"{len(stale)} finished point(s) read data file(s) {listed(files)} that changed since they "
                      f"ran; they are run again: {listed(sorted(stale))}.", UserWarning, stacklevel=2)
    for i in tqdm(rescore, desc="finished points from several starts", disable=not progress, unit="pt"):
        records[i] = {**add_starts(out_root / "points" / point_id(configs[i]), records[i], configs[i]), "skipped": True}
    bar = tqdm(total=len(configs), initial=len(configs) - len(todo), desc="grid points",
               disable=not progress, unit="pt")
    if executor is None:
        for i in todo:
            bar.set_postfix_str(point_id(configs[i])[:48])
            records[i] = fn(dict(configs[i]), str(out_root))
            bar.update(1)
    else:
        futures = {executor.submit(fn, dict(configs[i]), str(out_root)): i for i in todo}
        for fut in _as_completed(futures, executor):
            i = futures[fut]
            try:
                records[i] = fut.result()
            except Exception as err:  # a worker lost or a pickling problem: record, keep going
                records[i] = _failed_record(configs[i], err)
            bar.update(1)
    bar.close()
    return [r for r in records if r is not None]


def _as_completed(futures: Mapping[Any, int], executor: Any) -> Iterable[Any]:
    """``as_completed`` for concurrent.futures and for dask futures alike."""
    module = type(executor).__module__
    if module.startswith("distributed") or module.startswith("dask"):
        from distributed import as_completed as dask_as_completed

        return dask_as_completed(list(futures))
    return as_completed(list(futures))


def _failed_record(cfg: Mapping[str, Any], err: BaseException) -> dict[str, Any]:
    return {"point_id": point_id(cfg), "config": dict(cfg), "status": FAILED,
            "error": f"{type(err).__name__}: {err}", "traceback": "".join(traceback.format_exception(err)),
            "fit_time": math.nan, "scores": {k: math.nan for k in ("D_stsp", "D_H", "PE", "diverged")}}


def collect_records(out_root: str | Path) -> list[dict[str, Any]]:
    """Every point record found under ``out_root/points`` (sorted by point id)."""
    folder = Path(out_root) / "points"
    if not folder.is_dir():
        return []
    recs = [read_record(p) for p in sorted(folder.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    return [r for r in recs if r is not None]


def records_to_dataset(records: Sequence[Mapping[str, Any]], *, sweep_keys: Sequence[str] = ()) -> xr.Dataset:
    """The records as an ``xarray.Dataset`` over dim ``point`` (NetCDF-ready).

    Variables: ``D_stsp``, ``D_H``, ``PE``, ``diverged``, ``coverage`` (NaN in records written
    before it existed), ``fit_time`` (seconds), ``status``,
    ``error``, and of the free run at twice the evaluation length (:mod:`.late_run`) ``regime``
    (the verdict; empty when not analysed), ``lambda_max`` (per unit of time), ``D_stsp_late``,
    ``D_H_late``, with bursting test data ``burst_period_late``, ``spikes_per_burst_late``,
    ``burst_cv_late`` and the test's ``data_burst_period``, ``data_spikes_per_burst``,
    ``data_burst_cv``, ``still_improving`` (the fit's ``trend`` verdict as 1 / 0, NaN without one),
    and with ``test_starts`` (:mod:`.starts`; NaN without) ``D_stsp_starts`` /
    ``D_H_starts`` (medians over the starts), ``D_stsp_starts_max`` and ``n_starts``;
    coordinates ``dataset``, ``model``, ``method``, ``seed`` and every ``sweep_keys`` entry
    (read from the top level of each configuration, then from model_params / fit_options; a
    dotted ``model_params.NAME`` / ``fit_options.NAME`` from that table, its coordinate ``NAME``).
    """
    from .._version import __version__

    n = len(records)
    data: dict[str, Any] = {}
    for name in ("D_stsp", "D_H", "PE", "diverged", "coverage"):
        data[name] = ("point", np.array([_num(r.get("scores", {}).get(name)) for r in records], dtype=float))
    data["fit_time"] = ("point", np.array([_num(r.get("fit_time")) for r in records], dtype=float))
    # the free run at twice the evaluation length (absent in records written before it existed)
    late = [r.get("late") or {} for r in records]
    data["regime"] = ("point", np.array([str(v.get("regime") or "") for v in late], dtype=object).astype(str))
    data["lambda_max"] = ("point", np.array([_num(v.get("lambda_max")) for v in late], dtype=float))
    data["D_stsp_late"] = ("point", np.array([_num(v.get("D_stsp")) for v in late], dtype=float))
    data["D_H_late"] = ("point", np.array([_num(v.get("D_H")) for v in late], dtype=float))
    if any("data_burst_period" in v for v in late):     # bursting test data: the late run's bursts
        from .late_run import BURST_KEYS

        for key in BURST_KEYS:
            data[f"{key}_late" if not key.startswith("data_") else key] = (
                "point", np.array([_num(v.get(key)) for v in late], dtype=float))
    # from test_starts starts over the whole test split (.starts; NaN where not asked)
    starts = [r.get("starts") or {} for r in records]
    data["D_stsp_starts"] = ("point", np.array([_num(v.get("median_D_stsp")) for v in starts], dtype=float))
    data["D_stsp_starts_max"] = ("point", np.array([_num(v.get("max_D_stsp")) for v in starts], dtype=float))
    data["D_H_starts"] = ("point", np.array([_num(v.get("median_D_H")) for v in starts], dtype=float))
    data["n_starts"] = ("point", np.array([_num(v.get("n_starts")) for v in starts], dtype=float))
    # training_trend's verdict (1: still improving when it stopped, 0: not, NaN: no reading)
    data["still_improving"] = ("point", np.array([_num((r.get("trend") or {}).get("still_improving"))
                                                  for r in records], dtype=float))
    data["status"] = ("point", np.array([str(r.get("status")) for r in records], dtype=object).astype(str))
    data["error"] = ("point", np.array([str(r.get("error") or "") for r in records], dtype=object).astype(str))
    # where each point was fitted: its fit time means little without it (.machine)
    data["machine"] = ("point", np.array([record_machine(r) for r in records], dtype=object)
                       .astype(str))
    coords: dict[str, Any] = {"point": np.array([str(r.get("point_id")) for r in records], dtype=object).astype(str)}
    for key in ("dataset", "model", "method"):
        coords[key] = ("point", np.array([str(r.get("config", {}).get(key)) for r in records], dtype=object).astype(str))
    coords["seed"] = ("point", np.array([int(r.get("config", {}).get("seed", 0)) for r in records], dtype=np.int64))
    for qualified in sweep_keys:
        table, _, key = qualified.rpartition(".")
        values = [_swept_value(key, _lookup(r.get("config", {}), key, table)) for r in records]
        numeric = all(isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_)) for v in values)
        whole = numeric and all(isinstance(v, (int, np.integer)) for v in values)     # a latent_dim stays 4, not 4.0
        coords[key] = ("point", np.array(values, dtype=np.int64 if whole else float) if numeric
                       else np.array([str(v) for v in values]))
    ds = xr.Dataset(data, coords=coords)
    ds["fit_time"].attrs["units"] = "s"
    ds.attrs = {"dsident_version": __version__, "n_points": n,
                "configs": json.dumps([_jsonable(r.get("config", {})) for r in records], default=str)}
    return ds


def _swept_value(key: str, value: Any) -> Any:
    """A swept setting as a table shows it. ``slow_channels`` is resolved into a table of filter
    settings when its point runs; its row keeps the value the sweep file gave: ``off``, ``auto``
    (whichever cutoff each point chose) or the cutoff."""
    if key != "slow_channels":
        return value
    if not isinstance(value, Mapping):
        return "off"
    cutoff = value.get("cutoff")
    if "auto" in (value.get("chosen"), cutoff):
        return "auto"
    return f"{cutoff:g}" if isinstance(cutoff, (int, float)) else str(cutoff)


def _lookup(cfg: Mapping[str, Any], key: str, table: str = "") -> Any:
    """``cfg``'s value of ``key``: from ``table`` (model_params / fit_options) when named, else the top
    level, then model_params, then fit_options."""
    if table:
        return (cfg.get(table) or {}).get(key, math.nan)
    for table in (cfg, cfg.get("model_params", {}), cfg.get("fit_options", {})):
        if key in table:
            return table[key]
    return math.nan


def _num(value: Any) -> float:
    try:
        return math.nan if value is None else float(value)
    except (TypeError, ValueError):
        return math.nan
