"""Figures for reconstructions: attractors, time series, power spectra, latents, flow fields, tables.

Every function builds a :class:`matplotlib.figure.Figure` without pyplot (so it works with
any backend, headless included, and leaves no global figure state behind), returns it, and
writes a PNG when ``save`` is given. Inputs are the package's datasets (``x(trial, time,
channel)``, generated ``z(trial, time, latent)``) or plain arrays of shape (time, channel).

The numbers behind the figures come from the packages that own them: power spectra from
:mod:`dsident.metrics` (the same smoothing as D_H), fixed points, cycles and flow fields
from :mod:`dsident.analysis`.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from .data.time_units import frequency_label, time_label

__all__ = [
    "plot_attractor", "plot_attractor_pairs", "plot_time_series", "plot_power_spectra",
    "plot_latent_trajectories", "plot_flow_field", "plot_benchmark_summary", "plot_reconstruction",
]

TRUE_STYLE = {"color": "0.35", "lw": 0.4, "alpha": 0.8}
GEN_STYLE = {"color": "tab:red", "lw": 0.4, "alpha": 0.8}


# ---------------------------------------------------------------------------------------------
# input helpers
# ---------------------------------------------------------------------------------------------

def _series(data: Any, *, trial: int = 0, var: str = "x", argname: str = "data") -> tuple[np.ndarray, list[str], float]:
    """One trial as (time, channel) array without trailing NaN padding, channel names and dt."""
    if isinstance(data, xr.Dataset):
        if var not in data:
            raise ValueError(f"`{argname}` has no variable {var!r}; it has {list(data.data_vars)}.")
        da = data[var]
        dt = float(data.attrs.get("dt", 1.0))
    elif isinstance(data, xr.DataArray):
        da, dt = data, float(data.attrs.get("dt", 1.0))
        if "time" not in da.dims:
            raise ValueError(f"`{argname}` is a DataArray without a 'time' dimension (dims {da.dims}); name its "
                             f"dimensions ('trial', 'time', 'channel') or pass the array's values.")
    else:
        try:
            arr = np.asarray(data, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"`{argname}` must be a dataset (xarray.Dataset with {var!r}), a DataArray or a numeric "
                            f"array of shape (time, channel); got {type(data).__name__}.") from None
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim == 3:
            arr = arr[trial]
        if arr.ndim != 2:
            raise ValueError(f"`{argname}` must have shape (time, channel) or (trial, time, channel); got {arr.shape}.")
        return _trim(arr), [f"{var}{i}" for i in range(arr.shape[1])], 1.0
    if "trial" in da.dims:
        if not 0 <= trial < da.sizes["trial"]:
            raise ValueError(f"`trial` must be in [0, {da.sizes['trial']}); got {trial}.")
        da = da.isel(trial=trial)
    other = [d for d in da.dims if d != "time"]
    arr = np.asarray(da.transpose("time", *other).values, dtype=float).reshape(da.sizes["time"], -1)
    names = [str(c) for c in da.coords[other[0]].values] if other and other[0] in da.coords else \
        [f"{var}{i}" for i in range(arr.shape[1])]
    units = _channel_units(da.attrs.get("units", data.attrs.get("units") if var == "x" else None), len(names))
    if isinstance(data, xr.Dataset) and var == "x":
        units = _units_after_preprocessing(data, names, units)
    names = [f"{n} ({u})" if u else n for n, u in zip(names, units)]
    return _trim(arr), names, dt


def _units_after_preprocessing(ds: xr.Dataset, names: list[str], units: list[str | None]) -> list[str | None]:
    """``units`` as the values now are: a z-scored channel keeps its recording's ``attrs["units"]``
    but is in z-units, and an auxiliary channel (the slow phase channels) has none."""
    from .data.preprocessing import preprocessing_steps
    from .data.slow_channels import auxiliary_channels

    try:
        steps = preprocessing_steps(ds)
        auxiliary = set(auxiliary_channels(ds))
    except (TypeError, ValueError):
        return units
    zscored: set[str] = set()
    for step in steps:
        if isinstance(step, dict) and step.get("step") == "zscore":
            zscored |= {str(c) for c in step.get("channel", names)}
    return [None if n in auxiliary else "z-units" if n in zscored else u for n, u in zip(names, units)]


def _sample_times(data: Any, n: int, dt: float, trial: int = 0) -> np.ndarray:
    """The times of a series' first ``n`` samples: an irregularly sampled dataset's own
    ``sample_time`` of that trial, else the sample index times ``dt``."""
    if isinstance(data, xr.Dataset) and "sample_time" in data:
        st = data["sample_time"]
        times = np.asarray((st.isel(trial=trial) if "trial" in st.dims else st).values, dtype=float)[:n]
        if len(times) == n and np.isfinite(times).all():
            return times
    return np.arange(n) * dt


def _channel_units(units: Any, n: int) -> list[str | None]:
    """Per channel, the physical unit an ``attrs["units"]`` names: one unit for every channel
    ("mV"), or one per channel joined by "; " ("mV; pA", as the importers write it); None where
    it names none, or is a sentence (a generated run's "z-units: the fit's z-score ...")."""
    if not isinstance(units, str) or not units.strip():
        return [None] * n
    parts = [u.strip() for u in units.split(";")]
    if len(parts) == 1:
        parts = parts * n
    if len(parts) != n or any(not u or len(u) > 12 or ":" in u for u in parts):
        return [None] * n
    return list(parts)


def _trim(arr: np.ndarray) -> np.ndarray:
    """Drop trailing all-NaN rows (ragged-trial padding); keep interior NaN (gaps are drawn as gaps)."""
    # NaN only: a run that diverged to inf keeps its inf rows, so the figure can say it left the frame
    kept = np.flatnonzero(~np.isnan(arr).all(axis=1))
    return arr[: kept[-1] + 1] if kept.size else arr[:0]


def _finish(fig: Figure, save: str | Path | None, dpi: int = 120) -> Figure:
    if save is not None:
        path = Path(save)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig


def _check_count(value: Any, argname: str) -> int:
    """A positive whole number of samples (``arr[:-50]`` would silently drop the last 50)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float)) or not value >= 1 \
            or not float(value).is_integer():
        raise ValueError(f"`{argname}` must be a positive whole number of samples; got {argname}={value!r}.")
    return int(value)


def _check_channels(x: np.ndarray, g: np.ndarray | None) -> None:
    """Refuse a generated run whose channels are not the data's (each panel pairs channel i of both)."""
    if g is not None and g.shape[1] != x.shape[1]:
        raise ValueError(f"`generated` has {g.shape[1]} channels and `true` {x.shape[1]}; each panel draws the "
                         f"same channel of both, so they must have the same channels.")


def _check_dims(dims: Sequence[int], n: int, argname: str = "dims", what: str = "channel") -> list[int]:
    dims = list(dims)
    if any((not isinstance(d, (int, np.integer))) or isinstance(d, bool) or d < 0 or d >= n for d in dims):
        raise ValueError(f"`{argname}` must be {what} indices in [0, {n}); got {dims}.")
    return dims


# ---------------------------------------------------------------------------------------------
# attractors and time series
# ---------------------------------------------------------------------------------------------

def plot_attractor(true: Any, generated: Any | None = None, *, dims: Sequence[int] = (0, 1, 2),
                   max_points: int = 20_000, title: str | None = None, save: str | Path | None = None) -> Figure:
    """True vs generated attractor in 3-D, side by side.

    Parameters
    ----------
    true : xarray.Dataset or ndarray of shape (time, channel)
        Data (first trial is drawn).
    generated : same, optional
        A free-running trajectory of the model.
    dims : three ints
        Channels on the x, y, z axes (two ints draw a 2-D plot; data with fewer than 3
        channels falls back to 2-D or a delay plot).
    max_points : int
        At most this many samples of each series are drawn (the first ones).
    save : path, optional
        Write a PNG there.
    """
    max_points = _check_count(max_points, "max_points")
    series = [("data", _series(true, argname="true"), TRUE_STYLE)]
    if generated is not None:
        series.append(("generated", _series(generated, argname="generated"), GEN_STYLE))
    n_ch = series[0][1][0].shape[1]
    dims = list(dims)
    if n_ch < len(dims) and dims == [0, 1, 2]:   # the default: fewer channels fall back to 2-D or a delay plot
        dims = list(range(n_ch))
    _check_dims(dims, n_ch)     # dims the user named are drawn or refused, never swapped for others
    fig = Figure(figsize=(5.0 * len(series), 4.6))
    lag = 10        # one channel: delay plot x(t) against x(t + 10)
    views = []
    for label, (arr, _, _), _ in series:
        arr = arr[:max_points]
        if arr.shape[1] <= max(dims):
            raise ValueError(f"`{label}` has {arr.shape[1]} channels; `dims` {dims} needs {max(dims) + 1}.")
        views.append(np.column_stack([arr[:-lag, dims[0]], arr[lag:, dims[0]]]) if len(dims) == 1
                     else arr[:, dims[:3]])
    # every panel on the data's scale, so a run that settles looks it: autoscaled, a fixed point's
    # round-off drift filled its panel like an attractor
    limits = _joint_limits(views) if len(series) > 1 else None
    # every panel is labelled as the data are: they share channels and, on one scale, units (a free
    # run carries no units of its own, and its panel read "x" beside the data's "x (mV)")
    names = series[0][1][1]
    for k, ((label, _, style), view) in enumerate(zip(series, views)):
        view, end, label = _framed(view, limits, label)
        ax = fig.add_subplot(1, len(series), k + 1, **({"projection": "3d"} if len(dims) >= 3 else {}))
        if len(dims) >= 3:
            ax.set_box_aspect(None, zoom=0.88)      # room for the z label beside the next panel
        ax.plot(*view.T, **style)
        if k == 1 and len(end):     # where the run ends: the only mark a run that stands still leaves
            ax.plot(*end.T, "o", color=GEN_STYLE["color"], ms=4)
        if len(dims) >= 3:
            ax.set_zlabel(names[dims[2]])
        _set_limits(ax, limits or [])
        ax.set_xlabel(names[dims[0]])
        ax.set_ylabel(names[dims[1]] if len(dims) > 1 else f"{names[dims[0]]}, {lag} samples later")
        ax.set_title(label)
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


def plot_attractor_pairs(true: Any, generated: Any | None = None, *, max_points: int = 20_000,
                         projections: Any = None, title: str | None = None,
                         save: str | Path | None = None) -> Figure:
    """Every pair of channels (upper triangle), data in grey and the generated trajectory in red.

    ``projections``: the (N, N) output of :func:`dsident.metrics.state_space_projections` for
    these two series; each panel is then titled with its pair's D_stsp, and the worst pair's
    panel is framed in red, so the eye goes where the model misses.
    """
    max_points = _check_count(max_points, "max_points")
    x, names, _ = _series(true, argname="true")
    g = _series(generated, argname="generated")[0] if generated is not None else None
    _check_channels(x, g)
    n = x.shape[1]
    if n < 2:
        raise ValueError(f"`true` needs at least 2 channels for pairwise plots; got {n}.")
    d = None
    if projections is not None:
        d = np.asarray(getattr(projections, "values", projections), dtype=float)
        if d.shape != (n, n):
            raise ValueError(f"`projections` must be the ({n}, {n}) matrix of state_space_projections for these "
                             f"{n} channels; got shape {d.shape}.")
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    worst = None
    if d is not None:
        from .metrics.projections import worst_pair

        worst = worst_pair(d)
    cols = min(3, len(pairs))
    rows = math.ceil(len(pairs) / cols)
    fig = Figure(figsize=(3.6 * cols, 3.3 * rows))
    for k, (i, j) in enumerate(pairs):
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.plot(x[:max_points, i], x[:max_points, j], label="data", **TRUE_STYLE)
        if g is not None:
            ax.plot(g[:max_points, i], g[:max_points, j], label="generated", **GEN_STYLE)
            end = g[:max_points][np.isfinite(g[:max_points, [i, j]]).all(axis=1)][-1:]
            if len(end):    # where the run ends: a run that stands still leaves no visible line
                ax.plot(end[:, i], end[:, j], "o", color=GEN_STYLE["color"], ms=4)
            # on the data's scale: autoscaled, a diverging run shrank the data to a dot
            views = [x[:max_points][:, [i, j]], g[:max_points][:, [i, j]]]
            limits = _joint_limits(views)
            _set_limits(ax, limits)
            if _outside(views[1][~np.isnan(views[1]).any(axis=1)], limits).any():
                ax.text(0.02, 0.98, _OUTSIDE, transform=ax.transAxes, ha="left", va="top", fontsize="x-small",
                        color=GEN_STYLE["color"])
        ax.set_xlabel(names[i])
        ax.set_ylabel(names[j])
        if d is not None:
            ax.set_title(f"D_stsp of the pair {d[i, j]:.3g}", fontsize="small",
                         color="tab:red" if (i, j) == worst else "black")
            if (i, j) == worst:
                for spine in ax.spines.values():
                    spine.set_edgecolor("tab:red")
                    spine.set_linewidth(2.0)
    fig.axes[0].legend(loc="best", fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _finish(fig, save)


def plot_time_series(true: Any, generated: Any | None = None, *, n_steps: int = 2_000,
                     title: str | None = None, label: str = "data", save: str | Path | None = None) -> Figure:
    """Each channel over time (first ``n_steps`` samples): data above, generated in red on top.
    ``label`` names ``true`` in the legend (``"generated"`` when it is a free run drawn alone)."""
    n_steps = _check_count(n_steps, "n_steps")
    x, names, dt = _series(true, argname="true")
    g = _series(generated, argname="generated")[0] if generated is not None else None
    _check_channels(x, g)
    n = x.shape[1]
    shown = min(n, 8)  # a wide recording would make unreadable panels; the first channels suffice
    fig = Figure(figsize=(9, 1.6 * shown + 0.6))
    axes = [fig.add_subplot(shown, 1, i + 1) for i in range(shown)]
    t = _sample_times(true, min(n_steps, len(x)), dt)
    for i, ax in enumerate(axes):
        ax.plot(t, x[: len(t), i], label=label, **{**TRUE_STYLE, "lw": 0.8})
        if g is not None:
            tg = t[:1].sum() + np.arange(min(n_steps, len(g))) * dt      # a run starts where the data do
            ax.plot(tg, g[: len(tg), i], label="generated", **{**GEN_STYLE, "lw": 0.8})
            _frame_series(ax, x[: len(t), i], g[: len(tg), i])
        ax.set_ylabel(names[i])
    axes[-1].set_xlabel(time_label(true))
    axes[0].legend(loc="upper right", fontsize="small")
    _suptitle(fig, title, shown, n, true)
    fig.tight_layout()
    return _finish(fig, save)


def _suptitle(fig: Figure, title: str | None, shown: int, n: int, data: Any = None) -> None:
    """The figure's title, saying so when only the first ``shown`` of ``n`` channels are drawn,
    and when ``data`` holds several trials, of which only the first is."""
    trials = _n_trials(data)
    parts = ([f"the first {shown} of {n} channels"] if shown < n else []) + \
        ([f"trial 0 of {trials}"] if trials > 1 else [])
    note = f"({', '.join(parts)})" if parts else ""
    if title or note:
        fig.suptitle("\n".join(p for p in (title, note) if p))


def _n_trials(data: Any) -> int:
    """How many trials ``data`` holds (1 for a (time, channel) array or anything unknown)."""
    da = data["x"] if isinstance(data, xr.Dataset) and "x" in data else data
    if isinstance(da, xr.DataArray):
        return int(da.sizes.get("trial", 1))
    shape = np.shape(data) if isinstance(data, np.ndarray) else ()
    return int(shape[0]) if len(shape) == 3 else 1


def _smoothed_spectra(arr: np.ndarray, sigma: float) -> np.ndarray:
    """Per-channel normalised, smoothed power spectra (the D_H recipe), shape (frequency, channel)."""
    from .metrics import power_spectrum

    arr = arr[np.isfinite(arr).all(axis=1)]
    return np.asarray(power_spectrum(arr, sigma=sigma), dtype=float).reshape(-1, arr.shape[1])


def _run_spectra(arr: np.ndarray, sigma: float, dt: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Smoothed spectra (freq, channel) of a generated run and their frequencies; None when it
    has fewer than two finite samples (a free run that diverged at once has no spectrum)."""
    n_finite = int(np.isfinite(arr).all(axis=1).sum()) if arr.size else 0
    if n_finite < 2:
        return None
    q = _smoothed_spectra(arr, sigma)
    return q, np.fft.rfftfreq(n_finite, d=dt)[: q.shape[0]]


def _note_gaps(ax: Any, arr: np.ndarray) -> None:
    """Say in the panel when the data's spectrum left samples out: the FFT needs a gap-free
    series, so samples with a missing channel are dropped and the pieces around them joined."""
    n_gap = int((~np.isfinite(arr).all(axis=1)).sum())
    if n_gap:
        ax.text(0.98, 0.5, f"data: {n_gap} of {len(arr)} samples in gaps\nleft out, the rest joined",
                transform=ax.transAxes, ha="right", va="center", fontsize="x-small", color="0.3")


_NO_SPECTRUM = "generated: no finite samples\n(the free run diverged)"


def plot_power_spectra(true: Any, generated: Any | None = None, *, sigma: float = 20.0,
                       max_frequency: float | None = None, log_power: bool = False, title: str | None = None,
                       save: str | Path | None = None) -> Figure:
    """Smoothed, normalised power spectra per channel (as compared by D_H), data vs generated.

    Parameters
    ----------
    sigma : float
        Gaussian smoothing width in frequency bins (the D_H default, 20).
    max_frequency : float, optional
        Upper frequency limit of the plot, in cycles per time unit (default: where 99.9 % of
        the data's power lies).
    log_power : bool
        Power on a log axis: a recording's rhythm stays visible beside a strong slow drift or
        broadband noise, which on a linear axis squeeze it into the first bins (``dsident
        inspect`` draws it so).
    """
    if max_frequency is not None and not (isinstance(max_frequency, (int, float, np.number))
                                          and not isinstance(max_frequency, bool)
                                          and math.isfinite(max_frequency) and max_frequency > 0):
        raise ValueError(f"`max_frequency` must be a positive number of cycles per time unit (or None); "
                         f"got max_frequency={max_frequency!r}.")
    x, names, dt = _series(true, argname="true")
    g = _series(generated, argname="generated")[0] if generated is not None else None
    _check_channels(x, g)
    p = _smoothed_spectra(x, sigma)
    freqs = np.fft.rfftfreq(int(np.isfinite(x).all(axis=1).sum()), d=dt)[: p.shape[0]]
    run = None if g is None else _run_spectra(g, sigma, dt)
    if max_frequency is None:
        cum = np.cumsum(p.mean(axis=1))
        max_frequency = float(freqs[min(np.searchsorted(cum, 0.999 * cum[-1]), len(freqs) - 1)]) or float(freqs[-1])
    n = x.shape[1]
    shown = min(n, 8)
    fig = Figure(figsize=(3.6 * min(shown, 3), 3.0 * math.ceil(shown / 3)))
    for i in range(shown):
        ax = fig.add_subplot(math.ceil(shown / 3), min(shown, 3), i + 1)
        keep = freqs <= max_frequency
        ax.plot(freqs[keep], p[keep, i], label="data", color="0.3")
        if run is not None:
            q, fq = run
            ax.plot(fq[fq <= max_frequency], q[fq <= max_frequency, i], label="generated", color="tab:red")
        elif generated is not None and i == 0:
            ax.text(0.5, 0.5, _NO_SPECTRUM, transform=ax.transAxes, ha="center", va="center", color="tab:red")
        ax.set_title(names[i])
        ax.set_xlabel(frequency_label(true))
        if log_power:
            ax.set_yscale("log")
    fig.axes[0].set_ylabel("normalised power" + (" (log)" if log_power else ""))
    _note_gaps(fig.axes[0], x)
    fig.axes[0].legend(fontsize="small")
    _suptitle(fig, title, shown, n, true)
    fig.tight_layout()
    return _finish(fig, save)


def plot_latent_trajectories(latents: Any, *, n_steps: int = 2_000, dims: Sequence[int] | None = None,
                             title: str | None = None, save: str | Path | None = None) -> Figure:
    """Latent states over time (left) and the first two/three of ``dims`` against each other (right).

    Parameters
    ----------
    latents : xarray.Dataset with ``z(trial, time, latent)`` (generated or smoothed), or ndarray (time, latent)
    dims : ints, optional
        Latent units to draw (default: the first up to 8 over time, the first 3 in state space);
        the state-space panel draws the first three of them (two: a 2-D plot, one: a delay plot).
    """
    n_steps = _check_count(n_steps, "n_steps")
    z, names, dt = _series(latents, var="z", argname="latents")
    m = z.shape[1]
    dims = list(range(min(m, 8))) if dims is None else _check_dims(dims, m, what="latent")
    if not dims:
        raise ValueError(f"`dims` must name at least one latent unit in [0, {m}); got {dims}.")
    fig = Figure(figsize=(11, 4.2))
    ax = fig.add_subplot(1, 2, 1)
    t = np.arange(min(n_steps, len(z))) * dt
    for d in dims:
        ax.plot(t, z[: len(t), d], lw=0.8, label=names[d])
    ax.set_xlabel(time_label(latents))
    ax.set_ylabel("latent state")
    ax.legend(fontsize="x-small", ncol=2)
    # the state space of the latents asked for (the first three of ``dims``): the panel drew
    # latents 0-2 whatever ``dims`` named, and with two it added latent 2 as the third axis
    sel = dims[:3]
    if len(sel) == 3:
        ax3 = fig.add_subplot(1, 2, 2, projection="3d")
        ax3.plot(*(z[:, d] for d in sel), lw=0.4, color="tab:blue")
        ax3.set_zlabel(names[sel[2]])
    else:
        ax3 = fig.add_subplot(1, 2, 2)
        ax3.plot(*_state_space_view(z[:, sel], three_d=False).T, lw=0.4, color="tab:blue")
    ax3.set_xlabel(names[sel[0]])
    ax3.set_ylabel(names[sel[1]] if len(sel) > 1 else f"{names[sel[0]]}, 10 samples later")
    ax3.set_title("latent state space")
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


def _state_space_view(arr: np.ndarray, three_d: bool) -> np.ndarray:
    """The coordinates a reconstruction page draws: the first three channels, the first two, or
    one channel against itself 10 samples later (a delay embedding), shape (time, 2 or 3)."""
    if three_d:
        return arr[:, :3]
    # np.roll wrapped the last 10 samples onto the first ones: a spurious stroke from the end to the start
    return arr[:, :2] if arr.shape[1] > 1 else np.column_stack([arr[:-10, 0], arr[10:, 0]])


#: how far beyond the data's range, in spans of it, a run may widen the shared panels: the data
#: keep at least a fifth of each axis (at 10 spans a diverging run shrank them to a dot)
RUN_REACH = 2.0


def _joint_limits(views: list[np.ndarray], pad: float = 0.05, reach: float = RUN_REACH) -> list[tuple[float, float]]:
    """Per coordinate, the range covering the first view (the data) and the others' finite values
    within ``reach`` of its span beyond it (a diverging run leaves the panel instead of shrinking
    the data to a dot), padded by ``pad`` of the range."""
    out = []
    for d in range(views[0].shape[1]):
        values = [v[:, d][np.isfinite(v[:, d])] for v in views]
        if values[0].size:
            lo, hi = float(values[0].min()), float(values[0].max())
            span = max(hi - lo, 1e-12)
            values = [values[0]] + [v[(v >= lo - reach * span) & (v <= hi + reach * span)] for v in values[1:]]
        values = np.concatenate(values)
        if values.size == 0:
            out.append((-1.0, 1.0))
            continue
        lo, hi = float(values.min()), float(values.max())
        margin = pad * (hi - lo) if hi > lo else max(1.0, abs(lo)) * pad
        out.append((lo - margin, hi + margin))
    return out


_OUTSIDE = "part of the run lies outside this frame"


def _framed(view: np.ndarray, limits: list[tuple[float, float]] | None,
            label: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``view`` with its rows outside the shared frame ``limits`` blanked (3-D axes do not clip: a
    run beyond the frame would be drawn over the page), its last finite row if inside the frame
    (where the run ends), and ``label`` with a note when rows were blanked."""
    end = view[np.isfinite(view).all(axis=1)][-1:]
    if limits is None:
        return view, end, label
    cut = _outside(view, limits)
    if not cut.any():
        return view, end, label
    return np.where(cut[:, None], np.nan, view), end[~_outside(end, limits)], label + f"\n({_OUTSIDE})"


def _frame_series(ax: Any, data: np.ndarray, run: np.ndarray) -> None:
    """A time-series panel's value axis on the data's range, widened for the run at most
    :data:`RUN_REACH` spans (autoscaled, a diverging run flattened the data to a line), with a
    note in the panel when part of the run lies beyond it."""
    (lo, hi), = _joint_limits([data[:, None], run[:, None]])
    ax.set_ylim(lo, hi)
    if ((run < lo) | (run > hi)).any():     # inf included; NaN (a run that stopped) is not outside
        ax.text(0.01, 0.97, _OUTSIDE, transform=ax.transAxes, ha="left", va="top", fontsize="x-small",
                color=GEN_STYLE["color"])


def _set_limits(ax: Any, limits: list[tuple[float, float]]) -> None:
    """Put ``ax`` (2-D or 3-D) on the shared frame ``limits``, one (low, high) per axis."""
    for (lo, hi), set_lim in zip(limits, (ax.set_xlim, ax.set_ylim, getattr(ax, "set_zlim", None))):
        if set_lim is not None:
            set_lim(lo, hi)


def _outside(view: np.ndarray, limits: list[tuple[float, float]]) -> np.ndarray:
    """Per row of ``view``, whether it lies outside ``limits`` (the shared frame) in any coordinate."""
    out = np.zeros(len(view), dtype=bool)
    for d, (lo, hi) in enumerate(limits[:view.shape[1]]):
        out |= (view[:, d] < lo) | (view[:, d] > hi)
    return out


def plot_reconstruction(true: Any, generated: Any, *, scores: dict[str, float] | None = None,
                        title: str | None = None, save: str | Path | None = None) -> Figure:
    """One-page summary: attractors (3-D or 2-D), the first channel over time, spectra of channel 0."""
    x, names, dt = _series(true, argname="true")
    g = _series(generated, argname="generated")[0]
    _check_channels(x, g)
    fig = Figure(figsize=(13, 7.5))
    fig.subplots_adjust(wspace=0.4)     # room for the 3-D panels' z labels beside the spectrum
    three_d = x.shape[1] >= 3
    shown = [_state_space_view(arr[:20_000], three_d) for arr in (x, g)]
    # both panels on one scale, so a run that settles or shrinks looks it (autoscaling would blow
    # a fixed point up to fill its panel)
    limits = _joint_limits(shown)
    for k, (view, style, label) in enumerate(zip(shown, (TRUE_STYLE, GEN_STYLE), ("data", "generated"))):
        view, end, label = _framed(view, limits, label)
        if three_d:
            ax = fig.add_subplot(2, 3, k + 1, projection="3d")
            ax.plot(view[:, 0], view[:, 1], view[:, 2], **style)
            ax.set_xlabel(names[0])     # which channels the axes are: the page left them blank
            ax.set_ylabel(names[1])
            ax.set_zlabel(names[2])
            ax.set_box_aspect(None, zoom=0.85)      # the z label inside its cell, not over the spectrum
        else:
            ax = fig.add_subplot(2, 3, k + 1)
            ax.plot(view[:, 0], view[:, 1], **style)
            ax.set_xlabel(names[0])
            if k == 0:  # one channel: its state space as a delay embedding, x(t) against x(t + 10 dt)
                ax.set_ylabel(names[1] if x.shape[1] > 1 else f"{names[0]}, 10 samples later")
        if k == 1 and len(end):     # where the run ends: the only mark a run that stands still leaves
            ax.plot(*end.T, "o", color=GEN_STYLE["color"], ms=4)

        _set_limits(ax, limits)
        ax.set_title(label)
    ax = fig.add_subplot(2, 3, 3)
    p = _smoothed_spectra(x[:, :1], 20.0)[:, 0]
    f = np.fft.rfftfreq(int(np.isfinite(x[:, :1]).all(axis=1).sum()), d=dt)[: len(p)]
    cum = np.cumsum(p)
    fmax = f[min(np.searchsorted(cum, 0.999 * cum[-1]), len(f) - 1)] or f[-1]
    ax.plot(f[f <= fmax], p[f <= fmax], color="0.3", label="data")
    run = _run_spectra(g[:, :1], 20.0, dt)
    if run is not None:
        q, fg = run[0][:, 0], run[1]
        ax.plot(fg[fg <= fmax], q[fg <= fmax], color="tab:red", label="generated")
    else:       # the page still shows the data, and says why the run's curve is missing
        ax.text(0.5, 0.5, _NO_SPECTRUM, transform=ax.transAxes, ha="center", va="center", color="tab:red")
    _note_gaps(ax, x[:, :1])
    ax.set_title(f"power spectrum, {names[0]}")
    ax.set_xlabel(frequency_label(true))
    ax.set_ylabel("normalised power")
    ax.legend(fontsize="small")
    ax = fig.add_subplot(2, 1, 2)
    n = min(3000, len(x), len(g))
    t = _sample_times(true, n, dt)
    ax.plot(t, x[:n, 0], label="data", **{**TRUE_STYLE, "lw": 0.8})
    ax.plot(t[:1].sum() + np.arange(n) * dt, g[:n, 0], label="generated", **{**GEN_STYLE, "lw": 0.8})
    _frame_series(ax, x[:n, 0], g[:n, 0])
    ax.set_xlabel(time_label(true))
    ax.set_ylabel(names[0])
    if scores:
        # numbers.Real: a score computed in float32 (np.float32 is no float) was left off the line
        text = "   ".join(f"{k} = {float(v):.3g}" for k, v in scores.items()
                           if isinstance(v, numbers.Real) and not isinstance(v, bool))
        fig.text(0.5, 0.005, text, ha="center", fontsize="small")
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


# ---------------------------------------------------------------------------------------------
# flow fields and fixed points
# ---------------------------------------------------------------------------------------------

def plot_flow_field(model: Any, *, dims: Sequence[int] = (0, 1), bounds: Sequence[float] | None = None,
                    n_grid: int = 25, fixed_points: Any = None, cycles: Any = None, trajectory: Any = None,
                    title: str | None = None, save: str | Path | None = None, anchor: Any = None) -> Figure:
    """The model's flow on a 2-D slice of latent space with its fixed points and cycles.

    Arrows show ``step(z) − z`` on a grid over latents ``dims`` (the other latents held at
    ``anchor``); fixed points are drawn filled when stable and open when unstable; k-cycles as
    connected markers. Only the slice's own flow is drawn: a fixed point whose other latents
    differ from ``anchor`` is not a zero of it.

    Parameters
    ----------
    model : estimator (with ``model_``) or StateSpaceModel
    dims : two ints
        Latent units spanning the slice.
    bounds : (xmin, xmax, ymin, ymax), optional
        Slice extent; default the range of ``trajectory`` (at least ±1 around a run that stands
        still), or ±3.
    n_grid : int
        Grid points per axis.
    fixed_points : :class:`dsident.analysis.FixedPoints` or ndarray (n, M), optional
        Default: computed here with :func:`dsident.analysis.fixed_points`.
    cycles : FixedPoints of period k (or a list of them), optional
        From :func:`dsident.analysis.cycles`; each cycle is drawn as a closed dashed polygon.
    trajectory : xarray.Dataset with ``z`` or ndarray (time, latent), optional
        A latent trajectory drawn on top (e.g. ``model.generate(...)``).
    anchor : ndarray of shape (M,), optional
        Values of the latents off the slice. Default: the mean of ``trajectory`` (a run that
        settled on a fixed point is sliced through it), or zeros without one.
    """
    from . import analysis

    from .analysis._resolve import resolve_dynamics

    dims = list(dims)
    if len(dims) != 2:
        raise ValueError(f"`dims` must name exactly two latent units; got {dims}.")
    m = resolve_dynamics(model)[0].latent_dim
    _check_dims(dims, m, what="latent")
    if bounds is not None:
        given = bounds
        try:
            bounds = np.asarray(bounds, dtype=float).ravel()
        except (TypeError, ValueError):
            bounds = np.zeros(0)
        if bounds.shape != (4,) or not np.isfinite(bounds).all() or bounds[0] >= bounds[1] or bounds[2] >= bounds[3]:
            raise ValueError(f"`bounds` must be four finite numbers (xmin, xmax, ymin, ymax) with xmin < xmax and "
                             f"ymin < ymax; got bounds={given!r}.")
    traj = _series(trajectory, var="z", argname="trajectory")[0] if trajectory is not None else None
    if traj is not None and traj.shape[1] != m:
        raise ValueError(f"`trajectory` has {traj.shape[1]} columns; the model has {m} latent units (pass its latent "
                         f"states z, e.g. model.generate(...), not the observations).")
    finite = traj[np.isfinite(traj[:, dims]).all(axis=1)] if traj is not None else None
    if bounds is None:
        if finite is not None and len(finite):      # a run that diverged to inf: the window of its finite part
            lo, hi = finite[:, dims].min(axis=0), finite[:, dims].max(axis=0)
            pad = 0.15 * (hi - lo + 1e-9)
            # a run standing still (a fixed point) would give a window of round-off width
            still = hi - lo < 1e-3 * (1.0 + np.abs(hi) + np.abs(lo))
            pad = np.where(still, 1.0 - 0.5 * (hi - lo), pad)
            bounds = (lo[0] - pad[0], hi[0] + pad[0], lo[1] - pad[1], hi[1] + pad[1])
        else:
            bounds = (-3.0, 3.0, -3.0, 3.0)
    if anchor is None and traj is not None and np.isfinite(traj).all(axis=1).any():
        anchor = np.nanmean(traj[np.isfinite(traj).all(axis=1)], axis=0)
    field = analysis.flow_field(model, dims=tuple(dims), limits=((bounds[0], bounds[1]), (bounds[2], bounds[3])),
                                n_grid=n_grid, anchor=anchor)
    g0, g1 = field["axis0"].values, field["axis1"].values
    # streamplot wants arrays indexed (y, x): transpose the (axis0, axis1) grid
    dx, dy = field["flow"].values[..., 0].T, field["flow"].values[..., 1].T
    fig = Figure(figsize=(6, 5.4))
    ax = fig.add_subplot(1, 1, 1)
    ax.streamplot(g0, g1, dx, dy, color=np.log10(np.hypot(dx, dy) + 1e-12), cmap="Greys", density=1.2,
                  linewidth=0.7)
    if traj is not None:
        ax.plot(traj[:, dims[0]], traj[:, dims[1]], color="tab:blue", lw=0.5, alpha=0.7, label="trajectory")
    if fixed_points is None:
        try:
            fixed_points = analysis.fixed_points(model)
        except Exception as err:  # e.g. a model too large for exhaustive search: draw the flow anyway
            ax.text(0.02, 0.02, f"fixed points not computed: {err}"[:90], transform=ax.transAxes, fontsize="x-small")
    for z, stable in _points_with_stability(fixed_points):
        ax.plot(z[dims[0]], z[dims[1]], "o", ms=8, mec="k", mfc="k" if stable else "w", zorder=5)
    for k, cyc in enumerate(_cycle_list(cycles)):
        ax.plot(np.r_[cyc[:, dims[0]], cyc[:1, dims[0]]], np.r_[cyc[:, dims[1]], cyc[:1, dims[1]]], "s--",
                ms=5, color="tab:orange", label="cycle" if k == 0 else None, zorder=4)
    ax.set_xlim(bounds[0], bounds[1])
    ax.set_ylim(bounds[2], bounds[3])
    ax.set_xlabel(f"z{dims[0]}")
    ax.set_ylabel(f"z{dims[1]}")
    ax.plot([], [], "o", mec="k", mfc="k", label="stable fixed point")
    ax.plot([], [], "o", mec="k", mfc="w", label="unstable fixed point")
    ax.legend(fontsize="x-small", loc="upper right")
    if title:
        fig.suptitle(title)
    return _finish(fig, save)


def _points_with_stability(fixed_points: Any) -> list[tuple[np.ndarray, bool]]:
    """[(z (M,), stable)] from an :class:`dsident.analysis.FixedPoints` (period 1) or an array (n, M)."""
    if fixed_points is None:
        return []
    if hasattr(fixed_points, "points"):
        pts = np.asarray(fixed_points.points, dtype=float)
        return [(pts[i, 0], bool(fixed_points.stable[i])) for i in range(pts.shape[0])]
    return [(np.asarray(z, float), False) for z in np.atleast_2d(np.asarray(fixed_points, float))]


def _cycle_list(cycles: Any) -> list[np.ndarray]:
    """[(k, M) arrays] from FixedPoints results of period k (one or a list of them) or arrays."""
    if cycles is None:
        return []
    results = cycles if isinstance(cycles, (list, tuple)) else [cycles]
    out = []
    for res in results:
        if hasattr(res, "points"):
            out += [np.asarray(res.points[i], float) for i in range(len(res))]
        else:
            out.append(np.atleast_2d(np.asarray(res, float)))
    return out


# ---------------------------------------------------------------------------------------------
# benchmark summary
# ---------------------------------------------------------------------------------------------

def plot_benchmark_summary(results: xr.Dataset, *, floor: dict[str, dict[str, float]] | None = None,
                           metrics: Sequence[str] = ("D_stsp", "D_H"), title: str | None = None,
                           save: str | Path | None = None) -> Figure:
    """Per dataset and metric: each model × inference as seeds (dots) and median (bar), floor dashed.

    Parameters
    ----------
    results : xarray.Dataset
        From :func:`dsident.experiments.runner.records_to_dataset` (dim ``point``).
    floor : mapping, optional
        ``dataset -> {"D_stsp": .., "D_H": ..}``, drawn as a dashed line.
    metrics : names
        Variables of ``results`` to show, one column each.
    """
    if not isinstance(results, xr.Dataset):
        raise TypeError(f"`results` must be the xarray.Dataset of records_to_dataset (dim 'point'); "
                        f"got {type(results).__name__}.")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)     # "D_H" is one metric, not 3 letters
    missing = [m for m in metrics if m not in results.data_vars]
    if not metrics or missing:
        raise ValueError(f"`metrics` must name variables of `results` ({list(results.data_vars)}); got "
                         f"{metrics}" + (f", without {missing}." if missing else "."))
    if results.sizes.get("point", 0) == 0:
        raise ValueError("`results` holds no points to summarise.")
    datasets = sorted(set(map(str, results["dataset"].values)))
    rows = sorted(set(zip(map(str, results["model"].values), map(str, results["method"].values))))
    fig = Figure(figsize=(4.2 * len(metrics), 0.5 + 0.45 * len(rows) * len(datasets) + 1.0))
    done = results["status"].values == "done"
    for j, metric in enumerate(metrics):
        ax = fig.add_subplot(1, len(metrics), j + 1)
        labels, y, floor_drawn = [], 0, False
        for d in datasets:
            for model, method in rows:
                sel = done & (results["dataset"].values == d) & (results["model"].values == model) & \
                    (results["method"].values == method)
                vals = results[metric].values[sel]
                vals = vals[np.isfinite(vals)]
                if vals.size:
                    ax.barh(y, np.median(vals), color="tab:blue", alpha=0.35)
                    ax.plot(vals, np.full(vals.size, y), "k.", ms=4)
                else:
                    ax.text(0, y, " no result", va="center", fontsize="x-small")
                labels.append(f"{d}: {model} × {method}")
                y += 1
            if floor and d in floor and metric in floor[d] and np.isfinite(floor[d][metric]):
                # the legend names the first line drawn: a dataset without a floor (a recording's that cannot
                # tell a fixed point apart) left the others' lines unnamed and an empty legend box
                ax.plot([floor[d][metric]] * 2, [y - len(rows) - 0.5, y - 0.5], "--", color="tab:green",
                        label=None if floor_drawn else "floor")
                floor_drawn = True
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels if j == 0 else [""] * len(labels), fontsize="small")
        ax.invert_yaxis()
        ax.set_xlabel(metric)
        if floor_drawn:
            ax.legend(fontsize="x-small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _finish(fig, save)
