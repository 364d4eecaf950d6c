"""Jacobian spectra at fixed points: the |lambda|_max distribution and min ||lambda| - 1| (Fig. 4).

The rPLRNN paper (seed 004, section 4.5) shows that the manifold-attractor regularizer moves
the Jacobian eigenvalues at the fixed points of trained networks onto the unit circle: the
spectral radius ``|lambda|_max`` clusters at 1 and, per system, the eigenvalue closest to the
unit circle is very close to it. These functions compute both statistics over one or many
fitted models so that such comparisons (regularized vs. not) are one call.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import xarray as xr

from .._version import __version__
from .fixed_points import FixedPoints, fixed_points

__all__ = ["jacobian_spectrum_statistics", "eigenvalue_summary"]


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
