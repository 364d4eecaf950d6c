"""Grid sweeps (e.g. τ × M × seed, as in the rPLRNN paper) on any executor.

A sweep file is a run configuration (see :mod:`dsident.experiments.config`) plus a ``[grid]``
table of lists; every combination is one point::

    # sweep.toml
    dataset = "lorenz63"
    model = "rplrnn"
    method = "laplace-em"
    out = "results/tau-sweep"          # optional; the command line's --out wins
    [model_params]
    reg_fraction = 0.5
    [grid]
    tau = [0.0, 10.0, 100.0]           # bare names go to model_params ...
    latent_dim = [8, 16]
    "fit_options.n_iter" = [20]        # ... or name the table explicitly
    seed = [0, 1, 2]                   # run keys (seed, dataset, model, method, *_length) stay top level

Points run on an executor with ``submit(fn, *args)`` → future with ``result()``, chosen by
``engine`` (key ``engine`` in the file, ``--engine`` on the command line): a local process pool
(``"process"``, the default), a Dask cluster (``"dask"``, ``scheduler="tcp://host:8786"``; extra
``distributed``) or SLURM through submitit (``"slurm"``, options in a ``[slurm]`` table such as
``timeout_min``, ``slurm_partition``, ``cpus_per_task``; extra ``slurm``; ``"submitit-local"``
runs the same jobs as local subprocesses). Results are gathered into one NetCDF file and one Markdown table
(rows = grid combination without the seed, median ± MAD over seeds).
"""
from __future__ import annotations

import itertools
import math
import json
import os
import threading
import time
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import xarray as xr

from .config import RUN_KEYS, SCORING_KEYS, check_run_types, held_out_by_default, load_config_file, resolve_config, save_config
from .inputs import check_grid_datasets, check_grid_files
from .machine import describe_machines
from .runner import check_run_options, records_to_dataset, run_grid, run_point
from .tables import (BURSTS_EXPLAINED, OFF_GRID_EXPLAINED, data_bursts_cell, late_bursts_cell, median_mad,
                     regime_cell, test_data_note, with_off_grid, _fmt)

#: keys of a sweep file besides the run configuration
SWEEP_KEYS = ("grid", "out", "scheduler", "n_workers", "preset", "engine", "slurm")


def expand_grid(base: Mapping[str, Any], grid: Mapping[str, Sequence[Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every combination of ``grid`` applied to ``base``; returns (resolved configs, swept key names).

    Parameters
    ----------
    base : mapping
        Run settings (``dataset``, ``model``, ``method``, ``model_params``, ...).
    grid : mapping of str to list
        Values per key. Keys in ``RUN_KEYS`` set the top level; ``model_params.X`` /
        ``fit_options.X`` set that table; any other bare name goes to ``model_params``.
    """
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError(f"`grid` must be a non-empty table of lists; got {grid!r}.")
    for key, values in grid.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(f"grid entry {key!r} must be a non-empty list of values; got {values!r}.")
        texts = [json.dumps(v, sort_keys=True, default=str) for v in values]
        repeated = sorted({t for t in texts if texts.count(t) > 1})
        if repeated:         # the same point twice: two workers writing one folder, one seed counted twice
            raise ValueError(f"grid entry {key!r} lists {', '.join(repeated)} more than once; got {list(values)!r}.")
    names = [k.rpartition(".")[2] for k in grid]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:            # one value would silently win, and the table's column would be ambiguous
        raise ValueError(f"grid entries {sorted(k for k in grid if k.rpartition('.')[2] in twice)} share the name "
                         f"{twice}: one would overwrite the other, or the table's column would mean two settings; "
                         "give each setting once in [grid].")
    check_run_types({k: v for k, v in base.items() if k in ("model", "method", "seed", "model_params", "fit_options")})
    for key in ("dataset", "model"):
        if key not in base and key not in grid:
            raise ValueError(f"a sweep needs `{key}` (in the file or in [grid]); got keys {sorted(base)}.")
    scoring = sorted(set(grid) & set(SCORING_KEYS))
    if scoring:      # one fit scored several ways is one point: its id does not see these keys
        raise ValueError(f"{scoring} cannot be swept in [grid]: they change how each fitted point is scored, not "
                         f"the fit; set one value at the top level of the sweep file.")
    keys = list(grid)
    configs = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        settings = {k: v for k, v in base.items() if k in RUN_KEYS}
        settings["model_params"] = dict(base.get("model_params") or {})
        settings["fit_options"] = dict(base.get("fit_options") or {})
        for key, value in zip(keys, combo):
            table, _, name = key.rpartition(".")
            if table in ("model_params", "fit_options"):
                settings[table][name] = value
            elif key in RUN_KEYS:
                settings[key] = value
            else:
                settings["model_params"][key] = value
        dataset, model = settings.pop("dataset"), settings.pop("model")
        method = settings.pop("method", None)
        configs.append(held_out_by_default(resolve_config(dataset, model, method, overrides=settings,
                                                          preset=base.get("preset"))))
    return configs, [k.rpartition(".")[2] for k in keys]


#: executor kinds accepted by :func:`make_executor` (``--engine``)
EXECUTOR_ENGINES = ("process", "dask", "slurm", "submitit-local")


class SubmititPool:
    """A ``concurrent.futures`` face over a submitit executor (SLURM or submitit's local mode).

    submitit's ``submit`` returns ``Job`` objects (``result()``, ``done()``) that
    ``concurrent.futures.as_completed`` cannot wait on. This wrapper hands out real
    :class:`concurrent.futures.Future` objects and completes them from one polling thread, so
    :func:`~dsident.experiments.runner.run_grid` treats SLURM jobs like pool futures.

    Parameters
    ----------
    executor : submitit executor
        ``submitit.AutoExecutor`` / ``LocalExecutor`` with its parameters already set.
    poll_interval : float
        Seconds between ``done()`` checks (submitit rate-limits its own ``sacct`` calls).
    """

    def __init__(self, executor: Any, poll_interval: float = 0.5) -> None:
        if poll_interval <= 0:
            raise ValueError(f"`poll_interval` must be > 0 seconds; got {poll_interval!r}.")
        self.executor = executor
        self.poll_interval = float(poll_interval)
        self.jobs: list[Any] = []          # every submitted submitit Job, in submission order
        self._pending: list[tuple[Any, Future]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Future:
        """Submit ``fn(*args, **kwargs)`` as one job; returns a future completed when the job ends."""
        if self._closed:
            raise RuntimeError("cannot submit to a SubmititPool after shutdown().")
        job = self.executor.submit(fn, *args, **kwargs)
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        fut.job = job                      # type: ignore[attr-defined]  # the job id and logs, for users
        with self._lock:
            self.jobs.append(job)
            self._pending.append((job, fut))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._poll, name="dsident-submitit-poll", daemon=True)
                self._thread.start()
        return fut

    def _poll(self) -> None:
        """Move finished jobs' results (or errors) into their futures until none is pending."""
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                return
            for job, fut in pending:
                if fut.cancelled():
                    finished = True
                elif job.done():
                    finished = True
                    try:
                        fut.set_result(job.result())
                    except BaseException as err:  # a failed job (submitit.FailedJobError), timeout, ...
                        fut.set_exception(err)
                else:
                    finished = False
                if finished:
                    with self._lock:
                        self._pending.remove((job, fut))
            time.sleep(self.poll_interval)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting jobs; ``cancel_futures`` cancels the unfinished ones, ``wait`` waits for the rest."""
        self._closed = True
        if cancel_futures:
            with self._lock:
                pending = list(self._pending)
            for job, fut in pending:
                job.cancel(check=False)
                fut.cancel()
        if wait:
            with self._lock:
                futures = [f for _, f in self._pending]
            for fut in futures:
                try:
                    fut.exception()
                except CancelledError:
                    pass

    def __enter__(self) -> "SubmititPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown(wait=True)


def _submitit_executor(cluster: str | None, slurm_options: Mapping[str, Any] | None,
                       folder: str | Path | None) -> SubmititPool:
    """A :class:`SubmititPool` over ``submitit.AutoExecutor`` for ``cluster`` ("slurm" or "local")."""
    try:
        import submitit
    except ImportError as err:
        raise ImportError("engine 'slurm' (and 'submitit-local') needs submitit: "
                          "pip install 'dsident[slurm]'.") from err
    if not isinstance(slurm_options, (Mapping, type(None))):
        raise TypeError(f"`slurm_options` must be a mapping of submitit parameters; got {slurm_options!r}.")
    options = dict(slurm_options or {})
    cluster = options.pop("cluster", None) or cluster
    poll = float(options.pop("poll_interval", 0.5))
    if cluster not in ("slurm", "local", "debug"):
        raise ValueError(f"slurm option `cluster` must be 'slurm', 'local' or 'debug'; got {cluster!r}.")
    # submitit names every file after its job id, so one folder serves all jobs (%j in a path works too)
    folder = str(folder) if folder is not None else "dsident-submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    try:
        executor.update_parameters(**options)
    except (NameError, TypeError) as err:   # submitit raises NameError for unknown parameters
        raise ValueError(f"unknown submitit/SLURM option(s) in {sorted(options)}: {err}") from err
    return SubmititPool(executor, poll_interval=poll)


def make_executor(engine: str | None = None, scheduler: str | None = None, n_workers: int | None = None,
                  slurm_options: Mapping[str, Any] | None = None, folder: str | Path | None = None) -> Any:
    """An executor with ``submit(fn, *args)`` → future with ``result()``, for :func:`run_grid`.

    Parameters
    ----------
    engine : {"process", "dask", "slurm", "submitit-local"}, optional
        ``"process"``: a local process pool of ``n_workers``. ``"dask"``: a Dask client for
        ``scheduler``, or a Dask cluster of ``n_workers`` local processes when no address is given
        (extra ``distributed``). ``"slurm"``: one SLURM job per point through submitit (extra
        ``slurm``); ``"submitit-local"``: the same through submitit's local mode (subprocesses,
        for testing a SLURM set-up on a workstation). Default: ``"dask"`` when ``scheduler`` is
        given, else ``"process"``. For backwards compatibility an address in place of ``engine``
        (anything with ``:`` that is not an engine name) is taken as the Dask scheduler.
    scheduler : str, optional
        Dask scheduler address (``tcp://host:8786``); only for ``engine="dask"``.
    n_workers : int, optional
        Local processes for ``"process"`` (default min(4, cores)) and for a local Dask cluster.
        submitit decides its own parallelism (SLURM queue; local mode starts every job at once).
    slurm_options : mapping, optional
        ``submitit.AutoExecutor.update_parameters`` keywords, e.g. ``timeout_min``,
        ``slurm_partition``, ``cpus_per_task``, ``mem_gb``; plus ``cluster`` ("slurm" | "local")
        to choose submitit's back end and ``poll_interval`` (seconds between job checks).
    folder : path, optional
        submitit's folder for job pickles and logs (default ``dsident-submitit``; ``%j`` in the
        path stands for the job id). Must be on a file system the compute nodes share.

    Raises
    ------
    ValueError
        Unknown ``engine`` (the message lists the engines), a ``scheduler`` for another engine,
        or an unknown submitit option.
    ImportError
        ``"slurm"``/``"submitit-local"`` without submitit (``pip install 'dsident[slurm]'``).
    """
    if engine is not None and not isinstance(engine, str):
        raise TypeError(f"`engine` must be a string, one of {list(EXECUTOR_ENGINES)}; got {engine!r}.")
    if engine is not None and engine.lower() not in EXECUTOR_ENGINES and ":" in engine and scheduler is None:
        engine, scheduler = "dask", engine   # the old positional form make_executor(address, n)
    engine = (engine or ("dask" if scheduler else "process")).lower()
    if engine not in EXECUTOR_ENGINES:
        raise ValueError(f"unknown executor engine {engine!r}; expected one of {list(EXECUTOR_ENGINES)}.")
    if scheduler and engine != "dask":
        raise ValueError(f"a scheduler address ({scheduler!r}) is only used by engine 'dask'; got engine {engine!r}.")
    if slurm_options and engine not in ("slurm", "submitit-local"):
        raise ValueError(f"slurm options {sorted(slurm_options)} are only used by engine 'slurm'; "
                         f"got engine {engine!r}.")
    _check_workers(n_workers)
    if engine == "dask":
        try:
            from distributed import Client
        except ModuleNotFoundError as err:
            raise ValueError(f"engine 'dask' (scheduler {scheduler!r}) needs dask.distributed: "
                             "pip install 'dsident[distributed]'.") from err
        if scheduler:
            return Client(scheduler)
        # no address: a cluster of single-threaded worker processes on this machine (loopback only)
        return Client(n_workers=n_workers or max(1, min(4, os.cpu_count() or 1)), threads_per_worker=1,
                      host="127.0.0.1", dashboard_address=None)
    if engine == "slurm":
        return _submitit_executor("slurm", slurm_options, folder)
    if engine == "submitit-local":
        return _submitit_executor("local", slurm_options, folder)
    return ProcessPoolExecutor(max_workers=n_workers or max(1, min(4, os.cpu_count() or 1)))


def close_executor(executor: Any) -> None:
    """Release an executor built by :func:`make_executor` without stopping a shared cluster.

    A Dask ``Client`` is closed (``Client.shutdown`` would stop the scheduler and its workers,
    which may serve other users); pools are shut down after their work finishes.
    """
    module = type(executor).__module__
    if module.startswith(("distributed", "dask")) or (hasattr(executor, "close") and not hasattr(executor, "shutdown")):
        executor.close()
    else:
        executor.shutdown()


def run_sweep(spec: str | Path | Mapping[str, Any], *, out: str | Path | None = None,
              scheduler: str | None = None, executor: Any = None, n_workers: int | None = None,
              engine: str | None = None, slurm_options: Mapping[str, Any] | None = None,
              progress: bool = True, point_function: Any = None) -> tuple[xr.Dataset, str]:
    """Run a sweep file (or dict) and gather the results.

    Parameters
    ----------
    spec : path or mapping
        The sweep: a TOML/YAML file or the same content as a dict (see the module docstring).
    out : path, optional
        Result folder (default: the file's ``out`` key, else ``dsident-results/sweep``).
    scheduler : str, optional
        Dask scheduler address (implies ``engine="dask"``); default: the file's ``scheduler``.
    executor : object with ``submit``, optional
        Use this executor instead of building one (not shut down here).
    n_workers : int, optional
        Size of the local process pool (or local Dask cluster).
    engine : {"process", "dask", "slurm", "submitit-local"}, optional
        Where the points run (see :func:`make_executor`); default: the file's ``engine``, else
        ``"dask"`` with a scheduler and ``"process"`` without.
    slurm_options : mapping, optional
        submitit parameters; merged over the file's ``[slurm]`` table (these win). submitit's
        job pickles and logs go to ``out/submitit`` unless ``folder`` is given here.
    progress : bool
        tqdm bar over the points.
    point_function : callable, optional
        Replaces :func:`~dsident.experiments.runner.run_point` (``fn(cfg, out_root) -> record``;
        must be importable by the workers).

    Returns
    -------
    (xarray.Dataset, str)
        One entry per point (see :func:`records_to_dataset`) and the Markdown table; both are
        also written to ``out/sweep.nc`` and ``out/sweep.md``. Every point has its own folder
        ``out/points/<point_id>``.
    """
    data, configs, swept = _read_sweep(spec, check_options=point_function is None)
    file_slurm = data.get("slurm", {})
    out = Path(out or data.get("out") or "dsident-results/sweep")
    out.mkdir(parents=True, exist_ok=True)
    save_config({"sweep": data}, out / "sweep_config.json")
    own = executor is None
    if own:
        # a scheduler given here implies engine "dask" over the file's engine, as --scheduler says
        engine = engine or ("dask" if scheduler else data.get("engine"))
        scheduler = scheduler or (data.get("scheduler") if engine in (None, "dask") else None)
        options = {**file_slurm, **(slurm_options or {})}
        folder = options.pop("folder", None)
        if engine in ("slurm", "submitit-local"):
            folder = folder or out / "submitit"
        executor = make_executor(engine, scheduler, n_workers or data.get("n_workers"),
                                 slurm_options=options or None, folder=folder)
    try:
        records = run_grid(configs, out, executor=executor, progress=progress,
                           point_function=point_function or run_point)
    finally:
        if own:
            close_executor(executor)
    # each swept setting read from where the grid put it: `fit_options.hidden_dim` (SVI's guide) is not
    # the model's hidden_dim, which a lookup by name alone found first
    placed = [k if k.rpartition(".")[0] in ("model_params", "fit_options") or k in RUN_KEYS else f"model_params.{k}"
              for k in data.get("grid", {})]
    results = records_to_dataset(records, sweep_keys=[k for k in placed if k != "seed"])
    results.attrs["out"] = str(out)
    results.to_netcdf(out / "sweep.nc", engine="h5netcdf")
    table = sweep_table(results, [k for k in swept if k != "seed"])
    note = test_data_note(records)
    table += f"\n- {note}\n" if note else ""
    table += floor_note(configs, out)
    (out / "sweep.md").write_text(table)
    return results, table


def _read_sweep(spec: str | Path | Mapping[str, Any], *, check_options: bool = True
                ) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    """The sweep file's settings, its points' resolved configurations and the swept key names;
    ``check_options``: refuse model_params / fit_options a point's model or method lacks."""
    data = load_config_file(spec) if isinstance(spec, (str, Path)) else dict(spec)
    unknown = sorted(set(data) - set(RUN_KEYS) - set(SWEEP_KEYS))
    if unknown:
        raise ValueError(f"unknown sweep key(s) {unknown}; expected run keys {list(RUN_KEYS)} "
                         f"or {list(SWEEP_KEYS)}. A model's setting goes in [model_params] (latent_dim, hidden_dim, "
                         "...) and an inference option in [fit_options] (n_epochs, seq_len, ...), or in [grid] to "
                         "sweep it" + ("; a sampling step belongs to the data file (an .npz's `dt`, a CSV's time "
                                       "column)" if "dt" in unknown else "") + ".")
    engine = data.get("engine")
    _check_workers(data.get("n_workers"), "the sweep file's ")
    if engine is not None and (not isinstance(engine, str) or engine.lower() not in EXECUTOR_ENGINES):
        raise ValueError(f"the sweep file's `engine` must be one of {list(EXECUTOR_ENGINES)}; got engine={engine!r}.")
    if not isinstance(data.get("slurm", {}), Mapping):
        raise ValueError(f"the sweep file's `slurm` must be a table of submitit options; got {data['slurm']!r}.")
    configs, swept = expand_grid(data, data.get("grid", {}))
    if isinstance(spec, (str, Path)):
        _check_relative_paths(configs, Path(spec))
    check_grid_datasets(c["dataset"] for c in configs)
    check_grid_files(configs)
    if check_options:          # a replacement point function takes its own settings
        check_run_options(configs)
    return data, configs, swept


def _check_workers(n_workers: Any, where: str = "") -> None:
    """Refuse a worker count that is not a whole number >= 1 (a "2" read as text, a bool)."""
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, (int, np.integer))
                                  or n_workers < 1):
        raise ValueError(f"{where}`n_workers` must be a whole number of processes >= 1; got n_workers={n_workers!r}.")


def _check_relative_paths(configs: Sequence[Mapping[str, Any]], spec: Path) -> None:
    """Refuse a relative data path that is missing from the working directory but lies beside the
    sweep file, saying so: paths in the file are read from the working directory (as ``out``), so
    ``dsident sweep ../proj/sweep.toml`` from another folder used to say only that the file does not exist."""
    from .inputs import is_path_like

    for cfg in configs:
        for key in ("dataset", "test_data"):
            name = cfg.get(key)
            if not isinstance(name, (str, Path)) or not is_path_like(str(name)) or Path(name).is_absolute():
                continue
            beside = spec.parent / name
            if not Path(name).exists() and beside.is_file():
                raise ValueError(f"`{key}` {str(name)!r} of the sweep file {str(spec)!r} is not in the working directory "
                                 f"{os.getcwd()!r}, which relative paths in a sweep file are read from (as `out`); it "
                                 f"is at {str(beside)!r}, beside the file: run the sweep from {str(spec.parent)!r}, or "
                                 "give the path from here or an absolute one.")


def plan_sweep(spec: str | Path | Mapping[str, Any], *, out: str | Path | None = None) -> str:
    """What :func:`run_sweep` would run, without fitting or writing anything.

    Returns
    -------
    str
        A Markdown table, one row per combination of the swept keys (seeds pooled): its values,
        the seeds, and how many of its points are already finished in ``out`` (a re-run skips
        them); then the number of points, the result folder and the expected fitting time of
        the unfinished points where the settings were measured
        (:func:`~dsident.experiments.benchmark.describe_expected_time`).
    """
    from .benchmark import describe_expected_time
    from .runner import is_done

    data, configs, swept = _read_sweep(spec)
    out = Path(out or data.get("out") or "dsident-results/sweep")
    grid = data.get("grid", {})
    shown = [i for i, name in enumerate(swept) if name != "seed"]
    # expand_grid makes one point per combination, in itertools.product order over the grid
    rows: dict[str, list[dict[str, Any]]] = {}
    for cfg, combo in zip(configs, itertools.product(*grid.values())):
        rows.setdefault(json.dumps([combo[i] for i in shown], default=str), []).append(cfg)
    lines = ["| " + " | ".join([*(swept[i] for i in shown), "seeds", "finished"]) + " |",
             "|" + "---|" * (len(shown) + 2)]
    for combo, points in rows.items():
        done = sum(is_done(c, out) for c in points)
        lines.append("| " + " | ".join([*(str(v) for v in json.loads(combo)),
                                         ", ".join(str(c["seed"]) for c in points), f"{done}/{len(points)}"]) + " |")
    n_points, n_rows = len(configs), len(rows)
    note = test_data_note([{"config": c} for c in configs])
    lines += ["", f"{n_points} point{'s' * (n_points != 1)} ({n_rows} combination{'s' * (n_rows != 1)}) → {out}.",
              "", describe_expected_time(configs, out), "", f"{note[:1].upper()}{note[1:]}."]
    return "\n".join(lines)


def floor_note(configs: Sequence[Mapping[str, Any]], out: str | Path) -> str:
    """Markdown lines giving the floor (:func:`.scoring.cached_floor`) of each dataset and
    evaluation length the sweep's points were scored at: what their D_stsp and D_H compare with."""
    from .inputs import is_path_like
    from .scoring import FLOOR_KEYS, FLOOR_KINDS, cached_floor
    from .tables import floor_discriminates

    seen: dict[str, Mapping[str, Any]] = {}
    for cfg in configs:      # one line per floor the points were scored against (a true system's: per length)
        keys = ("dataset", "eval_length", *(FLOOR_KEYS if is_path_like(str(cfg["dataset"])) else ()))
        key = json.dumps({k: cfg.get(k) for k in keys}, sort_keys=True, default=str)
        seen.setdefault(key, cfg)
    lines = []
    for cfg in seen.values():
        floor = cached_floor(cfg, out)
        if not math.isfinite(floor.get("D_stsp", math.nan)):
            continue
        what = FLOOR_KINDS["recording" if is_path_like(str(cfg["dataset"])) else "true system"]
        line = (f"- floor of {cfg['dataset']} at {int(floor.get('length', cfg.get('eval_length')))} samples ({what}): D_stsp "
                f"{_fmt(floor['D_stsp'])}, D_H {_fmt(floor['D_H'])}")
        if not floor_discriminates(floor):
            line += (f"; a run at rest scores D_stsp {_fmt(floor['D_stsp_at_rest'])}, so on this test stretch D_stsp "
                     "cannot tell a reconstruction from a fixed point")
        lines.append(line)
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def _data_bursts_lines(results: xr.Dataset) -> list[str]:
    """What the bursts column compares with: the test data's bursts, per dataset of the sweep."""
    done = results["status"].values == "done"
    names, period = results["dataset"].values, results["data_burst_period"].values
    said = [f"{d} {data_bursts_cell(results, done & (names == d) & np.isfinite(period))}"
            for d in sorted(set(names[done & np.isfinite(period)]))]
    return [f"- {BURSTS_EXPLAINED}; per row the medians over the seeds whose run bursts, and how many "
            f"did. The test data: {'; '.join(said)}"]


def _in_order(value: Any) -> tuple:
    """A sort key for a swept value: numbers by size (latent_dim 8 before 16, tau 2.0 before 10.0;
    also as the text a grid mixing numbers and words stores them as), then anything else by its text."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
        return (0, float(value), "")
    try:
        return (0, float(str(value)), str(value))
    except ValueError:
        return (1, 0.0, str(value))


def sweep_table(results: xr.Dataset, keys: Sequence[str]) -> str:
    """Markdown table: one row per combination of ``keys`` (seeds pooled), median ± MAD, and
    where the seeds' free runs end up at twice the evaluation length (:mod:`.late_run`); with
    ``test_starts`` also ``D_stsp_starts``, the median over seeds of each seed's median D_stsp
    from that many starts over the test split (:mod:`.starts`). Where the test data burst, a last
    column gives the late free runs' bursts (:func:`.tables.late_bursts_cell`) and a line under the
    table the test data's, so a row that scores well but bursts like clockwork, or not at all, shows."""
    metrics: tuple[str, ...] = ("D_stsp", "D_H", "PE", "diverged", "fit_time")
    if "D_stsp_starts" in results and np.isfinite(results["D_stsp_starts"].values).any():
        metrics = ("D_stsp", "D_stsp_starts", *metrics[1:])
    n = results.sizes.get("point", 0)
    status = results["status"].values if n else np.array([])
    bursting = ("data_burst_period" in results and "burst_period_late" in results
                and np.isfinite(results["data_burst_period"].values[status == "done"]).any())
    header = [*keys, "seeds done", *metrics, "free run (2T)"] + (["bursts (2T)"] if bursting else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    combos: dict[tuple, list[int]] = {}
    for i in range(n):
        combos.setdefault(tuple(results[k].values[i].item() if hasattr(results[k].values[i], "item")
                                else results[k].values[i] for k in keys), []).append(i)
    errors = []
    off_grid = False
    for combo, idx in sorted(combos.items(), key=lambda kv: tuple(map(_in_order, kv[0]))):
        done = [i for i in idx if results["status"].values[i] == "done"]
        cells = [str(v) for v in combo] + [f"{len(done)}/{len(idx)}"]
        for m in metrics:
            med, mad, k = median_mad(results[m].values[done])
            if m == "diverged":  # a fraction of seeds, not a median
                finite = results[m].values[done][np.isfinite(results[m].values[done])]
                cells.append("–" if finite.size == 0 else f"{finite.mean():.2f}")
            else:
                cells.append("–" if k == 0 else _fmt(med) if k == 1 or m == "fit_time"
                             else f"{_fmt(med)} ± {_fmt(mad, 2)}")
                if m == "D_stsp":       # a seed whose run never entered the data's grid is not unscored
                    cells[-1] = with_off_grid(cells[-1], results[m].values[done], results["diverged"].values[done])
                    off_grid = off_grid or "off grid" in cells[-1]
        cells.append(regime_cell(results["regime"].values[done]) if "regime" in results else "–")
        if bursting:
            cells.append(late_bursts_cell(results, np.isin(np.arange(n), done)) if done else "–")
        lines.append("| " + " | ".join(cells) + " |")
        errors += [f"- failed: {dict(zip(keys, combo))} seed {int(results['seed'].values[i])}: "
                   f"{(str(results['error'].values[i]).splitlines() or ['no error recorded'])[0][:200]}"
                   for i in idx if i not in done]
    machines = describe_machines(results["machine"].values) if "machine" in results else None
    tail = errors + ([f"- {OFF_GRID_EXPLAINED}"] if off_grid else []) + ([f"- {machines}"] if machines else []) + (_data_bursts_lines(results) if bursting else [])
    return "\n".join(lines + ([""] + tail if tail else [])) + "\n"
