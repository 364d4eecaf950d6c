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

Points run on an executor with ``submit(fn, *args)`` → future with ``result()``: a local
process pool by default, or a Dask cluster (``scheduler="tcp://host:8786"``; needs the
``distributed`` extra). Results are gathered into one NetCDF file and one Markdown table
(rows = grid combination without the seed, median ± MAD over seeds).
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import xarray as xr

from .config import RUN_KEYS, load_config_file, resolve_config, save_config
from .runner import records_to_dataset, run_grid, run_point
from .tables import median_mad, _fmt

#: keys of a sweep file besides the run configuration
SWEEP_KEYS = ("grid", "out", "scheduler", "n_workers", "preset")


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
    for key in ("dataset", "model"):
        if key not in base and key not in grid:
            raise ValueError(f"a sweep needs `{key}` (in the file or in [grid]); got keys {sorted(base)}.")
    keys = list(grid)
    configs = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        settings = {k: v for k, v in base.items() if k in RUN_KEYS}
        settings["model_params"] = dict(base.get("model_params", {}))
        settings["fit_options"] = dict(base.get("fit_options", {}))
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
        configs.append(resolve_config(dataset, model, method, overrides=settings, preset=base.get("preset")))
    return configs, [k.rpartition(".")[2] for k in keys]


def make_executor(scheduler: str | None = None, n_workers: int | None = None) -> Any:
    """A Dask client for ``scheduler`` (an address), else a local process pool.

    Raises
    ------
    ValueError
        ``scheduler`` given but ``distributed`` is not installed.
    """
    if scheduler:
        try:
            from distributed import Client
        except ModuleNotFoundError as err:
            raise ValueError(f"--scheduler {scheduler!r} needs dask.distributed: "
                             "pip install 'dsident[distributed]'.") from err
        return Client(scheduler)
    return ProcessPoolExecutor(max_workers=n_workers or max(1, min(4, os.cpu_count() or 1)))


def run_sweep(spec: str | Path | Mapping[str, Any], *, out: str | Path | None = None,
              scheduler: str | None = None, executor: Any = None, n_workers: int | None = None,
              progress: bool = True) -> tuple[xr.Dataset, str]:
    """Run a sweep file (or dict) and gather the results.

    Parameters
    ----------
    spec : path or mapping
        The sweep: a TOML/YAML file or the same content as a dict (see the module docstring).
    out : path, optional
        Result folder (default: the file's ``out`` key, else ``dsident-results/sweep``).
    scheduler : str, optional
        Dask scheduler address; default: a local process pool.
    executor : object with ``submit``, optional
        Use this executor instead of building one (not shut down here).
    n_workers : int, optional
        Size of the local process pool.

    Returns
    -------
    (xarray.Dataset, str)
        One entry per point (see :func:`records_to_dataset`) and the Markdown table; both are
        also written to ``out/sweep.nc`` and ``out/sweep.md``.
    """
    data = load_config_file(spec) if isinstance(spec, (str, Path)) else dict(spec)
    unknown = sorted(set(data) - set(RUN_KEYS) - set(SWEEP_KEYS))
    if unknown:
        raise ValueError(f"unknown sweep key(s) {unknown}; expected run keys {list(RUN_KEYS)} "
                         f"or {list(SWEEP_KEYS)}.")
    configs, swept = expand_grid(data, data.get("grid", {}))
    out = Path(out or data.get("out") or "dsident-results/sweep")
    out.mkdir(parents=True, exist_ok=True)
    save_config({"sweep": data}, out / "sweep_config.json")
    own = executor is None
    executor = executor or make_executor(scheduler or data.get("scheduler"), n_workers or data.get("n_workers"))
    try:
        records = run_grid(configs, out, executor=executor, progress=progress, point_function=run_point)
    finally:
        if own:
            (executor.close if hasattr(executor, "close") and not hasattr(executor, "shutdown")
             else executor.shutdown)()
    results = records_to_dataset(records, sweep_keys=[k for k in swept if k != "seed"])
    results.to_netcdf(out / "sweep.nc", engine="h5netcdf")
    table = sweep_table(results, [k for k in swept if k != "seed"])
    (out / "sweep.md").write_text(table)
    return results, table


def sweep_table(results: xr.Dataset, keys: Sequence[str]) -> str:
    """Markdown table: one row per combination of ``keys`` (seeds pooled), median ± MAD."""
    metrics = ("D_stsp", "D_H", "PE", "diverged", "fit_time")
    header = [*keys, "seeds done", *metrics]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    n = results.sizes.get("point", 0)
    combos: dict[tuple, list[int]] = {}
    for i in range(n):
        combos.setdefault(tuple(results[k].values[i].item() if hasattr(results[k].values[i], "item")
                                else results[k].values[i] for k in keys), []).append(i)
    errors = []
    for combo, idx in sorted(combos.items(), key=lambda kv: tuple(map(str, kv[0]))):
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
        lines.append("| " + " | ".join(cells) + " |")
        errors += [f"- failed: {dict(zip(keys, combo))} seed {int(results['seed'].values[i])}: "
                   f"{str(results['error'].values[i]).splitlines()[0][:200]}" for i in idx if i not in done]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"
