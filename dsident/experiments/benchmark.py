"""``dsident benchmark``: models × datasets × seeds, the table with its floor, and the figures.

:func:`run_benchmark` resolves one configuration per (dataset, model, method, seed) from the
defaults table (:mod:`dsident.experiments.config`), runs the grid (:mod:`.runner`), computes
the floor of SPEC-metrics §5 at the evaluation length of each dataset, and writes into ``out``::

    results.nc        one entry per grid point (scores, fit time, status, error, configs)
    results.md        the benchmark table (median ± MAD over seeds, floor and untrained rows), then
                      where the free runs end up at twice the evaluation length (verdicts, λ_max
                      beside the true system's, late-stretch D_stsp; :mod:`.late_run`)
    summary.png       the summary figure
    <dataset>_best.png  attractor / time-series / spectrum figure of the best point per dataset
    <dataset>_dynamics.md, <dataset>_flow.png
                      the best point's dynamics (:mod:`.best_dynamics`): verdict, Lyapunov
                      exponents beside the true system's, fixed points, flow field
    points/...        one folder per grid point (config.json, result.json, metrics.nc, model/, ...)

With ``quick=True`` the ``quick`` preset of :data:`dsident.experiments.config.PRESETS` sets
the grid (Lorenz-63, the model and method that reconstruct it fastest, one seed) and its
settings; an untrained model of the same configuration is scored beside it.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import xarray as xr

from .best_dynamics import TRUE_SPECTRUM_STEPS, best_point_dynamics, true_spectrum
from .config import FILE_ONLY_KEYS, PRESETS, check_run_types, default_method, held_out_by_default, resolve_config
from .inputs import check_grid_datasets, check_grid_files, is_path_like
from .machine import cpu_model
from .registry import available_models, check_model_name
from .runner import check_run_options, point_id, records_to_dataset, run_grid
from .scoring import cached_floor
from .tables import (RECONSTRUCTION_FLOOR_RATIO, RECONSTRUCTION_MAX_DH, bursts_table, floor_discriminates,
                     floor_multiple, is_reconstruction, markdown_table, regime_table, starts_table, test_data_note,
                     trend_note)

#: the grid ``dsident benchmark`` runs without arguments
DEFAULT_DATASETS: tuple[str, ...] = ("lorenz63", "bursting_neuron", "ecg")
DEFAULT_MODELS: tuple[str, ...] = ("shplrnn", "rplrnn", "gnode", "ltc", "rfwp", "organics")
DEFAULT_SEEDS = 3


def benchmark_configs(datasets: Sequence[str], models: Sequence[str], methods: Sequence[str] | None,
                      seeds: int | Sequence[int], *, quick: bool = False,
                      overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Resolved configurations of the grid datasets × models × methods × seeds.

    ``methods=None`` uses each (dataset, model)'s default method (:func:`default_method`).
    ``seeds`` is a count (0..n-1, or from ``overrides["seed"]`` on: ``--seed 5 --seeds 3`` runs
    seeds 5, 6, 7) or a list.
    """
    first = (overrides or {}).get("seed")
    if first is not None:
        check_run_types({"seed": first})
        if not isinstance(seeds, (int, np.integer)):
            raise ValueError(f"`seed` (--seed {first}) and a list of seeds {list(seeds)!r} both name the seeds; give "
                             "one of them.")
    start = int(first or 0)
    seed_list = list(range(start, start + int(seeds))) if isinstance(seeds, (int, np.integer)) \
        else [int(s) for s in seeds]
    if not seed_list:
        raise ValueError(f"`seeds` must be a positive count or a non-empty list; got {seeds!r}.")
    observation = ((overrides or {}).get("model_params") or {}).get("observation")
    file_only = sorted(set(overrides or {}) & set(FILE_ONLY_KEYS))
    if file_only and not any(is_path_like(str(d)) for d in datasets):
        raise ValueError(f"{file_only} (--read / --test-fraction / --delay-embed) apply only to a grid's data files "
                         f"(their reader's options, their held-out share, their embedding), but the datasets "
                         f"{list(datasets)} are all shipped sets; drop them.")
    out = []
    for dataset in datasets:
        # a shipped set has no reader options and its own test split: those settings are the files'
        shared = {k: v for k, v in (overrides or {}).items()
                  if is_path_like(str(dataset)) or k not in FILE_ONLY_KEYS}
        for model in models:
            model = check_model_name(model)
            for method in (methods or [default_method(model, dataset, observation)]):
                for seed in seed_list:
                    ov = {**shared, "seed": seed}
                    out.append(held_out_by_default(resolve_config(dataset, model, method, overrides=ov,
                                                                  preset="quick" if quick else None)))
    check_run_options(out)
    return out


def quick_grid() -> dict[str, Any]:
    """Datasets, models, methods and seeds of the ``--quick`` preset."""
    return dict(PRESETS["quick"]["grid"])


def run_benchmark(*, datasets: Sequence[str] | None = None, models: Sequence[str] | None = None,
                  methods: Sequence[str] | None = None, seeds: int | Sequence[int] | None = None,
                  quick: bool = False, out: str | Path = "dsident-results/benchmark",
                  overrides: dict[str, Any] | None = None, executor: Any = None, progress: bool = True,
                  untrained: bool | None = None, figures: bool = True, echo: Any = print) -> dict[str, Any]:
    """Run the benchmark and write its table, NetCDF results and figures.

    Parameters
    ----------
    datasets, models, methods, seeds
        The grid; defaults: :data:`DEFAULT_DATASETS`, every *available* model of
        :data:`DEFAULT_MODELS` (an unavailable one is listed with its reason), each
        (dataset, model)'s default method (``config.default_method``),
        :data:`DEFAULT_SEEDS` seeds. With ``quick=True`` the quick preset fills whatever is
        not given.
    quick : bool
        Use the ``quick`` preset (the README's main job: Lorenz-63 in minutes on a laptop).
    out : path
        Result folder (re-running into the same folder skips finished points).
    overrides : dict, optional
        Settings applied to every point (config file / flags): run keys of
        :data:`dsident.experiments.config.RUN_KEYS`.
    executor : object with ``submit``, optional
        Run the points there (process pool, Dask client); default in this process.
    untrained : bool, optional
        Also score an untrained model of each (dataset, model, method) (default: with ``quick``).
    figures : bool
        Write the PNG figures, and analyse the best point's dynamics per dataset (a section of
        ``results.md``, ``<dataset>_dynamics.md``, ``<dataset>_flow.png``).
    echo : callable
        Where progress text goes (``print``; ``None`` for silence).

    Returns
    -------
    dict
        ``results`` (xarray.Dataset), ``table`` (Markdown str), ``floor`` and ``untrained``
        (dataset -> scores), ``best`` (dataset -> record), ``wall_time`` (s), ``out`` (Path).
    """
    t_start = time.perf_counter()
    say = echo or (lambda *a, **k: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    grid = quick_grid() if quick else {}
    entries = available_models()
    datasets, models, methods, configs = _grid(datasets, models, methods, seeds, quick, overrides, say)
    say(f"[dsident] benchmark: {len(configs)} point(s) — datasets {datasets}, models {list(models)}, "
        f"methods {methods or 'the default per dataset and model'}; results in {out}")
    say(f"[dsident] {describe_expected_time(configs, out, quick)}")
    records = run_grid(configs, out, executor=executor, progress=progress)
    results = records_to_dataset(records)
    results.attrs["quick"] = int(bool(quick))
    results.to_netcdf(out / "results.nc", engine="h5netcdf")

    floors = {d: cached_floor(_first(configs, d), out, say) for d in datasets}
    # the floors that can mark reconstructions (multiples, ✓, the summary figure's line)
    yardsticks = {d: f for d, f in floors.items() if floor_discriminates(f)}
    untrained_scores: dict[str, dict[str, dict[str, float]]] = {}
    if untrained if untrained is not None else quick:
        for cfg in _one_per_cell(configs, with_method=False):   # the start point does not depend on the method
            label = f"untrained {cfg['model']}"
            untrained_scores.setdefault(label, {})[cfg["dataset"]] = _untrained(cfg, out, say)
    floor_label = ("floor (true system, same length)" if not any(is_path_like(str(d)) for d in datasets)
                   else "floor (same length: true system; a file's own stretches)")
    extra = {floor_label: floors, **untrained_scores}
    pe = int(configs[0].get("pe_steps", 20)) if configs else 20
    notes = [test_data_note(records, datasets) or "evaluation length (test samples compared) per dataset: "
             + ", ".join(f"{d} {_first(configs, d).get('eval_length')}" for d in datasets),
             *(f"floor of {d}: the recording has no true system, so its other stretches (from the training part, "
               "as many as fit, at most 5) against the test stretch; no PE floor" for d in datasets
               if is_path_like(str(d)) and math.isfinite(floors.get(d, {}).get("D_stsp", math.nan))),
             *(f"{d}: no multiple of the floor and no ✓: on this test stretch a run at rest at the data's mean scores "
               f"D_stsp {floors[d]['D_stsp_at_rest']:.3g}, within {RECONSTRUCTION_FLOOR_RATIO:g}× the floor, so D_stsp "
               "cannot tell a reconstruction from a fixed point; hold out a longer stretch (--test-fraction, "
               "test_data)" for d in datasets if d in floors and not floor_discriminates(floors[d])),
             "cells: median ± MAD over seeds; diverged: fraction of seeds; fit time: median wall seconds",
             *(f"{m}: not available ({e.error})" for m, e in entries.items()
               if not e.available and m in (grid.get("models") or DEFAULT_MODELS))]
    table = markdown_table(results, extra_rows=extra, pe_steps=pe,
                           title="dsident benchmark" + (" (--quick)" if quick else ""), notes=notes, floor=yardsticks)
    best = _best_points(results, records)
    verdicts = [_verdict(d, best.get(d), yardsticks.get(d, {})) for d in datasets if quick]
    table += "".join(f"\n{v}\n" for v in verdicts if v)
    truth, units, true_verdicts = _true_exponents(datasets, configs, out, say)
    regimes = regime_table(results, truth=truth, unit=units, truth_verdict=true_verdicts)
    table += f"\n{regimes}" if regimes else ""
    bursts = bursts_table(results, unit=units)
    table += f"\n{bursts}" if bursts else ""
    starts = starts_table(results, floor=yardsticks)
    table += f"\n{starts}" if starts else ""
    trend = trend_note(results)
    table += f"\n{trend}" if trend else ""
    if figures:
        lines = [best_point_dynamics(d, best[d], out, say=say) for d in datasets if d in best]
        if any(lines):
            table += ("\n## Dynamics of each dataset's best point (`dsident analyze`)\n\n"
                      "The point with the lowest D_stsp, whether or not it reconstructs (the table's ✓ says).\n\n"
                      + "\n".join(line for line in lines if line) + "\n")
    wall = time.perf_counter() - t_start
    table += f"\nwall time of this run: {wall:.0f} s\n"
    (out / "results.md").write_text(table)
    if figures:
        _figures(results, yardsticks, best, out, say)
    say(table)
    return {"results": results, "table": table, "floor": floors, "untrained": untrained_scores,
            "best": best, "wall_time": wall, "out": out}


def _starts_plan(configs: Sequence[dict[str, Any]], out: str | Path) -> list[str]:
    """The dry run's line on ``test_starts``: how many points will also be scored from several
    starts, and how many of them are finished fits whose saved models are scored without a refit."""
    from .runner import point_id, read_record
    from .starts import needs_starts

    asked = [c for c in configs if c.get("test_starts")]
    if not asked:
        return []
    records = [(c, read_record(Path(out) / "points" / point_id(c))) for c in asked]
    rescore = sum(r is not None and r.get("status") == "done" and needs_starts(r, c) for c, r in records)
    return [f"Every point is also scored from {asked[0]['test_starts']} starts over its test split "
            f"(`--starts`); {rescore} finished point(s) will be scored from their saved models, nothing refitted.", ""]


def _grid(datasets: Sequence[str] | None, models: Sequence[str] | None, methods: Sequence[str] | None,
          seeds: int | Sequence[int] | None, quick: bool, overrides: dict[str, Any] | None,
          say: Any) -> tuple[list[str], list[str], Sequence[str] | None, list[dict[str, Any]]]:
    """The grid's datasets, models, methods and resolved configurations (defaults filled in)."""
    grid = quick_grid() if quick else {}
    datasets = list(datasets or grid.get("datasets") or DEFAULT_DATASETS)
    seeds = seeds if seeds is not None else grid.get("seeds", DEFAULT_SEEDS)
    entries = available_models()
    if models is None:
        models = list(grid.get("models") or DEFAULT_MODELS)
        for m in [m for m in models if not entries[m].available]:
            say(f"[dsident] model {m} skipped: {entries[m].error}")
        models = [m for m in models if entries[m].available]
        if not models:
            raise ValueError("no model is available in this build of dsident: "
                             + "; ".join(f"{m}: {e.error}" for m, e in entries.items()))
    methods = methods or grid.get("methods")
    check_grid_datasets(datasets)
    configs = benchmark_configs(datasets, models, methods, seeds, quick=quick, overrides=overrides)
    check_grid_files(configs)
    return datasets, list(models), methods, configs


def plan_benchmark(*, datasets: Sequence[str] | None = None, models: Sequence[str] | None = None,
                   methods: Sequence[str] | None = None, seeds: int | Sequence[int] | None = None,
                   quick: bool = False, out: str | Path = "dsident-results/benchmark",
                   overrides: dict[str, Any] | None = None, echo: Any = print) -> str:
    """What :func:`run_benchmark` with the same arguments would run, without running or writing anything.

    Returns
    -------
    str
        A Markdown table, one row per (dataset, model, method) cell: the seeds, how many of
        them are already finished in ``out`` (a re-run skips those), the training length,
        whether the cell has measured defaults (``PAIR_DEFAULTS``, the cells whose numbers
        are in the README; ``RECORDING_DEFAULTS`` for a data file) or runs on the engines' defaults, what the cell gave when it was
        measured (:data:`~dsident.experiments.config.MEASURED`: median D_stsp with its
        multiple of the floor, D_H, seeds) and its median fit time, and the resolved settings.
        Under the table, the fitting time the unfinished points are expected to take. A cell
        whose settings differ from the measured ones (a config file, flags) shows no numbers.
    """
    from .config import MEASURED_EVAL_LENGTH, PAIR_DEFAULTS, recording_cell
    from .runner import is_done

    say = echo or (lambda *a, **k: None)
    _, _, _, configs = _grid(datasets, models, methods, seeds, quick, overrides, say)
    preset = PRESETS["quick"] if quick else {}
    floors: dict[str, float] = {}
    lines = [f"| dataset | model | method | seeds | finished | train length | defaults | measured (T = "
             f"{MEASURED_EVAL_LENGTH}) | fit time | settings |", "|---|---|---|---|---|---|---|---|---|---|"]
    for cell in _one_per_cell(configs):
        key = (cell["dataset"], cell["model"], cell["method"])
        points = [c for c in configs if (c["dataset"], c["model"], c["method"]) == key]
        done = sum(is_done(c, out) for c in points)
        tuned = ("quick preset" if key in preset else "measured cell" if key in PAIR_DEFAULTS else
                 "recording cell" if recording_cell(*key, cell["model_params"].get("observation")) is not None
                 else "engine defaults")
        settings = json.dumps({"model_params": cell["model_params"], "fit_options": cell["fit_options"],
                               **({"slow_channels": cell["slow_channels"]} if cell.get("slow_channels") else {})})
        record = measured_cell(cell, quick)
        numbers, fit_time = "–", "–"
        if record is not None:
            if key[0] not in floors:
                floors[key[0]] = _measured_floor(key[0])
            numbers = (f"D_stsp {_num3(record['D_stsp'], keep_zeros=True)}"
                       f"{floor_multiple(record['D_stsp'], record['D_H'], floors[key[0]])}, D_H "
                       f"{_num3(record['D_H'])}; {int(record['seeds'])} seed{'s' if record['seeds'] != 1 else ''}")
            if math.isfinite(record["fit_time_s"]):
                fit_time = f"{record['fit_time_s']:.0f} s"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {', '.join(str(c['seed']) for c in points)} | "
                     f"{done}/{len(points)} | {cell.get('train_length') or 'all'} | {tuned} | "
                     f"{numbers} | {fit_time} | `{settings}` |")
    test_note = test_data_note([{"config": c} for c in configs])
    lines += ["", describe_expected_time(configs, out, quick), *_starts_plan(configs, out),
              f"{test_note[:1].upper()}{test_note[1:]}.",
              "Measured: D_stsp (k×) is its multiple of the floor at that length; ✓ a reconstruction "
              f"(D_stsp ≤ {RECONSTRUCTION_FLOOR_RATIO:g}× the floor and D_H ≤ {RECONSTRUCTION_MAX_DH:g}); "
              "– not measured with these settings.", "", "At a glance (the measured column as a matrix):", "",
              glance_matrix(configs, quick, floors=floors)]
    return "\n".join(lines)


#: short names of the inference methods in :func:`glance_matrix`'s cells
_METHOD_SHORT = {"teacher-forcing": "TF", "gtf": "TF", "laplace-em": "EM", "svi": "SVI", "bptt": "BPTT"}


def glance_matrix(configs: Sequence[Mapping[str, Any]], quick: bool = False, *,
                  floors: dict[str, float] | None = None) -> str:
    """The grid's measured numbers as one Markdown matrix: a row per model, a column per dataset.

    Each cell reads ``"TF 1.08 (2.42× ✓) / 0.028"``: the cell's method (``TF`` teacher forcing,
    ``EM`` Laplace-EM, ``SVI``, ``BPTT``), its measured median D_stsp with the multiple of the
    floor (✓ a reconstruction, :func:`~dsident.experiments.tables.is_reconstruction`) and its
    median D_H, all from :data:`~dsident.experiments.config.MEASURED` through
    :func:`measured_cell`; "–" where the grid's settings were not measured. A model run with
    several methods on one dataset lists them one under the other (``<br>``).

    Parameters
    ----------
    configs : sequence of resolved configurations (one per grid point; seeds are ignored)
    quick : bool
        Read the quick preset's measured numbers.
    floors : dict, optional
        Cache of floor D_stsp per dataset at the measured length (filled in as needed).
    """
    floors = {} if floors is None else floors
    datasets = list(dict.fromkeys(c["dataset"] for c in configs))
    models = list(dict.fromkeys(c["model"] for c in configs))
    cells: dict[tuple[str, str], list[str]] = {}
    for cell in _one_per_cell(configs):
        record = measured_cell(cell, quick)
        text = "–"
        if record is not None:
            if cell["dataset"] not in floors:
                floors[cell["dataset"]] = _measured_floor(cell["dataset"])
            multiple = floor_multiple(record["D_stsp"], record["D_H"], floors[cell["dataset"]])
            text = f"{_num3(record['D_stsp'], keep_zeros=True)}{multiple} / {_num3(record['D_H'])}"
        method = _METHOD_SHORT.get(cell["method"], cell["method"])
        cells.setdefault((cell["model"], cell["dataset"]), []).append(f"{method} {text}")
    lines = ["| model | " + " | ".join(f"{d}: D_stsp (× floor) / D_H" for d in datasets) + " |",
             "|---|" + "---|" * len(datasets)]
    for model in models:
        row = ["<br>".join(cells.get((model, d), ["n/a"])) for d in datasets]
        lines.append(f"| {model} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def measured_cell(cell: Mapping[str, Any], quick: bool = False) -> dict[str, float] | None:
    """What a resolved cell gave when it was measured, or None.

    The record of :data:`~dsident.experiments.config.MEASURED` (``PRESET_MEASURED["quick"]``
    with ``quick``) for the cell's (dataset, model, method), when the cell runs with the
    settings it was measured with (its resolved defaults, at the measured evaluation length);
    None otherwise, or when the cell was never measured.
    """
    from .config import MEASURED, PRESET_MEASURED

    table = PRESET_MEASURED["quick"] if quick else MEASURED
    key = (cell["dataset"], cell["model"], cell["method"])
    return table.get(key) if key in table and _as_measured(cell, quick) else None


def expected_fit_time(configs: Sequence[Mapping[str, Any]], out: str | Path,
                      quick: bool = False, jobs: int = 1) -> tuple[float, int, int]:
    """Measured fitting time of the grid points not finished in ``out``.

    ``jobs``: the cores a point run alone may use. A cell that keeps the best of k fits
    (``best_of``, measured with its candidates one after another) then trains them
    ``min(jobs, k)`` at a time (:func:`.runner.fit_point`), so its time is scaled by
    ``ceil(k / min(jobs, k)) / k``.

    Returns
    -------
    seconds : float
        Sum of the measured median fit times of the unfinished points that have one.
    n_unknown : int
        Unfinished points without a measured time (other settings, or never measured).
    n_todo : int
        Unfinished points.
    """
    from .runner import is_done

    seconds, n_unknown, n_todo = 0.0, 0, 0
    for cfg in configs:
        if is_done(cfg, out):
            continue
        n_todo += 1
        record = measured_cell(cfg, quick)
        if record is None or not math.isfinite(record["fit_time_s"]):
            n_unknown += 1
        else:
            seconds += record["fit_time_s"] * _side_by_side_share(cfg, jobs)
    return seconds, n_unknown, n_todo


def _side_by_side_share(cfg: Mapping[str, Any], jobs: int) -> float:
    """The share of a best_of cell's sequential time left when ``jobs`` processes train its
    candidates (1 for any other cell, or one whose options fix ``n_jobs`` or ask for restarts)."""
    options = cfg.get("fit_options") or {}
    k = int(options.get("best_of", 1))
    if k <= 1 or jobs <= 1 or "n_jobs" in options or options.get("restarts"):
        return 1.0
    return math.ceil(k / min(jobs, k)) / k


def describe_expected_time(configs: Sequence[Mapping[str, Any]], out: str | Path, quick: bool = False) -> str:
    """One sentence: the expected fitting time of the unfinished points (:func:`expected_fit_time`)."""
    from .._threads import usable_cores

    cores = usable_cores()
    seconds, unknown, n_todo = expected_fit_time(configs, out, quick, jobs=cores)
    if n_todo == 0:
        return "Every point is already finished."
    if n_todo == unknown:
        return f"Expected fitting time of the {n_todo} unfinished points: not measured for these settings."
    return (f"Expected fitting time of the {n_todo} unfinished points: ≈ {_duration(seconds)} with one worker "
            f"(`--workers N` runs N at once; with one, a best-of-k cell trains its candidates on the {cores} cores)"
            + (f", plus {unknown} without a measured time" if unknown else "")
            + ". Times were measured with one torch thread on 2 shared cores of the development machines, "
            "which differ among themselves by up to 4× (the quick job took 105-410 s with the same code); "
            f"this machine: {cpu_model()}, {os.cpu_count()} logical cores. The late free run and scoring add "
            "≈ 10-20 s a point.")


def _as_measured(cell: Mapping[str, Any], quick: bool) -> bool:
    """Whether a cell runs with the settings its measured numbers were taken with: the resolved
    defaults of its (dataset, model, method), evaluated at the measured length."""
    from .config import MEASURED_EVAL_LENGTH

    base = resolve_config(cell["dataset"], cell["model"], cell["method"], preset="quick" if quick else None)
    same = all(cell.get(k) == base.get(k) for k in ("model_params", "fit_options", "train_length", "slow_channels"))
    return same and cell.get("eval_length") == MEASURED_EVAL_LENGTH


def _measured_floor(dataset: str) -> float:
    """The floor's D_stsp at the measured evaluation length (NaN where there is none)."""
    from .config import MEASURED_EVAL_LENGTH
    from .scoring import floor_scores

    try:
        return float(floor_scores(dataset, eval_length=MEASURED_EVAL_LENGTH)[0]["D_stsp"])
    except Exception:   # a dataset without a true system: the numbers stand without the multiple
        return math.nan


def _num3(value: float, keep_zeros: bool = False) -> str:
    return "off grid" if not math.isfinite(value) else f"{value:#.3g}" if keep_zeros else f"{value:.3g}"


def _duration(seconds: float) -> str:
    """A rough duration: "45 s", "12 min", "3.4 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _first(configs: Sequence[dict[str, Any]], dataset: str) -> dict[str, Any]:
    return next((c for c in configs if c["dataset"] == dataset), {"eval_length": None, "pe_steps": 20})


def _one_per_cell(configs: Sequence[dict[str, Any]], *, with_method: bool = True) -> list[dict[str, Any]]:
    seen, out = set(), []
    for c in configs:
        key = (c["dataset"], c["model"], c["method"] if with_method else "")
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _untrained(cfg: dict[str, Any], out: Path, say: Any) -> dict[str, float]:
    """Scores of the configuration's model before any training (its initialisation)."""
    from .scoring import evaluate_model
    from .runner import adapt_to_data, point_data
    from .untrained import untrained_model

    cache = out / f"untrained_{point_id(cfg)}.json"
    if cache.is_file():
        return {k: (math.nan if v is None else v) for k, v in json.loads(cache.read_text()).items()}
    try:
        train, test, fitted_cfg = point_data(cfg)
        model = untrained_model(adapt_to_data(fitted_cfg, train), train)
        scores, _ = evaluate_model(model, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=int(cfg.get("seed", 0)))
    except Exception as err:
        say(f"[dsident] untrained {cfg['model']} not scored: {type(err).__name__}: {err}")
        return {"D_stsp": math.nan, "D_H": math.nan, "PE": math.nan, "diverged": math.nan}
    cache.write_text(json.dumps({k: (None if not math.isfinite(v) else v) for k, v in scores.items()}))
    return scores


def _true_exponents(datasets: Sequence[str], configs: Sequence[dict[str, Any]], out: Path,
                    say: Any) -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """Per dataset, the true system's largest Lyapunov exponent (NaN for a recording or the
    ECG), the data's time unit, and what the true spectrum says of the attractor."""
    from ..analysis.lyapunov import spectrum_verdict, zero_tolerance
    from .inputs import load_data

    truth: dict[str, float] = {}
    units: dict[str, str] = {}
    verdicts: dict[str, str] = {}
    for d in datasets:
        try:
            test = load_data(d, split="test", length=None, read=_first(configs, d).get("read"))
            spectrum, units[d] = true_spectrum(d, test, out)
        except Exception as err:   # the table stands without the true row
            say(f"[dsident] true Lyapunov exponents of {d} not computed: {type(err).__name__}: {err}")
            continue
        truth[d] = math.nan if spectrum is None else float(spectrum[0])
        if spectrum is not None:
            # the zero tolerance the models' free runs get, for the steps true_spectrum averages,
            # in the data's time unit
            zero_tol = zero_tolerance(TRUE_SPECTRUM_STEPS) / float(test.attrs["dt"])
            verdicts[d] = spectrum_verdict(spectrum, zero_tol=zero_tol)
    return truth, units, verdicts


def _best_points(results: xr.Dataset, records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per dataset, the finished point with the lowest D_stsp (ties: lower D_H)."""
    best: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("status") != "done":
            continue
        d = rec["config"]["dataset"]
        s = rec["scores"]
        key = (s.get("D_stsp", math.nan), s.get("D_H", math.nan))
        key = tuple(math.inf if not math.isfinite(v) else v for v in key)
        if d not in best or key < best[d]["_key"]:
            best[d] = {**rec, "_key": key}
    return best


def _verdict(dataset: str, best: dict[str, Any] | None, floor: dict[str, float]) -> str:
    """One line: does the best model reach D_stsp ≤ 3× floor and D_H ≤ 0.15?"""
    if best is None:
        return f"**{dataset}: no finished fit** — see the failures above."
    s, f = best["scores"], floor.get("D_stsp", math.nan)
    ratio = s["D_stsp"] / f if math.isfinite(f) and f > 0 else math.nan
    ok = is_reconstruction(s["D_stsp"], s["D_H"], f)
    cfg = best["config"]
    rule = f"D_stsp ≤ {RECONSTRUCTION_FLOOR_RATIO:g}× floor, D_H ≤ {RECONSTRUCTION_MAX_DH:g}"
    seed = f"seed {cfg['seed']}"
    if "best_of" in best:          # fit(best_of=k): which of the k models the training data chose
        chosen = best["best_of"]
        seed += (f"; the model from seed {chosen['seed_used']} kept of {len(chosen['candidates'])} trained, "
                 f"chosen on the training data")
    return (f"**{dataset}: best {cfg['model']} × {cfg['method']} ({seed}): "
            f"D_stsp = {s['D_stsp']:.3g} ({ratio:.2f}× the floor {f:.3g}), D_H = {s['D_H']:.3g} — "
            + (f"a real reconstruction ({rule}).**" if ok else
               f"NOT yet a reconstruction by the criterion {rule.replace(', ', ' and ')}.**"))


def _figures(results: xr.Dataset, floors: dict[str, dict[str, float]], best: dict[str, dict[str, Any]],
             out: Path, say: Any) -> None:
    from .. import plotting
    from .inputs import run_test

    try:
        if results.sizes.get("point", 0):
            plotting.plot_benchmark_summary(results, floor=floors, title="dsident benchmark",
                                            save=out / "summary.png")
    except Exception as err:
        say(f"[dsident] summary figure failed: {type(err).__name__}: {err}")
    for dataset, rec in best.items():
        gen_path = out / "points" / rec["point_id"] / "generated.nc"
        if not gen_path.is_file():
            continue
        try:
            cfg = rec["config"]
            # the channels the model saw (slow channels, if any, with the fit's scale)
            test = run_test(cfg, length=cfg.get("eval_length"))
            with xr.open_dataset(gen_path, engine="h5netcdf") as g:
                gen = g.load()
            title = f"{dataset}: {cfg['model']} × {cfg['method']}, seed {cfg['seed']}"
            plotting.plot_reconstruction(test, gen, scores={k: v for k, v in rec["scores"].items() if k != "diverged"},
                                         title=title, save=out / f"{Path(dataset).stem}_best.png")
            if test.sizes["channel"] >= 2:
                plotting.plot_attractor(test, gen, dims=tuple(range(min(3, test.sizes["channel"]))),
                                        title=title, save=out / f"{Path(dataset).stem}_attractor.png")
        except Exception as err:
            say(f"[dsident] figure for {dataset} failed: {type(err).__name__}: {err}")
