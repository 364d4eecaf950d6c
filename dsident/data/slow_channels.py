"""Auxiliary slow channels: a slow band of one channel, and its quadrature, as extra observations.

Some recordings carry a slow rhythm that a short delay embedding cannot hold: the ECG's
respiratory baseline wander (a 4 s cycle under ~1 s beats) is the case in point. A model
trained by teacher forcing on windows of a few hundred samples gets almost no signal to learn
such a rhythm into units the data do not force (docs/teacher_forcing.md, "The ECG's baseline
wander"). :func:`add_slow_channels` hands it the rhythm as two more observed channels:

* ``slow(c)``: channel ``c`` low-passed (zero-phase Butterworth, ``cutoff`` in Hz of the
  data's time unit), its mean removed;
* ``slow_q(c)``: its quadrature (the imaginary part of the analytic signal), so that the pair
  turns like a 2-d oscillator and its phase is readable from any single sample.

Both are divided by one ``scale`` (the training data's standard deviation of ``slow(c)``
unless given), so a test set must reuse the training set's ``scale``. The two channels are
listed in the dataset's ``attrs["auxiliary_channels"]`` (JSON): :func:`dsident.metrics.evaluate`
leaves them out of D_stsp, D_H and PE(n), which compare the data's own channels only, while the
free run still generates them. The filter looks at the whole series (zero phase), so the slow
channels at a test set's first sample summarise the test data around it: that is how the free
run's start is inferred, not data it is scored on.

The series' two ends are edges for the filter and, more so, for the Hilbert transform: on the
shipped ECG the quadrature at the first of 10 000 test samples came out 5.63 in training-scale
units, against 7.25 from the whole test split and a range of about ±1.6 away from the ends.
A free run started there starts far outside the states it was trained on. ``before`` (the
recording just before the data, e.g. the training split a test split continues) lets the
filter run across that edge: the slow channels are then computed on ``before`` + data and only
the data's samples are kept (:func:`dsident.experiments.inputs.load_test` passes it whenever a
test set continues its training data).

Where no neighbouring recording exists (a training split's two ends, a test file given alone,
the far end of any series), ``edges="predict"`` (the default) extends the series by a forecast
of its slow band before filtering: an autoregressive model (Burg's method, which gives stable
models, so the forecast cannot run away), fitted to the band sampled at eight points per cutoff
period, continues it for three cutoff periods on each side (backwards in time at the start),
and the filter and the Hilbert transform then run over the extended series, whose far ends
fall outside the samples kept. The forecast starts a cutoff period inside each end, where the
low-pass is not yet biased by the edge, and a second round forecasts again from the
once-extended series. ``python benchmarks/bench_slow_edges.py`` measures it against the whole
ECG recording filtered at once: at the end samples the quadrature's error falls from 8.7
training-scale units to 0.08 and the band's from 1.1 to 0.19 (on a slow tone cut at eight
phases, against the analytic components: 1.14 to 0.21 and 0.46 to 0.03 of its amplitude),
for 0.3 s instead of 0.2 s on 100 000 samples. ``edges="plain"`` filters the series as it is
(how every slow-channel fit before session 33 was made, and what the ECG cells recorded then
still use).
"""
from __future__ import annotations

import json
import math
import numbers
import warnings
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["add_slow_channels", "auxiliary_channels", "scored_channels", "SLOW_FILTER_ORDER", "EDGE_MODES"]

#: order of the Butterworth low-pass (applied forward and backward: twice the roll-off)
SLOW_FILTER_ORDER = 4
#: a trial must span at least this many periods of the cutoff frequency
MIN_CUTOFF_PERIODS = 3
#: how a series' ends are treated: forecast beyond them ("predict") or filtered as they are ("plain")
EDGE_MODES = ("predict", "plain")
#: forecast length beyond each end, in periods of the cutoff frequency
FORECAST_PERIODS = 3
#: the forecast's autoregressive model sees the band at this many samples per cutoff period ...
AR_SAMPLES_PER_PERIOD = 8
#: ... and this many periods of it back (its order)
AR_PERIODS = 2
#: the forecast starts this many cutoff periods inside each end, where the low-pass is unbiased
GUARD_PERIODS = 1.0
#: rounds of forecast-and-refilter
FORECAST_ROUNDS = 2


def auxiliary_channels(data: xr.Dataset) -> list[str]:
    """Names of the channels ``data`` marks as auxiliary (derived, not scored); [] if none."""
    raw = data.attrs.get("auxiliary_channels")
    if not raw:
        return []
    names = json.loads(raw) if isinstance(raw, str) else list(raw)
    return [str(n) for n in names]


def scored_channels(data: xr.Dataset) -> np.ndarray:
    """Positions of the channels a score compares: every channel not marked auxiliary, (K,) int."""
    auxiliary = set(auxiliary_channels(data))
    return np.array([i for i, c in enumerate(data["channel"].values) if str(c) not in auxiliary], dtype=int)


def _lengths(ds: xr.Dataset) -> np.ndarray:
    """Samples per trial, (trial,) int: ``length`` when the dataset is ragged, else its time size."""
    x = ds["x"]
    return np.asarray(ds["length"].values, dtype=int) if "length" in ds else np.full(x.shape[0], x.shape[1])


def _preceding(before: Any, ds: xr.Dataset, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``before``'s samples, (trial, time, channel), and lengths, (trial,); empty when None.

    Raises ValueError when ``before`` does not have ``ds``'s channels and number of trials.
    """
    from .container import as_dataset

    if before is None:
        return np.zeros((ds.sizes["trial"], 0, len(names))), np.zeros(ds.sizes["trial"], dtype=int)
    prior = as_dataset(before)
    prior_names = [str(c) for c in prior["channel"].values]
    if prior_names != names or prior.sizes["trial"] != ds.sizes["trial"]:
        raise ValueError(f"`before` must hold the recording just before the data, with the same channels and trials; "
                         f"got channels {prior_names} × {prior.sizes['trial']} trial(s), expected {names} × "
                         f"{ds.sizes['trial']}.")
    return prior["x"].values, _lengths(prior)


def channel_position(names: list[str], channel: int | str, argname: str = "channel") -> int:
    """The position of ``channel`` (a name or a position) among ``names``; ValueError naming
    ``argname`` otherwise."""
    if isinstance(channel, str):
        if channel not in names:
            raise ValueError(f"`{argname}` must name one of the data's channels {names}; got {channel!r}.")
        return names.index(channel)
    if isinstance(channel, (int, np.integer)) and not isinstance(channel, bool) and 0 <= channel < len(names):
        return int(channel)
    raise ValueError(f"`{argname}` must be a channel name or a position in 0..{len(names) - 1}; got {channel!r}.")


def burg_ar(series: np.ndarray, order: int) -> np.ndarray:
    """Autoregressive coefficients of ``series`` by Burg's method.

    Burg's reflection coefficients each lie in [-1, 1] (Cauchy-Schwarz), so the model is stable
    and a forecast from it decays or keeps its amplitude instead of growing; unlike Yule-Walker
    it does not taper the record's ends, which matters for the short, tone-like slow bands it
    is used on.

    Parameters
    ----------
    series : (n,) float
        Zero-mean samples.
    order : int
        Number of lags, < n.

    Returns
    -------
    (order,) float
        ``a`` with ``series[t] ≈ sum_j a[j] * series[t - 1 - j]``.
    """
    fwd = np.asarray(series, dtype=float).copy()
    bwd = fwd.copy()
    coef = np.zeros(0)
    for m in range(order):
        f, b = fwd[m + 1:], bwd[m:-1]
        denom = f @ f + b @ b
        k = 2.0 * (f @ b) / denom if denom > 0 else 0.0
        coef = np.concatenate([coef - k * coef[::-1], [k]])
        fwd[m + 1:], bwd[m + 1:] = f - k * b, b - k * f
    return coef


def forecast_band(band: np.ndarray, n_ahead: int, step: int, lags: int) -> np.ndarray:
    """Continue a slow series past its last sample with an autoregressive model (Burg).

    Parameters
    ----------
    band : (n,) float
        The series (a low-passed signal), finite.
    n_ahead : int
        Samples to forecast after ``band[-1]``.
    step : int
        The model sees every ``step``-th sample, counted back from the last one (the band is
        smooth, so a coarse grid holds it and keeps the order small); the forecast is
        interpolated back to the series' own grid by a cubic spline.
    lags : int
        The model's order on the coarse grid; lowered to a third of the coarse samples when the
        series is short.

    Returns
    -------
    (n_ahead,) float
        The forecast; the series' mean when the series is flat (no dynamics to continue).
    """
    from scipy.interpolate import CubicSpline

    coarse = band[::-1][::step][::-1]                   # ends on the last sample
    mean = float(coarse.mean())
    centred = coarse - mean
    lags = max(1, min(int(lags), centred.size // 3))
    if not np.any(centred):
        return np.full(n_ahead, mean)
    coef = burg_ar(centred, lags)                       # coef[j] multiplies lag j + 1
    history = list(centred[-lags:])
    for _ in range(int(math.ceil(n_ahead / step)) + 1):
        history.append(float(np.dot(coef, history[:-lags - 1:-1])))
    path = np.array(history[lags - 1:]) + mean          # the last real sample, then the forecast
    return CubicSpline(np.arange(path.size) * step, path)(np.arange(1, n_ahead + 1))


def _observed_stretches(series: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of finite samples of a 1-D series, in order."""
    finite = np.concatenate([[False], np.isfinite(series), [False]])
    edges = np.flatnonzero(np.diff(finite.astype(np.int8)))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def _extended(src: np.ndarray, sos: np.ndarray, cutoff: float, dt: float) -> tuple[np.ndarray, int]:
    """``src`` with a forecast of its slow band prepended and appended, and the length of each.

    The low-pass is itself biased within about a cutoff period of each end, so the forecast
    starts one period inside (``guard``) and only its part beyond the end is used; a second
    round forecasts again from the band of the once-extended series, whose ends are then
    nearly right (two rounds halved the worst error of one on a tone and on the ECG).
    """
    from scipy.signal import sosfiltfilt

    period = 1.0 / (cutoff * dt)                                  # samples per cutoff period
    step = max(1, int(period / AR_SAMPLES_PER_PERIOD))
    lags = int(math.ceil(AR_PERIODS * period / step))
    n_ahead = int(math.ceil(FORECAST_PERIODS * period))
    guard = int(period * GUARD_PERIODS)
    band, pad = sosfiltfilt(sos, src), 0
    for _ in range(FORECAST_ROUNDS):
        core = band[pad:band.size - pad]
        inner = core[guard:core.size - guard]
        if inner.size < 3 * step:               # too short to skip the biased ends
            inner = core
        shift = (core.size - inner.size) // 2
        after = forecast_band(inner, n_ahead + shift, step, lags)[shift:]
        ahead_of = forecast_band(inner[::-1], n_ahead + shift, step, lags)[shift:][::-1]  # a stationary AR runs backwards alike
        extended, pad = np.concatenate([ahead_of, src, after]), n_ahead
        band = sosfiltfilt(sos, extended)
    return extended, pad


def add_slow_channels(data: Any, cutoff: float, *, channel: int | str = 0, scale: float | None = None,
                      order: int = SLOW_FILTER_ORDER, before: Any = None,
                      edges: str = "predict") -> tuple[xr.Dataset, dict[str, Any]]:
    """Append the slow band of one channel and its quadrature as two auxiliary channels.

    Parameters
    ----------
    data : xarray.Dataset or anything :func:`dsident.data.as_dataset` accepts
        ``x(trial, time, channel)`` with ``attrs["dt"]`` (time unit: that of ``cutoff``'s
        inverse; seconds for the ECG). Ragged trials (``length``) are filtered over their own
        samples.
    cutoff : float
        Low-pass cutoff frequency in cycles per time unit (Hz when dt is in seconds); must lie
        below the Nyquist frequency ``1 / (2 dt)``.
    channel : int or str
        The source channel, by position or name.
    scale : float, optional
        Divide both new channels by this (the training data's value for a test set). None: the
        standard deviation of the slow band of ``data`` itself.
    order : int
        Butterworth order (run forward and backward).
    before : xarray.Dataset, optional
        The samples recorded just before ``data``, in the same units, with the same channels
        and trials (trial i of ``data`` continues trial i of ``before``). The filter and the
        quadrature run over ``before`` followed by ``data`` (mean removed over both), and only
        ``data``'s samples are returned, so that its first samples carry no edge effect. None:
        ``data`` alone.
    edges : {"predict", "plain"}
        "predict": extend each end of the (``before`` +) data by an autoregressive forecast of
        its slow band before filtering (module docstring), so that the ends carry little edge
        effect. "plain": filter the series as it is.

    Returns
    -------
    (xarray.Dataset, dict)
        The data with channels ``slow(name)`` and ``slow_q(name)`` appended (NaN beyond each
        trial's length) and ``attrs["auxiliary_channels"]`` naming them, and the settings to
        reuse on other data: ``{"cutoff", "channel", "scale", "order", "edges"}``. The settings,
        the new channels and the samples of ``before`` per trial are appended to
        ``attrs["preprocessing"]`` as an ``"add_slow_channels"`` step.

    Raises
    ------
    ValueError
        An unknown channel, a cutoff that is not a positive frequency below Nyquist, a trial
        shorter than ``MIN_CUTOFF_PERIODS`` periods of the cutoff, a source channel with no stretch
        that long between its missing samples (NaN; each long stretch is filtered on its own, and
        the slow channels are missing in the gaps and shorter stretches, with a warning), irregular
        sample times (``sample_time``: resample them first), a flat source
        channel (no slow band to scale), a non-positive ``scale``, a ``before`` whose channels
        or trials differ from ``data``'s, or an unknown ``edges``.
    """
    from scipy.signal import butter, hilbert, sosfiltfilt

    from .container import STEP_RTOL, as_dataset

    ds = as_dataset(data)
    dt = float(ds.attrs.get("dt", 1.0))
    names = [str(c) for c in ds["channel"].values]
    index = channel_position(names, channel)
    nyquist = 0.5 / dt
    if isinstance(cutoff, (bool, np.bool_)) or not isinstance(cutoff, numbers.Real) or not 0 < cutoff < nyquist:
        raise ValueError(f"`cutoff` must be a frequency in (0, {nyquist:g}) cycles per time unit (below Nyquist "
                         f"at dt = {dt:g}); got cutoff={cutoff!r}.")
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 1:
        raise ValueError(f"`order` must be a positive integer; got order={order!r}.")
    if scale is not None and (isinstance(scale, (bool, np.bool_)) or not isinstance(scale, numbers.Real)
                              or not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"`scale` must be a positive number (the training data's); got scale={scale!r}.")
    if edges not in EDGE_MODES:
        raise ValueError(f"`edges` must be one of {list(EDGE_MODES)}; got edges={edges!r}.")
    clash = [n for n in (f"slow({names[index]})", f"slow_q({names[index]})") if n in names]
    if clash:
        raise ValueError(f"the data already have the channels {clash}: slow channels were added before.")

    if "sample_time" in ds:
        steps = np.diff(ds["sample_time"].values, axis=1)
        steps = steps[np.isfinite(steps)]
        if steps.size and not np.all(np.abs(steps - dt) <= STEP_RTOL * dt):
            raise ValueError(f"`data` is sampled irregularly (sample steps from {steps.min():.6g} to {steps.max():.6g}, "
                             f"its `sample_time`; dt = {dt:g}); the slow band's filter needs evenly spaced samples: "
                             "resample them first (dsident.data.preprocessing.resample(data, dt, method='linear')).")
    x = ds["x"].values
    lengths = _lengths(ds)
    prefix, prefix_lengths = _preceding(before, ds, names)
    sos = butter(int(order), float(cutoff), fs=1.0 / dt, output="sos")
    slow = np.full(x.shape[:2] + (2,), np.nan)
    min_len = int(math.ceil(MIN_CUTOFF_PERIODS / (cutoff * dt)))
    gaps: list[str] = []
    for i, n in enumerate(lengths):
        head = prefix[i, :prefix_lengths[i], index]
        src = np.concatenate([head, x[i, :n, index]])
        if src.size < min_len:
            raise ValueError(f"trial {i} has {src.size} samples; slow channels with cutoff={cutoff:g} need at least "
                             f"{min_len} ({MIN_CUTOFF_PERIODS} periods of the cutoff at dt = {dt:g}).")
        stretches = _observed_stretches(src)
        long = [(a, b) for a, b in stretches if b - a >= min_len]
        if not long:
            where = "`before` and the data" if head.size else "the data"
            longest = max((b - a for a, b in stretches), default=0)
            raise ValueError(f"channel {names[index]!r} of trial {i} ({where}) has no stretch of {min_len} observed "
                             f"samples between its {int((~np.isfinite(src)).sum())} missing ones (the longest has "
                             f"{longest}); slow channels with cutoff={cutoff:g} need {MIN_CUTOFF_PERIODS} periods of "
                             "the cutoff without a gap.")
        if len(stretches) > 1 or stretches[0] != (0, src.size):
            lost = int(src.size - sum(b - a for a, b in long))
            gaps.append(f"trial {i}: {len(long)} stretch(es), {lost} sample(s) left missing")
        band, quad = np.full(src.size, np.nan), np.full(src.size, np.nan)
        for a, b in long:
            # each stretch between gaps is filtered as a trial of its own: the filter cannot run
            # across a gap, and filling one would invent the slow band there
            piece, pad = src[a:b], 0
            if edges == "predict":
                piece, pad = _extended(piece, sos, float(cutoff), dt)
            filtered = sosfiltfilt(sos, piece)
            filtered = filtered - filtered[pad:filtered.size - pad].mean()
            band[a:b] = filtered[pad:filtered.size - pad]
            quad[a:b] = np.imag(hilbert(filtered))[pad:filtered.size - pad]
        slow[i, :n, 0] = band[head.size:]
        slow[i, :n, 1] = quad[head.size:]
    if gaps:
        warnings.warn(f"channel {names[index]!r} has missing samples: its slow band was filtered over each observed "
                      f"stretch of {min_len}+ samples on its own, and is missing in the gaps and in shorter stretches "
                      f"({'; '.join(gaps)}).", UserWarning, stacklevel=2)
    if scale is None:
        scale = float(np.nanstd(slow[..., 0]))
        if not scale > 0:
            raise ValueError(f"channel {names[index]!r} has no slow band below {cutoff:g} (flat after filtering); "
                             "nothing to add.")
    slow /= scale
    new_names = [f"slow({names[index]})", f"slow_q({names[index]})"]
    out = xr.Dataset(
        {"x": (("trial", "time", "channel"), np.concatenate([x, slow], axis=2)),
         **{k: ds[k] for k in ds.data_vars if k != "x"}},
        coords={"trial": ds["trial"].values, "time": ds["time"].values, "channel": names + new_names},
        attrs=dict(ds.attrs))
    out.attrs["auxiliary_channels"] = json.dumps(auxiliary_channels(ds) + new_names)
    settings = {"cutoff": float(cutoff), "channel": names[index], "scale": float(scale), "order": int(order),
                "edges": edges}
    steps = json.loads(ds.attrs.get("preprocessing", "[]"))
    step = {"step": "add_slow_channels", **settings, "channels": new_names,
            "before_samples": prefix_lengths.tolist()}
    out.attrs["preprocessing"] = json.dumps([*steps, step])
    return out, settings
