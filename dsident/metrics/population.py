"""Neural-population metrics of the Neural Latents Benchmark (NLB'21).

All functions take spike counts and predicted rates as arrays of shape
``(trial, time, neuron)`` (numpy, ``xarray.DataArray``, or a canonical dataset whose ``x`` holds
the counts). Rates are **expected counts per bin** (not per second), as in NLB submissions.
NaN counts are missing bins: they are dropped from every sum, never read as zero spikes.

- :func:`poisson_nll` — summed Poisson negative log-likelihood ``Σ (r − n log r + log n!)``;
- :func:`bits_per_spike` — ``(NLL_null − NLL_model) / (n_spikes · ln 2)`` with the null model
  predicting each neuron's mean count per bin over the evaluated bins (0 for the null model
  itself, positive when the prediction beats it);
- :func:`co_smoothing_bps` — bits per spike on held-out neurons (NLB "co-bps");
- :func:`forward_prediction_bps` — bits per spike on a forward window (NLB "fp-bps");
- :func:`psth` and :func:`psth_r2` — per-condition trial averages and their R² against a
  reference PSTH (NLB "psth R²");
- :func:`behavior_r2` — R² of behaviour decoded from rates by ridge regression with the
  regularisation chosen by cross-validation on the training trials (NLB "vel R²");
- :func:`chop_trials`, :func:`split_forward` and :func:`held_out_mask` — the data splits the
  protocol needs (one long recording → trials; observed window | forward window; held-out
  neurons masked).

Reference: Pei et al. (2021), "Neural Latents Benchmark '21", NeurIPS Datasets and Benchmarks;
definitions as in the MIT-licensed ``nlb_tools`` evaluation (re-implemented here, not copied).
"""
from __future__ import annotations

import json
import math
import warnings
from typing import Any, Sequence

import numpy as np
import xarray as xr
from scipy.special import gammaln, xlogy

__all__ = ["poisson_nll", "bits_per_spike", "co_smoothing_bps", "forward_prediction_bps", "psth", "psth_r2",
           "behavior_r2", "chop_trials", "split_forward", "held_out_mask", "MIN_RATE"]

#: rates below this (expected counts per bin) are raised to it with a warning, as in NLB
MIN_RATE = 1e-9


def poisson_nll(rates: Any, spikes: Any) -> float:
    """Summed Poisson negative log-likelihood of counts under predicted rates.

    Parameters
    ----------
    rates : array-like of shape (trial, time, neuron)
        Expected counts per bin, non-negative where ``spikes`` is observed.
    spikes : array-like of the same shape
        Spike counts per bin; NaN = missing (dropped).

    Returns
    -------
    float
        ``Σ_observed (r − n log r + log n!)`` in nats.
    """
    r, n = _pair(rates, spikes)
    obs = np.isfinite(n)
    return _nll(r[obs], n[obs])


def bits_per_spike(rates: Any, spikes: Any) -> float:
    r"""Bits per spike of a Poisson rate prediction against the mean-rate null model.

    .. math:: \mathrm{bps} = \frac{\mathrm{NLL}_0 - \mathrm{NLL}(r)}{n_\mathrm{spikes}\,\ln 2},
              \qquad r^{(0)}_{n} = \operatorname{mean}_{\text{trial, time}}\, x_{\cdot,\cdot,n}

    The null model predicts, for each neuron, its mean count per bin over the evaluated
    (observed) bins. A perfect-rate prediction scores the largest values; the null model
    itself scores exactly 0; worse-than-null predictions are negative.

    Parameters
    ----------
    rates : array-like of shape (trial, time, neuron)
        Predicted expected counts per bin.
    spikes : array-like of the same shape
        Observed counts; NaN bins are dropped.

    Returns
    -------
    float
        Bits per spike.

    Raises
    ------
    ValueError
        Shapes differ; rates negative or NaN at an observed bin; no spikes at all in the
        evaluated bins (the score is undefined); negative or non-integer counts.
    """
    r, n = _pair(rates, spikes)
    obs = np.isfinite(n)
    n_spikes = float(n[obs].sum())
    if n_spikes <= 0:
        raise ValueError("`spikes` has no spikes in the observed bins; bits per spike is undefined.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)             # all-NaN neurons give NaN means
        null_rate = np.nanmean(n, axis=tuple(range(n.ndim - 1)))    # (neuron,)
    counts = n[obs]
    null = np.broadcast_to(null_rate, n.shape)[obs]
    model = _checked_rates(r[obs])
    # NLL_null - NLL_model; the log n! terms cancel
    gain = np.sum(null - model) - np.sum(xlogy(counts, null)) + np.sum(xlogy(counts, model))
    return float(gain / (n_spikes * math.log(2.0)))


def co_smoothing_bps(rates: Any, spikes: Any, held_out: Sequence[int]) -> float:
    """Co-smoothing bits per spike: :func:`bits_per_spike` on the held-out neurons.

    Parameters
    ----------
    rates : array-like of shape (trial, time, neuron) or (trial, time, held_out)
        Predicted rates of all neurons, or of the held-out neurons only (in ``held_out`` order).
        In the NLB protocol these are inferred from the held-in neurons alone.
    spikes : array-like of shape (trial, time, neuron)
        Observed counts of all neurons (or of the held-out neurons only).
    held_out : sequence of int
        Indices of the held-out neurons along the last axis of the full arrays.

    Returns
    -------
    float
        co-bps.
    """
    idx = _indices(held_out, "held_out")
    r, n = _values(rates, "rates"), _values(spikes, "spikes")
    # an array with exactly len(held_out) neurons is already the held-out subset (when every
    # neuron is held out, both readings give the same score)
    r = r if r.shape[-1] == len(idx) else _take(r, idx, "rates")
    n = n if n.shape[-1] == len(idx) else _take(n, idx, "spikes")
    return bits_per_spike(r, n)


def forward_prediction_bps(rates: Any, spikes: Any) -> float:
    """Forward-prediction bits per spike: :func:`bits_per_spike` on the forward window.

    Parameters
    ----------
    rates : array-like of shape (trial, forward_time, neuron)
        Rates predicted for the bins following each trial's observed window, from the
        observed window only (held-in and held-out neurons together).
    spikes : array-like of the same shape
        The counts recorded in those bins (see :func:`split_forward`).

    Returns
    -------
    float
        fp-bps.
    """
    return bits_per_spike(rates, spikes)


def psth(data: Any, conditions: Any, *, smooth_sd: float = 0.0) -> xr.DataArray:
    """Per-condition trial average (peri-stimulus time histogram), optionally smoothed.

    Parameters
    ----------
    data : array-like of shape (trial, time, neuron)
        Counts or rates; NaN bins are left out of the average.
    conditions : array-like of shape (trial,)
        Condition label of each trial.
    smooth_sd : float, default 0
        Standard deviation (in bins) of a Gaussian kernel applied along time after averaging
        (NLB smooths the reference PSTH; 0 = none). NaN bins stay NaN.

    Returns
    -------
    xarray.DataArray of shape (condition, time, neuron)
        Mean over the trials of each condition; conditions in sorted order.
    """
    if not isinstance(smooth_sd, (int, float, np.integer, np.floating)) or not np.isfinite(smooth_sd) or smooth_sd < 0:
        raise ValueError(f"`smooth_sd` must be a finite number >= 0 (bins); got smooth_sd={smooth_sd!r}.")
    x = _values(data, "data")
    if x.ndim != 3:
        raise ValueError(f"`data` must have shape (trial, time, neuron); got {x.shape}.")
    labels = _labels(conditions, x.shape[0])
    keys = np.unique(labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)             # bins NaN in every trial stay NaN
        mean = np.stack([np.nanmean(x[labels == k], axis=0) for k in keys])
    if smooth_sd > 0:
        mean = _smooth_time(mean, smooth_sd)
    return xr.DataArray(mean, dims=("condition", "time", "neuron"), coords={"condition": keys},
                        attrs={"smooth_sd": float(smooth_sd)})


def psth_r2(rates: Any, conditions: Any, reference_psth: Any) -> float:
    """R² of the per-condition average of predicted rates against a reference PSTH.

    Rows are (condition, time) stacked, columns are neurons; R² is computed per neuron and
    averaged with equal weights (scikit-learn's ``r2_score`` with ``multioutput="uniform_average"``),
    as in NLB. Rows where either side is NaN are dropped.

    Parameters
    ----------
    rates : array-like of shape (trial, time, neuron)
        Predicted rates per trial.
    conditions : array-like of shape (trial,)
        Condition label of each trial.
    reference_psth : array-like of shape (condition, time, neuron)
        The reference, one row per condition in sorted label order (as :func:`psth` returns),
        e.g. ``psth(true_rates, conditions)`` or ``psth(spikes, conditions, smooth_sd=...)``.

    Returns
    -------
    float
        psth R².
    """
    from sklearn.metrics import r2_score

    pred = psth(rates, conditions).values
    ref = _values(reference_psth, "reference_psth")
    if ref.shape != pred.shape:
        raise ValueError(f"`reference_psth` has shape {ref.shape}; expected {pred.shape} "
                         "(condition, time, neuron) with conditions in sorted order.")
    a, b = ref.reshape(-1, ref.shape[-1]), pred.reshape(-1, pred.shape[-1])
    keep = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    if keep.sum() < 2:
        raise ValueError("fewer than two (condition, time) rows are finite in both PSTHs; R² is undefined.")
    return float(r2_score(a[keep], b[keep]))


def behavior_r2(rates_train: Any, behavior_train: Any, rates_eval: Any, behavior_eval: Any, *,
                alphas: Sequence[float] | None = None, lag: int = 0, n_folds: int = 5) -> float:
    """R² of behaviour decoded from rates with ridge regression (NLB "vel R²").

    A ridge regression (scikit-learn ``Ridge``) from rates at bin ``t`` to behaviour at bin
    ``t + lag`` is fitted on the training trials (trial and time flattened), with the penalty
    chosen by ``n_folds``-fold cross-validation (contiguous folds, no shuffling: deterministic)
    over ``alphas`` — the choice ``GridSearchCV(Ridge(), {"alpha": alphas}, cv=n_folds)`` makes,
    computed from per-fold sufficient statistics so that NLB-sized data take a second; the score
    is its R² on the evaluation trials (uniform average over behaviour dimensions).

    Parameters
    ----------
    rates_train, rates_eval : array-like of shape (trial, time, neuron)
        Rates (held-in and held-out neurons concatenated, in NLB).
    behavior_train, behavior_eval : array-like of shape (trial, time, behavior)
        Behaviour (e.g. hand velocity) in the same bins. A 2-D array is read as one behaviour.
    alphas : sequence of float, optional
        Ridge penalties tried. Default ``logspace(-4, 0, 9)`` (NLB).
    lag : int, default 0
        Bins by which behaviour lags the rates (>= 0).
    n_folds : int, default 5
        Cross-validation folds for the penalty.

    Returns
    -------
    float
        R² on the evaluation trials. Rows with a NaN in rates or behaviour are dropped.
    """
    from sklearn.linear_model import Ridge

    if isinstance(lag, bool) or not isinstance(lag, (int, np.integer)) or lag < 0:
        raise ValueError(f"`lag` must be an integer >= 0 (bins); got lag={lag!r}.")
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 2:
        raise ValueError(f"`n_folds` must be an integer >= 2; got n_folds={n_folds!r}.")
    alphas = np.logspace(-4, 0, 9) if alphas is None else np.asarray(alphas, dtype=np.float64).ravel()
    if alphas.size == 0 or not (np.isfinite(alphas).all() and (alphas > 0).all()):
        raise ValueError(f"`alphas` must be positive finite penalties; got {alphas.tolist()}.")
    xtr, ytr = _decoding_rows(rates_train, behavior_train, lag, "train")
    xev, yev = _decoding_rows(rates_eval, behavior_eval, lag, "eval")
    if xtr.shape[1] != xev.shape[1]:
        raise ValueError(f"`rates_train` has {xtr.shape[1]} neurons but `rates_eval` has {xev.shape[1]}.")
    if xtr.shape[0] < n_folds:
        raise ValueError(f"{xtr.shape[0]} training rows are fewer than `n_folds`={n_folds}.")
    alpha = _ridge_cv_alpha(xtr, ytr, alphas, n_folds)
    return float(Ridge(alpha=alpha).fit(xtr, ytr).score(xev, yev))


def _ridge_cv_alpha(x: np.ndarray, y: np.ndarray, alphas: np.ndarray, n_folds: int) -> float:
    """The penalty scikit-learn's ``GridSearchCV(Ridge(), {"alpha": alphas}, cv=n_folds)`` picks.

    Same folds (contiguous, unshuffled ``KFold``), same score (mean over folds of the R²
    averaged uniformly over outputs) and same tie rule (the first best), but every fold's ridge
    solutions for all penalties come from one eigendecomposition of its centred Gram matrix,
    built from sufficient statistics: 45 fits of an NLB-sized problem cost one pass over the data.
    """
    n = x.shape[0]
    bounds = np.concatenate([[0], np.cumsum(np.full(n_folds, n // n_folds) + (np.arange(n_folds) < n % n_folds))])
    total_xx, total_xy = x.T @ x, x.T @ y
    total_x, total_y = x.sum(axis=0), y.sum(axis=0)
    scores = np.zeros(len(alphas))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        xf, yf = x[lo:hi], y[lo:hi]
        m = n - (hi - lo)
        mx, my = (total_x - xf.sum(axis=0)) / m, (total_y - yf.sum(axis=0)) / m
        gram = total_xx - xf.T @ xf - m * np.outer(mx, mx)               # centred X'X of the other folds
        cross = total_xy - xf.T @ yf - m * np.outer(mx, my)              # centred X'y
        eigval, eigvec = np.linalg.eigh(gram)
        projected = eigvec.T @ cross
        centred_x, centred_y = xf - mx, yf - my
        ss_tot = ((yf - yf.mean(axis=0)) ** 2).sum(axis=0)
        for k, alpha in enumerate(alphas):
            weights = eigvec @ (projected / (eigval + alpha)[:, None])
            ss_res = ((centred_y - centred_x @ weights) ** 2).sum(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                # r2_score's convention for a constant target: 1 if predicted exactly, else 0
                r2 = np.where(ss_tot > 0, 1.0 - ss_res / ss_tot, np.where(ss_res == 0, 1.0, 0.0))
            scores[k] += r2.mean() / n_folds
    return float(alphas[int(np.argmax(scores))])


def chop_trials(data: xr.Dataset, n_bins: int) -> xr.Dataset:
    """Cut long trials into consecutive, non-overlapping trials of ``n_bins`` bins.

    Turns one long recording (such as the shipped ``lorenz63_spikes``) into the trial layout of
    the NLB protocol. A remainder shorter than ``n_bins`` at the end of a trial is dropped.

    Parameters
    ----------
    data : xarray.Dataset
        Canonical dataset; other variables with dims ``(trial, time, ...)`` (e.g. ``z_true``)
        are cut the same way.
    n_bins : int
        Bins per new trial (>= 2).

    Returns
    -------
    xarray.Dataset
        Canonical dataset with ``source_trial(trial)`` and ``source_start(trial)`` (the first
        bin's index in the source trial); attrs carried over, ``attrs["split"]`` records the cut.
    """
    from ..data import as_dataset, to_arrays

    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 2:
        raise ValueError(f"`n_bins` must be an integer >= 2; got n_bins={n_bins!r}.")
    arr = to_arrays(data)
    pieces = [(i, s) for i, n in enumerate(arr.length) for s in range(0, int(n) - n_bins + 1, n_bins)]
    if not pieces:
        raise ValueError(f"no trial is at least `n_bins`={n_bins} long (lengths {arr.length.tolist()}).")
    x = np.stack([arr.x[i, s:s + n_bins] for i, s in pieces])
    ds = as_dataset(x, dt=arr.dt, channel_names=[str(c) for c in data["channel"].values],
                    name=str(data.attrs.get("name", "data")), provenance=data.attrs.get("provenance"))
    for key, var in data.data_vars.items():
        if key in ("x", "length", "u", "sample_time") or var.dims[:2] != ("trial", "time"):
            continue
        values = np.stack([var.values[i, s:s + n_bins] for i, s in pieces])
        ds[key] = (var.dims, values)
        for dim in var.dims[2:]:
            if dim in data.coords:
                ds = ds.assign_coords({dim: data.coords[dim].values})
    ds["source_trial"] = ("trial", np.array([i for i, _ in pieces], dtype=np.int64))
    ds["source_start"] = ("trial", np.array([s for _, s in pieces], dtype=np.int64))
    ds.attrs = {**data.attrs, **{k: ds.attrs[k] for k in ("dt", "name", "provenance")},
                "split": json.dumps({"step": "chop_trials", "n_bins": int(n_bins)})}
    return ds


def split_forward(data: xr.Dataset, n_forward: int) -> tuple[xr.Dataset, xr.Dataset]:
    """Split each trial into an observed window and the last ``n_forward`` bins.

    Parameters
    ----------
    data : xarray.Dataset
        Canonical dataset; all trials must be at least ``n_forward + 2`` bins long.
    n_forward : int
        Bins of the forward window (NLB: 200 ms, i.e. 40 bins of 5 ms).

    Returns
    -------
    observed, forward : xarray.Dataset
        ``observed`` holds bins ``[0, length - n_forward)`` of every trial (canonical, ragged
        trials NaN-padded); ``forward`` holds the last ``n_forward`` bins, ``x(trial, time,
        channel)`` with time restarting at 0. Their ``attrs["split"]`` records the cut.
    """
    from ..data import as_dataset, to_arrays

    if isinstance(n_forward, bool) or not isinstance(n_forward, (int, np.integer)) or n_forward < 1:
        raise ValueError(f"`n_forward` must be an integer >= 1; got n_forward={n_forward!r}.")
    arr = to_arrays(data)
    short = np.flatnonzero(arr.length < n_forward + 2)
    if short.size:
        raise ValueError(f"trial {int(short[0])} has {int(arr.length[short[0]])} bins; `n_forward`={n_forward} "
                         "needs at least n_forward + 2.")
    names = [str(c) for c in data["channel"].values]
    dt = float(data.attrs.get("dt", 1.0))
    head = [arr.x[i, : n - n_forward] for i, n in enumerate(arr.length)]
    tail = [arr.x[i, n - n_forward: n] for i, n in enumerate(arr.length)]
    split = json.dumps({"step": "split_forward", "n_forward": int(n_forward)})
    out = []
    for part in (head, tail):
        ds = as_dataset(part, dt=dt, channel_names=names, name=str(data.attrs.get("name", "data")),
                        provenance=data.attrs.get("provenance"), min_length=1)
        for key in ("bin_size", "units", "held_in_neurons", "held_out_neurons"):
            if key in data.attrs:
                ds.attrs[key] = data.attrs[key]
        ds.attrs["split"] = split
        out.append(ds)
    return out[0], out[1]


def held_out_mask(data: xr.Dataset, held_out: Sequence[int] | None = None) -> xr.Dataset:
    """The dataset with the held-out neurons set to NaN (masked), for inferring from held-in ones.

    Parameters
    ----------
    data : xarray.Dataset
        Canonical dataset of counts.
    held_out : sequence of int, optional
        Neuron indices; default ``json.loads(data.attrs["held_out_neurons"])``.

    Returns
    -------
    xarray.Dataset
        A copy whose ``x`` is NaN for the held-out neurons; ``attrs["masked_neurons"]`` lists them.
    """
    if held_out is None:
        if "held_out_neurons" not in data.attrs:
            raise ValueError("`held_out` not given and `data.attrs` has no 'held_out_neurons'; pass the indices.")
        held_out = json.loads(data.attrs["held_out_neurons"])
    idx = _indices(held_out, "held_out")
    x = np.array(data["x"].values, dtype=np.float64)
    if idx.max(initial=-1) >= x.shape[-1]:
        raise ValueError(f"`held_out` index {int(idx.max())} is out of range for {x.shape[-1]} neurons.")
    x[..., idx] = np.nan
    out = data.copy()
    out["x"] = (data["x"].dims, x)
    out.attrs = {**data.attrs, "masked_neurons": json.dumps(idx.tolist())}
    return out


# --------------------------------------------------------------------------- helpers


def _values(a: Any, argname: str) -> np.ndarray:
    if isinstance(a, xr.Dataset):
        if "x" not in a:
            raise ValueError(f"`{argname}` Dataset has no variable 'x'; got {sorted(map(str, a.data_vars))}.")
        a = a["x"]
    if isinstance(a, xr.DataArray):
        a = a.values
    elif hasattr(a, "detach") and hasattr(a, "cpu"):
        # a torch tensor that requires grad (or lives on a GPU) refuses np.asarray with torch's words
        a = a.detach().cpu().numpy()
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{argname}` must be numeric; got {type(a).__name__} ({err}).") from None
    if arr.ndim < 1:
        raise ValueError(f"`{argname}` must have a neuron axis; got a scalar.")
    return arr


def _pair(rates: Any, spikes: Any) -> tuple[np.ndarray, np.ndarray]:
    r, n = _values(rates, "rates"), _values(spikes, "spikes")
    if r.shape != n.shape:
        raise ValueError(f"`rates` has shape {r.shape} but `spikes` has shape {n.shape}; they must match "
                         "(trial, time, neuron).")
    obs = np.isfinite(n)
    if (n[obs] < 0).any() or (n[obs] != np.round(n[obs])).any():
        raise ValueError("`spikes` must hold non-negative integer counts (NaN = missing).")
    return r, n


def _nll(r: np.ndarray, n: np.ndarray) -> float:
    """Poisson NLL over matched 1-D arrays of observed bins."""
    r = _checked_rates(r)
    return float(np.sum(r - xlogy(n, r) + gammaln(n + 1.0)))


def _checked_rates(r: np.ndarray) -> np.ndarray:
    """Refuse negative or non-finite rates; raise rates below MIN_RATE to it with a warning."""
    bad = ~np.isfinite(r) | (r < 0)
    if bad.any():
        raise ValueError(f"`rates` must be finite and >= 0 at every observed bin; {int(bad.sum())} are not "
                         f"(e.g. {r[bad][:3].tolist()}).")
    low = r < MIN_RATE
    if low.any():
        warnings.warn(f"{int(low.sum())} predicted rate(s) below {MIN_RATE} were raised to {MIN_RATE} "
                      "(log of zero).", RuntimeWarning, stacklevel=3)
        r = np.maximum(r, MIN_RATE)
    return r


def _indices(idx: Any, argname: str) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
        raise ValueError(f"`{argname}` must be a non-empty 1-D sequence of neuron indices; got {idx!r}.")
    return arr.astype(np.int64)


def _take(a: np.ndarray, idx: np.ndarray, argname: str) -> np.ndarray:
    if idx.max() >= a.shape[-1] or idx.min() < -a.shape[-1]:
        raise ValueError(f"held-out index {int(idx.max())} is out of range for `{argname}` with "
                         f"{a.shape[-1]} neurons.")
    return a[..., idx]


def _labels(conditions: Any, n_trial: int) -> np.ndarray:
    labels = np.asarray(conditions.values if isinstance(conditions, xr.DataArray) else conditions)
    if labels.shape != (n_trial,):
        raise ValueError(f"`conditions` must have one label per trial, shape ({n_trial},); got {labels.shape}.")
    return labels


def _smooth_time(x: np.ndarray, sd: float) -> np.ndarray:
    """Gaussian smoothing along axis 1 that ignores NaN (normalised by the observed weight)."""
    from scipy.ndimage import gaussian_filter1d

    obs = np.isfinite(x)
    num = gaussian_filter1d(np.where(obs, x, 0.0), sd, axis=1, mode="nearest")
    den = gaussian_filter1d(obs.astype(np.float64), sd, axis=1, mode="nearest")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[~obs] = np.nan
    return out


def _decoding_rows(rates: Any, behavior: Any, lag: int, which: str) -> tuple[np.ndarray, np.ndarray]:
    r, b = _values(rates, f"rates_{which}"), _values(behavior, f"behavior_{which}")
    if b.ndim == r.ndim - 1:
        b = b[..., None]
    if r.ndim != 3 or b.ndim != 3 or r.shape[:2] != b.shape[:2]:
        raise ValueError(f"`rates_{which}` {r.shape} and `behavior_{which}` {b.shape} must be (trial, time, ·) "
                         "with the same trials and bins.")
    if lag >= r.shape[1]:
        raise ValueError(f"`lag`={lag} is not shorter than the trials ({r.shape[1]} bins).")
    r, b = r[:, : r.shape[1] - lag], b[:, lag:]
    x, y = r.reshape(-1, r.shape[-1]), b.reshape(-1, b.shape[-1])
    keep = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
    if keep.sum() < 2:
        raise ValueError(f"fewer than two finite (rate, behaviour) rows in the {which} data.")
    return x[keep], y[keep]
