"""Preprocessing of canonical datasets: z-score, smoothing, resampling, delay embedding.

Every function takes a canonical dataset (or anything :func:`~dsident.data.as_dataset`
accepts), returns a new one, and appends what it did, with its constants, to
``attrs["preprocessing"]`` (a JSON list of dicts, each with a ``"step"`` key), so a result can be
mapped back (:func:`unzscore`) and a test split can be treated exactly like its train split
(``zscore(test, mean=..., std=...)``). Missing samples (NaN) stay missing: no step fills them.

Functions
---------
zscore, unzscore          per-channel standardisation and its inverse
gaussian_smooth           Gaussian filter along time (NaN-aware)
resample                  change the sampling step (polyphase or linear)
delay_embed               time-delay embedding with given delays
average_mutual_information, choose_delay, false_nearest_neighbors, choose_dimension, auto_embed
                          automatic delay (first minimum of the AMI) and dimension (false nearest
                          neighbours) choice, recorded in the preprocessing attrs
"""
from __future__ import annotations

import json
import numbers
import re
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import xarray as xr
from scipy.ndimage import gaussian_filter1d
from scipy.signal import resample_poly
from scipy.spatial import cKDTree

from .container import STEP_RTOL, as_dataset, to_arrays
from .slow_channels import auxiliary_channels

__all__ = [
    "zscore", "unzscore", "zscore_constants", "gaussian_smooth", "resample", "delay_embed", "average_mutual_information",
    "choose_delay", "false_nearest_neighbors", "choose_dimension", "auto_embed", "choose_embedding",
    "preprocessing_steps",
]


def preprocessing_steps(ds: xr.Dataset) -> list[dict]:
    """The list of preprocessing steps recorded on ``ds`` (oldest first)."""
    return json.loads(ds.attrs.get("preprocessing", "[]"))


def _with_step(ds: xr.Dataset, step: dict) -> xr.Dataset:
    out = ds.copy()
    out.attrs = {**ds.attrs, "preprocessing": json.dumps([*preprocessing_steps(ds), step])}
    return out


def _rebuild(template: xr.Dataset, trials: list[np.ndarray], dt: float, *, channel_names: Sequence[str],
             u_trials: list[np.ndarray] | None = None, times: list[np.ndarray] | None = None,
             same_time: bool = False) -> xr.Dataset:
    """A canonical dataset with new x (and u, and sample times) but the template's input names,
    trial labels and attrs.

    Extra variables of the template without a time axis (``trial_start``, a trial's condition)
    are carried; those with one (e.g. ``z_true``) only when ``same_time`` (the time axis is
    unchanged, as in smoothing), since resampling or embedding shifts it."""
    names = [str(c) for c in template["input"].values] if u_trials is not None and "input" in template else None
    ds = as_dataset(trials, dt=dt, u=u_trials, channel_names=list(channel_names), input_names=names,
                    name=template.attrs.get("name"), min_length=1, time=times)
    ds = _with_trial_variables(ds, template, same_time=same_time)
    if "trial_start" in ds and "trial_stop" in ds and times is None:    # bin_spikes' windows: end of the last bin
        ds["trial_stop"] = ds["trial_start"] + ds["length"] * dt
    ds.attrs = {**template.attrs, **{k: ds.attrs[k] for k in ("dt",)}}
    return ds


def _with_trial_variables(ds: xr.Dataset, template: xr.Dataset, *, same_time: bool = False) -> xr.Dataset:
    """``ds`` with the template's trial labels and its extra variables: those without a time axis
    (``trial_start``, a trial's condition), and with ``same_time`` those with one too."""
    ds = ds.assign_coords(trial=template["trial"].values)
    for key, var in template.data_vars.items():
        if key not in ("x", "u", "length", "sample_time") and (same_time or "time" not in var.dims):
            ds[key] = var.drop_vars([c for c in var.coords if c == "time"])
    return ds


def _times(arrays: Any, cut: int = 0) -> list[np.ndarray] | None:
    """Each trial's sample times (irregular data), its last ``cut`` samples dropped; None for regular data."""
    if arrays.time is None:
        return None
    return [arrays.time[i, :n - cut] for i, n in enumerate(arrays.length)]


# ----------------------------------------------------------------------------- z-score


def zscore(data: Any, *, mean: Sequence[float] | None = None, std: Sequence[float] | None = None,
           constant: str = "error") -> xr.Dataset:
    """Standardise each channel: ``(x − mean) / std``.

    Parameters
    ----------
    data : canonical dataset or array-like
        Observations ``x(trial, time, channel)``.
    mean, std : sequence of float of length channel, optional
        Constants to use (e.g. those of the train split, for the test split). Default: the
        mean and (population, ddof = 0) standard deviation over all observed samples of all
        trials.
    constant : {"error", "center"}
        What to do with a channel whose standard deviation is zero (or below 1e-12 times its
        mean magnitude): ``"error"`` raises a ValueError naming the channels; ``"center"``
        only subtracts the mean for those channels (std recorded as 1.0).

    Returns
    -------
    xarray.Dataset
        Standardised copy; ``attrs["preprocessing"]`` gains
        ``{"step": "zscore", "channel": [...], "mean": [...], "std": [...]}``.
    """
    ds = as_dataset(data)
    if constant not in ("error", "center"):
        raise ValueError(f"`constant` must be 'error' or 'center'; got {constant!r}.")
    x = to_arrays(ds).x
    n_channel = x.shape[2]
    channels = [str(c) for c in ds["channel"].values]
    unobserved = ~np.isfinite(x).any(axis=(0, 1))
    if (mean is None or std is None) and unobserved.any():
        raise ValueError(f"channel(s) {[channels[i] for i in np.flatnonzero(unobserved)]} of `data` have no observed "
                         "(non-NaN) sample, so they have no mean or std to z-score by; drop them, or pass `mean` and "
                         "`std`.")
    if mean is None:
        mean_arr = np.nanmean(x, axis=(0, 1))
    else:
        mean_arr = _constants(mean, n_channel, "mean")
    if std is None:
        own_mean = np.nanmean(x, axis=(0, 1))           # the spread about the data's own mean, given `mean` or not
        std_arr = np.sqrt(np.nanmean((x - own_mean) ** 2, axis=(0, 1)))
        flat = std_arr <= 1e-12 * np.maximum(np.abs(own_mean), 1.0)
        if flat.any():
            if constant == "error":
                raise ValueError(f"channel(s) {[channels[i] for i in np.flatnonzero(flat)]} are constant (std 0), so "
                                 "they cannot be z-scored; drop them, or pass constant='center' to only subtract "
                                 "their mean.")
            std_arr = np.where(flat, 1.0, std_arr)
    else:
        std_arr = _constants(std, n_channel, "std")
        if (std_arr <= 0).any():
            raise ValueError(f"`std` must be positive; got {std_arr.tolist()}.")
    out = ds.copy()
    out["x"] = ds["x"].copy(data=(ds["x"].values - mean_arr) / std_arr)
    return _with_step(out, {"step": "zscore", "channel": channels, "mean": mean_arr.tolist(), "std": std_arr.tolist()})


def unzscore(data: Any, values: Any = None) -> Any:
    """Undo the most recent z-score step of ``data``.

    Parameters
    ----------
    data : canonical dataset
        A dataset whose ``attrs["preprocessing"]`` holds a ``zscore`` step.
    values : array-like of shape (..., channel), optional
        Values in z-units to map back (e.g. a model's generated trajectory), one column per
        channel of ``data`` (or per channel the z-score saw). Default: ``data``'s own ``x``; then
        a dataset is returned with the step removed from its attrs.

    Each channel gets the constants of the z-scored channel it comes from, found by name, so
    data delay-embedded after the z-score (``"<channel>(t+<delay>)"``, any subset of channels)
    map back; auxiliary slow channels are left in their own scale.

    Returns
    -------
    xarray.Dataset or ndarray
    """
    ds = as_dataset(data)
    steps = preprocessing_steps(ds)
    where = _last_zscore(steps)
    mean, std = np.asarray(steps[where]["mean"], dtype=float), np.asarray(steps[where]["std"], dtype=float)
    scored = [str(c) for c in steps[where].get("channel", [])]
    if values is not None:
        values = np.asarray(values, dtype=float)
        if values.ndim and values.shape[-1] == ds.sizes["channel"]:
            mean, std = _constants_per_channel(ds, scored, mean, std)        # e.g. a model's run of embedded data
        elif not values.ndim or values.shape[-1] != mean.size:
            raise ValueError(f"`values` must have one column per channel of `data` ({ds.sizes['channel']}) or of its "
                             f"z-scored channels ({mean.size}); got shape {values.shape}.")
        return values * std + mean
    mean, std = _constants_per_channel(ds, scored, mean, std)
    out = ds.copy()
    out["x"] = ds["x"].copy(data=ds["x"].values * std + mean)
    out.attrs = {**ds.attrs, "preprocessing": json.dumps(steps[:where] + steps[where + 1:])}
    return out


def _constants_per_channel(ds: xr.Dataset, scored: list[str], mean: np.ndarray,
                           std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The z-score constants of each channel of ``ds``, found by name: a channel the z-score saw, or a
    delay-embedded copy of one (``"<channel>(t+<delay>)"``); auxiliary channels (slow channels, in
    their own scale) keep mean 0 and std 1. Channels renamed since fall back to position."""
    names = [str(c) for c in ds["channel"].values]
    auxiliary = set(json.loads(ds.attrs.get("auxiliary_channels", "[]")))
    mean_out, std_out, unknown = np.zeros(len(names)), np.ones(len(names)), []
    for k, name in enumerate(names):
        base = name
        while base not in scored and _DELAYED.match(base):
            base = _DELAYED.match(base).group(1)
        if base in scored:
            mean_out[k], std_out[k] = mean[scored.index(base)], std[scored.index(base)]
        elif name not in auxiliary:
            unknown.append(name)
    if not unknown:
        return mean_out, std_out
    if len(names) == mean.size and not auxiliary:
        return mean, std
    if mean.size == 1:                                     # one z-scored series under other names
        aux = np.isin(names, list(auxiliary))
        return np.where(aux, 0.0, mean[0]), np.where(aux, 1.0, std[0])
    raise ValueError(f"channels {unknown} of `data` were not z-scored (the zscore step saw {scored}), so they cannot "
                     "be mapped back.")


#: a delay-embedded channel's name, ``"<channel>(t+<delay>)"`` (:func:`delay_embed`)
_DELAYED = re.compile(r"^(.*)\(t\+\d+\)$")


def zscore_constants(data: Any) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel mean and std of the most recent z-score step of ``data`` (data units).

    For mapping another series of the same system into the units of a shipped set:
    ``zscore(other, mean=mean, std=std)``. Raises a ValueError when ``data`` has no such step.
    """
    steps = preprocessing_steps(as_dataset(data))
    step = steps[_last_zscore(steps)]
    return np.asarray(step["mean"], dtype=float), np.asarray(step["std"], dtype=float)


def _last_zscore(steps: list[dict]) -> int:
    where = [i for i, s in enumerate(steps) if s.get("step") == "zscore"]
    if not where:
        raise ValueError(f"`data` has no zscore step in attrs['preprocessing']; its steps are {[s.get('step') for s in steps]}.")
    return where[-1]


# ----------------------------------------------------------------------------- split in time


def split_in_time(data: Any, fraction: float, *, argname: str = "fraction") -> tuple[xr.Dataset, xr.Dataset]:
    """Hold out the last ``fraction`` of every trial's samples (in time).

    Parameters
    ----------
    data : canonical dataset or array-like
        ``x(trial, time, channel)``, optional ``u`` and per-sample times.
    fraction : float in (0, 1)
        Share of each trial's samples that goes to the held-out part (rounded down).
    argname : str
        Name of the caller's argument, for the error message.

    Returns
    -------
    (xarray.Dataset, xarray.Dataset)
        The leading parts (trials cut short) and the held-out tails, as trials of their own.
        Both keep the attrs (``auxiliary_channels`` included) and per-trial variables;
        ``trial_start`` / ``trial_stop`` (from :func:`~dsident.data.bin_spikes`) become each
        part's window.

    Raises
    ------
    ValueError
        ``fraction`` outside (0, 1), or a part of some trial shorter than 2 samples.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"`{argname}` must be a fraction in (0, 1); got {fraction!r}.")
    ds = as_dataset(data)
    arr = to_arrays(ds)
    n_held = np.floor(arr.length * float(fraction)).astype(np.int64)
    n_lead = arr.length - n_held
    if (n_held < 2).any() or (n_lead < 2).any():
        raise ValueError(f"`{argname}`={fraction!r} leaves fewer than 2 time steps in one of the two parts of some "
                         f"trial (trial lengths {arr.length.tolist()}); choose another fraction.")
    names = [str(c) for c in ds["channel"].values] if "channel" in ds.coords else None
    parts = []
    for held, (lo, hi) in enumerate(((np.zeros_like(n_lead), n_lead), (n_lead, arr.length))):
        xs = [arr.x[i, lo[i]:hi[i]] for i in range(len(lo))]
        us = None if arr.u is None else [arr.u[i, lo[i]:hi[i]] for i in range(len(lo))]
        ts = None if arr.time is None else [arr.time[i, lo[i]:hi[i]] for i in range(len(lo))]
        part = as_dataset(xs, dt=arr.dt, u=us, channel_names=names, name=ds.attrs.get("name"), time=ts)
        # per-trial variables (a condition, a window) stay with both parts; so do where the data came
        # from, which channels are auxiliary, units (not the bounds of an earlier split, which no
        # longer describe them)
        part = _with_trial_variables(part, ds)
        part.attrs.update({k: v for k, v in ds.attrs.items() if k not in ("dt", "name", "split")})
        if "trial_start" in part and "trial_stop" in part and arr.time is None:   # bin_spikes' windows
            if held:
                part["trial_start"] = ds["trial_start"] + n_lead * arr.dt
            else:
                part["trial_stop"] = ds["trial_start"] + n_lead * arr.dt
        parts.append(part)
    return parts[0], parts[1]


def _constants(values: Any, n: int, argname: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.shape != (n,) or not np.isfinite(arr).all():
        raise ValueError(f"`{argname}` must be {n} finite numbers (one per channel); got {np.asarray(values).tolist()}.")
    return arr


# ----------------------------------------------------------------------------- smoothing


def gaussian_smooth(data: Any, sigma: float, *, truncate: float = 4.0) -> xr.Dataset:
    """Gaussian filter along time, per trial and channel.

    Parameters
    ----------
    data : canonical dataset or array-like
    sigma : float
        Standard deviation of the kernel, in samples (not time units).
    truncate : float, default 4
        The kernel is cut at ``truncate · sigma`` samples (length ``2·round(truncate·sigma)+1``).

    Returns
    -------
    xarray.Dataset
        Smoothed copy. Missing samples stay missing; around them the filter is renormalised
        over the observed samples (normalised convolution). Trial edges are reflected.
    """
    ds = as_dataset(data)
    sigma = _positive(sigma, "sigma")
    truncate = _positive(truncate, "truncate")
    arrays = to_arrays(ds)
    trials = []
    for i, n in enumerate(arrays.length):
        x, m = arrays.x[i, :n], arrays.mask[i, :n]
        num = gaussian_filter1d(np.where(m, x, 0.0), sigma, axis=0, truncate=truncate, mode="reflect")
        den = gaussian_filter1d(m.astype(float), sigma, axis=0, truncate=truncate, mode="reflect")
        with np.errstate(invalid="ignore", divide="ignore"):
            trials.append(np.where(m, num / den, np.nan))
    out = _rebuild(ds, trials, arrays.dt, channel_names=ds["channel"].values,
                   u_trials=None if arrays.u is None else [arrays.u[i, :n] for i, n in enumerate(arrays.length)],
                   times=_times(arrays), same_time=True)
    return _with_step(out, {"step": "gaussian_smooth", "sigma_samples": sigma, "truncate": truncate})


def _positive(value: Any, argname: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"`{argname}` must be a positive finite number; got {argname}={value!r}.")
    return float(value)


# ----------------------------------------------------------------------------- resampling


def resample(data: Any, dt: float, *, method: str = "polyphase", max_denominator: int = 1000) -> xr.Dataset:
    """Change the sampling step to ``dt``.

    Parameters
    ----------
    data : canonical dataset or array-like
    dt : float
        New sampling step (unit of the ``time`` coordinate).
    method : {"polyphase", "linear"}
        ``"polyphase"``: :func:`scipy.signal.resample_poly` with the ratio ``old dt / new dt``
        approximated by a fraction (denominator ≤ ``max_denominator``), which low-pass filters
        before decimating; needs data without NaN. ``"linear"``: linear interpolation; a new
        sample next to a missing one is missing. Inputs ``u`` are always interpolated linearly.

    Returns
    -------
    xarray.Dataset
        Resampled copy with ``attrs["dt"] = dt``; trial ``i`` keeps the time span
        ``[0, (length_i − 1) · old dt]``. Irregularly sampled data (``sample_time``) are
        interpolated at their sample times (``"linear"``; ``"polyphase"`` refuses them) over
        their span, and keep evenly spaced ``sample_time`` from the trial's first time.
    """
    ds = as_dataset(data)
    new_dt = _positive(dt, "dt")
    if method not in ("polyphase", "linear"):
        raise ValueError(f"`method` must be 'polyphase' or 'linear'; got {method!r}.")
    arrays = to_arrays(ds)
    old_dt = arrays.dt
    ratio = Fraction(old_dt / new_dt).limit_denominator(max_denominator)
    up, down = ratio.numerator, ratio.denominator
    if method == "polyphase":
        # the filter's step is old_dt * down / up; one that strays from dt drifts over a long trial
        drift = abs(float(ratio) * new_dt / old_dt - 1.0) * (int(arrays.length.max()) - 1) * old_dt / new_dt
        if drift > 0.5:
            raise ValueError(f"`dt`={new_dt!r}: the ratio of the steps, {old_dt / new_dt!r}, is approximated by "
                             f"{up}/{down} (max_denominator={max_denominator}), whose step {old_dt * down / up!r} "
                             f"drifts {drift:.3g} samples from dt over the longest trial; raise `max_denominator` or "
                             "use method='linear'.")
    if method == "polyphase" and not arrays.mask[np.arange(arrays.x.shape[1])[None, :] < arrays.length[:, None]].all():
        raise ValueError("`data` has missing samples (NaN); method='polyphase' cannot filter across them. "
                         "Use method='linear'.")
    if method == "polyphase" and arrays.time is not None:
        steps = np.diff(arrays.time, axis=1)
        steps = steps[np.isfinite(steps)]
        if steps.size and not np.all(np.abs(steps - old_dt) <= STEP_RTOL * old_dt):
            raise ValueError(f"`data` is sampled irregularly (sample steps from {steps.min():.6g} to {steps.max():.6g},"
                             " its `sample_time`); method='polyphase' needs evenly spaced samples. Use method='linear',"
                             " which interpolates at the sample times.")
    if arrays.time is None or method == "polyphase":
        spans = (arrays.length - 1) * old_dt
    else:
        spans = np.array([arrays.time[i, n - 1] - arrays.time[i, 0] for i, n in enumerate(arrays.length)])
    short = np.flatnonzero(np.floor(spans / new_dt + 1e-9) + 1 < 2)
    if short.size:
        raise ValueError(f"`dt`={new_dt!r} is longer than trial(s) {short.tolist()} (time spans "
                         f"{[float(f'{v:.6g}') for v in spans[short]]}): each would keep 1 sample, and a trial needs at "
                         "least 2; choose a shorter `dt`.")
    trials, u_trials = [], [] if arrays.u is not None else None
    times = None if arrays.time is None else []
    for i, n in enumerate(arrays.length):
        if arrays.time is None or method == "polyphase":
            t_old = np.arange(n) * old_dt
        else:
            t_old = arrays.time[i, :n] - arrays.time[i, 0]         # interpolate at the actual sample times
        n_new = int(np.floor(t_old[-1] / new_dt + 1e-9)) + 1
        t_new = np.arange(n_new) * new_dt
        if times is not None:
            times.append(arrays.time[i, 0] + t_new)
        x = arrays.x[i, :n]
        if method == "polyphase":
            y = resample_poly(x, up, down, axis=0, padtype="line")[:n_new]
            if y.shape[0] < n_new:                      # rounding of up/down: extend by the last value
                y = np.concatenate([y, np.repeat(y[-1:], n_new - y.shape[0], axis=0)])
        else:
            y = np.stack([_interp_nan(t_new, t_old, x[:, c]) for c in range(x.shape[1])], axis=1)
        trials.append(y)
        if u_trials is not None:
            u = arrays.u[i, :n]
            u_trials.append(np.stack([np.interp(t_new, t_old, u[:, c]) for c in range(u.shape[1])], axis=1))
    out = _rebuild(ds, trials, new_dt, channel_names=ds["channel"].values, u_trials=u_trials, times=times)
    return _with_step(out, {"step": "resample", "method": method, "dt_old": old_dt, "dt_new": new_dt,
                            "up": up, "down": down})


def _interp_nan(t_new: np.ndarray, t_old: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Linear interpolation that is NaN wherever a neighbouring old sample is NaN."""
    idx = np.clip(np.searchsorted(t_old, t_new, side="right") - 1, 0, len(t_old) - 2)
    w = (t_new - t_old[idx]) / (t_old[idx + 1] - t_old[idx])
    left, right = y[idx], y[idx + 1]
    out = (1 - w) * left + w * right
    # a new sample that falls on an old one needs only that one (its NaN neighbour does not matter)
    on_left, on_right = np.isclose(w, 0.0), np.isclose(w, 1.0)
    out[on_left] = left[on_left]
    out[on_right] = right[on_right]
    return out


# ----------------------------------------------------------------------------- delay embedding


def delay_embed(data: Any, delays: Sequence[int], *, channels: Sequence[str] | None = None) -> xr.Dataset:
    """Time-delay embedding: ``X[t, k] = s(t + delays[k])`` for each selected channel ``s``.

    Parameters
    ----------
    data : canonical dataset or array-like
    delays : sequence of int ≥ 0
        Shifts in samples, in the output column order (need not be sorted: the published ECG
        embedding is (0, 20, 68, 55, 10)).
    channels : sequence of str, optional
        Channels to embed (default all); the output has ``len(channels) · len(delays)`` channels
        named ``"<channel>(t+<delay>)"``.

    Returns
    -------
    xarray.Dataset
        Each trial is ``max(delays)`` samples shorter (time index t of the output is time t of
        the input). A NaN in the input makes every embedded sample that uses it NaN. Embedded
        copies of auxiliary channels (``attrs["auxiliary_channels"]``, e.g. slow channels) are
        listed there under their new names, so scores still leave them out.
    """
    ds = as_dataset(data)
    delays = _delays(delays)
    all_channels = [str(c) for c in ds["channel"].values]
    if channels is None:
        channels = all_channels
    elif isinstance(channels, str):
        raise TypeError(f"`channels` must be a sequence of channel names, not one string; got {channels!r} "
                        f"(write [{channels!r}]).")
    missing = [c for c in channels if c not in all_channels]
    if missing or len(channels) == 0:
        raise ValueError(f"`channels` must name channels of `data`; unknown {missing}, available {all_channels}.")
    if len(set(channels)) != len(channels):
        raise ValueError(f"`channels` must not repeat a channel; got {list(channels)}.")
    cols = [all_channels.index(c) for c in channels]
    arrays = to_arrays(ds)
    span = max(delays)
    if (arrays.length <= span).any():
        raise ValueError(f"trials must be longer than the largest delay ({span}); got lengths {arrays.length.tolist()}.")
    trials, u_trials = [], [] if arrays.u is not None else None
    for i, n in enumerate(arrays.length):
        x = arrays.x[i, :n]
        trials.append(np.stack([x[d: n - span + d, c] for c in cols for d in delays], axis=1))
        if u_trials is not None:
            u_trials.append(arrays.u[i, : n - span])
    names = [f"{c}(t+{d})" for c in channels for d in delays]
    out = _rebuild(ds, trials, arrays.dt, channel_names=names, u_trials=u_trials, times=_times(arrays, span))
    if "auxiliary_channels" in ds.attrs:       # an embedded slow channel stays auxiliary under its new names
        auxiliary = set(auxiliary_channels(ds))
        out.attrs["auxiliary_channels"] = json.dumps([f"{c}(t+{d})" for c in channels for d in delays if c in auxiliary])
    return _with_step(out, {"step": "delay_embed", "channels": list(channels), "delays": list(delays)})


def _delays(delays: Any) -> list[int]:
    try:
        values = [int(d) for d in delays]
    except (TypeError, ValueError):
        raise TypeError(f"`delays` must be a sequence of non-negative integers; got {delays!r}.") from None
    if not values or any(v < 0 for v in values) or any(int(d) != d for d in delays):
        raise ValueError(f"`delays` must be a non-empty sequence of non-negative integers; got {list(delays)!r}.")
    if len(set(values)) != len(values):
        raise ValueError(f"`delays` must not repeat a value; got {values}.")
    return values


# ----------------------------------------------------------------------------- automatic choice


def average_mutual_information(series: Any, max_lag: int, *, n_bins: int = 32) -> np.ndarray:
    """Average mutual information I(s_t; s_{t+τ}) in nats for τ = 0 … max_lag.

    Histogram estimate with ``n_bins`` equal-width bins over the range of ``series`` (1-D,
    NaN samples are skipped pairwise).

    Returns
    -------
    ndarray of shape (max_lag + 1,)
    """
    s = np.asarray(series, dtype=float).ravel()
    if isinstance(max_lag, bool) or not isinstance(max_lag, numbers.Integral) or max_lag < 1 or max_lag >= s.size - 1:
        raise ValueError(f"`max_lag` must be an integer in [1, {s.size - 2}] for a series of {s.size} samples; "
                         f"got {max_lag!r}.")
    if isinstance(n_bins, bool) or not isinstance(n_bins, numbers.Integral) or n_bins < 2:
        raise ValueError(f"`n_bins` must be an integer >= 2; got n_bins={n_bins!r}.")
    finite = s[np.isfinite(s)]
    if finite.size < 2:
        raise ValueError(f"`series` has {finite.size} observed (finite) samples of {s.size}; the average mutual "
                         "information needs at least 2.")
    edges = np.linspace(finite.min(), finite.max(), n_bins + 1)
    codes = np.clip(np.digitize(s, edges[1:-1]), 0, n_bins - 1)
    ok = np.isfinite(s)
    out = np.empty(max_lag + 1)
    for lag in range(max_lag + 1):
        a, b = codes[: s.size - lag], codes[lag:]
        keep = ok[: s.size - lag] & ok[lag:]
        joint = np.bincount(a[keep] * n_bins + b[keep], minlength=n_bins * n_bins).reshape(n_bins, n_bins)
        p = joint / joint.sum()
        pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
        nz = p > 0
        out[lag] = float(np.sum(p[nz] * np.log(p[nz] / (pa @ pb)[nz])))
    return out


#: lags after a local minimum of the average mutual information for which it must not dip lower
#: (:func:`choose_delay`): 8 skips the histogram's zig-zag on clean sines (period 100: delay 2 -> 19,
#: period 250: 4 -> 32) and keeps the delays of Lorenz-63 (16, 15, 16) and of the ECG (61)
AMI_MIN_HOLD = 8


def choose_delay(series: Any, max_lag: int, *, n_bins: int = 32) -> tuple[int, np.ndarray]:
    """Delay at the first local minimum of the average mutual information.

    A minimum counts when the AMI stays at or above it for the next :data:`AMI_MIN_HOLD` lags
    (up to ``max_lag``): the histogram estimate zig-zags by a few lags on a clean periodic
    signal, which the plain next-lag test took for a minimum (1-2 samples on a sine of period
    100). If the AMI has no such minimum up to ``max_lag``, the first lag where it falls below
    ``AMI(0)/e`` is used, and failing that ``max_lag``.

    Returns
    -------
    delay : int
    ami : ndarray of shape (max_lag + 1,)
    """
    ami = average_mutual_information(series, max_lag, n_bins=n_bins)
    if not ami[0] > 0:                                   # one bin holds every sample: nothing to lose with lag
        raise ValueError(f"`series` is constant (every observed sample equals {float(np.nanmax(series))!r}); "
                         "no delay can be chosen from its average mutual information.")
    for lag in range(1, max_lag):
        if ami[lag] < ami[lag - 1] and ami[lag] <= ami[lag + 1: lag + 1 + AMI_MIN_HOLD].min():
            return lag, ami
    below = np.flatnonzero(ami < ami[0] / np.e)
    return (int(below[0]) if below.size else max_lag), ami


def false_nearest_neighbors(series: Any, delay: int, max_dim: int, *, ratio_threshold: float = 15.0,
                            size_threshold: float = 2.0, max_points: int = 4000,
                            seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """Fraction of false nearest neighbours for embedding dimensions 1 … max_dim.

    A neighbour in dimension m is false when adding coordinate m+1 moves it away by more than
    ``ratio_threshold`` times their distance, or by more than ``size_threshold`` times the
    series' standard deviation (Kennel, Brown & Abarbanel 1992, criteria 1 and 2). Points that
    coincide in all m+1 coordinates up to round-off (exact recurrences) are not counted as
    neighbours.

    Parameters
    ----------
    series : array-like of shape (time,)
        NaN marks a missing sample: delay vectors that reach one are left out.
    delay : int
        Uniform embedding delay (samples).
    max_dim : int
    max_points : int, default 4000
        Reference points are a random subset of this size (neighbours are searched among all).
    seed : int or Generator
        For the subset.

    Returns
    -------
    ndarray of shape (max_dim,)
        Entry m − 1 is the fraction for dimension m.
    """
    s = np.asarray(series, dtype=float).ravel()
    for argname, value in (("delay", delay), ("max_dim", max_dim), ("max_points", max_points)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"`{argname}` must be a positive integer; got {argname}={value!r}.")
    _positive(ratio_threshold, "ratio_threshold")
    _positive(size_threshold, "size_threshold")
    # a delay vector that reaches a missing sample is left out; the series is never joined across a
    # gap (that would make vectors of samples that were never that far apart)
    n_all = s.size - max_dim * delay
    complete = np.ones(max(n_all, 0), dtype=bool)
    for k in range(max_dim + 1):
        complete &= np.isfinite(s[k * delay: k * delay + n_all])
    start = np.flatnonzero(complete)
    n = start.size
    if n < 10:
        raise ValueError(f"series of {s.size} samples ({int(np.isfinite(s).sum())} observed) is too short for delay "
                         f"{delay} and max_dim {max_dim}: {n} complete delay vectors, expected at least 10.")
    scale = np.nanstd(s)
    if not scale > 0:
        raise ValueError(f"`series` is constant (its {int(np.isfinite(s).sum())} observed samples all equal "
                         f"{float(np.nanmax(s))!r}); false nearest neighbours need a series that varies.")
    rng = np.random.default_rng(seed)
    refs = rng.choice(n, size=min(max_points, n), replace=False)
    out = np.empty(max_dim)
    for m in range(1, max_dim + 1):
        emb = np.stack([s[start + k * delay] for k in range(m)], axis=1)
        nxt = s[start + m * delay]
        # A neighbour that coincides with the point in all m+1 coordinates up to round-off is an
        # exact recurrence (e.g. a sampled periodic signal), not a neighbour: skip to the nearest
        # point that differs. A distance-0 neighbour that differs in coordinate m+1 is false.
        dist, idx = cKDTree(emb).query(emb[refs], k=min(64, n))
        tiny = 1e-9 * scale
        extra_all = np.abs(nxt[refs][:, None] - nxt[idx])
        keep = ~((dist <= tiny) & (extra_all <= tiny))
        rows = np.arange(len(refs))
        first = np.argmax(keep, axis=1)
        found = keep[rows, first]
        d, extra = dist[rows, first][found], extra_all[rows, first][found]
        false = (extra > ratio_threshold * d) | (np.sqrt(d ** 2 + extra ** 2) / scale > size_threshold)
        out[m - 1] = false.mean() if found.any() else 0.0
    return out


def choose_dimension(series: Any, delay: int, *, max_dim: int = 10, threshold: float = 0.01,
                     **fnn_options: Any) -> tuple[int, np.ndarray]:
    """Smallest dimension whose false-nearest-neighbour fraction is below ``threshold``.

    Returns
    -------
    dimension : int
        ``max_dim`` when no dimension reaches the threshold.
    fnn : ndarray of shape (max_dim,)
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0.0 < float(threshold) <= 1.0:
        raise ValueError(f"`threshold` must be a fraction of false neighbours in (0, 1]; got threshold={threshold!r}.")
    fnn = false_nearest_neighbors(series, delay, max_dim, **fnn_options)
    below = np.flatnonzero(fnn < threshold)
    return (int(below[0]) + 1 if below.size else max_dim), fnn


def auto_embed(data: Any, *, channel: str | None = None, max_lag: int = 100, max_dim: int = 10,
               n_bins: int = 32, fnn_threshold: float = 0.01, seed: int = 0) -> xr.Dataset:
    """Delay-embed one channel with an automatically chosen delay and dimension.

    The delay is the first minimum of the average mutual information
    (:func:`choose_delay`), the dimension the false-nearest-neighbour choice
    (:func:`choose_dimension`); the embedding uses delays ``(0, τ, 2τ, …, (m−1)τ)``. Statistics
    are computed on the first trial.

    Returns
    -------
    xarray.Dataset
        The embedded data. ``attrs["preprocessing"]`` gains the ``delay_embed`` step preceded by
        ``{"step": "auto_embed", "delay": τ, "dimension": m, "ami": [...], "fnn": [...], ...}``.
    """
    ds = as_dataset(data)
    channels = [str(c) for c in ds["channel"].values]
    if channel is None:
        if len(channels) != 1:
            raise ValueError(f"`channel` is required for data with several channels; choose one of {channels}.")
        channel = channels[0]
    if channel not in channels:
        raise ValueError(f"`channel` {channel!r} is not a channel of `data`; available {channels}.")
    arrays = to_arrays(ds)
    series = arrays.x[0, : arrays.length[0], channels.index(channel)]
    choice = {"step": "auto_embed", "channel": channel,
              **choose_embedding(series, max_lag=max_lag, max_dim=max_dim, n_bins=n_bins,
                                 fnn_threshold=fnn_threshold, seed=seed)}
    return delay_embed(_with_step(ds, choice), choice["delays"], channels=[channel])


#: false-nearest-neighbour share at which a recording's embedding stops adding dimensions (the
#: command line's ``--delay-embed auto``, ``dsident inspect``'s suggestion): noise keeps a
#: recording's share above the 1 % of noise-free data (Hindmarsh-Rose voltage with 1 % noise:
#: 0.99 / 0.56 / 0.14 / 0.049 / 0.034 for 1-5 dimensions, so 4)
RECORDING_FNN_THRESHOLD = 0.05


def choose_embedding(series: Any, *, max_lag: int = 100, max_dim: int = 10, n_bins: int = 32,
                     fnn_threshold: float = 0.01, seed: int = 0) -> dict[str, Any]:
    """The delay (first minimum of the average mutual information, :func:`choose_delay`) and
    dimension (false nearest neighbours below ``fnn_threshold``, :func:`choose_dimension`) of a
    1-D series' delay embedding.

    Returns
    -------
    dict
        ``method``, ``delay``, ``dimension``, ``delays`` (``0, τ, …, (m−1)τ``), the settings, and
        the ``ami`` and ``fnn`` curves.
    """
    delay, ami = choose_delay(series, max_lag, n_bins=n_bins)
    dimension, fnn = choose_dimension(series, delay, max_dim=max_dim, threshold=fnn_threshold, seed=seed)
    return {"method": "AMI first minimum + false nearest neighbours", "delay": delay, "dimension": dimension,
            "delays": [k * delay for k in range(dimension)], "max_lag": max_lag, "n_bins": n_bins,
            "fnn_threshold": fnn_threshold, "ami": np.round(ami, 6).tolist(), "fnn": np.round(fnn, 6).tolist()}
