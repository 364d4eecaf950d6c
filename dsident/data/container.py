"""The one data container: ``xarray.Dataset`` with ``x(trial, time, channel)``.

Every layer of dsident reads and writes this layout, and :func:`as_dataset` is the only door
through which user data enters (validation happens here once, so inner code can trust it):

- ``x``        float64 (trial, time, channel); NaN = missing sample (masked downstream, never
               filled); ragged trials are NaN-padded at the end.
- ``u``        optional float64 (trial, time, input): external inputs; finite within each
               trial (an input cannot be "missing"), NaN in the padding.
- ``length``   int64 (trial,): number of valid time steps of each trial.
- ``sample_time`` optional float64 (trial, time): the actual sampling times of irregularly
               sampled trials (unit of ``dt``), NaN in the padding.
- coords       ``trial`` (int), ``time`` (float, = index · dt), ``channel`` (str),
               ``input`` (str, only with ``u``).
- attrs        ``dt`` (float, unit of the time coordinate), ``name`` (str),
               ``provenance`` (JSON str, where the data came from), ``preprocessing`` (JSON str,
               a list of steps, each a dict with a ``"step"`` key and its constants).

:func:`to_arrays` hands the same content to numerical code as plain numpy arrays.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import xarray as xr

__all__ = ["Arrays", "as_dataset", "to_arrays", "steps_agree", "STEP_RTOL", "check_model_step", "sample_gaps"]

#: Data variables and attributes that :func:`as_dataset` builds itself; everything else found on
#: an input Dataset is carried over unchanged when its shape fits.
_CORE_VARIABLES = {"x", "u", "length", "sample_time"}


@dataclass(frozen=True)
class Arrays:
    """Plain numpy arrays of a canonical dataset (see :func:`to_arrays`).

    Attributes
    ----------
    x : ndarray of shape (trial, time, channel)
        Observations, float64; NaN where missing or past a trial's end.
    mask : ndarray of bool, shape (trial, time, channel)
        True where ``x`` is observed.
    u : ndarray of shape (trial, time, input) or None
        External inputs, float64 (NaN past a trial's end), or None when the data have none.
    length : ndarray of int, shape (trial,)
        Valid time steps of each trial.
    dt : float
        Nominal sampling step, in the unit of the ``time`` coordinate.
    time : ndarray of shape (trial, time) or None
        Sampling times of irregularly sampled data (NaN past a trial's end); None when the
        samples are ``dt`` apart.
    """

    x: np.ndarray
    mask: np.ndarray
    u: np.ndarray | None
    length: np.ndarray
    dt: float
    time: np.ndarray | None = None


def as_dataset(data: Any, *, dt: float | None = None, u: Any = None,
               channel_names: Sequence[str] | None = None, input_names: Sequence[str] | None = None,
               name: str | None = None, min_length: int = 2, provenance: dict | str | None = None,
               time: Any = None) -> xr.Dataset:
    """Validate data and convert it to the canonical dataset.

    Parameters
    ----------
    data : array-like, list of array-likes, ``xarray.DataArray`` or ``xarray.Dataset``
        The observations. Accepted layouts:

        ============================== ==============================================
        input                          read as
        ============================== ==============================================
        array of shape (time,)         one trial, one channel
        array of shape (time, channel) one trial
        array (trial, time, channel)   equal-length trials
        list/tuple of arrays           ragged trials, each (time,) or (time, channel)
        DataArray                      dims named ``trial``/``time``/``channel`` are
                                       used by name; otherwise by position as above
        Dataset with variable ``x``    re-validated; ``u``, ``length``, ``sample_time``,
                                       attrs and extra variables are carried over
        ============================== ==============================================

        A list or tuple is always read as a list of trials (wrap one nested-list trial in
        ``np.asarray`` first). Values must be real numbers (bool and int are converted to
        float64; ``None`` in an object array is read as NaN); NaN marks a missing sample;
        inf is refused.
    dt : float, optional
        Sampling step, in the unit of the ``time`` coordinate (e.g. seconds). Default: the
        input's ``dt`` attribute, else the median step of ``time`` if given, else 1.0.
    u : array-like or list of array-likes, optional
        External inputs in the same layouts as ``data``, with the same number of trials and
        the same length per trial. Must be finite.
    channel_names, input_names : sequence of str, optional
        Unique names of the channels / inputs. Default ``x0, x1, ...`` / ``u0, u1, ...``
        (or the input's coordinate labels, or a pandas DataFrame's named columns).
    name : str, optional
        Name of the data set (``attrs["name"]``). Default: the input's name, else ``"data"``.
    min_length : int, default 2
        Shortest trial accepted (time steps).
    provenance : dict or JSON str, optional
        Where the data came from; stored as JSON in ``attrs["provenance"]``.
    time : array-like of shape (time,) or (trial, time), or list of 1-D arrays, optional
        Sampling times for irregular sampling, strictly increasing within each trial, one per
        sample. Stored as the variable ``sample_time(trial, time)``; the ``time`` coordinate
        stays the sample index times ``dt``.

    Returns
    -------
    xarray.Dataset
        The canonical container described in the module docstring. The input is never
        modified.

    Raises
    ------
    TypeError
        Non-numeric or complex values; a ``dt`` that is not a number.
    ValueError
        Wrong rank, inf values, no trials/channels, trials shorter than ``min_length``, a trial
        without any observed sample, differing channel counts, ``dt <= 0``, inputs whose trial
        count or lengths differ from ``data``, non-finite inputs, duplicate or wrongly counted
        names, non-increasing sample times.

    Examples
    --------
    >>> import numpy as np
    >>> ds = as_dataset(np.zeros((2, 100, 3)), dt=0.01, channel_names=["x", "y", "z"])
    >>> ds["x"].dims, ds.attrs["dt"]
    (('trial', 'time', 'channel'), 0.01)
    """
    min_length = _check_min_length(min_length)
    lengths_given = None
    trial_labels = None
    attrs: dict[str, Any] = {}
    extra: dict[str, xr.DataArray] = {}
    if isinstance(data, xr.Dataset):
        if "x" not in data:
            raise ValueError(f"`data` Dataset must contain a variable 'x'; got variables {sorted(map(str, data.data_vars))}.")
        attrs = dict(data.attrs)
        if dt is None:
            dt = attrs.get("dt")
            if "sample_time" not in data:
                _check_time_step(data)
        if u is None and "u" in data:
            u = data["u"]
            if input_names is None and "input" in data["u"].coords:
                input_names = [str(c) for c in data["u"].coords["input"].values]
        if time is None and "sample_time" in data:
            time = data["sample_time"]
        if "length" in data:
            lengths_given = _valid_lengths(data, dt)
        extra = {str(k): v for k, v in data.data_vars.items() if k not in _CORE_VARIABLES}
        data = data["x"]
    if isinstance(data, xr.DataArray):
        data = _canonical_order(data)
        if channel_names is None and "channel" in data.coords:
            channel_names = [str(c) for c in data.coords["channel"].values]
        if "trial" in data.coords and data.ndim == 3:
            trial_labels = np.asarray(data.coords["trial"].values)
        if dt is None:
            dt = data.attrs.get("dt")
        if name is None and "name" not in attrs and data.name not in (None, "x"):
            name = str(data.name)

    if channel_names is None and _is_frame(data):
        # a table's named columns name its channels (a RangeIndex, 0 1 2 ..., names none)
        columns = list(data.columns)
        if not all(isinstance(c, (int, np.integer)) for c in columns):
            channel_names = [str(c) for c in columns]
    trials = _as_trials(data, "data")
    if lengths_given is not None:
        trials = _cut_to_lengths(trials, lengths_given)
    n_channel = _check_trials(trials, "data", min_length, allow_nan=True)
    lengths = np.array([t.shape[0] for t in trials], dtype=np.int64)
    n_trial, n_time = len(trials), int(lengths.max())

    sample_time = None if time is None else _as_sample_time(time, lengths)
    dt = _check_dt(dt, sample_time)
    channel_names = _check_names(channel_names, n_channel, "channel_names", "x")

    x = _pad(trials, n_time)
    if trial_labels is None or len(trial_labels) != n_trial:
        trial_labels = np.arange(n_trial)
    elif trial_labels.dtype.kind in "iu":
        trial_labels = trial_labels.astype(np.int64)     # NetCDF-3 stores int32
    variables: dict[str, Any] = {"x": (("trial", "time", "channel"), x), "length": (("trial",), lengths)}
    coords: dict[str, Any] = {"trial": trial_labels, "time": np.arange(n_time) * dt,
                              "channel": np.array(channel_names, dtype=str)}
    if u is not None:
        u_pad, input_names = _as_inputs(u, lengths, input_names)
        variables["u"] = (("trial", "time", "input"), u_pad)
        coords["input"] = np.array(input_names, dtype=str)
    if sample_time is not None:
        variables["sample_time"] = (("trial", "time"), sample_time)

    ds = xr.Dataset(variables, coords=coords)
    for key, var in extra.items():
        if _fits(var, n_trial, n_time):
            ds[key] = var.drop_vars([c for c in var.coords if c in ("trial", "time")])
    ds.attrs = {**attrs, "dt": dt, "name": str(name if name is not None else attrs.get("name", "data")),
                "provenance": _provenance_json(provenance, attrs.get("provenance")),
                "preprocessing": str(attrs.get("preprocessing", "[]"))}
    return ds


def to_arrays(ds: xr.Dataset) -> Arrays:
    """Plain numpy arrays of a canonical dataset.

    Parameters
    ----------
    ds : xarray.Dataset
        A dataset made by :func:`as_dataset` (anything else is passed through it first).

    Returns
    -------
    Arrays
        ``x`` (trial, time, channel) float64, ``mask`` (True = observed), ``u`` or None,
        ``length`` (trial,), ``dt`` and, for irregular sampling, ``time`` (trial, time).
        The arrays are copies; changing them does not change ``ds``.
    """
    if not (isinstance(ds, xr.Dataset) and "x" in ds and ds["x"].dims == ("trial", "time", "channel")
            and "length" in ds):
        ds = as_dataset(ds)
    elif "sample_time" not in ds:
        _check_time_step(ds)
    x = np.array(ds["x"].values, dtype=np.float64)
    length = _valid_lengths(ds, ds.attrs.get("dt"))
    inside = np.arange(x.shape[1])[None, :] < length[:, None]          # (trial, time)
    mask = np.isfinite(x) & inside[:, :, None]
    x[~inside] = np.nan
    u = np.array(ds["u"].values, dtype=np.float64) if "u" in ds else None
    time = np.array(ds["sample_time"].values, dtype=np.float64) if "sample_time" in ds else None
    return Arrays(x=x, mask=mask, u=u, length=length, dt=float(ds.attrs.get("dt", 1.0)), time=time)


# --------------------------------------------------------------------------- helpers


def _check_min_length(min_length: Any) -> int:
    if isinstance(min_length, bool) or not isinstance(min_length, numbers.Integral) or min_length < 1:
        raise ValueError(f"`min_length` must be a positive integer; got min_length={min_length!r}.")
    return int(min_length)


def _canonical_order(arr: xr.DataArray) -> xr.DataArray:
    """Put named dims in (trial, time, channel) order; unnamed dims stay positional."""
    names = [d for d in ("trial", "time", "channel") if d in arr.dims]
    if len(names) == arr.ndim:
        return arr.transpose(*names)
    return arr


def _numeric(values: Any, argname: str, where: str = "") -> np.ndarray:
    """Convert one array-like to float64, refusing non-numeric and complex values."""
    if isinstance(values, xr.DataArray):
        values = values.values
    elif hasattr(values, "detach") and hasattr(values, "cpu"):
        # a torch tensor that requires grad (or lives on a GPU) refuses np.asarray with torch's words
        values = values.detach().cpu().numpy()
    try:
        arr = np.asarray(values)
    except ValueError as err:            # ragged nested lists
        raise ValueError(f"`{argname}`{where} could not be read as a rectangular array ({err}); "
                         "pass ragged trials as a list of arrays.") from None
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64)
    if arr.dtype.kind == "c":
        raise TypeError(f"`{argname}`{where} must be real-valued; got complex dtype {arr.dtype}.")
    if arr.dtype.kind == "O":
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"`{argname}`{where} must be numeric (bool, int or float); got dtype {arr.dtype} "
                    f"(first element {arr.ravel()[:1].tolist()!r}).")


def _as_trials(data: Any, argname: str) -> list[np.ndarray]:
    """Split ``data`` into a list of float64 (time, channel) arrays."""
    if isinstance(data, (list, tuple)):
        if len(data) == 0:
            raise ValueError(f"`{argname}` is an empty list; expected at least one trial.")
        trials = []
        for i, item in enumerate(data):
            arr = _numeric(item, argname, f"[{i}]")
            if arr.ndim == 1:
                arr = arr[:, None]
            if arr.ndim != 2:
                raise ValueError(f"each trial of `{argname}` must have shape (time,) or (time, channel); "
                                 f"trial {i} has shape {arr.shape}.")
            trials.append(arr)
        return trials
    arr = _numeric(data, argname)
    if arr.ndim == 1:
        return [arr[:, None]]
    if arr.ndim == 2:
        return [arr]
    if arr.ndim == 3:
        if arr.shape[0] == 0:
            raise ValueError(f"`{argname}` has no trials (shape {arr.shape}); expected at least one.")
        return list(arr)
    raise ValueError(f"`{argname}` must have shape (time,), (time, channel) or (trial, time, channel); "
                     f"got an array of rank {arr.ndim} with shape {arr.shape}.")


def _valid_lengths(ds: xr.Dataset, dt: Any) -> np.ndarray:
    """Per-trial valid lengths of ``ds``, corrected for a slice along ``time``.

    ``length`` counts from the first sample of the original trials; after ``ds.isel(time=slice(a, b))``
    xarray keeps it unchanged, so the offset ``a`` is recovered from the regular time coordinate
    (``time[0] / dt``) and the count is clipped to the sliced window. Irregular data count their
    finite sample times (NaN only in the padding).
    """
    length = np.asarray(ds["length"].values, dtype=np.int64)
    n_time = ds.sizes.get("time", 0)
    if "sample_time" in ds and ds["sample_time"].dims == ("trial", "time"):
        # the sample times are finite exactly on a trial's samples, wherever the window starts
        observed = np.isfinite(np.asarray(ds["sample_time"].values, dtype=np.float64)).sum(axis=1)
        return np.minimum(observed, np.clip(length, 0, n_time))
    offset = 0
    if "time" in ds.coords and n_time and dt:
        t0 = float(ds["time"].values[0])
        if np.isfinite(t0) and float(dt) > 0:
            offset = max(int(round(t0 / float(dt))), 0)
    return np.clip(length - offset, 0, n_time)


def _is_frame(data: Any) -> bool:
    """Whether ``data`` is a pandas DataFrame (without importing pandas for anything else)."""
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns") and hasattr(data, "to_numpy")


def _check_time_step(ds: xr.Dataset) -> None:
    """Refuse a regularly sampled Dataset whose ``time`` coordinate no longer steps by its own
    ``attrs["dt"]``: an xarray slice with a step (``ds.isel(time=slice(None, None, 2))``) or a pick
    of samples keeps ``dt``, and the data would be read at the old step (every time constant, period
    and exponent off by the factor)."""
    dt = ds.attrs.get("dt")
    if "time" not in ds.coords or ds.sizes.get("time", 0) < 2 or not isinstance(dt, numbers.Real) or not dt > 0:
        return
    time = np.asarray(ds["time"].values, dtype=np.float64)
    steps = np.diff(time)
    # the mean step over the whole span: a coordinate stored as float32 (save_dataset's dtype) rounds
    # each step by more than 1 % on a long recording, but not the span; skipping samples only lengthens it
    mean_step = (time[-1] - time[0]) / (time.size - 1)
    if np.isfinite(steps).all() and (not steps_agree(mean_step, dt) or steps.min() <= 0):
        raise ValueError(f"`data`'s time coordinate steps by {steps.min():.6g} to {steps.max():.6g} but its attrs['dt'] is "
                         f"{float(dt):g}: a slice with a step (ds.isel(time=slice(None, None, k))) or a pick of samples "
                         "keeps dt. To change the step use dsident.data.preprocessing.resample(data, new_dt), which "
                         "low-pass filters first; or state the step the data now have: as_dataset(data, dt=...).")


def _cut_to_lengths(trials: list[np.ndarray], lengths: np.ndarray) -> list[np.ndarray]:
    if lengths.shape != (len(trials),):
        raise ValueError(f"the Dataset's `length` has shape {lengths.shape}; expected ({len(trials)},), one per trial.")
    out = []
    for i, (t, n) in enumerate(zip(trials, lengths)):
        if not 0 <= int(n) <= t.shape[0]:
            raise ValueError(f"the Dataset's `length[{i}]` = {int(n)} is outside [0, {t.shape[0]}] (the time dimension).")
        out.append(t[: int(n)])
    return out


def _check_trials(trials: list[np.ndarray], argname: str, min_length: int, *, allow_nan: bool) -> int:
    """Shared checks on a list of (time, channel) arrays; returns the channel count."""
    n_channel = trials[0].shape[1]
    if n_channel == 0:
        raise ValueError(f"`{argname}` has no channels (shape {trials[0].shape}); expected at least one.")
    for i, t in enumerate(trials):
        if t.shape[1] != n_channel:
            raise ValueError(f"all trials of `{argname}` must have the same number of channels; trial 0 has "
                             f"{n_channel}, trial {i} has {t.shape[1]}.")
        if t.shape[0] < min_length:
            what = "is empty" if t.shape[0] == 0 else f"has only {t.shape[0]} time steps"
            raise ValueError(f"trial {i} of `{argname}` {what}; every trial needs at least "
                             f"min_length={min_length} time steps.")
        bad = np.isinf(t) if allow_nan else ~np.isfinite(t)
        if bad.any():
            step, channel = np.argwhere(bad)[0]
            kind = "inf" if allow_nan else "non-finite (NaN or inf)"
            raise ValueError(f"`{argname}` contains {int(bad.sum())} {kind} value(s), the first in trial {i} at "
                             f"time step {step}, channel {channel}; "
                             + ("use NaN to mark missing samples." if allow_nan else "inputs must be finite."))
        if allow_nan and not np.isfinite(t).any():
            raise ValueError(f"trial {i} of `{argname}` has no observed (non-NaN) sample; drop it.")
    return n_channel


#: how far (relative) a sampling step may stray from another and still be the same step: sample
#: times written to a few digits scatter that much, a unit slip (s vs ms) is 1000×
STEP_RTOL = 0.01


def steps_agree(step: float, reference: float) -> bool:
    """Whether ``step`` is ``reference`` within :data:`STEP_RTOL` of it: the one test behind every
    refusal of a step that disagrees (a dt against sample times, test data or a ``--dt`` against
    the step a model was fitted at)."""
    return abs(float(step) - float(reference)) <= STEP_RTOL * abs(float(reference))


def sample_gaps(time: np.ndarray, fallback: float) -> np.ndarray:
    """(trial, time - 1) gaps between successive sample times (trial, time) of irregularly sampled
    data; ``fallback`` (the nominal step) where there is no gap: in the NaN padding past a trial's
    end, or between equal times."""
    gaps = np.diff(np.asarray(time, dtype=float), axis=1)
    return np.where(np.isfinite(gaps) & (gaps > 0), gaps, float(fallback))


def check_model_step(data: Any, model_dt: float | None, *, argname: str) -> None:
    """Refuse a Dataset whose own sampling step (``attrs["dt"]``) disagrees with a model's (beyond
    :data:`STEP_RTOL`): a model run against it, freely or a few steps ahead, would be compared
    with data on another time axis. Plain arrays carry no step and are taken at the model's; so
    is anything when ``model_dt`` is None."""
    if model_dt is None or not isinstance(data, xr.Dataset) or "dt" not in data.attrs:
        return
    given = float(data.attrs["dt"])
    if not steps_agree(given, float(model_dt)):
        raise ValueError(f"`{argname}` is sampled every {given:g} (attrs['dt']) but the model steps by "
                         f"{float(model_dt):g}: use data at the model's step, or pass `dt` to run the model at the "
                         "data's (continuous-time models only).")


def _check_dt(dt: Any, sample_time: np.ndarray | None) -> float:
    if dt is None:
        if sample_time is None:
            return 1.0
        steps = np.diff(sample_time, axis=1)
        # times read from text carry its rounding (0.05000000000001137); 12 digits keep any real step
        return float(f"{float(np.nanmedian(steps)):.12g}")
    if isinstance(dt, (bool, np.bool_)) or not isinstance(dt, (numbers.Real, np.floating, np.integer)):
        if isinstance(dt, np.ndarray) and dt.ndim == 0:
            return _check_dt(dt.item(), sample_time)
        raise TypeError(f"`dt` must be a real number (the sampling step); got {type(dt).__name__} {dt!r}.")
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be a positive finite number in the unit of the `time` coordinate; got dt={dt!r}. "
                         "For irregular sampling pass `time=` (per-trial sample times) instead.")
    if sample_time is not None and sample_time.shape[1] > 1:
        # continuous-time models step by dt; one that contradicts evenly spaced times (a unit slip,
        # s vs ms) would rescale every time constant they learn. Irregular times keep a nominal dt.
        steps = np.diff(sample_time, axis=1)
        steps = steps[np.isfinite(steps)]
        typical = float(np.median(steps)) if steps.size else np.nan
        regular = steps.size > 0 and bool(np.all(np.abs(steps - typical) <= STEP_RTOL * abs(typical)))
        if regular and not steps_agree(typical, dt):
            raise ValueError(f"`dt`={dt!r} disagrees with the sample times, whose median step is {typical:.6g} "
                             f"(the same unit); give dt={typical:.6g}, or leave `dt` out to take it from the times.")
    return dt


def _check_names(names: Sequence[str] | None, n: int, argname: str, prefix: str) -> list[str]:
    if names is None:
        return [f"{prefix}{i}" for i in range(n)]
    if isinstance(names, str):
        raise TypeError(f"`{argname}` must be a sequence of strings, not one string; got {names!r}.")
    names = [str(c) for c in names]
    if len(names) != n:
        raise ValueError(f"`{argname}` has {len(names)} entries; expected {n} (one per column).")
    seen: set[str] = set()
    dupes = sorted({c for c in names if c in seen or seen.add(c)})
    if dupes:
        raise ValueError(f"`{argname}` must be unique; {dupes} appear more than once in {names}.")
    return names


def _pad(trials: list[np.ndarray], n_time: int) -> np.ndarray:
    out = np.full((len(trials), n_time, trials[0].shape[1]), np.nan)
    for i, t in enumerate(trials):
        out[i, : t.shape[0]] = t
    return out


def _as_inputs(u: Any, lengths: np.ndarray, input_names: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    if isinstance(u, xr.DataArray):
        names = [d for d in ("trial", "time", "input") if d in u.dims]
        if len(names) == u.ndim:
            u = u.transpose(*names)
        if input_names is None and "input" in u.coords:
            input_names = [str(c) for c in u.coords["input"].values]
        u = u.values
    trials = _as_trials(u, "u")
    if len(trials) != len(lengths):
        raise ValueError(f"`u` has {len(trials)} trial(s) but `data` has {len(lengths)}; give one input series per trial.")
    # A trial's inputs have its length, or the longest trial's (a rectangular array padded for
    # ragged data); the padding is dropped.
    cut = []
    for i, (t, n) in enumerate(zip(trials, lengths)):
        if t.shape[0] not in (n, int(lengths.max())):
            raise ValueError(f"`u` trial {i} has {t.shape[0]} time steps but `data` trial {i} has {int(n)}; "
                             "inputs must have the same length as the observations.")
        cut.append(t[:n])
    _check_trials(cut, "u", 1, allow_nan=False)
    input_names = _check_names(input_names, cut[0].shape[1], "input_names", "u")
    return _pad(cut, int(lengths.max())), input_names


def _as_sample_time(time: Any, lengths: np.ndarray) -> np.ndarray:
    if isinstance(time, xr.DataArray):
        time = time.values
    if isinstance(time, (list, tuple)) and not all(np.ndim(t) == 0 for t in time):
        rows = [_numeric(t, "time", f"[{i}]").ravel() for i, t in enumerate(time)]
    else:
        arr = _numeric(time, "time")
        if arr.ndim == 1:
            rows = [arr] * len(lengths)
        elif arr.ndim == 2:
            rows = list(arr)
        else:
            raise ValueError(f"`time` must have shape (time,) or (trial, time); got {arr.shape}.")
    if len(rows) != len(lengths):
        raise ValueError(f"`time` gives {len(rows)} trial(s) of sample times; `data` has {len(lengths)}.")
    out = np.full((len(lengths), int(lengths.max())), np.nan)
    for i, (row, n) in enumerate(zip(rows, lengths)):
        if row.shape[0] not in (n, int(lengths.max())):
            raise ValueError(f"`time` for trial {i} has {row.shape[0]} entries; expected {int(n)}, one per sample.")
        row = row[:n]
        if not np.isfinite(row).all():
            raise ValueError(f"`time` for trial {i} contains NaN or inf; sample times must be finite.")
        if n > 1 and not (np.diff(row) > 0).all():
            k = int(np.argmin(np.diff(row) > 0))
            raise ValueError(f"`time` for trial {i} must be strictly increasing; time[{k}]={row[k]!r} is followed by "
                             f"time[{k + 1}]={row[k + 1]!r}.")
        out[i, :n] = row
    return out


def _fits(var: xr.DataArray, n_trial: int, n_time: int) -> bool:
    """An extra variable is kept if its trial/time dims (when present) still match."""
    sizes = dict(var.sizes)
    return sizes.get("trial", n_trial) == n_trial and sizes.get("time", n_time) == n_time


def _provenance_json(given: dict | str | None, existing: Any) -> str:
    if given is None:
        return str(existing) if existing is not None else json.dumps({"source": "as_dataset"})
    if isinstance(given, str):
        try:
            json.loads(given)
        except json.JSONDecodeError as err:
            raise ValueError(f"`provenance` given as a string must be JSON; got {given!r} ({err}).") from None
        return given
    try:
        return json.dumps(given, default=_json_default)
    except TypeError as err:
        raise TypeError(f"`provenance` must be JSON-serialisable; got {given!r} ({err}).") from None


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable")
