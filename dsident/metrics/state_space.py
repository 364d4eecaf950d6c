"""State-space divergence D_stsp: how well generated orbits fill the true attractor.

D_stsp is the Kullback–Leibler divergence between the distributions, over state space (not
over time), of the true and of the generated observations (Koppe et al. 2019; Mikhaeil et al.
2022; Hess et al. 2023). Two estimators, see ``SPEC-metrics.md`` §1:

- **binned** (default for fewer than 6 channels): histograms on a grid set by the true data,
  ``[min − 0.1·std, max + 0.1·std]`` per channel with ``n_bins`` bins, Laplace smoothing
  ``alpha``. Only occupied bins are stored; the bins empty in both histograms all carry the same
  smoothed probabilities, so together they contribute one closed-form term. No dense
  ``n_bins**N`` array is ever built.
- **Gaussian mixture** (default for 6 or more channels): an isotropic Gaussian of variance
  ``gmm_scaling`` on each of the first ``gmm_points`` points of each series, and a Monte-Carlo
  estimate of the KL with ``mc_samples`` draws (Hershey & Olsen 2007), computed in the log
  domain and in chunks so that memory stays bounded.

Shape legend: ``S`` samples (time points pooled over trials), ``N`` channels, ``U`` bins
occupied by either series, ``C`` mixture components.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from scipy.special import logsumexp

from .._checks import check_bool

__all__ = ["state_space_divergence", "state_space_coverage"]

Direction = Literal["forward", "reverse", "symmetric"]
_DIRECTIONS = ("forward", "reverse", "symmetric")
_METHODS = ("auto", "bins", "gmm")
#: bytes of one pairwise-distance block in the GMM estimator (bounds its memory)
_GMM_BLOCK_BYTES = 32 * 2**20


def state_space_divergence(true: Any, generated: Any, *, method: str = "auto", n_bins: int = 30,
                           smoothing_alpha: float = 1e-5, direction: Direction = "forward",
                           gmm_scaling: float = 1.0, gmm_points: int = 10_000, mc_samples: int = 1_000,
                           seed: int | np.random.Generator | None = 0) -> float:
    """State-space divergence D_stsp = KL(p_true ‖ p_generated) between two sets of orbits.

    Parameters
    ----------
    true, generated : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        Observations (an ``xarray.Dataset`` uses its ``x`` variable). Time points of all trials
        are pooled; the order of the samples does not matter. Rows with any non-finite entry
        (NaN = missing sample) are left out. The two series may differ in length but must have
        the same channels.
    method : {"auto", "bins", "gmm"}
        "auto" takes "bins" for fewer than 6 channels and "gmm" otherwise.
    n_bins : int
        Bins per channel of the binned estimator.
    smoothing_alpha : float
        Laplace smoothing of the binned estimator:
        ``p = (count + alpha) / (sum(count) + alpha * n_bins**N)``.
    direction : {"forward", "reverse", "symmetric"}
        "forward" is KL(true ‖ generated) (the default of recent papers), "reverse" is
        KL(generated ‖ true), "symmetric" their mean. The binning grid always comes from the
        true data.
    gmm_scaling : float
        Variance of the isotropic Gaussian placed at each point (GMM estimator).
    gmm_points : int
        Number of leading points of each series used as mixture components (GMM estimator).
    mc_samples : int
        Monte-Carlo samples drawn from the first distribution of the KL (GMM estimator).
    seed : int or numpy Generator
        Randomness of the Monte-Carlo samples (GMM estimator only).

    Returns
    -------
    float
        The divergence in nats (>= 0 up to Monte-Carlo error). NaN when the generated series
        has no point on the true data's grid (binned) or no finite point at all.

    Raises
    ------
    ValueError
        Unknown ``method``/``direction``, mismatched channel counts, a true series without
        finite rows, or invalid numeric settings.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(20_000, 2))
    >>> round(state_space_divergence(x, x), 12)
    0.0
    """
    n_bins, alpha, gmm_scaling, gmm_points, mc_samples = check_settings(
        method, n_bins, smoothing_alpha, direction, gmm_scaling, gmm_points, mc_samples)
    if not (seed is None or isinstance(seed, np.random.Generator)
            or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0)):
        # numpy refused it only when the GMM estimator ran, in its own words
        raise ValueError(f"`seed` must be a non-negative integer, a numpy Generator or None; got seed={seed!r}.")
    xt = _finite_rows(_no_inf(as_trials(true, "true"), "true"))
    xg = _finite_rows(_no_inf(as_trials(generated, "generated"), "generated"))
    _check_pair(xt, xg, "D_stsp")
    if method == "auto":
        method = "bins" if xt.shape[1] < 6 else "gmm"
    if method == "bins":
        return binned_divergence(xt, xg, n_bins=n_bins, alpha=alpha, direction=direction)
    return gmm_divergence(xt, xg, scaling=gmm_scaling, n_points=gmm_points, mc_samples=mc_samples,
                          direction=direction, rng=np.random.default_rng(seed))


def state_space_coverage(true: Any, generated: Any, *, n_bins: int = 30,
                         per_sample: bool = False) -> float | np.ndarray:
    """Fraction of the true samples whose bin the generated series visits at least once.

    The binned D_stsp (:func:`state_space_divergence`, ``method="bins"``) is dominated by the
    true data's mass in bins the generated series never enters: such a bin gets only the
    smoothing mass ``alpha / (S_gen + alpha * n_bins**N)`` and costs ``p log(p / q)`` with
    ``log(p / q)`` ≈ 10-14 nats at the defaults (``alpha = 1e-5``, 10 000 samples). So
    ``D_stsp ≈ 12 · (1 − coverage)`` for series of that length: the coverage says whether a
    D_stsp comes from regions the model never reaches (a too thin or shifted orbit) or from
    mass spread wrongly over the regions it does reach.

    Parameters
    ----------
    true, generated : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        As for :func:`state_space_divergence`: trials are pooled, rows with a non-finite entry
        (missing samples) are left out, and the grid comes from the true data.
    n_bins : int
        Bins per channel, as in the binned D_stsp (any number of channels).
    per_sample : bool
        Return, instead of the fraction, which true samples are covered: where in time a
        model misses the data.

    Returns
    -------
    float
        In [0, 1]: 1 when every true sample's bin holds a generated sample, 0 when none does
        (also when the generated series has no finite row).
    ndarray of shape (time,) or (trial, time), only with ``per_sample=True``
        1.0 for a covered true sample, 0.0 for an uncovered one, NaN for a missing one, laid
        out like ``true`` (a Dataset or 3-d array gives (trial, time)).

    Raises
    ------
    ValueError
        Mismatched channel counts, a true series without finite rows, or a bad ``n_bins``.

    Examples
    --------
    >>> x = np.arange(10.0)[:, None]
    >>> state_space_coverage(x, x[:5])
    0.5
    """
    n_bins = _positive_int(n_bins, "n_bins")
    check_bool("per_sample", per_sample)     # "no" read as True gave the per-sample array
    trials = _no_inf(as_trials(true, "true"), "true")
    flat = trials.reshape(-1, trials.shape[-1])
    finite = np.all(np.isfinite(flat), axis=1)
    xt = flat[finite]
    xg = _finite_rows(_no_inf(as_trials(generated, "generated"), "generated"))
    _check_pair(xt, xg, "the coverage")
    lo, hi = bin_edges(xt)
    # every true sample is on its own grid, so codes_t has one entry per row of xt
    codes_t = _bin_codes(np.ascontiguousarray(xt.T), lo, hi, n_bins)
    codes_g = _bin_codes(np.ascontiguousarray(xg.T), lo, hi, n_bins)
    _, inverse = np.unique(np.concatenate([codes_t, codes_g]), return_inverse=True,
                           axis=0 if codes_t.ndim == 2 else None)
    inverse = inverse.ravel()
    visited = np.zeros(int(inverse.max()) + 1, dtype=bool)
    visited[inverse[codes_t.shape[0]:]] = True
    covered = visited[inverse[: codes_t.shape[0]]]
    if not per_sample:
        return float(covered.mean())
    out = np.full(flat.shape[0], np.nan)
    out[finite] = covered
    shaped = out.reshape(trials.shape[:2])
    several = hasattr(true, "data_vars") or isinstance(true, (list, tuple)) or np.ndim(true) == 3
    return shaped if several else shaped[0]


# ---------------------------------------------------------------------------------------------
# binned estimator
# ---------------------------------------------------------------------------------------------
def binned_divergence(xt: np.ndarray, xg: np.ndarray, *, n_bins: int, alpha: float,
                      direction: Direction = "forward") -> float:
    """Binned KL on the true data's grid, over occupied bins only.

    Parameters
    ----------
    xt, xg : ndarray of shape (S, N)
        Finite rows of the true and generated series.
    n_bins, alpha, direction
        See :func:`state_space_divergence`.
    """
    # channel-major copies: every reduction and comparison below runs over contiguous memory
    xt_c, xg_c = np.ascontiguousarray(xt.T), np.ascontiguousarray(xg.T)
    lo, hi = bin_edges(xt_c.T)
    counts_t, counts_g, n_empty = _sparse_histograms(xt_c, xg_c, lo, hi, n_bins)
    if counts_g.sum() == 0:
        return float("nan")
    n_cells = float(n_bins) ** xt.shape[1]
    values = []
    if direction in ("forward", "symmetric"):
        values.append(_smoothed_kl(counts_t, counts_g, n_empty, n_cells, alpha))
    if direction in ("reverse", "symmetric"):
        values.append(_smoothed_kl(counts_g, counts_t, n_empty, n_cells, alpha))
    return float(np.mean(values))


def bin_edges(xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid range per channel from the true data (S, N): ``[min − 0.1·std, max + 0.1·std]``.

    A constant channel (max = min) gets the range ``[value − 0.5, value + 0.5]`` so that its one
    value falls inside a bin. (Its std need not be 0: a constant 0.1 has a round-off std of 1e-17,
    which made a grid of zero width.)
    """
    mn, mx, sd = xt.min(axis=0), xt.max(axis=0), xt.std(axis=0)
    pad = np.where(mx > mn, 0.1 * sd, 0.5)
    return mn - pad, mx + pad


#: up to this many cells a dense count vector is cheaper than sorting (8 MB of int64)
_DENSE_COUNT_CELLS = 2**20


def _sparse_histograms(xt_c: np.ndarray, xg_c: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                       n_bins: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Counts of both series over the bins occupied by either (U,), and the number of other bins.

    ``xt_c``, ``xg_c`` are channel-major, shape (N, S).
    """
    n_dim = xt_c.shape[0]
    codes_t = _bin_codes(xt_c, lo, hi, n_bins)
    codes_g = _bin_codes(xg_c, lo, hi, n_bins)
    n_cells = float(n_bins) ** n_dim
    if codes_t.ndim == 1 and n_cells <= _DENSE_COUNT_CELLS:
        # few cells (e.g. 30^3): count into a short vector, then keep the occupied entries
        ct = np.bincount(codes_t, minlength=int(n_cells))
        cg = np.bincount(codes_g, minlength=int(n_cells))
        occupied = (ct > 0) | (cg > 0)
        return ct[occupied].astype(float), cg[occupied].astype(float), n_cells - float(occupied.sum())
    if codes_t.ndim == 1:
        keys_t, ct = _sorted_counts(codes_t)
        keys_g, cg = _sorted_counts(codes_g)
        union = _sorted_counts(np.concatenate([keys_t, keys_g]))[0]
        counts_t = np.zeros(union.size)
        counts_g = np.zeros(union.size)
        counts_t[np.searchsorted(union, keys_t)] = ct
        counts_g[np.searchsorted(union, keys_g)] = cg
        return counts_t, counts_g, n_cells - union.size
    # more cells than int64 codes can address: unique rows of bin indices
    both = np.concatenate([codes_t, codes_g])
    _, inverse = np.unique(both, return_inverse=True, axis=0)
    inverse = inverse.ravel()
    n_occ = int(inverse.max()) + 1 if inverse.size else 0
    counts_t = np.bincount(inverse[: codes_t.shape[0]], minlength=n_occ).astype(float)
    counts_g = np.bincount(inverse[codes_t.shape[0]:], minlength=n_occ).astype(float)
    return counts_t, counts_g, n_cells - n_occ


def _sorted_counts(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values (sorted) and their counts, by one sort (faster than np.unique here)."""
    if codes.size == 0:
        return codes, np.zeros(0, dtype=np.int64)
    srt = np.sort(codes)
    first = np.flatnonzero(np.concatenate([[True], srt[1:] != srt[:-1]]))
    return srt[first], np.diff(np.append(first, srt.size))


def _bin_codes(x_c: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_bins: int) -> np.ndarray:
    """One integer per in-grid sample (row-major bin index); samples outside the grid are dropped.

    ``x_c`` is channel-major (N, S). Returns ndarray of shape (S_in,) int64, or (S_in, N) bin
    indices when ``n_bins**N`` does not fit in int64.
    """
    n_dim, n_samples = x_c.shape
    idx = np.empty((n_dim, n_samples), dtype=np.int64)
    inside = np.ones(n_samples, dtype=bool)
    for d in range(n_dim):
        scaled = (x_c[d] - lo[d]) * (n_bins / (hi[d] - lo[d]))
        inside &= (scaled >= 0) & (scaled < n_bins)
        with np.errstate(invalid="ignore"):    # far-off values overflow the cast; they are dropped
            idx[d] = scaled.astype(np.int64)  # truncation == floor for the kept, non-negative values
    idx = idx[:, inside]
    if n_dim * np.log2(n_bins) >= 62:
        return np.ascontiguousarray(idx.T)
    codes = idx[0].copy()
    for d in range(1, n_dim):
        codes *= n_bins
        codes += idx[d]
    return codes


def _smoothed_kl(counts_p: np.ndarray, counts_q: np.ndarray, n_empty: float, n_cells: float,
                 alpha: float) -> float:
    """KL(p ‖ q) of Laplace-smoothed histograms: occupied bins explicitly, empty ones in closed form."""
    norm_p = counts_p.sum() + alpha * n_cells
    norm_q = counts_q.sum() + alpha * n_cells
    p = (counts_p + alpha) / norm_p
    q = (counts_q + alpha) / norm_q
    kl = float(np.sum(p * (np.log(p) - np.log(q))))
    if n_empty > 0:
        p0, q0 = alpha / norm_p, alpha / norm_q
        kl += n_empty * p0 * (np.log(p0) - np.log(q0))
    return kl


# ---------------------------------------------------------------------------------------------
# Gaussian-mixture Monte-Carlo estimator
# ---------------------------------------------------------------------------------------------
def gmm_divergence(xt: np.ndarray, xg: np.ndarray, *, scaling: float, n_points: int, mc_samples: int,
                   direction: Direction, rng: np.random.Generator) -> float:
    """Monte-Carlo KL between isotropic Gaussian mixtures centred on the two series.

    Parameters
    ----------
    xt, xg : ndarray of shape (S, N)
        Finite rows of the true and generated series; the first ``n_points`` of each are the
        mixture centres.
    scaling, n_points, mc_samples, direction, rng
        See :func:`state_space_divergence`.
    """
    if xg.shape[0] == 0:
        return float("nan")
    # the KL does not change under a common shift; centring on the true centres keeps the expanded
    # squared distances |x|² − 2x·c + |c|² free of cancellation for data far from the origin
    shift = xt[:n_points].mean(axis=0)
    ct, cg = xt[:n_points] - shift, xg[:n_points] - shift
    values = []
    if direction in ("forward", "symmetric"):
        values.append(_mc_kl(ct, cg, scaling, mc_samples, rng))
    if direction in ("reverse", "symmetric"):
        values.append(_mc_kl(cg, ct, scaling, mc_samples, rng))
    return float(np.mean(values))


def _mc_kl(cp: np.ndarray, cq: np.ndarray, scaling: float, n_samples: int, rng: np.random.Generator) -> float:
    """E_{x~p}[log p(x) − log q(x)] for mixtures with centres cp (C_p, N), cq (C_q, N)."""
    pick = rng.integers(0, cp.shape[0], size=n_samples)
    samples = cp[pick] + np.sqrt(scaling) * rng.standard_normal((n_samples, cp.shape[1]))
    return float(np.mean(_mixture_log_density(samples, cp, scaling) - _mixture_log_density(samples, cq, scaling)))


def _mixture_log_density(x: np.ndarray, centres: np.ndarray, scaling: float) -> np.ndarray:
    """log of (1/C) Σ_c N(x; centre_c, scaling·I) for each row of x (S, N) -> (S,), in blocks."""
    n_dim = x.shape[1]
    c_sq = np.einsum("ij,ij->i", centres, centres)
    rows = max(1, _GMM_BLOCK_BYTES // (8 * centres.shape[0]))
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], rows):
        block = x[start:start + rows]
        sq = np.einsum("ij,ij->i", block, block)[:, None] - 2.0 * block @ centres.T + c_sq[None, :]
        np.maximum(sq, 0.0, out=sq)  # round-off can make tiny distances negative
        out[start:start + rows] = logsumexp(-0.5 / scaling * sq, axis=1)
    return out - np.log(centres.shape[0]) - 0.5 * n_dim * np.log(2.0 * np.pi * scaling)


# ---------------------------------------------------------------------------------------------
# input handling shared by the metrics
# ---------------------------------------------------------------------------------------------
def as_trials(data: Any, argname: str) -> np.ndarray:
    """Observations as a float64 array of shape (trial, time, channel).

    Accepts an ``xarray.Dataset`` (its ``x``), a ``DataArray`` (dims named ``trial``/``time``/
    ``channel`` are used by name), a torch tensor, an array of shape (time,), (time, channel) or
    (trial, time, channel), or a list/tuple of trials, each (time,) or (time, channel), as
    :func:`dsident.as_dataset` reads one: trials of unequal length are padded with NaN (missing).
    """
    if hasattr(data, "data_vars"):
        if "x" not in data:
            raise ValueError(f"`{argname}` Dataset must contain a variable 'x'; got {list(data.data_vars)}.")
        data = data["x"]
    if isinstance(data, (list, tuple)) and not all(np.ndim(item) == 0 for item in data):
        return _padded_trials(data, argname)
    if hasattr(data, "dims") and hasattr(data, "values"):
        from ..data.container import _canonical_order

        data = _canonical_order(data).values
    elif hasattr(data, "detach"):
        data = data.detach().cpu().numpy()
    try:
        arr = np.asarray(data, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"`{argname}` must be numeric array-like or a Dataset with 'x'; got "
                        f"{type(data).__name__}.") from None
    if arr.ndim == 1:
        return arr[None, :, None]
    if arr.ndim == 2:
        return arr[None]
    if arr.ndim == 3:
        return arr
    raise ValueError(f"`{argname}` must have shape (time,), (time, channel) or (trial, time, channel); "
                     f"got shape {arr.shape}.")


def _padded_trials(data: list | tuple, argname: str) -> np.ndarray:
    """A list of trials, each (time,) or (time, channel), as (trial, time, channel), NaN-padded."""
    from ..data.container import _as_trials

    trials = _as_trials(list(data), argname)
    n_channels = {t.shape[1] for t in trials}
    if len(n_channels) > 1:
        raise ValueError(f"all trials of `{argname}` must have the same number of channels; got "
                         f"{[t.shape[1] for t in trials]}.")
    out = np.full((len(trials), max(t.shape[0] for t in trials), trials[0].shape[1]), np.nan)
    for i, t in enumerate(trials):
        out[i, : t.shape[0]] = t
    return out


def _check_pair(xt: np.ndarray, xg: np.ndarray, what: str) -> None:
    """Refuse finite rows (S, N) of true and generated data that ``what`` cannot compare."""
    if xt.shape[1] != xg.shape[1]:
        raise ValueError(f"`true` and `generated` must have the same number of channels; got "
                         f"{xt.shape[1]} and {xg.shape[1]}.")
    if xt.shape[0] == 0:
        raise ValueError(f"`true` has no row without missing values; {what} needs observed samples.")


def _no_inf(x: np.ndarray, argname: str) -> np.ndarray:
    """``x`` unchanged, or a ValueError naming ``argname`` where it holds ±inf: NaN marks a missing
    sample, but an inf is an overflowed (diverged) value, and leaving its rows out scored the rest
    of a run as if it had stayed on the attractor."""
    bad = np.isinf(x)
    if bad.any():
        trial, time, channel = (int(i[0]) for i in np.nonzero(bad))
        raise ValueError(f"`{argname}` contains {int(bad.sum())} inf value(s), the first in trial {trial} at time step "
                         f"{time}, channel {channel}; a diverged run has no state-space distribution (evaluate reports "
                         "it as diverged). Use NaN to mark missing samples.")
    return x


def _finite_rows(x: np.ndarray) -> np.ndarray:
    """Pool trials and keep the rows without a missing (non-finite) entry: (S, N)."""
    flat = x.reshape(-1, x.shape[-1])
    return flat[np.all(np.isfinite(flat), axis=1)]


def check_direction(direction: Any) -> None:
    """Refuse a ``direction`` that is not one of "forward", "reverse", "symmetric"."""
    if not isinstance(direction, str) or direction not in _DIRECTIONS:
        raise ValueError(f"`direction` must be one of {_DIRECTIONS}; got {direction!r}.")


def binned_settings(n_bins: Any, smoothing_alpha: Any) -> tuple[int, float]:
    """The binned estimator's ``n_bins`` and ``smoothing_alpha``, checked: (int, float)."""
    return _positive_int(n_bins, "n_bins"), positive_number(smoothing_alpha, "smoothing_alpha", "a positive number")


def check_settings(method: Any, n_bins: Any, smoothing_alpha: Any, direction: Any, gmm_scaling: Any,
                   gmm_points: Any, mc_samples: Any) -> tuple[int, float, float, int, int]:
    """Every D_stsp setting checked, whichever estimator runs (an invalid one is never passed over):
    ``(n_bins, smoothing_alpha, gmm_scaling, gmm_points, mc_samples)``."""
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}; got {method!r}.")
    check_direction(direction)
    n_bins, alpha = binned_settings(n_bins, smoothing_alpha)
    return (n_bins, alpha, positive_number(gmm_scaling, "gmm_scaling", "a positive variance"),
            _positive_int(gmm_points, "gmm_points"), _positive_int(mc_samples, "mc_samples"))


def positive_number(value: Any, name: str, what: str = "a positive finite number") -> float:
    """``value`` as a positive finite float, or a ValueError naming ``name`` and the value."""
    try:
        v = float(value) if not isinstance(value, (str, bool, np.bool_)) else float("nan")
    except (TypeError, ValueError):
        v = float("nan")
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"`{name}` must be {what}; got {value!r}.")
    return v


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return int(value)
