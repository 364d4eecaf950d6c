"""Bridge from a fitted model to the five numbers of a benchmark cell.

The metrics themselves live in :mod:`dsident.metrics` (one implementation of each); this
module only calls :func:`dsident.metrics.evaluate` / :func:`dsident.metrics.floor` with a run
configuration's settings and reads the numbers back under stable names:

``D_stsp``, ``D_H``, ``PE``, ``diverged`` (0/1)
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Mapping

import numpy as np
import xarray as xr

#: stable result name -> names the metrics module may use for it
METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "D_stsp": ("D_stsp", "state_space_divergence", "d_stsp", "dstsp"),
    "D_H": ("D_H", "power_spectrum_distance", "d_h", "dh", "hellinger"),
    "PE": ("PE", "prediction_error", "pe", "PE(20)"),
    "diverged": ("diverged", "divergence", "is_diverged"),
}
SCORE_NAMES: tuple[str, ...] = ("D_stsp", "D_H", "PE", "diverged")


def _call_with_supported(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` with only the keyword arguments its signature accepts."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return func(*args, **kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return func(*args, **kwargs)
    return func(*args, **{k: v for k, v in kwargs.items() if k in params})


def _as_float(value: Any) -> float:
    if isinstance(value, xr.DataArray):
        value = value.values
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        return math.nan
    if arr.size > 1:  # a per-dimension or per-trial array: the protocol's summary is the mean
        return float(np.nanmean(arr)) if np.isfinite(arr).any() else math.nan
    return float(arr.reshape(-1)[0])


def extract_scores(result: Any) -> dict[str, float]:
    """Read D_stsp, D_H, PE and diverged out of an ``evaluate``/``floor`` result.

    Accepts an ``xarray.Dataset`` (data variables or attrs) or a mapping. Missing numbers are NaN.
    """
    if isinstance(result, xr.Dataset):
        lookup: Mapping[str, Any] = {**result.attrs, **{k: result[k] for k in result.data_vars}}
    elif isinstance(result, Mapping):
        lookup = result
    else:
        raise TypeError(f"`result` must be an xarray.Dataset or a mapping; got {type(result).__name__}.")
    out = {}
    for name, aliases in METRIC_ALIASES.items():
        value = next((lookup[a] for a in aliases if a in lookup), None)
        out[name] = math.nan if value is None else _as_float(value)
    if math.isnan(out["diverged"]):
        out["diverged"] = 0.0 if math.isfinite(out["D_stsp"]) else math.nan
    return out


def evaluate_model(model: Any, test: xr.Dataset, *, pe_steps: int = 20, seed: int = 0) -> tuple[dict[str, float], Any]:
    """SPEC-metrics §4 evaluation of ``model`` on ``test``; returns (scores, raw result).

    ``model`` is an estimator or a ``StateSpaceModel`` (``dsident.metrics.evaluate`` takes both).
    """
    from .. import metrics

    raw = _call_with_supported(metrics.evaluate, model, test, pe_steps=pe_steps, seed=seed)
    return extract_scores(raw), raw


def floor_scores(dataset: str, *, eval_length: int, pe_steps: int = 20) -> tuple[dict[str, float], Any]:
    """The floor (SPEC-metrics §5) of a shipped dataset at the evaluation length."""
    from .. import metrics

    raw = _call_with_supported(metrics.floor, dataset, length=eval_length)
    scores = extract_scores(raw)
    # the true system predicts itself exactly (PE floor 0 on clean data) and never diverges
    scores["PE"], scores["diverged"] = 0.0, 0.0
    return scores, raw


def protocol_free_run(model: Any, test: xr.Dataset, *, seed: int = 0, burn_in_fraction: float = 0.25) -> xr.Dataset:
    """The free run the evaluation compares (for figures and ``generated.nc``).

    Like :func:`dsident.metrics.evaluate`: start from the first fully observed sample of the
    first test trial, run ``(1 + burn_in_fraction)·T`` steps and keep the last ``T``
    (``T`` = that trial's length), so the figure shows what the scores measured.
    """
    x = np.asarray(test["x"].values[0], dtype=float)
    complete = np.flatnonzero(np.isfinite(x).all(axis=1))
    n_valid = int(test["length"].values[0]) if "length" in test else x.shape[0]
    if complete.size == 0:
        return model.generate(n_valid, seed=seed)
    start = int(complete[0])
    window = n_valid - start
    burn = int(np.floor(burn_in_fraction * window))
    run = model.generate(burn + window, x0=x[start], seed=seed)
    out = run.isel(time=slice(burn, None))
    out = out.assign_coords(time=np.arange(out.sizes["time"]) * float(run.attrs.get("dt", 1.0)))
    out.attrs = {**run.attrs, "burn_in_steps": burn, "start_index": start}
    return out
