"""The evaluation protocol from many starts: does a model reach the data's attractor from
wherever in the data its free run begins?

:func:`~dsident.metrics.evaluate` starts one free run per test trial, at its first observed
sample. A model can score well from there and still fall to a fixed point, or onto another
attractor, from other states the data visit (teacher-forced fits show this: a kept epoch's
runs from one start chaotic, from another at rest). :func:`evaluate_starts` cuts ``n_starts``
windows of ``length`` samples, evenly spaced over the data, and scores each with the same
protocol, so the spread over starts and the share of runs that settle are numbers.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__
from .evaluate import evaluate

__all__ = ["evaluate_starts"]


def evaluate_starts(model: Any, data: Any, *, n_starts: int = 8, length: int | None = None, seed: int = 0,
                    burn_in_fraction: float = 0.25, n_bins: int = 30, sigma: float = 20.0,
                    divergence_threshold: float = 1e3, dt: float | None = None,
                    progress: bool = False) -> xr.Dataset:
    """Score free runs started at ``n_starts`` points spread over ``data``.

    Each start is a window of ``length`` samples of one trial; :func:`evaluate` scores the
    model on it (a free run of ``(1 + burn_in_fraction)·length`` steps from the window's first
    observed sample, the burn-in dropped, compared with the window). The windows' starts are
    evenly spaced over every position a window fits in, across trials. The spread over starts
    includes the data's own variation from stretch to stretch (see
    :func:`~dsident.metrics.floor`); a run that settles (``at_rest``) or diverges is the
    model's.

    Parameters
    ----------
    model : fitted estimator or StateSpaceModel
        As for :func:`evaluate`.
    data : Dataset or array-like of shape (time, channel) / (trial, time, channel)
        Observations in the model's units (e.g. a test split); ``attrs["auxiliary_channels"]``
        are honoured as in :func:`evaluate`.
    n_starts : int
        Number of windows (fewer when fewer positions exist). More than the data hold
        side by side makes them overlap: allowed (each start is its own initial condition),
        with a warning, since overlapping windows share samples.
    length : int, optional
        Samples per window, the ``T`` of the protocol (default: the smaller of 10 000 and the
        longest trial).
    seed, burn_in_fraction, n_bins, sigma, divergence_threshold, dt
        As for :func:`evaluate`.
    progress : bool
        Show a progress bar over the starts.

    Returns
    -------
    xarray.Dataset
        Over ``start``: ``trial`` and ``start_index`` (the window's first sample in that
        trial), ``state_space_divergence``, ``power_spectrum_distance``,
        ``state_space_coverage``, ``diverged`` and ``at_rest`` (the compared window's last
        tenth stands still: a fixed point). attrs: ``length``, the settings, and the summary
        ``median_D_stsp``, ``max_D_stsp``, ``fraction_diverged``, ``fraction_at_rest``, and
        ``n_overlapping``: windows that share samples with the one before them (more starts
        than the data hold non-overlapping windows; a RuntimeWarning says so).

    Raises
    ------
    ValueError
        A bad ``n_starts`` or ``length``, or no trial with ``length`` samples.
    """
    from tqdm.auto import tqdm

    from ..analysis.report import at_rest
    from ..data import as_dataset
    from .state_space import _finite_rows

    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or n_starts < 1:
        raise ValueError(f"`n_starts` must be a positive integer; got {n_starts!r}.")
    ds = as_dataset(data)
    n_trials, n_time = ds.sizes["trial"], ds.sizes["time"]
    lengths = np.asarray(ds["length"].values, dtype=int) if "length" in ds else np.full(n_trials, n_time)
    if length is None:
        length = int(min(10_000, lengths.max()))
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 2:
        raise ValueError(f"`length` must be an integer number of samples >= 2; got {length!r}.")
    length = int(length)
    # every (trial, first sample) a window fits in, numbered trial after trial
    n_positions = np.maximum(lengths - length + 1, 0)
    if n_positions.sum() == 0:
        raise ValueError(f"`length`={length} exceeds every trial of `data` (longest {int(lengths.max())} samples); "
                         "pass a shorter `length`.")
    offsets = np.concatenate([[0], np.cumsum(n_positions)])
    picks = np.unique(np.round(np.linspace(0, offsets[-1] - 1, int(n_starts))).astype(int))
    trials = np.searchsorted(offsets, picks, side="right") - 1
    chosen = [(int(i), int(k - offsets[i])) for i, k in zip(trials, picks)]
    n_overlapping = _overlapping(chosen, length)
    if n_overlapping:
        # still scored: each start is its own initial condition, but not its own stretch of data
        n_apart = int(np.sum(lengths // length))
        warnings.warn(f"the {len(chosen)} windows (`n_starts`={int(n_starts)}) of `length`={length} samples overlap ({n_overlapping} share "
                      f"samples with the window before them): `data` hold {n_apart} non-overlapping windows of that "
                      "length, so the spread over starts understates the data's variation from stretch to stretch. "
                      f"Pass n_starts <= {n_apart} or a shorter length for separate stretches.", RuntimeWarning,
                      stacklevel=2)
    elif len(chosen) < int(n_starts):
        # e.g. a window as long as the data: asking for more starts must not pass in silence
        warnings.warn(f"only {len(chosen)} window(s) of `length`={length} samples fit in `data`, so "
                      f"{len(chosen)} start(s) are scored, not `n_starts`={int(n_starts)}; pass a shorter length "
                      "for more.", RuntimeWarning, stacklevel=2)

    columns: dict[str, list[float]] = {name: [] for name in ("state_space_divergence", "power_spectrum_distance",
                                                             "state_space_coverage", "diverged", "at_rest")}
    bar = tqdm(total=len(chosen), desc="starts", leave=False, disable=not progress)
    for trial, start in chosen:
        # as_dataset (inside evaluate) reads the slice's offset from its time axis and clips `length`
        window = ds.isel(trial=[trial], time=slice(start, start + length))
        with warnings.catch_warnings():
            # one summary instead of a warning per diverged start
            warnings.filterwarnings("ignore", message="the free run of .* diverged", category=RuntimeWarning)
            scores, run = evaluate(model, window, seed=seed, burn_in_fraction=burn_in_fraction, n_bins=n_bins,
                                   sigma=sigma, pe_steps=1, divergence_threshold=divergence_threshold, dt=dt,
                                   return_run=True)
        for name in ("state_space_divergence", "power_spectrum_distance", "state_space_coverage"):
            columns[name].append(float(scores[name]))
        diverged = bool(scores["diverged"])
        columns["diverged"].append(diverged)
        x = _finite_rows(run["x"].values)
        columns["at_rest"].append(bool(not diverged and len(x) > 0 and at_rest(x)))
        bar.update(1)
    bar.close()

    d = np.asarray(columns["state_space_divergence"])
    finite = d[np.isfinite(d)]
    out = xr.Dataset(
        {"trial": (("start",), np.array([c[0] for c in chosen])),
         "start_index": (("start",), np.array([c[1] for c in chosen])),
         **{name: (("start",), np.asarray(values, dtype=bool if name in ("diverged", "at_rest") else float))
            for name, values in columns.items()}},
        coords={"start": np.arange(len(chosen))},
    )
    out.attrs = {
        "protocol": "metrics.evaluate on each of n_starts windows of `length` samples, evenly spaced over the data",
        "length": length, "n_starts": len(chosen), "seed": int(seed), "burn_in_fraction": float(burn_in_fraction),
        "n_bins": int(n_bins), "sigma": float(sigma), "divergence_threshold": float(divergence_threshold),
        "median_D_stsp": float(np.median(finite)) if finite.size else float("nan"),
        "max_D_stsp": float(finite.max()) if finite.size else float("nan"),
        "fraction_diverged": float(np.mean(columns["diverged"])),
        "fraction_at_rest": float(np.mean(columns["at_rest"])),
        "n_overlapping": n_overlapping,
        "data_name": str(ds.attrs.get("name", "data")), "dsident_version": __version__,
    }
    n_div = int(np.sum(columns["diverged"]))
    if n_div:
        warnings.warn(f"{n_div} of {len(chosen)} free runs diverged (their D_stsp and D_H are NaN).", RuntimeWarning,
                      stacklevel=2)
    return out


def _overlapping(chosen: list[tuple[int, int]], length: int) -> int:
    """How many of the (trial, first sample) windows, in order, start within ``length`` samples
    of the window before them in the same trial."""
    return sum(1 for (t0, s0), (t1, s1) in zip(chosen, chosen[1:]) if t0 == t1 and s1 - s0 < length)
