"""Analysis tools for continuous-time latent dynamics (gnODE paper, seed ``000_gnode.md`` section 7).

* :func:`vector_field_fixed_points`: roots of the vector field ``f(z, u) = dz/dt`` by Newton's
  method from many starts (the paper: up to 100 iterations, keep points with ``||f|| < 0.01``,
  discard points outside ``2q < z_i < 2r`` of the visited range), classified by the
  spectral abscissa of the continuous-time Jacobian (``~0``: marginally stable, the signature of
  a continuous attractor).
* :func:`vector_field_grid`: the vector field on a 2-D slice of the state space (for flow-field
  plots of N = 2 gnODEs).

The Newton iteration itself is the generic one of :func:`dsident.analysis.fixed_points.newton_fixed_points`,
applied to the map ``z + f(z, u)`` whose fixed points are the roots of ``f``.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
import xarray as xr

from ._resolve import resolve_dynamics
from .fixed_points import _check_finite_starts, newton_fixed_points, off_graph
from .flow import slice_dataset, slice_grid

__all__ = ["ContinuousFixedPoints", "vector_field_fixed_points", "vector_field_grid", "vector_field_jacobian",
           "spectral_abscissa"]


@dataclass
class ContinuousFixedPoints:
    """Fixed points of ``dz/dt = f(z, u)`` with their linear stability.

    Attributes
    ----------
    points : ndarray of shape (n, latent)
    eigenvalues : complex ndarray of shape (n, latent)
        Eigenvalues of the Jacobian ``D = df/dz`` at each point, by decreasing real part.
    spectral_abscissa : ndarray of shape (n,)
        ``max Re(eig D)`` (units 1 / time).
    kind : list of str
        "stable" (abscissa < -marginal_tol), "marginal" (|abscissa| <= marginal_tol) or "unstable".
    speed : ndarray of shape (n,)
        ``||f(z, u)||`` at each point.
    info : dict
        Settings and counts (``n_starts``, ``n_converged``, ``n_out_of_range``, bounds).
    """

    points: np.ndarray
    eigenvalues: np.ndarray
    spectral_abscissa: np.ndarray
    kind: list[str]
    speed: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    @property
    def stable(self) -> np.ndarray:
        """True where every eigenvalue has a real part below ``-marginal_tol``, shape (n,)."""
        return np.array([k == "stable" for k in self.kind], dtype=bool)


def _inputs(dyn: Any, u: Any, batch: int) -> torch.Tensor | None:
    k = getattr(dyn, "input_dim", 0)
    if k == 0:
        if u is not None and np.size(u) > 0:     # it was dropped unused
            raise ValueError(f"`u` was given (shape {np.shape(u)}) but {type(dyn).__name__} takes no inputs "
                             "(input_dim=0); leave it out.")
        return None
    uu = torch.zeros(k, dtype=torch.float64) if u is None else torch.as_tensor(np.asarray(off_graph(u), dtype=float))
    if uu.shape[-1] != k:
        raise ValueError(f"`u` must have {k} input channels; got shape {tuple(uu.shape)}.")
    return uu.reshape(-1, k).expand(batch, k)


def _vector_field_dynamics(model: Any) -> Any:
    dyn, _ = resolve_dynamics(model, None)
    if not hasattr(dyn, "vector_field"):
        raise TypeError(f"{type(dyn).__name__} has no vector_field(z, u): it is a discrete-time model; use "
                        "dsident.analysis.fixed_points.newton_fixed_points for its map instead.")
    return copy.deepcopy(dyn).double()


def vector_field_jacobian(model: Any, z: Any, u: Any = None) -> np.ndarray:
    """Continuous-time Jacobian ``df/dz`` at states ``z`` (n, latent) -> (n, latent, latent).

    Analytic when the dynamics provide ``vector_field_jacobian``, autograd otherwise.
    """
    dyn = _vector_field_dynamics(model)
    zz = torch.as_tensor(np.atleast_2d(np.asarray(off_graph(z), dtype=float)))
    if zz.ndim != 2 or zz.shape[1] != dyn.latent_dim:
        raise ValueError(f"`z` must have shape (n, {dyn.latent_dim}) or ({dyn.latent_dim},); got {tuple(np.shape(z))}.")
    uu = _inputs(dyn, u, zz.shape[0])
    with torch.no_grad():
        if hasattr(dyn, "vector_field_jacobian"):
            return dyn.vector_field_jacobian(zz, uu).numpy()
        if uu is None:
            jac = torch.func.vmap(torch.func.jacrev(lambda zi: dyn.vector_field(zi[None], None)[0]))(zz)
        else:
            jac = torch.func.vmap(torch.func.jacrev(lambda zi, ui: dyn.vector_field(zi[None], ui[None])[0]))(zz, uu)
        return jac.numpy()


def spectral_abscissa(jacobians: np.ndarray) -> np.ndarray:
    """``max Re(eig J)`` for each matrix of ``jacobians`` (n, M, M) -> (n,)."""
    jacobians = np.asarray(jacobians)
    if jacobians.ndim != 3 or jacobians.shape[1] != jacobians.shape[2]:
        raise ValueError(f"`jacobians` must have shape (n, M, M), square matrices one per point; got shape "
                         f"{jacobians.shape}.")
    return np.linalg.eigvals(jacobians).real.max(axis=-1)


def vector_field_fixed_points(model: Any, starts: Any, *, u: Any = None, max_iter: int = 100,
                              speed_threshold: float = 0.01, range_filter: bool = True,
                              marginal_tol: float = 0.01, dedup_tol: float = 1e-3) -> ContinuousFixedPoints:
    """Fixed points of a continuous-time model by Newton's method from many starting states.

    Parameters
    ----------
    model : LatentDynamics with ``vector_field``, StateSpaceModel or fitted estimator
    starts : array of shape (n_starts, latent)
        Starting states, e.g. latent states visited on validation trials (the paper uses 10,000).
    u : array of shape (input,), optional
        The input the field is evaluated at (the paper clamps it to 0; zeros by default).
    max_iter : int
        Newton iterations (100 in the paper).
    speed_threshold : float
        Keep a point only if ``||f(z, u)|| < speed_threshold`` (0.01 in the paper; 1 / time units).
    range_filter : bool
        Keep a point only if every coordinate lies in ``(q - |q|, r + |r|)`` with ``q``, ``r`` the
        smallest and largest coordinate over ``starts`` (the paper's ``2q < z_i < 2r``).
    marginal_tol : float
        Spectral abscissae within ``+-marginal_tol`` count as marginally stable.
    dedup_tol : float
        Points closer than this (Euclidean) are merged.

    Returns
    -------
    ContinuousFixedPoints
    """
    dyn = _vector_field_dynamics(model)
    starts = np.asarray(off_graph(starts), dtype=float)
    if starts.ndim != 2 or starts.shape[1] != dyn.latent_dim:
        raise ValueError(f"`starts` must have shape (n_starts, {dyn.latent_dim}); got {starts.shape}.")
    _check_finite_starts(starts)

    def as_map(z: torch.Tensor) -> torch.Tensor:
        return z + dyn.vector_field(z, _inputs(dyn, u, z.shape[0]))

    # a copy: the generic finder iterates in place on the array it is given
    # the paper's criterion alone (||f|| < speed_threshold), slow points included
    found = newton_fixed_points(as_map, starts=starts.copy(), max_iter=max_iter, tol=1e-10,
                                speed_threshold=speed_threshold, dedup_tol=dedup_tol, root_check=False)
    pts = found.points[:, 0, :]
    q, r = float(starts.min()), float(starts.max())
    lo, hi = q - abs(q), r + abs(r)
    n_out = 0
    if range_filter and len(pts):
        inside = ((pts > lo) & (pts < hi)).all(axis=1)
        n_out = int((~inside).sum())
        pts = pts[inside]
    if len(pts):
        jac = vector_field_jacobian(dyn, pts, u)
        eig = np.linalg.eigvals(jac)
        eig = np.take_along_axis(eig, np.argsort(-eig.real, axis=1), axis=1)
        absc = eig.real[:, 0]
        with torch.no_grad():
            zz = torch.as_tensor(pts)
            speed = dyn.vector_field(zz, _inputs(dyn, u, len(pts))).norm(dim=1).numpy()
    else:
        eig = np.zeros((0, dyn.latent_dim), dtype=complex)
        absc, speed = np.zeros(0), np.zeros(0)
    kind = ["marginal" if abs(a) <= marginal_tol else ("stable" if a < 0 else "unstable") for a in absc]
    info = {**found.info, "n_out_of_range": n_out, "range": [lo, hi] if range_filter else None,
            "max_iter": max_iter, "marginal_tol": marginal_tol}
    return ContinuousFixedPoints(points=pts, eigenvalues=eig, spectral_abscissa=absc, kind=kind, speed=speed,
                                 info=info)


def vector_field_grid(model: Any, *, dims: Sequence[int] = (0, 1),
                      limits: Sequence[Sequence[float]] = ((-2.0, 2.0), (-2.0, 2.0)), n_grid: int = 41,
                      anchor: Any = None, u: Any = None) -> xr.Dataset:
    """The vector field ``dz/dt`` on a grid over two latent units (the others held at ``anchor``).

    Parameters
    ----------
    model : LatentDynamics with ``vector_field``, StateSpaceModel or fitted estimator
    dims : pair of int
        Latent units spanning the slice.
    limits : ((lo0, hi0), (lo1, hi1))
        Grid range per axis (latent units).
    n_grid : int
        Grid points per axis.
    anchor : array of shape (latent,), optional
        Values of the other units (zeros by default).
    u : array of shape (input,), optional
        Input held during the evaluation (zeros by default).

    Returns
    -------
    xarray.Dataset
        ``flow(axis0, axis1, component)`` = the two chosen components of ``dz/dt`` (latent units per
        time unit), ``speed(axis0, axis1)`` = ``||dz/dt||`` over all units; coordinates ``axis0``,
        ``axis1``, ``component``; the same layout as :func:`dsident.analysis.flow.flow_field`.
    """
    dyn = _vector_field_dynamics(model)
    if not isinstance(n_grid, int) or n_grid < 2:
        raise ValueError(f"`n_grid` must be an integer >= 2; got {n_grid!r}.")
    grid, g0, g1, dims = slice_grid(dyn.latent_dim, dims, limits, n_grid, anchor)
    with torch.no_grad():
        zz = torch.as_tensor(grid.reshape(-1, dyn.latent_dim))
        vel = dyn.vector_field(zz, _inputs(dyn, u, zz.shape[0])).numpy().reshape(grid.shape)
    return slice_dataset(vel, g0, g1, dims, quantity="vector field dz/dt")
