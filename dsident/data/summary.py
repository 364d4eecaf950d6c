"""What a dataset holds, before anything is fitted: :func:`describe` and :func:`describe_markdown`.

A lab's first question of a file is whether dsident reads it as they meant: how many trials,
samples and channels, the sampling step and its unit, what is missing, each channel's scale and
rhythm. The notes then name what would hurt a fit or a score before hours are spent on it: a
constant channel, channels on scales far apart, an evaluation window that spans few periods of
the slowest rhythm, a time unit nobody named. ``dsident inspect FILE`` prints them.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import xarray as xr

from .._text import and_more

__all__ = ["describe", "describe_markdown", "FEW_PERIODS", "SCALE_RATIO"]

#: a per-channel table longer than this puts the notes above it, where they are not scrolled past
LONG_TABLE = 50

#: an evaluation window spanning fewer periods of the slowest rhythm than this gets a note
FEW_PERIODS = 5
#: channel standard deviations further apart than this factor get a note (--zscore)
SCALE_RATIO = 100.0
#: samples of each channel's first trial searched for bursts (about 0.3 s a channel)
BURST_SAMPLES = 200_000


def describe(data: xr.Dataset, *, eval_length: int = 10_000) -> dict[str, Any]:
    """Sizes, sampling, and per-channel statistics and rhythms of a canonical dataset.

    Parameters
    ----------
    data : xarray.Dataset
        ``x(trial, time, channel)`` as :func:`dsident.data.as_dataset` makes it (NaN = missing).
    eval_length : int
        The evaluation window ``T`` (samples) the notes compare the slowest rhythm with (the
        default of ``dsident fit`` for a data file).

    Returns
    -------
    dict
        ``name``, ``trials``, ``samples`` (per trial, observed span), ``channels`` (names),
        ``dt``, ``time_unit`` (None when unknown), ``duration`` (all trials, time units),
        ``per_channel`` (list of dicts: ``channel``, ``mean``, ``std``, ``min``, ``max``,
        ``missing`` (share of samples), ``period`` (the rhythm over the first trial's longest
        observed stretch, :func:`dsident.analysis.rhythm_period`, time units; NaN for a flat,
        short or broadband channel),
        ``period_samples``, ``burst_period`` (median interval between burst onsets over the
        first trial's first :data:`BURST_SAMPLES` samples, :func:`dsident.analysis.bursts.find_bursts`,
        time units; NaN when the channel does not burst), ``burst_period_cv`` (the onset
        intervals' coefficient of variation), ``spikes_per_burst`` and ``n_bursts``), and
        ``notes`` (list of str).
    """
    from ..analysis import rhythm_period
    from ..analysis.bursts import find_bursts
    from .time_units import time_unit

    if not isinstance(data, xr.Dataset) or "x" not in data:
        raise TypeError(f"`data` must be a canonical xarray.Dataset with `x`; got {type(data).__name__}.")
    if isinstance(eval_length, bool) or int(eval_length) < 2:
        raise ValueError(f"`eval_length` must be an integer ≥ 2 (samples); got {eval_length!r}.")
    x = np.asarray(data["x"].values, dtype=float)                  # (trial, time, channel)
    dt = float(data.attrs.get("dt", 1.0))
    lengths = (np.asarray(data["length"].values, dtype=int) if "length" in data
               else np.full(x.shape[0], x.shape[1], dtype=int))
    names = [str(c) for c in data["channel"].values]
    rows = []
    for k, name in enumerate(names):
        values = np.concatenate([x[i, :lengths[i], k] for i in range(x.shape[0])])
        finite = values[np.isfinite(values)]
        period = rhythm_period(x[0, :lengths[0], k], dt) if finite.size >= 4 else math.nan
        bursts = find_bursts(x[0, :min(lengths[0], BURST_SAMPLES), k], dt) if finite.size >= 4 else None
        rows.append({"channel": name, "mean": _stat(np.mean, finite), "std": _stat(np.std, finite),
                     "min": _stat(np.min, finite), "max": _stat(np.max, finite),
                     "missing": 1.0 - finite.size / max(values.size, 1), "period": period,
                     "period_samples": period / dt if math.isfinite(period) else math.nan,
                     "burst_period": bursts.period if bursts else math.nan,
                     "spikes_per_burst": bursts.spikes_per_burst if bursts else math.nan,
                     "burst_period_cv": bursts.period_cv if bursts else math.nan,
                     "n_bursts": bursts.n_bursts if bursts else 0})
    out = {"name": str(data.attrs.get("name", "data")), "trials": int(x.shape[0]), "samples": lengths.tolist(),
           "channels": names, "dt": dt, "time_unit": time_unit(data), "duration": float(lengths.sum() * dt),
           "per_channel": rows}
    out["notes"] = _notes(out, int(eval_length), data)
    return out


#: samples of a one-channel recording the embedding suggestion is chosen on (the first ones)
EMBEDDING_SAMPLES = 100_000


def _one_channel_note(data: xr.Dataset, channel: str, length: int) -> str:
    """The note on a one-channel recording (its first trial, ``length`` samples): the delay
    embedding ``--delay-embed auto`` would fit."""
    from .preprocessing import RECORDING_FNN_THRESHOLD, choose_embedding

    k = [str(c) for c in data["channel"].values].index(channel)
    series = np.asarray(data["x"].values[0, : min(int(length), EMBEDDING_SAMPLES), k], dtype=float)
    try:
        choice = choose_embedding(series, fnn_threshold=RECORDING_FNN_THRESHOLD)
    except ValueError as err:       # too short for the mutual information's lags
        return f"one channel ({channel!r}): a model observes one variable of the system; {err}"
    return (f"one channel ({channel!r}): a model observes one variable of the system. `--delay-embed auto` fits it "
            f"delay-embedded, at delays {choice['delays']} samples here (the first minimum of the average mutual "
            f"information at {choice['delay']}; {choice['dimension']} dimensions, where false nearest neighbours "
            f"fall below {100 * RECORDING_FNN_THRESHOLD:g} %).")


def _burst_note(row: dict[str, Any], unit: str, dt: float) -> str:
    """The note on a one-channel recording that bursts: the slow channels ``--slow-channels auto``
    would add, because the variable that starts and ends each burst is not recorded."""
    from ..analysis.bursts import CUTOFF_PER_BURST, SLOW_CHANNELS_EVIDENCE, bursts_described

    period = row["burst_period"]
    said = bursts_described(row["n_bursts"], row["spikes_per_burst"], period, row["burst_period_cv"], dt=dt,
                            unit=unit, where="the first trial")
    return (f"channel {row['channel']!r} fires in bursts ({said}), and what starts and ends them is not "
            "recorded. `--slow-channels auto` "
            "hands the burst cycle to the model as two observed, unscored channels (the band below "
            f"{CUTOFF_PER_BURST / period:.3g} cycles per {'time unit' if unit == 'time units' else unit}, "
            f"{CUTOFF_PER_BURST:g}× the burst frequency, and its quadrature). " + SLOW_CHANNELS_EVIDENCE)


def _stat(func: Any, values: np.ndarray) -> float:
    return float(func(values)) if values.size else math.nan


def transposed_note(n_samples: int, n_channels: int) -> str:
    """The note on data with more channels than samples a trial: a recording rarely has that, an
    array saved as (channel, time) always does, and a 2-D array is read as (time, channel)."""
    return (f"more channels ({n_channels}) than samples a trial ({n_samples}): a 2-D array is read as (time, "
            "channel), so this may be a (channel, time) array. If it is, read it with --read "
            "'dims=[\"channel\", \"time\"]' (dsident.data.load_array's `dims`; a 3-D array: "
            "'dims=[\"trial\", \"channel\", \"time\"]'), or save it transposed (numpy.save(path, x.T)).")


def counts_note(data: xr.Dataset) -> str | None:
    """The note on data whose scored channels hold spike counts, which a Gaussian likelihood, the
    default, models as a continuous signal; None otherwise. Counts: every channel non-negative
    integers, and at least half of them of few levels (:func:`dsident.analysis.bursts.
    looks_like_counts`; a fast neuron's counts may take more, a digitised voltage takes far more)."""
    from ..analysis.bursts import looks_like_counts
    from .slow_channels import scored_channels

    keep = scored_channels(data)
    x = np.asarray(data["x"].values, dtype=float)[..., keep]
    seen = x[np.isfinite(x)]
    if keep.size == 0 or seen.size == 0 or (seen < 0).any() or (seen != np.round(seen)).any():
        return None
    if 2 * sum(looks_like_counts(x[..., k]) for k in range(keep.size)) < keep.size:
        return None
    return ("every channel holds counts (non-negative integers of few levels, e.g. spikes per bin): the default "
            "Gaussian likelihood treats them as a continuous signal; fit them with a count likelihood, "
            "--param observation=poisson (or bernoulli for 0/1), and without --zscore.")


def _notes(summary: dict[str, Any], eval_length: int, data: xr.Dataset) -> list[str]:
    """What would hurt a fit or a score, each with what to do."""
    from .slow_channels import scored_channels

    notes = []
    if len(summary["channels"]) > max(summary["samples"]):
        notes.append(transposed_note(max(summary["samples"]), len(summary["channels"])))
    rows = [summary["per_channel"][k] for k in scored_channels(data)]
    unit = summary["time_unit"] or "time units"
    for r in rows:
        if r["std"] == 0.0:
            notes.append(f"channel {r['channel']!r} is constant ({r['mean']:.6g}): a Gaussian likelihood and "
                         "--zscore refuse it; leave it out of the file.")
        elif math.isnan(r["std"]):
            notes.append(f"channel {r['channel']!r} has no observed sample.")
    counts = counts_note(data)
    if counts is not None:
        notes.append(counts)
    stds = [r["std"] for r in rows if r["std"] and math.isfinite(r["std"])]
    if len(stds) >= 2 and max(stds) / min(stds) > SCALE_RATIO:
        notes.append(f"the channels' standard deviations span {min(stds):.3g} to {max(stds):.3g} "
                     f"({max(stds) / min(stds):.0f}×): the scores and the loss weigh the large ones; "
                     "--zscore standardises each with the training data's mean and std.")
    far = [r for r in rows if r["std"] and math.isfinite(r["std"]) and abs(r["mean"]) > 3 * r["std"]]
    if far:
        listed = and_more([f"{r['channel']} (mean {r['mean']:.3g}, std {r['std']:.3g})" for r in far], 4)
        notes.append(f"far from 0 for their spread: {listed}; models start near 0, so --zscore often trains "
                     "faster (fit.md's scores and figures are then in z-units; `dsident generate` writes the "
                     "data's units).")
    missing = [r for r in rows if r["missing"] > 0]
    if missing:
        listed = and_more([f"{r['channel']} {100 * r['missing']:.2g} %" for r in missing], 6)
        notes.append(f"missing samples (NaN, masked by every likelihood and score, never filled): {listed}.")
    periods = [r["period_samples"] for r in rows if math.isfinite(r["period_samples"])]
    if periods:
        slowest = max(periods)
        cover = min(eval_length, max(summary["samples"])) / slowest
        if cover < FEW_PERIODS:
            notes.append(f"the slowest rhythm has a period of {slowest:.0f} samples ({slowest * summary['dt']:.4g} "
                         f"{unit}), so an evaluation window of {eval_length} samples spans {cover:.1f} of them: "
                         f"D_stsp and D_H then compare little of it; --eval-length {int(FEW_PERIODS * slowest) + 1} "
                         "or more if the test data are that long (a rhythm slower than every training window can "
                         "also be handed over as slow channels: --slow-channels).")
    if len(rows) == 1 and rows[0]["std"] and math.isfinite(rows[0]["std"]):
        notes.append(_one_channel_note(data, rows[0]["channel"], summary["samples"][0]))
        if math.isfinite(rows[0]["burst_period"]):
            notes.append(_burst_note(rows[0], unit, float(summary["dt"])))
    if summary["time_unit"] is None:
        notes.append("the time unit is not named, so periods and Lyapunov exponents read \"per time unit\" (the "
                     "unit of dt); a text table's time column named time_ms or `Time (s)`, or a rate in Hz, "
                     "names it.")
    return notes


def describe_markdown(summary: dict[str, Any]) -> str:
    """:func:`describe`'s result as a short Markdown report: sizes, a per-channel table, notes."""
    unit = summary["time_unit"] or "time units"
    samples = summary["samples"]
    span = f"{min(samples)}" if min(samples) == max(samples) else f"{min(samples)}–{max(samples)}"
    sizes = (f"{samples[0]} samples" if len(samples) == 1 else
             f"{len(samples)} trials of {span} samples ({sum(samples)} in all)")
    lines = [f"# {summary['name']}", "",
             f"- {sizes} × {len(summary['channels'])} channel(s); dt = {summary['dt']:.6g} {unit} "
             f"({1.0 / summary['dt']:.6g} samples per {summary['time_unit'] or 'time unit'}); "
             f"{summary['duration']:.6g} {unit} in all"]
    notes_first = len(summary["per_channel"]) > LONG_TABLE and summary["notes"]
    if notes_first:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in summary["notes"]]
    lines += ["", f"| channel | mean | std | min | max | missing | period ({unit}) | period (samples) "
                 f"| bursts ({unit} apart × spikes) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["per_channel"]:
        bursts = (f"{_num(r['burst_period'])} × {r['spikes_per_burst']:g}"
                  if math.isfinite(r.get("burst_period", math.nan)) else "–")
        lines.append(f"| {r['channel']} | {_num(r['mean'])} | {_num(r['std'])} | {_num(r['min'])} | {_num(r['max'])} "
                     f"| {100 * r['missing']:.3g} % | {_num(r['period'])} | {_num(r['period_samples'], 1)} | {bursts} |")
    from ..analysis.report import RHYTHM_MIN_CYCLES, RHYTHM_PROMINENCE

    lines += ["", "Periods: the rhythm of each channel's first trial (`dsident.analysis.rhythm_period`: the "
                  f"fundamental among spectral lines {RHYTHM_PROMINENCE:g}× above their surroundings, of "
                  f"{RHYTHM_MIN_CYCLES} cycles or more over the longest gap-free stretch; – for a broadband or flat "
                  "channel, one whose gap-free stretch is short, or one whose rhythm is too slow for that "
                  f"many cycles, where a line of {RHYTHM_MIN_CYCLES}+ cycles would be a harmonic). Bursts: "
                  "groups of spikes (`dsident.analysis.bursts.find_bursts`: the median interval between burst "
                  "onsets × the median spikes a burst; – where the channel does not burst)."]
    if notes_first:
        lines += ["", "(Notes above the table.)"]
    elif summary["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in summary["notes"]]
    else:
        lines += ["", "Nothing to note."]
    return "\n".join(lines) + "\n"


def _num(value: float, decimals: int | None = None) -> str:
    if not math.isfinite(value):
        return "–"
    return f"{value:.{decimals}f}" if decimals is not None else f"{value:.4g}"
