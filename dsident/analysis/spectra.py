"""Jacobian spectra at fixed points: the |lambda|_max distribution and min ||lambda| - 1| (Fig. 4).

The rPLRNN paper (seed 004, section 4.5) shows that the manifold-attractor regularizer moves
the Jacobian eigenvalues at the fixed points of trained networks onto the unit circle: the
spectral radius ``|lambda|_max`` clusters at 1 and, per system, the eigenvalue closest to the
unit circle is very close to it. These functions compute both statistics over one or many
fitted models so that such comparisons (regularized vs. not) are one call.
"""
from __future__ import annotations

from typing import Any, Iterable

import copy

import numpy as np
import torch
import xarray as xr

from .._version import __version__
from ._resolve import resolve_dynamics
from .fixed_points import FixedPoints, fixed_points

__all__ = ["jacobian_spectrum_statistics", "eigenvalue_summary", "jacobian_product_norms"]


def eigenvalue_summary(eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-object spectral radius and distance of the nearest eigenvalue to the unit circle.

    Parameters
    ----------
    eigenvalues : complex ndarray of shape (n, M)

    Returns
    -------
    max_abs : ndarray of shape (n,)
        ``max_i |lambda_i|``.
    min_deviation : ndarray of shape (n,)
        ``min_i ||lambda_i| - 1|``.
    """
    modulus = np.abs(np.asarray(eigenvalues))
    if modulus.ndim != 2:
        raise ValueError(f"`eigenvalues` must have shape (n, M); got {modulus.shape}.")
    if modulus.shape[0] == 0:
        return np.zeros(0), np.zeros(0)
    return modulus.max(axis=1), np.abs(modulus - 1.0).min(axis=1)


def jacobian_spectrum_statistics(models: Any | Iterable[Any], *, band: float = 0.055,
                                 bins: np.ndarray | int = 40, value_range: tuple[float, float] = (0.0, 2.0),
                                 **fixed_point_options: Any) -> xr.Dataset:
    """The Fig. 4 statistics of fixed-point Jacobian spectra over one or many models.

    Parameters
    ----------
    models : model, FixedPoints, or a list of them
        Each model (fitted estimator, StateSpaceModel, LatentDynamics, PLRNNParams) is passed
        to :func:`~dsident.analysis.fixed_points`; a ``FixedPoints`` is used as it is.
    band : float, default 0.055
        Half-width of the band around 1 counted in ``fraction_near_one`` (the paper's
        reference values use 0.055).
    bins : int or ndarray
        Histogram bins of ``|lambda|_max`` over ``value_range``.
    **fixed_point_options
        Passed to :func:`~dsident.analysis.fixed_points` (e.g. ``method``, ``seed``).

    Returns
    -------
    xarray.Dataset
        ``max_abs_eigenvalue(point)``, ``min_deviation(point)``, ``model(point)`` (index of the
        model the point belongs to), ``histogram(bin)`` with ``bin_edges(edge)``; attrs
        ``n_points``, ``fraction_near_one``, ``mean_min_deviation``, ``std_min_deviation``,
        ``median_max_abs_eigenvalue``, ``band``, ``package_version``.
    """
    if isinstance(band, bool) or not isinstance(band, (int, float)) or not band > 0:
        raise ValueError(f"`band` must be a positive number; got band={band!r}.")
    try:        # checked before the fixed points are searched, which may take minutes
        np.histogram(np.zeros(0), bins=bins, range=value_range)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`bins`={bins!r} with `value_range`={value_range!r} do not define a histogram: `bins` must "
                         "be a positive integer or increasing edges, `value_range` a pair (lo, hi) of finite numbers "
                         f"with lo < hi ({err}).") from None
    items = list(models) if isinstance(models, (list, tuple)) else [models]
    max_abs, min_dev, owner = [], [], []
    for index, item in enumerate(items):
        result = item if isinstance(item, FixedPoints) else fixed_points(item, **fixed_point_options)
        a, d = eigenvalue_summary(result.eigenvalues)
        max_abs.append(a)
        min_dev.append(d)
        owner.append(np.full(len(a), index))
    max_abs_all = np.concatenate(max_abs) if max_abs else np.zeros(0)
    min_dev_all = np.concatenate(min_dev) if min_dev else np.zeros(0)
    counts, edges = np.histogram(max_abs_all, bins=bins, range=value_range)
    n = len(max_abs_all)
    nan = float("nan")
    return xr.Dataset(
        {"max_abs_eigenvalue": (("point",), max_abs_all),
         "min_deviation": (("point",), min_dev_all),
         "model": (("point",), np.concatenate(owner) if owner else np.zeros(0, int)),
         "histogram": (("bin",), counts),
         "bin_edges": (("edge",), edges)},
        attrs={"n_points": int(n),
               "fraction_near_one": float(np.mean(np.abs(max_abs_all - 1.0) <= band)) if n else nan,
               "mean_min_deviation": float(min_dev_all.mean()) if n else nan,
               "std_min_deviation": float(min_dev_all.std(ddof=1)) if n > 1 else nan,
               "median_max_abs_eigenvalue": float(np.median(max_abs_all)) if n else nan,
               "band": float(band), "n_models": len(items), "package_version": __version__},
    )


def jacobian_product_norms(model: Any, n_steps: int, *, z0: np.ndarray | None = None, u: np.ndarray | None = None,
                           dt: float | None = None) -> xr.Dataset:
    """Spectral norms of ``dz_t / dz_0 = J(z_{t-1}) ... J(z_0)`` along free runs (Theorems 1-2).

    For the rPLRNN, Theorem 2 of seed 004 bounds these norms below by 1 (the regularized units
    carry the gradient over any lag), while a contracting vanilla network lets them vanish:
    the gradient diagnostic behind long-range learning.

    Parameters
    ----------
    model : fitted estimator, StateSpaceModel or LatentDynamics
    n_steps : int
        Number of steps (lags 1 .. n_steps).
    z0 : ndarray of shape (trial, M), optional
        Initial states (default: one trial from zeros).
    u : ndarray of shape (trial, n_steps + 1, K), optional
        Inputs; ``u[:, t]`` drives the step into time t (index 0 unused).
    dt : float, optional
        Passed to ``step`` and ``jacobian`` (a StateSpaceModel's ``dt`` by default).

    Returns
    -------
    xarray.Dataset
        ``norm(trial, lag)``, the 2-norm of the Jacobian product over ``lag`` steps, and
        ``z(trial, lag, latent)`` the states reached.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"`n_steps` must be a positive integer; got n_steps={n_steps!r}.")
    dyn, step_dt = resolve_dynamics(model, dt)
    m = dyn.latent_dim
    work = copy.deepcopy(dyn).double()
    z = torch.zeros(1, m, dtype=torch.float64) if z0 is None else torch.as_tensor(
        np.atleast_2d(np.asarray(z0, dtype=float)))
    if z.shape[1] != m:
        raise ValueError(f"`z0` must have shape (trial, {m}); got {tuple(z.shape)}.")
    uu = None if u is None else torch.as_tensor(np.asarray(u, dtype=float))
    if uu is not None and (uu.ndim != 3 or uu.shape[0] != z.shape[0] or uu.shape[1] < n_steps + 1):
        raise ValueError(f"`u` must have shape ({z.shape[0]}, >= {n_steps + 1}, input); got {tuple(uu.shape)}.")
    prod = torch.eye(m, dtype=torch.float64).expand(z.shape[0], m, m)
    norms, states = [], []
    with torch.no_grad():
        for t in range(1, n_steps + 1):
            ut = None if uu is None else uu[:, t]
            prod = work.jacobian(z, ut, step_dt) @ prod
            z = work.step(z, ut, step_dt)
            norms.append(torch.linalg.matrix_norm(prod, ord=2).numpy())
            states.append(z.numpy().copy())
    return xr.Dataset({"norm": (("trial", "lag"), np.stack(norms, axis=1)),
                       "z": (("trial", "lag", "latent"), np.stack(states, axis=1))},
                      coords={"lag": np.arange(1, n_steps + 1)}, attrs={"package_version": __version__})
