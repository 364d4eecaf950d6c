"""Spike times to binned counts: :func:`bin_spikes`.

The one primitive behind every spiking importer (NWB Units tables, Neo spike trains, plain
arrays of spike times): it turns per-unit spike times into the canonical dataset with counts
``x(trial, time, unit)`` that Poisson observation models read.

Bin convention
--------------
Bins are half-open, ``[e_k, e_k + bin_size)``, with edges computed from integers,
``e_k = start + k * bin_size`` (never by accumulating floats), so a spike lying exactly on an
interior edge is counted in the bin that *starts* there. Times within ``1e-9 * bin_size`` below
an edge count as on the edge, so that decimal times stored a hair below their value (0.3 s is
below ``3 * 0.1`` in floating point) land where a reader of the numbers expects. A trial ``[start, stop)`` holds
``floor((stop - start) / bin_size)`` complete bins; a trailing partial bin is dropped. A spike
exactly at a trial's ``stop`` (or at ``t_stop`` of the recording) therefore falls outside every
bin and is **not counted**; the number of such spikes is recorded in the provenance
(``"spikes_at_stop"``) so that a convention mismatch with a closed-right tool
(``np.histogram`` counts it) stays visible.

Observed bins
-------------
A bin is observed (a count, possibly 0) only if it lies entirely inside the recording
``[t_start, t_stop]`` and, when ``obs_intervals`` are given, entirely inside one of that unit's
observation intervals. Every other bin is NaN (masked by every likelihood and metric, never
read as "no spikes").
"""
from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

import numpy as np
import xarray as xr

from .container import as_dataset

__all__ = ["bin_spikes"]

#: relative tolerance when a duration is an integer number of bins up to float rounding
_EDGE_TOLERANCE = 1e-9

#: names that trial-table columns may not take (they are the container's own variables)
_RESERVED = {"x", "u", "length", "sample_time", "trial", "time", "channel", "trial_start", "trial_stop"}


def bin_spikes(spike_times: Any, bin_size: float, t_start: float, t_stop: float, *, trials: Any = None,
               unit_names: Sequence[str] | None = None, obs_intervals: Sequence[Any] | None = None,
               name: str = "spikes", provenance: dict | None = None) -> xr.Dataset:
    """Bin spike times into counts ``x(trial, time, unit)``.

    Parameters
    ----------
    spike_times : sequence of 1-D array-likes, or mapping name -> 1-D array-like
        Spike times of each unit, in the time unit of ``bin_size`` (usually seconds). Need not
        be sorted. A mapping gives the unit names (unless ``unit_names`` is given).
    bin_size : float
        Bin width (> 0), same time unit. Becomes ``attrs["dt"]`` and ``attrs["bin_size"]``.
    t_start, t_stop : float
        The recorded span ``[t_start, t_stop]``. Bins reaching outside it are NaN.
    trials : None, array-like of shape (trial, 2), or mapping
        Trial windows ``[start, stop)``. None: one trial ``[t_start, t_stop)``. A mapping (for
        example an NWB trials table read into a dict, or a pandas DataFrame) must have
        ``"start_time"`` and ``"stop_time"``; its other columns of one value per trial (numbers
        or strings, e.g. a condition label) become variables ``(trial,)`` of the result.
        Trials may overlap and may differ in length (shorter ones are NaN-padded).
    unit_names : sequence of str, optional
        Channel names, one per unit (default: the mapping's keys, else ``u0, u1, ...``).
    obs_intervals : sequence (one per unit) of array-likes of shape (interval, 2), optional
        Per-unit observation intervals (NWB ``Units.obs_intervals``). A bin of a unit is
        observed only if it lies entirely inside one of them. ``None`` for a unit means the
        whole recording.
    name : str, default "spikes"
        ``attrs["name"]``.
    provenance : dict, optional
        Merged into ``attrs["provenance"]`` (e.g. the source file).

    Returns
    -------
    xarray.Dataset
        The canonical container (:func:`dsident.data.as_dataset`) with

        - ``x(trial, time, channel)``: spike counts per bin, float64; NaN outside the recording,
          outside a unit's observation intervals, and past a trial's end;
        - ``trial_start(trial)``, ``trial_stop(trial)``: the absolute window of each trial; the
          ``time`` coordinate is the bin's start relative to ``trial_start``;
        - attrs ``dt = bin_size``, ``bin_size``, ``units = "spike counts per bin"``, ``provenance``
          (JSON: the bin convention, ``t_start``, ``t_stop``, ``spikes_at_stop``).

    Raises
    ------
    ValueError
        ``bin_size <= 0``, ``t_stop <= t_start``, non-finite spike times, a trial shorter than
        one bin, a trial without any observed bin, malformed trial windows or intervals,
        wrongly counted names.
    TypeError
        Spike times or windows that are not numbers.

    Examples
    --------
    >>> ds = bin_spikes([[0.01, 0.02, 0.25], [0.3]], bin_size=0.1, t_start=0.0, t_stop=0.4)
    >>> ds["x"].values[0, :, 0].tolist(), ds["x"].values[0, :, 1].tolist()
    ([2.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0])
    """
    bin_size = _positive_float(bin_size, "bin_size")
    t_start, t_stop = _finite_float(t_start, "t_start"), _finite_float(t_stop, "t_stop")
    if not t_stop > t_start:
        raise ValueError(f"`t_stop` must be greater than `t_start`; got t_start={t_start!r}, t_stop={t_stop!r}.")
    units, unit_names = _as_units(spike_times, unit_names)
    starts, stops, columns = _as_trials(trials, t_start, t_stop)
    n_bins = np.array([_bin_count(a, b, bin_size, i) for i, (a, b) in enumerate(zip(starts, stops))])
    intervals = _as_intervals(obs_intervals, len(units), t_start, t_stop)

    offsets = np.concatenate([[0], np.cumsum(n_bins)])       # trial i owns flat bins offsets[i]:offsets[i+1]
    trial_of_bin = np.repeat(np.arange(len(starts)), n_bins)
    k_of_bin = np.arange(offsets[-1]) - offsets[trial_of_bin]
    bin_lo = starts[trial_of_bin] + k_of_bin * bin_size
    bin_hi = starts[trial_of_bin] + (k_of_bin + 1) * bin_size
    tol = _EDGE_TOLERANCE * bin_size                          # edges built by multiplication are inexact
    recorded = (bin_lo >= t_start - tol) & (bin_hi <= t_stop + tol)

    # one bincount over (bin, unit) pairs builds the (bin, unit) table directly, contiguous per trial
    n_units = len(units)
    pairs, at_stop = [], 0
    for j, spikes in enumerate(units):
        flat, n_at_stop = _flat_bin_index(spikes, starts, n_bins, offsets, bin_size)
        pairs.append(flat * n_units + j)
        at_stop += n_at_stop
    counts = np.bincount(np.concatenate(pairs), minlength=offsets[-1] * n_units).astype(np.float64)
    counts = counts.reshape(offsets[-1], n_units)
    for j in range(n_units):
        observed = recorded if intervals[j] is None else recorded & _inside(bin_lo + tol, bin_hi - tol, intervals[j])
        if not observed.all():
            counts[~observed, j] = np.nan
    per_trial = [counts[offsets[i]:offsets[i + 1]] for i in range(len(starts))]
    for i, block in enumerate(per_trial):
        if not np.isfinite(block).any():
            raise ValueError(f"trial {i} [{float(starts[i])!r}, {float(stops[i])!r}) has no observed bin: it lies "
                             f"outside the recording [{t_start!r}, {t_stop!r}] or outside every unit's "
                             "observation intervals.")
    prov = {"source": "dsident.data.bin_spikes", "bin_size": bin_size, "t_start": t_start, "t_stop": t_stop,
            "bins": "half-open [start + k*bin_size, start + (k+1)*bin_size); trailing partial bin dropped",
            "spikes_at_stop": int(at_stop), "n_trials": int(len(starts)),
            "masked": "bins not entirely inside the recording or a unit's obs_intervals are NaN"}
    if provenance:
        prov.update(provenance)
    ds = as_dataset(per_trial, dt=bin_size, channel_names=unit_names, name=name, min_length=1, provenance=prov)
    ds["trial_start"] = ("trial", starts)
    ds["trial_stop"] = ("trial", starts + n_bins * bin_size)
    for key, values in columns.items():
        ds[key] = ("trial", values)
    ds.attrs.update(bin_size=bin_size, units="spike counts per bin")
    return ds


# --------------------------------------------------------------------------- helpers


def _flat_bin_index(spikes: np.ndarray, starts: np.ndarray, n_bins: np.ndarray, offsets: np.ndarray,
                    bin_size: float) -> tuple[np.ndarray, int]:
    """Flat bin index of every (spike, trial) pair that falls in a trial's bins.

    ``spikes`` is sorted. A spike in two overlapping trials is counted in both. Returns the
    indices and the number of spikes lying exactly at a trial's last edge (not counted).
    """
    tol = _EDGE_TOLERANCE * bin_size
    ends = starts + n_bins * bin_size
    lo = np.searchsorted(spikes, starts - tol, side="left")    # first spike >= start (edge snapped)
    hi = np.searchsorted(spikes, ends - tol, side="left")      # first spike >= end: the end is excluded
    at_stop = int((np.searchsorted(spikes, ends + tol, side="right") - hi).sum())
    n_in = hi - lo
    trial = np.repeat(np.arange(len(starts)), n_in)
    # position of each selected spike in `spikes`: lo[trial] + rank within its trial
    rank = np.arange(n_in.sum()) - np.repeat(np.cumsum(n_in) - n_in, n_in)
    t = spikes[lo[trial] + rank]
    # a time within tol below an edge is on the edge: decimal times such as 0.3 s are stored a
    # hair below 3 * 0.1 and must land in the bin that starts there
    k = np.floor((t - starts[trial]) / bin_size + _EDGE_TOLERANCE).astype(np.int64)
    k = np.clip(k, 0, n_bins[trial] - 1)
    return offsets[trial] + k, at_stop


def _inside(lo: np.ndarray, hi: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """True where the bin [lo, hi) lies entirely inside one of the (merged, sorted) intervals."""
    j = np.searchsorted(intervals[:, 0], lo, side="right") - 1
    ok = j >= 0
    out = np.zeros(lo.shape, dtype=bool)
    out[ok] = hi[ok] <= intervals[j[ok], 1]
    return out


def _bin_count(start: float, stop: float, bin_size: float, i: int) -> int:
    ratio = (stop - start) / bin_size
    n = int(round(ratio)) if abs(ratio - round(ratio)) <= _EDGE_TOLERANCE * max(1.0, abs(ratio)) else int(np.floor(ratio))
    if n < 1:
        raise ValueError(f"trial {i} [{float(start)!r}, {float(stop)!r}) is shorter than one bin "
                         f"(bin_size={bin_size!r}).")
    return n


def _positive_float(value: Any, argname: str) -> float:
    value = _finite_float(value, argname)
    if value <= 0:
        raise ValueError(f"`{argname}` must be a positive number; got {argname}={value!r}.")
    return value


def _finite_float(value: Any, argname: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"`{argname}` must be a real number; got {type(value).__name__} {value!r}.")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"`{argname}` must be finite; got {argname}={value!r}.")
    return value


def _as_units(spike_times: Any, unit_names: Sequence[str] | None) -> tuple[list[np.ndarray], list[str]]:
    if isinstance(spike_times, Mapping):
        if unit_names is None:
            unit_names = [str(k) for k in spike_times]
        spike_times = list(spike_times.values())
    if isinstance(spike_times, np.ndarray) and spike_times.dtype.kind != "O":
        if spike_times.ndim != 1:
            raise ValueError("`spike_times` must be a sequence with one 1-D array of times per unit; got an array "
                             f"of shape {spike_times.shape}. For one unit pass [times].")
        spike_times = [spike_times]
    if isinstance(spike_times, (str, bytes)) or not isinstance(spike_times, (Sequence, np.ndarray)):
        raise TypeError("`spike_times` must be a sequence (one entry per unit) of 1-D arrays of spike times, or a "
                        f"mapping unit name -> times; got {type(spike_times).__name__}.")
    if len(spike_times) == 0:
        raise ValueError("`spike_times` has no units; expected at least one array of spike times.")
    units = []
    for j, times in enumerate(spike_times):
        arr = np.asarray(times)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"spike times of unit {j} must be numbers; got dtype {arr.dtype}.")
        arr = arr.astype(np.float64).ravel()
        if not np.isfinite(arr).all():
            raise ValueError(f"spike times of unit {j} contain NaN or inf; every spike time must be finite.")
        units.append(arr if arr.size < 2 or (arr[1:] >= arr[:-1]).all() else np.sort(arr))   # sorted is typical
    if unit_names is None:
        return units, [f"u{j}" for j in range(len(units))]
    if isinstance(unit_names, str) or len(unit_names) != len(units):
        raise ValueError(f"`unit_names` must hold one name per unit ({len(units)}); got {unit_names!r}.")
    return units, [str(n) for n in unit_names]


def _as_trials(trials: Any, t_start: float, t_stop: float) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    columns: dict[str, np.ndarray] = {}
    if trials is None:
        return np.array([t_start]), np.array([t_stop]), columns
    if hasattr(trials, "columns") and hasattr(trials, "to_dict"):          # pandas DataFrame
        trials = {str(c): np.asarray(trials[c]) for c in trials.columns}
    if isinstance(trials, Mapping):
        missing = [k for k in ("start_time", "stop_time") if k not in trials]
        if missing:
            raise ValueError(f"`trials` given as a table must have columns 'start_time' and 'stop_time'; missing "
                             f"{missing} among {sorted(map(str, trials))}.")
        starts = _window_column(trials["start_time"], "start_time")
        stops = _window_column(trials["stop_time"], "stop_time")
        for key, values in trials.items():
            if key in ("start_time", "stop_time"):
                continue
            arr = np.asarray(values)
            if arr.ndim == 1 and len(arr) == len(starts) and arr.dtype.kind in "biufUS":
                columns[key if key not in _RESERVED else f"trial_{key}"] = arr
    else:
        arr = np.asarray(trials)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"`trials` must hold numbers (start, stop); got dtype {arr.dtype}.")
        if arr.ndim != 2 or arr.shape[1] != 2 or arr.shape[0] == 0:
            raise ValueError(f"`trials` must have shape (trial, 2) with rows (start, stop); got shape {arr.shape}.")
        starts, stops = arr[:, 0].astype(np.float64), arr[:, 1].astype(np.float64)
    if len(starts) != len(stops) or len(starts) == 0:
        raise ValueError(f"`trials` needs one start and one stop time per trial; got {len(starts)} starts and "
                         f"{len(stops)} stops.")
    if not (np.isfinite(starts).all() and np.isfinite(stops).all()):
        raise ValueError("`trials` start and stop times must be finite.")
    bad = np.flatnonzero(stops <= starts)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"trial {i} has stop_time {float(stops[i])!r} <= start_time {float(starts[i])!r}; "
                         "each trial is [start, stop).")
    return starts, stops, columns


def _window_column(values: Any, key: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf" or arr.ndim != 1:
        raise TypeError(f"`trials['{key}']` must be a 1-D array of numbers; got dtype {arr.dtype}, shape {arr.shape}.")
    return arr.astype(np.float64)


def _as_intervals(obs_intervals: Any, n_units: int, t_start: float, t_stop: float) -> list[np.ndarray | None]:
    if obs_intervals is None:
        return [None] * n_units
    if isinstance(obs_intervals, (str, bytes)) or not hasattr(obs_intervals, "__len__"):
        raise TypeError(f"`obs_intervals` must be a sequence with one entry per unit ({n_units}), each None or rows "
                        f"(start, stop); got {type(obs_intervals).__name__} {obs_intervals!r}.")
    if len(obs_intervals) != n_units:
        raise ValueError(f"`obs_intervals` has {len(obs_intervals)} entries; expected {n_units} (one per unit).")
    out: list[np.ndarray | None] = []
    for j, iv in enumerate(obs_intervals):
        if iv is None:
            out.append(None)
            continue
        try:
            arr = np.asarray(iv, dtype=np.float64).reshape(-1, 2) if np.size(iv) else np.zeros((0, 2))
        except (TypeError, ValueError):
            raise TypeError(f"`obs_intervals[{j}]` must be rows of two numbers (start, stop); got {iv!r}.") from None
        if (arr[:, 1] < arr[:, 0]).any() or not np.isfinite(arr).all():
            raise ValueError(f"`obs_intervals[{j}]` must be finite (start, stop) rows with stop >= start; got {arr.tolist()}.")
        out.append(_merge(arr[np.argsort(arr[:, 0])]))
    return out


def _merge(intervals: np.ndarray) -> np.ndarray:
    """Merge overlapping or touching sorted intervals so each bin meets at most one."""
    merged: list[list[float]] = []
    for lo, hi in intervals:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return np.array(merged, dtype=np.float64).reshape(-1, 2)

