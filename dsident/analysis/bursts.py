"""Spikes and bursts in a voltage-like series: :func:`find_bursts` and :func:`burst_cutoff`.

A bursting neuron fires groups of spikes separated by long silences; the slow variable that
starts and ends each burst is rarely recorded. A chaotic burster (Hindmarsh-Rose, r = 0.006)
makes no spectral line a rhythm test accepts (:func:`dsident.analysis.rhythm_period` gives NaN),
yet its bursts are plain in the time series. :func:`find_bursts` reads them the way an
electrophysiologist does, from the inter-spike intervals (ISIs):

1. spikes are local maxima whose prominence is at least :data:`SPIKE_PROMINENCE` of the
   series' 1st-99th percentile range (``scipy.signal.find_peaks``);
2. the log-ISIs are split in two by Otsu's rule (the split that maximises the between-class
   variance): short ISIs within a burst, long ones between bursts;
3. the series bursts when the long class's median ISI is at least :data:`MIN_ISI_RATIO` times
   the short class's and a burst holds at least :data:`MIN_SPIKES_PER_BURST` spikes in the
   median, over at least :data:`MIN_BURSTS` bursts.

Rule 3 keeps out what is not bursting: a tonic spiker (one ISI class), Lorenz-63's lobe
switches (ratios 1.3-2.1), the ECG's R and T waves (two peaks a beat, ratio 2.6); measured in
``docs/main_job.md`` "Session 50". Missing samples (NaN) split the series into observed
stretches: spikes are found within each, and no interval spans a gap.

:func:`burst_cutoff` turns the burst period into the low-pass cutoff of
:func:`dsident.data.add_slow_channels` (``--slow-channels auto``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Bursts", "find_bursts", "find_spikes", "burst_cutoff", "SPIKE_PROMINENCE", "MIN_ISI_RATIO",
           "MIN_SPIKES_PER_BURST", "MIN_BURSTS", "CUTOFF_PER_BURST", "SLOW_CHANNELS_EVIDENCE", "looks_like_counts",
           "COUNT_LEVELS", "bursts_described"]

#: a spike's prominence, as a share of the series' 1st-99th percentile range
SPIKE_PROMINENCE = 0.3
#: the between-burst ISIs' median over the within-burst ISIs' median must reach this
MIN_ISI_RATIO = 3.0
#: spikes a burst must hold in the median (the ECG's R and T waves make pairs)
MIN_SPIKES_PER_BURST = 3
#: bursts needed before a burst period is given (as many cycles as a rhythm needs)
MIN_BURSTS = 10
#: ``--slow-channels auto`` cuts at this many times the burst frequency (1 / period): the
#: band keeps the burst cycle and drops the spikes (session 49's 0.02 on a ~100-unit period)
CUTOFF_PER_BURST = 2.0
#: what the slow channels did for the three bursting recordings they were measured on (sessions
#: 50-51), quoted by the notes that suggest them (`dsident inspect`, fit.md)
SLOW_CHANNELS_EVIDENCE = (
    "Measured on three one-channel bursters (the gnODE's recording cell, trained on windows of 50 samples): it "
    "helped where the bursts were 954 and 1 241 samples apart (a chaotic Hindmarsh-Rose burster, CV 0.31: 333× "
    "to about 9× the floor, the LTC 607× to 10×, the shallow PLRNN, clipped, 460× to 16×; a regular one, CV 0.00: "
    "D_stsp 10.3 to 2.1 over 2 seeds, the better 0.12) and hurt where they were 296 apart (the bursting neuron's V "
    "alone: 0.82 to 14.5). So it is likelier to help the longer the bursts are against the training windows, "
    "whether they are regular or not. Fit with and without it and compare: a sweep with "
    "`slow_channels = [false, {cutoff = \"auto\"}]` in its grid does both (docs/main_job.md, \"Session 51\").")


@dataclass(frozen=True)
class Bursts:
    """Bursts found in a series (:func:`find_bursts`); times in the series' time unit.

    Attributes
    ----------
    period : float
        Median interval between consecutive burst onsets (first spikes).
    spikes_per_burst : float
        Median spikes per complete burst.
    n_bursts : int
        Bursts whose onset follows a between-burst interval.
    n_spikes : int
        Spikes found.
    isi_ratio : float
        Median between-burst ISI over median within-burst ISI.
    threshold : float
        The ISI that separates the two classes (geometric midpoint of the gap Otsu's split leaves).
    period_cv : float
        Coefficient of variation of the onset intervals: about 0 for a regular burster, 0.3 for
        the chaotic Hindmarsh-Rose voltage.
    onsets : numpy.ndarray
        Sample indices of the burst onsets, (n_bursts,) int.
    """

    period: float
    spikes_per_burst: float
    n_bursts: int
    n_spikes: int
    isi_ratio: float
    threshold: float
    period_cv: float
    onsets: np.ndarray


def find_spikes(series: np.ndarray, *, prominence: float = SPIKE_PROMINENCE) -> list[np.ndarray]:
    """Spike peaks of a 1-D series, one index array per observed stretch (NaN splits stretches).

    Parameters
    ----------
    series : (time,) float
        The series (NaN = missing).
    prominence : float
        Minimum prominence as a share of the finite samples' 1st-99th percentile range.

    Returns
    -------
    list of (n_i,) int arrays
        Sample indices of the peaks within each observed stretch, in time order; no spikes when
        the series is flat.
    """
    from scipy.signal import find_peaks

    from ..metrics.evaluate import true_runs

    x = np.asarray(series, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"`series` must be one channel, shape (time,); got shape {x.shape}.")
    if not 0 < prominence < 1:
        raise ValueError(f"`prominence` must be a share in (0, 1) of the series' range; got {prominence!r}.")
    finite = x[np.isfinite(x)]
    if finite.size < 3:
        return []
    spread = float(np.percentile(finite, 99) - np.percentile(finite, 1))
    if not spread > 0:
        return []
    return [start + find_peaks(x[start:stop], prominence=prominence * spread)[0]
            for start, stop in zip(*true_runs(np.isfinite(x))) if stop - start >= 3]


def _otsu_split(s: np.ndarray) -> int:
    """Index into the sorted values ``s`` where Otsu's rule splits them (the first of the upper class)."""
    n = s.size
    cum = np.cumsum(s)
    i = np.arange(1, n)
    lower, upper = cum[:-1] / i, (cum[-1] - cum[:-1]) / (n - i)
    return int(i[np.argmax(i * (n - i) * (upper - lower) ** 2)])


#: a series of non-negative integers with fewer distinct values than this reads as spike counts
COUNT_LEVELS = 32


def looks_like_counts(series: np.ndarray) -> bool:
    """Whether a series' observed values are spike counts per bin: non-negative integers taking
    fewer than :data:`COUNT_LEVELS` distinct values (a voltage digitised as integers spans far
    more levels)."""
    x = np.asarray(series, dtype=float)
    x = x[np.isfinite(x)]
    return bool(x.size) and bool((x >= 0).all() and (x == np.round(x)).all()) and np.unique(x).size < COUNT_LEVELS


def find_bursts(series: np.ndarray, dt: float, *, prominence: float = SPIKE_PROMINENCE,
                min_isi_ratio: float = MIN_ISI_RATIO, min_spikes: float = MIN_SPIKES_PER_BURST,
                min_bursts: int = MIN_BURSTS) -> Bursts | None:
    """The bursts of a voltage-like series, or None when it does not burst (module docstring).

    Parameters
    ----------
    series : (time,) float
        One channel (NaN = missing; spikes and intervals are found within observed stretches).
    dt : float
        Sampling step (time units).
    prominence, min_isi_ratio, min_spikes, min_bursts
        The rules' thresholds (:data:`SPIKE_PROMINENCE`, :data:`MIN_ISI_RATIO`,
        :data:`MIN_SPIKES_PER_BURST`, :data:`MIN_BURSTS`).

    Returns
    -------
    Bursts or None
        None for a series with fewer than ``2 * min_bursts`` spikes, one ISI class, bursts of
        fewer than ``min_spikes`` spikes, or fewer than ``min_bursts`` bursts, and for spike
        counts (:func:`looks_like_counts`): a count series' local maxima are bins with more
        spikes than their neighbours, not spikes, and a rate-modulated Poisson train would
        read as "bursts".
    """
    if isinstance(dt, bool) or not isinstance(dt, (int, float, np.integer, np.floating)) or not math.isfinite(dt) \
            or dt <= 0:
        raise ValueError(f"`dt` must be a positive sampling step; got {dt!r}.")
    peaks = find_spikes(series, prominence=prominence)       # checks `series` and `prominence` first
    if looks_like_counts(series):
        return None
    intervals = [np.diff(p) for p in peaks if p.size >= 2]
    n_spikes = int(sum(p.size for p in peaks))
    if n_spikes < 2 * min_bursts or not intervals:
        return None
    log_isi = np.log(np.concatenate(intervals).astype(float))
    if np.ptp(log_isi) == 0:
        return None
    ordered = np.sort(log_isi)
    cut = _otsu_split(ordered)
    short, long_ = ordered[:cut], ordered[cut:]
    ratio = float(np.exp(np.median(long_) - np.median(short)))
    threshold = float(np.exp(0.5 * (short[-1] + long_[0])))          # in samples
    onsets, gaps, sizes = [], [], []
    for p in peaks:
        if p.size < 2:
            continue
        isi = np.diff(p)
        starts = np.flatnonzero(isi > threshold) + 1                  # spikes that open a burst
        onsets.append(p[starts])
        gaps.append(np.diff(p[starts]))
        sizes.append(np.diff(starts))                                 # complete bursts only
    onset = np.concatenate(onsets).astype(int)
    period_samples = np.concatenate(gaps).astype(float)
    size = np.concatenate(sizes).astype(float)
    if (ratio < min_isi_ratio or onset.size < min_bursts or period_samples.size == 0
            or np.median(size) < min_spikes):
        return None
    return Bursts(period=float(np.median(period_samples) * dt), spikes_per_burst=float(np.median(size)),
                  n_bursts=int(onset.size), n_spikes=n_spikes, isi_ratio=ratio, threshold=threshold * dt,
                  period_cv=float(period_samples.std() / period_samples.mean()), onsets=onset)


def bursts_described(n_bursts: int, spikes_per_burst: float, period: float, period_cv: float, *, dt: float,
                     unit: str, where: str) -> str:
    """The notes' words for a channel's bursts (``dsident inspect``'s note from its summary row,
    fit.md's hint from a :class:`Bursts`): ``"N in <where>, S spikes each, P <unit> (K samples)
    apart in the median, the intervals' CV c"``; ``dt`` the sampling step (the period in samples
    sets it against the training windows)."""
    return (f"{n_bursts} in {where}, {spikes_per_burst:g} spikes each, {period:.4g} {unit} "
            f"({period / dt:.0f} samples) apart in the median, the intervals' CV {period_cv:.2f}")


def burst_cutoff(bursts: Bursts) -> float:
    """The slow channels' low-pass cutoff for a burster: :data:`CUTOFF_PER_BURST` / period
    (cycles per time unit), below the spikes and above the burst cycle."""
    return CUTOFF_PER_BURST / bursts.period
