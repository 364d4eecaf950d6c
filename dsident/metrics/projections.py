"""Where a free run misses the attractor: the binned D_stsp of every channel and channel pair.

A full D_stsp says how far a generated orbit is from the true one, not in which variables. The
binned estimator restricted to one channel compares the marginal distributions (amplitudes,
time spent at each level); restricted to a pair it compares a 2-D projection of the attractor,
which is where a wrong coupling between variables shows. On the bursting neuron the shallow
PLRNN cell's models match every marginal to 0.02 nats or better, while their (V, n) projection,
the fast spike loop, scores 2.5-9 times what another true stretch scores (docs/metrics.md,
"Which variables a model misses").

Shape legend: ``N`` scored channels.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from .state_space import _check_pair, _finite_rows, _no_inf, as_trials, binned_divergence, binned_settings, check_direction

__all__ = ["state_space_projections", "worst_pair"]


def state_space_projections(true: Any, generated: Any, *, n_bins: int = 30, smoothing_alpha: float = 1e-5,
                            direction: str = "forward", channels: Any = None) -> xr.DataArray:
    """The binned D_stsp of every channel (diagonal) and every pair of channels (off-diagonal).

    Entry ``[i, i]`` is KL(p_true ‖ p_generated) between the two series' histograms of channel
    ``i`` alone; entry ``[i, j]`` the same on the 2-D histograms of channels ``i`` and ``j``. Each
    uses the grid, bins and smoothing of :func:`~dsident.metrics.state_space_divergence`'s
    binned estimator, on the same samples: rows with a non-finite entry in any channel are left
    out first, so a missing sample removes the same time point from every projection.

    Parameters
    ----------
    true, generated : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        As for :func:`~dsident.metrics.state_space_divergence` (trials pooled; the grid from the
        true data); at least one channel, the same number in both.
    n_bins, smoothing_alpha, direction
        As for the binned :func:`~dsident.metrics.state_space_divergence`.
    channels : sequence of str, optional
        Channel names for the result's coordinates (default: a Dataset's ``channel`` coordinate,
        else ``0 … N-1``).

    Returns
    -------
    xarray.DataArray of shape (N, N), dims ("channel", "other_channel")
        Symmetric, in nats; NaN where the generated series has no point on the true grid of
        that projection. ``attrs`` record the settings.

    Raises
    ------
    ValueError
        Mismatched channel counts, a true series without finite rows, a bad ``n_bins``,
        ``smoothing_alpha``, ``direction`` or a ``channels`` list of the wrong length.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(20_000, 2))
    >>> shuffled = np.column_stack([x[:, 0], rng.permutation(x[:, 1])])   # same marginals
    >>> d = state_space_projections(x, shuffled)
    >>> float(d[0, 0]), float(d[1, 1])
    (0.0, 0.0)
    """
    check_direction(direction)
    n_bins, alpha = binned_settings(n_bins, smoothing_alpha)
    xt = _finite_rows(_no_inf(as_trials(true, "true"), "true"))
    xg = _finite_rows(_no_inf(as_trials(generated, "generated"), "generated"))
    _check_pair(xt, xg, "D_stsp projections")
    n = xt.shape[1]
    names = _channel_names(channels if channels is not None else _dataset_channels(true), n)
    out = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            cols = [i] if i == j else [i, j]
            out[i, j] = out[j, i] = binned_divergence(xt[:, cols], xg[:, cols], n_bins=n_bins, alpha=alpha,
                                                      direction=direction)
    return xr.DataArray(out, dims=("channel", "other_channel"),
                        coords={"channel": names, "other_channel": names}, name="state_space_projections",
                        attrs={"n_bins": n_bins, "smoothing_alpha": alpha, "direction": direction,
                               "description": "binned D_stsp of each channel (diagonal) and channel pair (nats)"})


def worst_pair(projections: Any) -> tuple[int, int] | None:
    """Indices ``(i, j)``, ``i < j``, of the pair with the largest finite D_stsp in a
    :func:`state_space_projections` matrix (DataArray or (N, N) array); None when no pair is finite."""
    d = np.asarray(getattr(projections, "values", projections), dtype=float)
    pairs = [(i, j) for i in range(d.shape[0]) for j in range(i + 1, d.shape[0]) if np.isfinite(d[i, j])]
    return max(pairs, key=lambda p: d[p]) if pairs else None


def _dataset_channels(data: Any) -> Any:
    if hasattr(data, "data_vars") and "channel" in data.coords:
        return data["channel"].values
    return None


def _channel_names(channels: Any, n: int) -> list[str]:
    if channels is None:
        return [str(k) for k in range(n)]
    names = [str(c) for c in channels]
    if len(names) != n:
        raise ValueError(f"`channels` must name the {n} channel(s) of the data; got {len(names)}: {names}.")
    return names
