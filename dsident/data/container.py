"""The one data container: ``xarray.Dataset`` with ``x(trial, time, channel)``.

PROVISIONAL minimal version (the foundation issue hardens validation and adds tests); the
layout below is the contract the other rooms rely on:

- ``x``      float64 (trial, time, channel); NaN = missing sample (masked downstream);
             ragged trials are NaN-padded at the end.
- ``u``      optional float64 (trial, time, input): external inputs.
- ``length`` int64 (trial,): number of valid time steps of each trial.
- coords     ``trial`` (int), ``time`` (float, = index · dt), ``channel`` (str), ``input`` (str).
- attrs      ``dt`` (float, unit of the time coordinate), ``name`` (str),
             ``provenance`` (JSON str), ``preprocessing`` (JSON str, list of steps).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class Arrays:
    """Plain arrays of a canonical dataset (see :func:`to_arrays`)."""

    x: np.ndarray          #: (trial, time, channel), NaN where missing
    mask: np.ndarray       #: bool (trial, time, channel), True = observed
    u: np.ndarray | None   #: (trial, time, input) or None
    length: np.ndarray     #: int (trial,)
    dt: float


def as_dataset(data: Any, *, dt: float | None = None, u: Any = None,
               channel_names: Sequence[str] | None = None, input_names: Sequence[str] | None = None,
               name: str | None = None, min_length: int = 2, provenance: dict | None = None) -> xr.Dataset:
    """Convert arrays, ragged trial lists or xarray objects to the canonical dataset.

    Parameters
    ----------
    data : ndarray (time, channel) or (trial, time, channel); list of (time, channel) arrays;
        ``xarray.DataArray`` with dims (time, channel) / (trial, time, channel); or a Dataset
        with an ``x`` variable.
    dt : float, optional
        Sampling step (unit of the time coordinate). Default: the dataset's ``dt`` attr, else 1.
    u : same layouts as ``data``, optional
        External inputs, same trials and lengths as ``data``.
    """
    if isinstance(data, xr.Dataset):
        if "x" not in data:
            raise ValueError(f"`data` Dataset must contain a variable 'x'; got variables {list(data.data_vars)}.")
        if dt is None:
            dt = data.attrs.get("dt")
        if u is None and "u" in data:
            u = data["u"]
        name = name or data.attrs.get("name")
        channel_names = channel_names or [str(c) for c in data["x"].coords.get("channel", [])] or None
        data = data["x"]
    if isinstance(data, xr.DataArray):
        if channel_names is None and "channel" in data.coords:
            channel_names = [str(c) for c in data.coords["channel"].values]
        if dt is None:
            dt = data.attrs.get("dt")
        data = data.values
    trials = _as_trials(data, "data")
    dt = 1.0 if dt is None else dt
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be a positive finite number; got dt={dt!r}.")
    n_ch = trials[0].shape[1]
    lengths = np.array([t.shape[0] for t in trials], dtype=np.int64)
    if lengths.min() < min_length:
        raise ValueError(f"every trial of `data` needs at least {min_length} time steps; got lengths {lengths.tolist()}.")
    T = int(lengths.max())
    x = np.full((len(trials), T, n_ch), np.nan)
    for i, t in enumerate(trials):
        x[i, : len(t)] = t
    channel_names = list(channel_names) if channel_names is not None else [f"x{i}" for i in range(n_ch)]
    ds = xr.Dataset(
        {"x": (("trial", "time", "channel"), x), "length": (("trial",), lengths)},
        coords={"trial": np.arange(len(trials)), "time": np.arange(T) * float(dt), "channel": channel_names},
        attrs={"dt": float(dt), "name": name or "data",
               "provenance": json.dumps(provenance or {"source": "as_dataset"}), "preprocessing": "[]"},
    )
    if u is not None:
        if isinstance(u, xr.DataArray):
            u = u.values
        utr = _as_trials(u, "u")
        uu = np.full((len(trials), T, utr[0].shape[1]), np.nan)
        for i, t in enumerate(utr):
            uu[i, : len(t)] = t
        ds["u"] = (("trial", "time", "input"), uu)
        ds = ds.assign_coords(input=list(input_names) if input_names else [f"u{i}" for i in range(uu.shape[2])])
    return ds


def _as_trials(data: Any, argname: str) -> list[np.ndarray]:
    if isinstance(data, (list, tuple)) and len(data) and np.ndim(data[0]) >= 1 and not np.isscalar(data[0]):
        trials = [np.asarray(t, dtype=float) for t in data]
        trials = [t[:, None] if t.ndim == 1 else t for t in trials]
    else:
        arr = np.asarray(data, dtype=float)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim == 2:
            trials = [arr]
        elif arr.ndim == 3:
            trials = list(arr)
        else:
            raise ValueError(f"`{argname}` must have shape (time, channel) or (trial, time, channel); got {arr.shape}.")
    return trials


def to_arrays(ds: xr.Dataset) -> Arrays:
    """Plain numpy arrays of a canonical dataset (x, mask, u, length, dt)."""
    x = np.asarray(ds["x"].values, dtype=float)
    u = np.asarray(ds["u"].values, dtype=float) if "u" in ds else None
    length = np.asarray(ds["length"].values) if "length" in ds else np.full(x.shape[0], x.shape[1])
    return Arrays(x=x, mask=np.isfinite(x), u=u, length=length, dt=float(ds.attrs.get("dt", 1.0)))
