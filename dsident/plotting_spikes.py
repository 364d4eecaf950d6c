"""Figures for spiking data: raster beside inferred rates, PSTHs, latent trajectories per condition.

Like :mod:`dsident.plotting`, every function builds a :class:`matplotlib.figure.Figure` without
pyplot (any backend, headless included; no global figure state), returns it and writes a PNG
when ``save`` is given. Inputs are canonical datasets of counts ``x(trial, time, channel)``, or
arrays of shape ``(trial, time, neuron)``; rates are expected counts per bin.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from .data.time_units import time_label
from .metrics.population import psth

__all__ = ["plot_raster_rates", "plot_psth", "plot_latents_by_condition"]


def plot_raster_rates(spikes: Any, rates: Any | None = None, *, trial: int = 0, n_bins: int | None = 500,
                      held_out: Sequence[int] | None = None, title: str | None = None,
                      save: str | Path | None = None) -> Figure:
    """Spike raster of one trial beside the inferred rates (as a neuron × time image).

    Parameters
    ----------
    spikes : xarray.Dataset, DataArray or array-like of shape (trial, time, neuron)
        Counts per bin; NaN (masked) bins are shaded grey.
    rates : array-like of the same shape, optional
        Inferred expected counts per bin (e.g. ``observation.rate`` of smoothed latents).
    trial : int, default 0
        Which trial to draw.
    n_bins : int or None, default 500
        Draw the first ``n_bins`` bins (None: all).
    held_out : sequence of int, optional
        Neurons to mark as held out (drawn in a second colour in the raster).
    title : str, optional
    save : str or path, optional
        Write a PNG there.

    Returns
    -------
    matplotlib.figure.Figure
    """
    counts, dt, names = _cube(spikes, "spikes")
    _check_trial(trial, counts.shape[0])
    if n_bins is not None and (isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1):
        raise ValueError(f"`n_bins` must be a positive integer number of bins (or None for all); got n_bins={n_bins!r}.")
    # the trial's own bins: a ragged trial's NaN padding past its end is not a masked bin
    observed = np.flatnonzero(~np.isnan(counts[trial]).all(axis=1))
    length = observed[-1] + 1 if observed.size else counts.shape[1]
    stop = length if n_bins is None else min(int(n_bins), length)
    x = counts[trial, :stop]
    t = np.arange(stop) * dt
    panels = 2 if rates is not None else 1
    fig = Figure(figsize=(5.5 * panels, 0.12 * x.shape[1] + 2.2), layout="constrained")
    axes = fig.subplots(1, panels, sharey=True, squeeze=False)[0]
    held = set(_check_indices(held_out, x.shape[1], "held_out")) if held_out else set()
    for j in range(x.shape[1]):
        col = x[:, j]
        fired = np.flatnonzero(np.nan_to_num(col) > 0)
        colour = "tab:orange" if j in held else "k"
        axes[0].vlines(t[fired], j - 0.4, j + 0.4, color=colour, lw=0.6)
        _shade_missing(axes[0], t, np.isnan(col), j, dt)
    axes[0].set_ylim(-0.5, x.shape[1] - 0.5)
    axes[0].invert_yaxis()
    axes[0].set_xlabel(time_label(spikes))
    axes[0].set_ylabel("neuron")
    axes[0].set_title("spikes" + (" (orange: held out)" if held else ""))
    if rates is not None:
        r, _, _ = _cube(rates, "rates")
        if r.shape != counts.shape:
            raise ValueError(f"`rates` has shape {r.shape}; expected {counts.shape}, the shape of `spikes`.")
        image = axes[1].imshow(r[trial, :stop].T, aspect="auto", origin="upper", cmap="viridis", interpolation="nearest",
                               extent=(t[0] - dt / 2, t[-1] + dt / 2, x.shape[1] - 0.5, -0.5))
        fig.colorbar(image, ax=axes[1], label="rate (counts / bin)")
        axes[1].set_xlabel(time_label(spikes))
        axes[1].set_title("inferred rates")
    if names and len(names) <= 40:
        axes[0].set_yticks(range(len(names)), names, fontsize=6)
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


def plot_psth(spikes: Any, conditions: Any, *, rates: Any | None = None, neurons: Sequence[int] | None = None,
              smooth_sd: float = 2.0, title: str | None = None, save: str | Path | None = None) -> Figure:
    """Per-condition PSTHs of selected neurons: observed (smoothed counts) and, optionally, predicted.

    Parameters
    ----------
    spikes : xarray.Dataset, DataArray or array-like of shape (trial, time, neuron)
        Counts per bin.
    conditions : array-like of shape (trial,) or str
        Condition label per trial, or the name of a ``(trial,)`` variable of ``spikes``.
    rates : array-like of the same shape as ``spikes``, optional
        Predicted rates; their per-condition average is drawn as solid lines (observed: dashed).
    neurons : sequence of int, optional
        One panel per neuron (default: the first four, or all of fewer).
    smooth_sd : float, default 2
        Gaussian smoothing of the observed PSTH, in bins (see :func:`dsident.metrics.psth`).
    title, save
        As in :func:`plot_raster_rates`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    counts, dt, names = _cube(spikes, "spikes")
    if isinstance(conditions, str):
        if not isinstance(spikes, xr.Dataset) or conditions not in spikes:
            raise ValueError(f"`conditions`={conditions!r} names no (trial,) variable of `spikes`.")
        conditions = spikes[conditions].values
    # the default is the first four neurons the data have: (0, 1, 2, 3) refused a recording of
    # two with an error about `neurons`, which the user had not passed
    neurons = list(range(min(4, counts.shape[2]))) if neurons is None else \
        _check_indices(neurons, counts.shape[2], "neurons")
    observed = psth(counts, conditions, smooth_sd=smooth_sd)
    predicted = None
    if rates is not None:
        r, _, _ = _cube(rates, "rates")
        if r.shape != counts.shape:
            raise ValueError(f"`rates` has shape {r.shape}; expected {counts.shape}, the shape of `spikes`.")
        predicted = psth(r, conditions)
    t = np.arange(counts.shape[1]) * dt
    ncol = min(4, len(neurons))
    nrow = -(-len(neurons) // ncol)
    fig = Figure(figsize=(3.2 * ncol, 2.4 * nrow), layout="constrained")
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    colours = [f"C{i % 10}" for i in range(observed.sizes["condition"])]
    for ax, j in zip(axes, neurons):
        for c, label in enumerate(observed["condition"].values):
            ax.plot(t, observed.values[c, :, j], ls="--" if predicted is not None else "-", color=colours[c],
                    lw=1.0, label=str(label))
            if predicted is not None:
                ax.plot(t, predicted.values[c, :, j], color=colours[c], lw=1.4)
        ax.set_title(names[j] if names else f"neuron {j}", fontsize=9)
        ax.set_xlabel(time_label(spikes))
    for ax in axes[len(neurons):]:
        ax.set_visible(False)
    axes[0].set_ylabel("counts / bin")
    axes[0].legend(fontsize=7, title="condition" + (" (dashed: data)" if predicted is not None else ""),
                   title_fontsize=7)
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


def plot_latents_by_condition(latents: Any, conditions: Any, *, dims: Sequence[int] = (0, 1),
                              show_trials: bool = True, title: str | None = None,
                              save: str | Path | None = None) -> Figure:
    """Latent trajectories coloured by condition, with the condition means drawn thick.

    Parameters
    ----------
    latents : xarray.Dataset (variable ``z``), DataArray or array-like of shape (trial, time, latent)
        E.g. smoothed posterior means ``model.smooth(data)["z"]``.
    conditions : array-like of shape (trial,)
        Condition label per trial.
    dims : sequence of 2 or 3 int, default (0, 1)
        Latent dimensions to draw (3 gives a 3-D plot).
    show_trials : bool, default True
        Draw single trials thinly beside the condition means.
    title, save
        As in :func:`plot_raster_rates`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(latents, xr.Dataset):
        if "z" not in latents:
            raise ValueError(f"`latents` Dataset has no variable 'z'; it has {list(latents.data_vars)}.")
        latents = latents["z"]
    z, _, _ = _cube(latents, "latents")
    dims = _check_indices(dims, z.shape[2], "dims")
    if len(dims) not in (2, 3):
        raise ValueError(f"`dims` must name 2 or 3 latent dimensions; got {list(dims)}.")
    labels = np.asarray(conditions)
    if labels.shape != (z.shape[0],):
        raise ValueError(f"`conditions` must have one label per trial, shape ({z.shape[0]},); got {labels.shape}.")
    means = psth(z, labels)
    fig = Figure(figsize=(5.0, 4.5), layout="constrained")
    ax = fig.add_subplot(projection="3d" if len(dims) == 3 else None)
    for c, label in enumerate(means["condition"].values):
        colour = f"C{c % 10}"
        if show_trials:
            for trial in np.flatnonzero(labels == label):
                ax.plot(*(z[trial, :, d] for d in dims), color=colour, lw=0.4, alpha=0.35)
        ax.plot(*(means.values[c, :, d] for d in dims), color=colour, lw=2.0, label=str(label))
        ax.plot(*(means.values[c, :1, d] for d in dims), "o", color=colour, ms=4)      # start of the mean path
    ax.set_xlabel(f"z{dims[0]}")
    ax.set_ylabel(f"z{dims[1]}")
    if len(dims) == 3:
        ax.set_zlabel(f"z{dims[2]}")
    ax.legend(fontsize=7, title="condition", title_fontsize=7)
    if title:
        ax.set_title(title)
    return _finish(fig, save)


# --------------------------------------------------------------------------- helpers


def _cube(data: Any, argname: str) -> tuple[np.ndarray, float, list[str] | None]:
    """(trial, time, neuron) float array, dt and channel names of a dataset / DataArray / array."""
    dt, names = 1.0, None
    if isinstance(data, xr.Dataset):
        if "x" not in data:
            raise ValueError(f"`{argname}` Dataset has no variable 'x'; it has {list(data.data_vars)}.")
        dt = float(data.attrs.get("dt", 1.0))
        data = data["x"]
    if isinstance(data, xr.DataArray):
        dt = float(data.attrs.get("dt", dt))
        if "time" in data.coords and data.sizes.get("time", 0) > 1:
            dt = float(data["time"].values[1] - data["time"].values[0])
        if data.ndim == 3 and data.dims[-1] in data.coords:
            names = [str(c) for c in data.coords[data.dims[-1]].values]
        data = data.values
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"`{argname}` must be a dataset (xarray.Dataset with 'x'), a DataArray or a numeric array of "
                        f"shape (trial, time, neuron); got {type(data).__name__}.") from None
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(f"`{argname}` must have shape (trial, time, neuron) or (time, neuron); got {arr.shape}.")
    return arr, dt, names


def _check_trial(trial: int, n: int) -> None:
    if isinstance(trial, bool) or not isinstance(trial, (int, np.integer)) or not 0 <= trial < n:
        raise ValueError(f"`trial` must be an integer in [0, {n}); got trial={trial!r}.")


def _check_indices(idx: Sequence[int], n: int, argname: str) -> list[int]:
    out = list(idx)
    if not out or any(not isinstance(i, (int, np.integer)) or not 0 <= i < n for i in out):
        raise ValueError(f"`{argname}` must be a non-empty list of indices in [0, {n}); got {out}.")
    return [int(i) for i in out]


def _shade_missing(ax: Any, t: np.ndarray, missing: np.ndarray, row: int, dt: float) -> None:
    if not missing.any():
        return
    from .metrics.evaluate import true_runs

    for lo, hi in zip(*true_runs(missing)):
        ax.fill_between([t[lo], t[hi - 1] + dt], row - 0.45, row + 0.45, color="0.85", lw=0)


def _finish(fig: Figure, save: str | Path | None, dpi: int = 120) -> Figure:
    if save is not None:
        path = Path(save)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    return fig
