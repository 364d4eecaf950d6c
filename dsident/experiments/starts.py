"""A grid point scored from several starts over its test split (run key ``test_starts``).

The benchmark's protocol (SPEC-metrics §4) scores one free run, from the first test sample. How
much of a cell's number is the model and how much is that start can differ a lot: on the
bursting neuron, two shallow-PLRNN cells whose models score alike from eight starts (medians
0.52 and 0.53 over six seeds) differ by 0.15 on the first stretch (docs/main_job.md, "Session 39").
With ``test_starts = K`` every point is also scored by :func:`dsident.metrics.evaluate_starts`
from K windows of the evaluation length spread over the whole test split; ``result.json`` keeps
the summary under ``starts``, ``starts.nc`` every start, and the benchmark and sweep tables get
a section with the medians over seeds (:func:`dsident.experiments.tables.starts_table`).

``test_starts`` only changes how a fitted model is scored, so it is not part of a point's id: a
re-run with it over a finished grid scores the saved models (:func:`add_starts`) and refits
nothing.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import xarray as xr

__all__ = ["score_starts", "add_starts", "needs_starts", "STARTS_FILE"]

#: per-start scores of a point, next to its metrics.nc
STARTS_FILE = "starts.nc"


def _summary(res: xr.Dataset) -> dict[str, Any]:
    """What ``result.json`` keeps of :func:`~dsident.metrics.evaluate_starts`' result."""
    d_h = np.asarray(res["power_spectrum_distance"].values, dtype=float)
    d_h = d_h[np.isfinite(d_h)]
    return {"n_starts": int(res.attrs["n_starts"]), "length": int(res.attrs["length"]),
            "median_D_stsp": float(res.attrs["median_D_stsp"]), "max_D_stsp": float(res.attrs["max_D_stsp"]),
            "median_D_H": float(np.median(d_h)) if d_h.size else float("nan"),
            "fraction_diverged": float(res.attrs["fraction_diverged"]),
            "fraction_at_rest": float(res.attrs["fraction_at_rest"])}


def score_starts(model: Any, cfg: Mapping[str, Any], folder: str | Path) -> dict[str, Any]:
    """Score ``model`` from ``cfg["test_starts"]`` starts over the whole test split of ``cfg``.

    Each start is a window of ``cfg["eval_length"]`` samples (the benchmark's T), scored by the
    same protocol as the point itself, with the point's seed. Writes ``folder/starts.nc``.

    Returns
    -------
    dict
        ``n_starts``, ``length``, ``median_D_stsp``, ``max_D_stsp`` (over the starts whose run
        did not diverge), ``median_D_H``, ``fraction_diverged``, ``fraction_at_rest``, and
        ``requested`` (K); or ``{"error": "...", "requested": K}`` when the starts cannot be
        scored (the point's own scores stand without them, as with the late run).
    """
    from ..metrics import evaluate_starts
    from .inputs import run_test
    from .runner import _write_netcdf

    requested = int(cfg["test_starts"])
    try:
        full = run_test(cfg)
        length = cfg.get("eval_length")
        res = evaluate_starts(model, full, n_starts=requested,
                              length=None if length is None else int(length), seed=int(cfg.get("seed", 0)))
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}", "requested": requested}
    _write_netcdf(res, Path(folder) / STARTS_FILE)
    return {**_summary(res), "requested": requested}


def needs_starts(record: Mapping[str, Any], cfg: Mapping[str, Any]) -> bool:
    """True when ``cfg`` asks for starts that the finished point's ``record`` does not hold (none,
    another number, or a failed attempt)."""
    want = cfg.get("test_starts")
    if not want:
        return False
    have = record.get("starts") or {}
    return "error" in have or have.get("requested") != int(want)


def add_starts(point_dir: str | Path, record: dict[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Score a finished point's saved model from ``cfg["test_starts"]`` starts and write the
    summary into its ``result.json`` (and ``config.json``'s ``test_starts``); returns the
    updated record. A point saved without its model gets ``starts = {"error": ...}``."""
    from .config import save_config
    from .registry import get_estimator_class
    from .runner import _jsonable

    point_dir = Path(point_dir)
    run_cfg = {**record.get("config", {}), "test_starts": int(cfg["test_starts"])}
    model_dir = point_dir / "model"
    if not model_dir.is_dir():
        starts: dict[str, Any] = {"error": f"no saved model in {model_dir} to score from several starts",
                                  "requested": run_cfg["test_starts"]}
    else:
        try:
            est = get_estimator_class(run_cfg["model"]).load(model_dir)
        except Exception as err:
            starts = {"error": f"loading {model_dir}: {type(err).__name__}: {err}", "requested": run_cfg["test_starts"]}
        else:
            starts = score_starts(est, run_cfg, point_dir)
    record = {**{k: v for k, v in record.items() if k != "skipped"}, "config": run_cfg, "starts": starts}
    (point_dir / "result.json").write_text(json.dumps(_jsonable(record), indent=2) + "\n")
    save_config(run_cfg, point_dir / "config.json")
    return record
