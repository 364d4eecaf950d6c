"""Power-spectrum distances: do generated orbits have the true time scales?

- :func:`power_spectrum_distance` — D_H, the Hellinger distance between smoothed, normalised
  power spectra, per channel and averaged (Mikhaeil et al. 2022; Hess et al. 2023); the
  recipe of ``SPEC-metrics.md`` §2.
- :func:`power_spectrum_mse` — the older measure of the rPLRNN paper (Schmidt et al. 2021,
  Fig. 3B/C and S6): mean squared difference of single-sided amplitude spectra, optionally
  split into a low and a high frequency band at a cutoff in physical units (``fs``-aware).

Shape legend: ``F`` frequency bins, ``N`` channels.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import xarray as xr
from scipy.ndimage import gaussian_filter1d

from .._checks import check_bool
from .state_space import as_trials, positive_number

__all__ = ["power_spectrum_distance", "power_spectrum", "power_spectrum_mse", "SpectrumMSE",
           "normalized_power_spectrum"]


def power_spectrum_distance(true: Any, generated: Any, *, sigma: float = 20.0,
                            per_channel: bool = False) -> float | np.ndarray:
    """Power-spectrum distance D_H: Hellinger distance of smoothed, normalised spectra.

    Per channel: z-score the series, take ``|rfft|²``, smooth with a Gaussian of ``sigma``
    frequency bins (``scipy.ndimage.gaussian_filter1d``, mode "reflect", truncate 4), clip
    negatives to 0, normalise to sum 1, and return ``H = sqrt(1 − Σ sqrt(p·q))``. With
    several trials the spectra are averaged over trials before normalising.

    Parameters
    ----------
    true, generated : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        Gap-free series of equal length (the number of trials may differ).
    sigma : float
        Width of the Gaussian smoothing kernel, in frequency bins (0 disables smoothing).
    per_channel : bool
        Return the distance of every channel instead of their mean.

    Returns
    -------
    float, or ndarray of shape (channel,) with ``per_channel=True``
        0 for identical spectra, 1 for spectra without common support. A channel that is
        constant in exactly one of the two series has no spectrum to compare and scores 1;
        constant in both, 0.

    Raises
    ------
    ValueError
        Different lengths or channel counts, missing samples (NaN), or a negative ``sigma``.
    """
    check_bool("per_channel", per_channel)     # "no" is truthy: an array where a float was asked for
    _check_same_step(true, generated)
    xt = _gap_free(_equal_trials(true, "true"), "true")
    xg = _gap_free(_equal_trials(generated, "generated"), "generated")
    _check_same_shape(xt, xg)
    sigma = _non_negative(sigma, "sigma")
    pt, flat_t = normalized_power_spectrum(xt, sigma=sigma)
    pg, flat_g = normalized_power_spectrum(xg, sigma=sigma)
    # 1 − Σ sqrt(p·q) written as ½ Σ (sqrt p − sqrt q)² (equal for spectra summing to 1): no cancellation,
    # so identical spectra give exactly 0 (1.5e-8 before) and small distances keep their digits
    dist = np.sqrt(np.clip(0.5 * np.sum((np.sqrt(pt) - np.sqrt(pg)) ** 2, axis=0), 0.0, 1.0))
    # flat channels: no spectrum; equal if both are flat, disjoint otherwise
    dist = np.where(flat_t | flat_g, np.where(flat_t & flat_g, 0.0, 1.0), dist)
    return dist if per_channel else float(np.mean(dist))


def normalized_power_spectrum(x: np.ndarray, *, sigma: float = 20.0) -> tuple[np.ndarray, np.ndarray]:
    """Trial-averaged, smoothed power spectrum of each channel, normalised to sum 1.

    Parameters
    ----------
    x : ndarray of shape (trial, time, channel)
        Gap-free series.
    sigma : float
        Gaussian smoothing width in frequency bins.

    Returns
    -------
    spectrum : ndarray of shape (F, N), F = time // 2 + 1
        Columns sum to 1 (zeros for constant channels).
    flat : ndarray of shape (N,) bool
        True for channels with zero variance (no spectrum).
    """
    # channel-major (channel, trial, time) copy: FFT and smoothing then run over contiguous rows.
    # Always a copy: with one channel the moved axes are already contiguous, and
    # ascontiguousarray would hand back the caller's memory to the in-place z-scoring below.
    xc = np.array(np.moveaxis(x, 2, 0), dtype=float, order="C", copy=True)
    flat_x = xc.reshape(xc.shape[0], -1)
    mean, std = flat_x.mean(axis=1), flat_x.std(axis=1)
    # constant means max = min: a constant 0.1 has a round-off std of 1e-17, and z-scored by it, a
    # spectrum all in the DC bin
    flat = ~(flat_x.max(axis=1) > flat_x.min(axis=1))
    xc -= mean[:, None, None]
    xc /= np.where(flat, 1.0, std)[:, None, None]
    power = np.abs(np.fft.rfft(xc, axis=2)) ** 2                  # (channel, trial, F)
    power = power.mean(axis=1)                                    # (channel, F)
    if sigma > 0:
        power = gaussian_filter1d(power, sigma, axis=1, mode="reflect", truncate=4.0)
    power = np.clip(power, 0.0, None)
    total = power.sum(axis=1)
    ok = (total > 0) & ~flat
    spectrum = np.where(ok[:, None], power / np.where(ok, total, 1.0)[:, None], 0.0).T
    return spectrum, flat | ~ok


def power_spectrum(x: Any, *, sigma: float = 20.0) -> np.ndarray:
    """The smoothed, normalised power spectrum that D_H compares (for plots and checks).

    Parameters
    ----------
    x : array-like of shape (time,), (time, channel) or (trial, time, channel), or Dataset
        Gap-free series; trials are averaged.
    sigma : float
        Gaussian smoothing width in frequency bins.

    Returns
    -------
    ndarray of shape (F,) for a 1-D input, else (F, channel)
        Each column sums to 1 (all zeros for a constant channel). Bin k is the frequency
        ``k / (time · dt)``.
    """
    arr = _gap_free(_equal_trials(x, "x"), "x")
    spectrum, _ = normalized_power_spectrum(arr, sigma=_non_negative(sigma, "sigma"))
    return spectrum[:, 0] if np.ndim(getattr(x, "values", x)) == 1 else spectrum


class SpectrumMSE(NamedTuple):
    """Result of :func:`power_spectrum_mse`; band values are NaN without a ``cutoff``."""

    total: float        #: mean over every frequency bin up to ``max_frequency``
    low: float          #: mean over f <= cutoff
    high: float         #: mean over cutoff < f <= max_frequency
    frequency: np.ndarray  #: (F,) frequencies of the bins, unit of ``fs``
    error: np.ndarray   #: (F,) squared spectrum difference per bin, averaged over channels


def power_spectrum_mse(true: Any, generated: Any, *, fs: float | None = None, cutoff: float | None = None,
                       max_frequency: float | None = None, sigma: float = 0.0, zscore: bool = False,
                       normalize: bool = False) -> SpectrumMSE:
    """Mean squared difference of amplitude spectra (rPLRNN paper, Schmidt et al. 2021).

    Each channel's single-sided amplitude spectrum is ``P1 = |FFT(x) / T|`` over bins
    ``0 … T // 2``, with the bins strictly between the first and the last doubled, at
    frequencies ``f_k = k · fs / T`` (no window, no smoothing by default; spectra averaged over
    trials and the squared error over channels). The bursting-neuron figures used fs = 2000 Hz
    (dt = 0.5 ms), T = 1501, cutoff 50 Hz and max_frequency 600 Hz; the ECG figure a 2.5 Hz
    split of slightly smoothed spectra.

    Parameters
    ----------
    true, generated : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        Gap-free series of equal length. The paper compared raw (not re-centred) series, so
        a generated offset shows up in the DC bin; pass ``zscore=True`` to remove it.
    fs : float, optional
        Sampling rate, in Hz (or 1 / unit of time) — sets the frequency axis of ``cutoff``.
        Default: ``1 / attrs["dt"]`` of ``true`` (or ``generated``) when it is a Dataset, else 1
        (frequencies in cycles per sample). A Dataset sampled at 0.5 ms gives 2000 Hz.
    cutoff : float, optional
        Frequency splitting the low (``f <= cutoff``) from the high (``cutoff < f``) band.
    max_frequency : float, optional
        Highest frequency counted (default the Nyquist frequency ``fs / 2``).
    sigma : float
        Optional Gaussian smoothing of the amplitude spectra, in bins ("slightly smoothed").
    zscore : bool
        z-score every channel before the FFT.
    normalize : bool
        Divide every value by the mean squared true amplitude over the same bins (a
        normalised MSE).

    Returns
    -------
    SpectrumMSE
    """
    _check_same_step(true, generated)
    xt = _gap_free(_equal_trials(true, "true"), "true")
    xg = _gap_free(_equal_trials(generated, "generated"), "generated")
    _check_same_shape(xt, xg)
    if fs is None:
        # a Dataset knows its own rate: fs = 1 would put cutoff and the frequencies in cycles per sample
        steps = [float(d.attrs["dt"]) for d in (true, generated) if isinstance(d, xr.Dataset) and "dt" in d.attrs]
        fs = 1.0 / steps[0] if steps else 1.0
    fs = _positive(fs, "fs")
    sigma = _non_negative(sigma, "sigma")
    n_time = xt.shape[1]
    freq = np.arange(n_time // 2 + 1) * fs / n_time
    f_max = fs / 2.0 if max_frequency is None else _positive(max_frequency, "max_frequency")
    if cutoff is not None:
        cutoff = _positive(cutoff, "cutoff")
        if cutoff >= f_max:
            raise ValueError(f"`cutoff` must lie below max_frequency={f_max}; got cutoff={cutoff}.")
    at = _amplitude_spectrum(xt, sigma, zscore)
    ag = _amplitude_spectrum(xg, sigma, zscore)
    err = np.mean((ag - at) ** 2, axis=1)
    ref = np.mean(at ** 2, axis=1)

    def band(sel: np.ndarray) -> float:
        if not np.any(sel):
            return float("nan")
        value = float(np.mean(err[sel]))
        return value / float(np.mean(ref[sel])) if normalize else value

    in_range = freq <= f_max
    low = band(in_range & (freq <= cutoff)) if cutoff is not None else float("nan")
    high = band(in_range & (freq > cutoff)) if cutoff is not None else float("nan")
    return SpectrumMSE(band(in_range), low, high, freq, err)


def _amplitude_spectrum(x: np.ndarray, sigma: float, zscore: bool) -> np.ndarray:
    """Trial-averaged single-sided amplitude spectrum (F, N)."""
    if zscore:
        flat = x.reshape(-1, x.shape[-1])
        std = flat.std(axis=0)
        # a constant channel (max = min) is only centred: its std may be a round-off 1e-17
        x = (x - flat.mean(axis=0)) / np.where(flat.max(axis=0) > flat.min(axis=0), std, 1.0)
    n_time = x.shape[1]
    amp = np.abs(np.fft.rfft(x, axis=1)) / n_time
    amp[:, 1:-1] *= 2.0
    amp = amp.mean(axis=0)
    if sigma > 0:
        amp = gaussian_filter1d(amp, sigma, axis=0, mode="reflect", truncate=4.0)
    return amp


def _check_same_step(true: Any, generated: Any, names: tuple[str, str] = ("true", "generated")) -> None:
    """Refuse two Datasets sampled at different steps: their spectra are compared bin by bin, so the
    same bin would be two different frequencies (a sine at 0.1 and its copy labelled 0.2 scored D_H 0)."""
    from ..data.container import steps_agree

    steps = [float(d.attrs["dt"]) if isinstance(d, xr.Dataset) and "dt" in d.attrs else None
             for d in (true, generated)]
    if None not in steps and not steps_agree(steps[1], steps[0]):
        raise ValueError(f"`{names[0]}` is sampled every {steps[0]:g} (attrs['dt']) but `{names[1]}` every {steps[1]:g}; "
                         "their spectra would compare different frequencies bin by bin. Resample one to the other's "
                         "step (dsident.data.preprocessing.resample).")


def _equal_trials(data: Any, argname: str) -> np.ndarray:
    """:func:`as_trials`, refusing a list of trials of unequal length (padding would read as gaps)."""
    if isinstance(data, (list, tuple)):
        lengths = [np.shape(t)[0] for t in data if np.ndim(t) > 0]
        if len(set(lengths)) > 1:
            raise ValueError(f"the trials of `{argname}` differ in length ({', '.join(map(str, lengths[:10]))}"
                             f"{' ...' if len(lengths) > 10 else ''} time steps); spectra need trials of equal "
                             "length. Cut them to a common length.")
    return as_trials(data, argname)


def _gap_free(x: np.ndarray, argname: str) -> np.ndarray:
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(f"`{argname}` has missing or non-finite samples (first at trial {bad[0]}, time "
                         f"{bad[1]}, channel {bad[2]}); spectra need gap-free series. Cut the data into "
                         "gap-free trials of equal length.")
    if x.shape[1] < 2:
        raise ValueError(f"`{argname}` needs at least 2 time steps for a spectrum; got {x.shape[1]}.")
    return x


def _check_same_shape(xt: np.ndarray, xg: np.ndarray) -> None:
    if xt.shape[2] != xg.shape[2]:
        raise ValueError(f"`true` and `generated` must have the same number of channels; got "
                         f"{xt.shape[2]} and {xg.shape[2]}.")
    if xt.shape[1] != xg.shape[1]:
        raise ValueError(f"`true` and `generated` must have the same length (time steps) so that their "
                         f"frequency grids match; got {xt.shape[1]} and {xg.shape[1]}. Compare equal-length "
                         "stretches (e.g. generated[:T]).")


def _positive(value: Any, name: str) -> float:
    return positive_number(value, name)


def _non_negative(value: Any, name: str) -> float:
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and value == 0:
        return 0.0
    return positive_number(value, name, "a non-negative finite number")

