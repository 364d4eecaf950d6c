"""Flow field and nullclines of a latent dynamics on a 2-D slice of its state space.

Returns plain arrays (an ``xarray.Dataset`` and line segments); :mod:`dsident.plotting`
draws them. On the slice, every latent unit other than the two chosen ones is held at an
anchor value; the "flow" is the one-step displacement ``step(z) - z`` (for a continuous-time
model divided by ``dt`` it approximates the vector field).
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import numpy as np
import torch
import xarray as xr

from ._resolve import resolve_dynamics

__all__ = ["flow_field", "nullclines", "zero_contour"]


def flow_field(model: Any, *, dims: Sequence[int] = (0, 1),
               limits: Sequence[Sequence[float]] = ((-3.0, 3.0), (-3.0, 3.0)), n_grid: int | Sequence[int] = 41,
               anchor: np.ndarray | None = None, dt: float | None = None) -> xr.Dataset:
    """One-step displacement of the latent state on a grid over two latent units.

    Parameters
    ----------
    model : fitted estimator, StateSpaceModel or LatentDynamics
    dims : pair of int
        The latent units spanning the slice.
    limits : ((lo0, hi0), (lo1, hi1))
        Grid range along each of the two units (latent units).
    n_grid : int or pair of int
        Grid points per axis.
    anchor : ndarray of shape (M,), optional
        Values of the other units (default zeros; a StateSpaceModel's ``initial_mean`` is a
        common alternative).
    dt : float, optional
        Passed to ``step`` (a StateSpaceModel's ``dt`` by default).

    Returns
    -------
    xarray.Dataset
        ``flow(axis0, axis1, component)`` the displacement in the two chosen units,
        ``speed(axis0, axis1)`` the norm of the full M-dimensional displacement, and
        coordinates ``axis0``, ``axis1`` (grid values), ``component`` (the two unit indices);
        attrs ``dims``, ``dt``.
    """
    dyn, step_dt = resolve_dynamics(model, dt)
    grid, g0, g1, dims = slice_grid(dyn.latent_dim, dims, limits, n_grid, anchor)
    work = copy.deepcopy(dyn).double()
    with torch.no_grad():
        z = torch.as_tensor(grid.reshape(-1, dyn.latent_dim), dtype=torch.float64)
        disp = (work.step(z, None, step_dt) - z).numpy().reshape(grid.shape)
    return slice_dataset(disp, g0, g1, dims, dt=float("nan") if step_dt is None else float(step_dt))


def slice_grid(latent_dim: int, dims: Sequence[int], limits: Sequence[Sequence[float]],
               n_grid: int | Sequence[int], anchor: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
    """Latent states on a regular grid over two units, the others held at ``anchor``.

    Returns
    -------
    grid : ndarray of shape (n0, n1, latent_dim)
    g0, g1 : ndarray of shape (n0,), (n1,)
        The grid values along the two units.
    dims : tuple of two int
    """
    m = int(latent_dim)
    dims = tuple(int(d) for d in dims)
    if len(dims) != 2 or dims[0] == dims[1] or not all(0 <= d < m for d in dims):
        raise ValueError(f"`dims` must be two different latent indices in [0, {m}); got dims={dims!r}.")
    n0, n1 = (int(n_grid), int(n_grid)) if np.isscalar(n_grid) else (int(n_grid[0]), int(n_grid[1]))
    if min(n0, n1) < 2:
        raise ValueError(f"`n_grid` must be at least 2 per axis; got n_grid={n_grid!r}.")
    (lo0, hi0), (lo1, hi1) = limits
    if not (hi0 > lo0 and hi1 > lo1):
        raise ValueError(f"`limits` must be ((lo, hi), (lo, hi)) with lo < hi; got limits={limits!r}.")
    base = np.zeros(m) if anchor is None else np.asarray(anchor, dtype=float).reshape(-1)
    if base.shape != (m,):
        raise ValueError(f"`anchor` must have shape ({m},); got {base.shape}.")
    g0, g1 = np.linspace(lo0, hi0, n0), np.linspace(lo1, hi1, n1)
    grid = np.broadcast_to(base, (n0, n1, m)).copy()
    grid[..., dims[0]] = g0[:, None]
    grid[..., dims[1]] = g1[None, :]
    return grid, g0, g1, dims


def slice_dataset(values: np.ndarray, g0: np.ndarray, g1: np.ndarray, dims: tuple, **attrs: Any) -> xr.Dataset:
    """``flow`` (the two chosen components) and ``speed`` (norm over all units) of ``values`` (n0, n1, M)."""
    return xr.Dataset(
        {"flow": (("axis0", "axis1", "component"), values[..., list(dims)]),
         "speed": (("axis0", "axis1"), np.linalg.norm(values, axis=-1))},
        coords={"axis0": g0, "axis1": g1, "component": list(dims)},
        attrs={"dims": list(dims), **attrs},
    )


def zero_contour(x: np.ndarray, y: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Line segments of the zero level set of a gridded function (marching squares).

    Parameters
    ----------
    x : ndarray of shape (n0,)
    y : ndarray of shape (n1,)
    values : ndarray of shape (n0, n1)
        ``values[i, j]`` at ``(x[i], y[j])``.

    Returns
    -------
    ndarray of shape (n_segments, 2, 2)
        Each segment's two end points ``(x, y)``, linearly interpolated along cell edges.
    """
    v = np.asarray(values, dtype=float)
    segments: list[np.ndarray] = []
    for i in range(len(x) - 1):
        for j in range(len(y) - 1):
            corners = [(x[i], y[j], v[i, j]), (x[i + 1], y[j], v[i + 1, j]),
                       (x[i + 1], y[j + 1], v[i + 1, j + 1]), (x[i], y[j + 1], v[i, j + 1])]
            crossings = []
            for (xa, ya, va), (xb, yb, vb) in zip(corners, corners[1:] + corners[:1]):
                if not (np.isfinite(va) and np.isfinite(vb)):
                    continue
                if (va < 0) != (vb < 0):          # sign change on this edge
                    s = va / (va - vb)
                    crossings.append((xa + s * (xb - xa), ya + s * (yb - ya)))
            # 2 crossings: one segment; 4 (a saddle cell): pair them in edge order
            for a, b in zip(crossings[0::2], crossings[1::2]):
                segments.append(np.array([a, b]))
    return np.stack(segments) if segments else np.zeros((0, 2, 2))


def nullclines(model: Any, **options: Any) -> dict[int, np.ndarray]:
    """Nullclines on a 2-D slice: where the displacement of each chosen unit vanishes.

    Parameters
    ----------
    model : fitted estimator, StateSpaceModel or LatentDynamics
    **options
        As for :func:`flow_field` (``dims``, ``limits``, ``n_grid``, ``anchor``, ``dt``).

    Returns
    -------
    dict int -> ndarray of shape (n_segments, 2, 2)
        For each of the two units, the line segments of ``step(z)_i - z_i = 0`` in the slice
        coordinates.
    """
    field = flow_field(model, **options)
    x, y = field["axis0"].values, field["axis1"].values
    return {int(c): zero_contour(x, y, field["flow"].sel(component=c).values) for c in field["component"].values}
