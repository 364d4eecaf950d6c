"""The evaluation protocol (``SPEC-metrics.md`` §4–5): score a model on held-out data.

:func:`evaluate` runs the model freely from the state inferred at the first test point for
``(1 + burn_in_fraction)·T`` steps, drops the first ``burn_in_fraction·T`` as transient, and
compares the remaining ``T`` steps with the test series (``T`` = test length) by the
state-space divergence D_stsp and the power-spectrum distance D_H; it also reports the n-step
prediction error PE(n) from data-initialised states. A free run that becomes non-finite or
leaves ``divergence_threshold`` standard deviations around the data mean is *diverged*: its
D_stsp and D_H are NaN and ``diverged`` is True (never silently dropped).

:func:`summarize` aggregates results over seeds (median ± MAD, mean ± SEM, fraction
diverged); :func:`floor` gives the best value reachable on a benchmark, the same distances
between independent stretches of the true system.

Every result is an ``xarray.Dataset`` whose attrs record every setting, the data name and
length, the model configuration, the seed and the dsident version.
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Sequence

import numpy as np
import xarray as xr

from .._checks import check_bool
from .._version import __version__
from .prediction import prediction_error
from .spectrum import _non_negative, power_spectrum_distance
from .state_space import as_trials, check_settings, state_space_coverage, state_space_divergence

__all__ = ["evaluate", "summarize", "floor", "SCALAR_METRICS"]

#: the scalar metrics of an evaluation result, in table order
SCALAR_METRICS = ("state_space_divergence", "power_spectrum_distance", "prediction_error", "state_space_coverage")


def evaluate(model: Any, test: Any, *, seed: int = 0, burn_in_fraction: float = 0.25, n_bins: int = 30,
             sigma: float = 20.0, pe_steps: int = 20, stsp_method: str = "auto", smoothing_alpha: float = 1e-5,
             direction: str = "forward", gmm_scaling: float = 1.0, gmm_points: int = 10_000,
             mc_samples: int = 1_000, divergence_threshold: float = 1e3, noise: bool = False,
             observation_noise: bool | None = None, dt: float | None = None,
             return_run: bool = False) -> xr.Dataset | tuple[xr.Dataset, xr.Dataset]:
    """Score a model against test data with the standard reconstruction protocol.

    Parameters
    ----------
    model : fitted estimator or StateSpaceModel
        Anything with ``generate(n_steps, n_trials=..., x0=..., u=..., noise=..., seed=...)``
        returning a Dataset with ``x(trial, time, channel)``, plus the prediction protocol of
        :func:`~dsident.metrics.prediction_error`; an estimator's ``model_`` is used.
    test : Dataset or array-like of shape (time, channel) / (trial, time, channel)
        Held-out observations (converted with :func:`dsident.data.as_dataset`). Each trial
        gets its own free run, started from its first fully observed sample. Channels the
        Dataset lists in ``attrs["auxiliary_channels"]`` (e.g. the slow channels of
        :func:`dsident.data.add_slow_channels`) start the run but are not scored. With external
        inputs ``u`` the run is driven by them over the test window and has no burn-in.
    seed : int
        Seed of the free run (used when ``noise=True``) and of the GMM Monte-Carlo samples.
    burn_in_fraction : float
        Fraction of ``T`` generated before the compared window and discarded.
    n_bins, smoothing_alpha, stsp_method, direction, gmm_scaling, gmm_points, mc_samples
        Settings of :func:`~dsident.metrics.state_space_divergence` ("auto": binned for fewer
        than 6 channels, Gaussian mixture otherwise).
    sigma : float
        Smoothing of :func:`~dsident.metrics.power_spectrum_distance`, in frequency bins.
    pe_steps : int
        Horizon n of the prediction error PE(n); the curve 1…n is stored too.
    divergence_threshold : float
        A free run is diverged when any value leaves ``mean ± divergence_threshold · std`` of
        the test data (per channel) or becomes non-finite.
    noise : bool
        Add process noise during the free run (default: the deterministic skeleton).
    observation_noise : bool, optional
        Score draws of the observation model along the free run instead of its mean. Default:
        for an observation model of counts or classes (``observation.discrete``: Poisson,
        Bernoulli, Categorical), where the data are draws too and a run of expected counts sits
        between the integers the data take (so even the true rates score far above the floor),
        and not otherwise. The latent run stays the deterministic skeleton unless ``noise``.
    dt : float, optional
        Sampling step passed to ``generate`` and ``step`` (default: the model's own).
    return_run : bool
        Also return the free run the scores compared, so figures and saved files show exactly
        what was measured without generating it a second time.

    Returns
    -------
    xarray.Dataset
        ``state_space_divergence``, ``power_spectrum_distance``, ``prediction_error`` (scalars),
        ``state_space_coverage`` (the share of the test samples whose bin the free run visits,
        :func:`~dsident.metrics.state_space_coverage`; it explains most of a binned D_stsp),
        ``power_spectrum_distance_per_channel(channel)``, ``prediction_error_curve(horizon)``,
        ``diverged`` (bool); attrs hold every setting, ``data_name``, ``data_length``
        (``T`` of every trial), ``model`` and ``model_config`` (JSON), ``seed`` and
        ``dsident_version``. D_stsp, D_H and the coverage are NaN when diverged; PE(n) does not depend on
        the free run and is always reported.
    xarray.Dataset, only with ``return_run=True``
        The compared window of the free run laid out like ``test``: ``x(trial, time,
        channel)`` (and ``z(trial, time, latent)`` when the model has latents) on the test's
        time axis, NaN outside each trial's window ``[start, length)``, ``length(trial)``;
        attrs ``dt``, ``seed``, ``diverged``, ``burn_in_steps`` and ``start_index`` (JSON lists,
        per trial).

    Examples
    --------
    >>> scores = evaluate(model, datasets.load("lorenz63", split="test"))   # doctest: +SKIP
    >>> float(scores.state_space_divergence), bool(scores.diverged)          # doctest: +SKIP
    """
    from ..data import as_dataset
    from ..data.slow_channels import scored_channels

    fitted = model.model_ if hasattr(model, "model_") else model
    if not callable(getattr(fitted, "generate", None)):
        raise TypeError(f"`model` must be a fitted estimator or a StateSpaceModel with generate(); got "
                        f"{type(model).__name__}.")
    if not 0 <= burn_in_fraction < 10 or not np.isfinite(burn_in_fraction):
        raise ValueError(f"`burn_in_fraction` must be a fraction of the test length in [0, 10); got {burn_in_fraction!r}.")
    if not np.isfinite(divergence_threshold) or divergence_threshold <= 0:
        raise ValueError(f"`divergence_threshold` must be a positive number of standard deviations; got {divergence_threshold!r}.")
    # every metric setting up front: a diverged run computes no D_stsp/D_H, and its result must not
    # record a setting that the metrics would have refused
    check_settings(stsp_method, n_bins, smoothing_alpha, direction, gmm_scaling, gmm_points, mc_samples)
    _non_negative(sigma, "sigma")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer; got {seed!r}.")
    # "no" is truthy: a noisy run (or a tuple) where the caller asked for none
    check_bool("noise", noise), check_bool("return_run", return_run)
    if observation_noise is not None:
        check_bool("observation_noise", observation_noise)
    ds = as_dataset(test)
    _check_step(test, fitted, dt)
    x = ds["x"].values
    lengths = np.asarray(ds["length"].values, dtype=int) if "length" in ds else np.full(x.shape[0], x.shape[1])
    u = ds["u"].values if "u" in ds else None
    n_trials, n_time, n_channels = x.shape
    obs_dim = getattr(fitted, "obs_dim", None)
    if obs_dim is not None and n_channels != int(obs_dim):
        raise ValueError(f"`test` has {n_channels} channel(s) but the model observes {int(obs_dim)} (obs_dim): "
                         "score it on data with the channels it was fitted to, in the same order.")
    from ..model import check_channel_order

    check_channel_order(ds["channel"].values, fitted, argname="test")
    input_dim = getattr(fitted, "input_dim", None)
    n_inputs = 0 if u is None else u.shape[-1]
    if input_dim is not None and n_inputs != int(input_dim):
        raise ValueError(f"`test` has {n_inputs} input(s) (variable `u`) but the model takes {int(input_dim)} "
                         "(input_dim): score it on data with the inputs it was fitted with, e.g. "
                         "`dsident.data.as_dataset(x, u=u)`.")

    # channels derived from the others (dsident.data.slow_channels) start and drive the free run
    # but are not scored: the scores compare the data's own channels
    keep = scored_channels(ds)
    if keep.size == 0:
        raise ValueError("every channel of `test` is marked auxiliary (attrs['auxiliary_channels']); nothing to score.")
    starts = _first_observed(x, lengths)
    windows = lengths - starts
    burn_in = np.zeros(n_trials, dtype=int) if u is not None else np.floor(burn_in_fraction * windows).astype(int)
    n_generate = int(np.max(burn_in + windows))
    if observation_noise is None:
        from ..observations.base import draws_observations

        observation_noise = draws_observations(fitted)
    gen_kwargs: dict[str, Any] = {"n_trials": n_trials, "x0": x[np.arange(n_trials), starts],
                                  "noise": bool(noise), "seed": int(seed)}
    if observation_noise:     # only then: generate() of duck-typed models need not take it
        gen_kwargs["observation_noise"] = True
    if dt is not None:
        gen_kwargs["dt"] = float(dt)
    if u is not None:
        gen_kwargs["u"] = _input_window(u, starts, lengths, n_generate)
    run = fitted.generate(n_generate, **gen_kwargs)
    xg_full = _generated_x(run, fitted, (n_trials, n_generate, n_channels))

    # the compared window: T_i steps after the burn-in, laid out like the test data
    generated = _compared_window(xg_full, starts, windows, burn_in, n_time)
    diverged = _is_diverged(run, xg_full, burn_in + windows, x, divergence_threshold)

    settings = dict(seed=int(seed), burn_in_fraction=float(burn_in_fraction), n_bins=int(n_bins),
                    smoothing_alpha=float(smoothing_alpha), stsp_method=stsp_method, direction=direction,
                    gmm_scaling=float(gmm_scaling), gmm_points=int(gmm_points), mc_samples=int(mc_samples),
                    sigma=float(sigma), pe_steps=int(pe_steps), divergence_threshold=float(divergence_threshold),
                    noise=int(bool(noise)), observation_noise=int(bool(observation_noise)))
    if diverged:
        warnings.warn(f"the free run of {type(model).__name__} diverged (non-finite or beyond "
                      f"{divergence_threshold:g} std of the data); D_stsp and D_H are NaN.", RuntimeWarning, stacklevel=2)
        d_stsp, d_h, coverage, d_h_length = np.nan, np.full(keep.size, np.nan), np.nan, 0
    else:
        d_stsp = state_space_divergence(x[..., keep], generated[..., keep], method=stsp_method, n_bins=n_bins,
                                        smoothing_alpha=smoothing_alpha, direction=direction,
                                        gmm_scaling=gmm_scaling, gmm_points=gmm_points,
                                        mc_samples=mc_samples, seed=seed)
        d_h, d_h_length = observed_spectrum_distance(x[..., keep], generated[..., keep], starts, lengths, sigma)
        coverage = state_space_coverage(x[..., keep], generated[..., keep], n_bins=n_bins)
    # plain arrays carry no step of their own: they are at the model's (as_dataset wrote 1.0)
    model_dt = getattr(fitted, "dt", None)
    pe_data = ds if isinstance(test, xr.Dataset) or model_dt is None else ds.assign_attrs(dt=float(model_dt))
    pe_curve = prediction_error(fitted, pe_data, n=int(pe_steps), curve=True, dt=dt, channels=keep)

    out = xr.Dataset(
        {"state_space_divergence": ((), float(d_stsp)),
         "power_spectrum_distance": ((), float(np.mean(d_h))),
         "power_spectrum_distance_per_channel": (("channel",), np.asarray(d_h, dtype=float)),
         "prediction_error": ((), float(pe_curve[-1])),
         "prediction_error_curve": (("horizon",), pe_curve),
         "state_space_coverage": ((), float(coverage)),
         "diverged": ((), bool(diverged))},
        coords={"channel": ds["channel"].values[keep], "horizon": np.arange(1, int(pe_steps) + 1)},
    )
    stsp_used = stsp_method if stsp_method != "auto" else ("bins" if keep.size < 6 else "gmm")
    out.attrs = {
        "protocol": "SPEC-metrics section 4: free run of (1 + burn_in_fraction)*T from the first test point, "
                    "burn-in dropped, compared with the T test steps",
        **settings, "stsp_method_used": stsp_used,
        "generated_steps": n_generate, "burn_in_steps": json.dumps(burn_in.tolist()),
        "data_name": str(ds.attrs.get("name", "data")), "data_length": json.dumps(windows.tolist()),
        "n_trials": int(n_trials), "n_channels": int(keep.size), "dt": _run_step(dt, run, test, fitted),
        "power_spectrum_samples": int(d_h_length),
        "model": type(fitted).__name__, "model_config": json.dumps(_model_config(model), default=repr),
        "dsident_version": __version__,
    }
    if not return_run:
        return out
    return out, _compared_run(run, generated, ds, starts, windows, burn_in, diverged, seed)


def _compared_window(full: np.ndarray, starts: np.ndarray, windows: np.ndarray, burn_in: np.ndarray,
                     n_time: int) -> np.ndarray:
    """Steps ``burn_in[i] : burn_in[i] + windows[i]`` of each trial of a free run ``full``
    (trial, step, ·), placed at ``starts[i]`` on a test-length axis (trial, n_time, ·), NaN elsewhere."""
    out = np.full((full.shape[0], n_time, full.shape[-1]), np.nan)
    for i in range(full.shape[0]):
        out[i, starts[i]:starts[i] + windows[i]] = full[i, burn_in[i]:burn_in[i] + windows[i]]
    return out


def _compared_run(run: xr.Dataset, generated: np.ndarray, ds: xr.Dataset, starts: np.ndarray,
                  windows: np.ndarray, burn_in: np.ndarray, diverged: bool, seed: int) -> xr.Dataset:
    """The compared window of ``run`` (trial, generated step, ·) in the layout of the test data."""
    variables: dict[str, Any] = {"x": (("trial", "time", "channel"), generated),
                                 "length": (("trial",), starts + windows)}
    if "z" in run:
        z = _compared_window(np.asarray(run["z"].values, dtype=float), starts, windows, burn_in, generated.shape[1])
        variables["z"] = (("trial", "time", "latent"), z)
    coords = {name: ds[name].values for name in ("trial", "time", "channel") if name in ds.coords}
    attrs = {"dt": float(run.attrs.get("dt", ds.attrs.get("dt", 1.0))), "seed": int(seed),
             "diverged": int(bool(diverged)), "burn_in_steps": json.dumps(burn_in.tolist()),
             "start_index": json.dumps(starts.tolist()),
             "protocol": "the compared window of the evaluation's free run (dsident.metrics.evaluate)"}
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def summarize(results: Sequence[xr.Dataset] | xr.Dataset, *, dim: str = "seed") -> xr.Dataset:
    """Aggregate evaluation results over seeds (or any other repetition).

    Parameters
    ----------
    results : sequence of Datasets from :func:`evaluate`, or one Dataset with dimension ``dim``
    dim : str
        Name of the repetition dimension of a combined Dataset.

    Returns
    -------
    xarray.Dataset
        For each scalar metric a variable over ``statistic`` = (median, mad, mean, sem,
        n_finite): median and the (unscaled) median absolute deviation, mean and standard
        error of the mean over the finite values (diverged runs are NaN and are left out of
        these but counted); ``fraction_diverged`` and ``n_runs``. attrs carry the first
        result's settings and the list of seeds.

    Raises
    ------
    ValueError
        An empty ``results``, or results whose metric settings (``n_bins``, ``sigma``,
        ``burn_in_fraction``, ...) differ: the summary records one setting.
    """
    if isinstance(results, xr.Dataset):
        if dim not in results.dims:
            raise ValueError(f"`results` Dataset has no dimension {dim!r}; got dims {tuple(results.dims)}.")
        runs = [results.isel({dim: i}) for i in range(results.sizes[dim])]
    elif isinstance(results, (str, bytes)) or not hasattr(results, "__iter__"):
        raise TypeError(f"`results` must be evaluation results (a list of Datasets from evaluate, or one Dataset "
                        f"stacked along `dim`); got {type(results).__name__}.")
    else:
        runs = list(results)
    if not runs:
        raise ValueError("`results` is empty; pass at least one evaluation result.")
    bad = [i for i, r in enumerate(runs) if not isinstance(r, xr.Dataset)]
    if bad:
        raise TypeError(f"`results` must hold Datasets from evaluate; entry {bad[0]} is a "
                        f"{type(runs[bad[0]]).__name__}.")
    _check_same_settings(runs)
    stats = ("median", "mad", "mean", "sem", "n_finite")
    out = xr.Dataset(coords={"statistic": list(stats)})
    for name in SCALAR_METRICS:
        if name not in runs[0]:
            continue
        values = np.array([float(r[name]) for r in runs])
        out[name] = (("statistic",), _robust_stats(values))
    diverged = np.array([bool(r["diverged"]) if "diverged" in r else False for r in runs])
    out["fraction_diverged"] = ((), float(diverged.mean()))
    out["n_runs"] = ((), len(runs))
    out.attrs = {k: v for k, v in runs[0].attrs.items() if k != "seed"}
    out.attrs["seeds"] = json.dumps([r.attrs.get("seed") for r in runs])
    return out


#: the metric settings every result of one summary must share (its attrs record them once)
_SUMMARY_SETTINGS = ("burn_in_fraction", "n_bins", "smoothing_alpha", "stsp_method", "direction", "gmm_scaling",
                     "gmm_points", "mc_samples", "sigma", "pe_steps", "divergence_threshold", "noise",
                     "observation_noise")


def _check_same_settings(runs: list[xr.Dataset]) -> None:
    """Refuse results computed with different metric settings: one summary records one setting."""
    first = runs[0].attrs
    for k, run in enumerate(runs[1:], start=1):
        for key in _SUMMARY_SETTINGS:
            if key in first and key in run.attrs and not _same(first[key], run.attrs[key]):
                raise ValueError(f"`results` were computed with different settings: {key}={first[key]!r} in result 0, "
                                 f"{run.attrs[key]!r} in result {k}. Summarise results of one setting at a time.")


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except (TypeError, ValueError):
        return a == b


def _robust_stats(values: np.ndarray) -> np.ndarray:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.array([np.nan, np.nan, np.nan, np.nan, 0.0])
    median = np.median(finite)
    mad = np.median(np.abs(finite - median))
    sem = np.std(finite, ddof=1) / np.sqrt(finite.size) if finite.size > 1 else np.nan
    return np.array([median, mad, finite.mean(), sem, float(finite.size)])


def floor(dataset: Any, other: Any = None, *, length: int | None = None, n_pairs: int = 5, n_bins: int = 30,
          sigma: float = 20.0, stsp_method: str = "auto", smoothing_alpha: float = 1e-5,
          direction: str = "forward", gmm_scaling: float = 1.0, gmm_points: int = 10_000,
          mc_samples: int = 1_000, seed: int = 0, pairing: str = "consecutive") -> xr.Dataset:
    """The floor of a benchmark: D_stsp and D_H between independent stretches of the true system.

    The stretches are consecutive, non-overlapping windows of ``length`` samples, taken first
    from ``dataset`` (each trial in turn, each run of fully observed samples of it in turn: a
    stretch never spans a missing sample), then from ``other``; pairs are consecutive
    stretches, the first of each pair playing the true data (its grid). For a shipped
    benchmark name, ``dataset`` is the test split and ``other`` the train split, so at the
    full test length the one pair is train vs test.

    Parameters
    ----------
    dataset : str or Dataset or array-like
        A name for :func:`dsident.datasets.load`, or the true series itself.
    other : Dataset or array-like, optional
        A second independent series of the same system (default for a name: its train split).
    length : int, optional
        Evaluation length ``T`` (default: the longest trial of ``dataset``). Binned D_stsp
        depends strongly on it, so use the length models are evaluated at.
    n_pairs : int
        Maximum number of stretch pairs (the spread over pairs is reported).
    pairing : {"consecutive", "first"}
        ``"consecutive"``: each stretch against the next. ``"first"``: the first stretch (of
        ``dataset``) against each of the others, as a model's free run is scored against one test
        stretch: the floor of a recording, whose held-out stretch is ``dataset`` and whose other
        stretches come from ``other`` (:func:`dsident.experiments.scoring.recording_floor`).
    n_bins, sigma, stsp_method, smoothing_alpha, direction, gmm_scaling, gmm_points, mc_samples, seed
        Metric settings, as in :func:`evaluate`.

    Returns
    -------
    xarray.Dataset
        ``state_space_divergence(pair)``, ``power_spectrum_distance(pair)``,
        ``power_spectrum_distance_per_channel(pair, channel)`` with a ``pair_label`` coordinate
        naming the two stretches; attrs hold mean, std, min and max of each metric over the
        pairs, the settings, data name, length and version. There is no PE floor: the true
        system's own n-step prediction is exact, so PE has floor 0 on clean data.

    Raises
    ------
    ValueError
        When no two stretches of ``length`` samples are available.
    """
    if isinstance(n_pairs, bool) or not isinstance(n_pairs, (int, np.integer)) or n_pairs < 1:
        raise ValueError(f"`n_pairs` must be a positive integer; got {n_pairs!r}.")
    n_pairs = int(n_pairs)
    name = None
    if isinstance(dataset, str):
        from .. import datasets

        name = dataset
        dataset, other = datasets.load(name, split="test"), (datasets.load(name, split="train") if other is None else other)
    if other is not None:
        from .spectrum import _check_same_step

        _check_same_step(dataset, other, ("dataset", "other"))
    first_tag = "data" if name is None else "test"
    series = [(f"{first_tag}#{k}", s) for k, s in enumerate(_gap_free_trials(dataset))]
    if other is not None:
        series += [(f"{'other' if name is None else 'train'}#{k}", s) for k, s in enumerate(_gap_free_trials(other))]
    if length is None:
        length = max(len(s) for tag, s in series if tag.startswith(first_tag))
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 2:
        raise ValueError(f"`length` must be an integer number of samples >= 2; got {length!r}.")
    length = int(length)
    stretches = []
    for tag, s in series:
        for j in range(len(s) // length):
            stretches.append((f"{tag}[{j * length}:{(j + 1) * length}]", s[j * length:(j + 1) * length]))
    if len(stretches) < 2:
        runs = sorted((len(s) for _, s in series), reverse=True)
        raise ValueError(f"need at least two gap-free stretches of length={length}; the data give {len(stretches)} "
                         f"(their fully observed runs: {', '.join(map(str, runs[:5]))}"
                         f"{f' and {len(runs) - 5} shorter' if len(runs) > 5 else ''} samples). "
                         "Pass a shorter `length` or a second series as `other`.")
    if pairing not in ("consecutive", "first"):
        raise ValueError(f"`pairing` must be 'consecutive' or 'first'; got {pairing!r}.")
    if pairing == "first":
        pairs = [(stretches[0], s) for s in stretches[1:]][:n_pairs]
    else:
        pairs = list(zip(stretches[:-1], stretches[1:]))[:n_pairs]
    d_stsp, d_h, labels = [], [], []
    for (label_a, a), (label_b, b) in pairs:
        d_stsp.append(state_space_divergence(a, b, method=stsp_method, n_bins=n_bins, smoothing_alpha=smoothing_alpha,
                                             direction=direction, gmm_scaling=gmm_scaling, gmm_points=gmm_points,
                                             mc_samples=mc_samples, seed=seed))
        d_h.append(power_spectrum_distance(a, b, sigma=sigma, per_channel=True))
        labels.append(f"{label_a} vs {label_b}")
    d_h_arr = np.asarray(d_h)
    n_channels = d_h_arr.shape[1]
    channels = (dataset["channel"].values if hasattr(dataset, "data_vars") and "channel" in dataset.coords
                else [f"x{i}" for i in range(n_channels)])
    out = xr.Dataset(
        {"state_space_divergence": (("pair",), np.asarray(d_stsp)),
         "power_spectrum_distance": (("pair",), d_h_arr.mean(axis=1)),
         "power_spectrum_distance_per_channel": (("pair", "channel"), d_h_arr)},
        coords={"pair": np.arange(len(pairs)), "pair_label": (("pair",), labels), "channel": channels},
    )
    attrs: dict[str, Any] = {
        "description": "floor: metrics between independent stretches of the true system (SPEC-metrics section 5)",
        "data_name": name or str(getattr(dataset, "attrs", {}).get("name", "data")), "length": length,
        "n_pairs": len(pairs), "n_bins": int(n_bins), "sigma": float(sigma), "stsp_method": stsp_method,
        "smoothing_alpha": float(smoothing_alpha), "direction": direction, "gmm_scaling": float(gmm_scaling),
        "gmm_points": int(gmm_points), "mc_samples": int(mc_samples), "seed": int(seed), "pairing": pairing,
        "dsident_version": __version__,
    }
    for var in ("state_space_divergence", "power_spectrum_distance"):
        v = out[var].values
        attrs.update({f"{var}_mean": float(np.mean(v)), f"{var}_std": float(np.std(v, ddof=1)) if v.size > 1 else float("nan"),
                      f"{var}_min": float(np.min(v)), f"{var}_max": float(np.max(v))})
    out.attrs = attrs
    return out


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _first_observed(x: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Index of the first fully observed sample of every trial (the free run starts there)."""
    complete = np.all(np.isfinite(x), axis=2)
    starts = np.argmax(complete, axis=1)
    bad = ~complete[np.arange(x.shape[0]), starts]
    if np.any(bad):
        raise ValueError(f"trials {np.flatnonzero(bad).tolist()} of `test` have no fully observed sample to start "
                         "the free run from.")
    if np.any(lengths - starts < 2):
        raise ValueError("every test trial needs at least 2 samples after its first fully observed one.")
    return starts


def _generated_x(run: Any, fitted: Any, expected: tuple[int, int, int]) -> np.ndarray:
    """The free run's ``x`` (trial, step, channel) as float64, refused unless it has the requested
    trials and channels and at least the requested steps (the protocol's contract with generate())."""
    x = run["x"] if hasattr(run, "data_vars") and "x" in run else None
    shape = None if x is None else np.shape(x)
    if shape is None or len(shape) != 3 or shape[0] != expected[0] or shape[1] < expected[1] or shape[2] != expected[2]:
        got = f"x of shape {shape}" if x is not None else f"a {type(run).__name__} without a variable 'x'"
        raise ValueError(f"{type(fitted).__name__}.generate({expected[1]}, n_trials={expected[0]}, ...) must return a "
                         f"Dataset with x(trial, time, channel) of shape {expected} (one trial per test trial, the "
                         f"test's channels); got {got}.")
    return np.asarray(x.values, dtype=float)


def _input_window(u: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n_steps: int) -> np.ndarray:
    """Inputs aligned with each trial's free run (trial, n_steps, input).

    Trial i's run is driven by its own inputs from ``starts[i]`` to ``lengths[i]`` (the steps it
    is scored on) and by zeros after that: the NaN padding of a shorter trial's ``u`` is not a
    missing input, and those steps are neither scored nor checked for divergence.
    """
    out = np.zeros((u.shape[0], n_steps, u.shape[2]))
    for i, (s, n) in enumerate(zip(starts, lengths)):
        seg = u[i, s:min(int(n), s + n_steps)]
        out[i, : seg.shape[0]] = seg
    if not np.all(np.isfinite(out)):
        raise ValueError("the test inputs `u` have missing values inside the evaluation window; inputs must be complete.")
    return out


def _is_diverged(run: xr.Dataset, xg: np.ndarray, n_used: np.ndarray, x: np.ndarray, threshold: float) -> bool:
    """Non-finite, or beyond mean ± threshold·std of the test data in any channel, anywhere in the run."""
    if int(run.attrs.get("diverged", 0)):
        return True
    mean, std = np.nanmean(x, axis=(0, 1)), np.nanstd(x, axis=(0, 1))
    # a constant channel (max = min; its std may be a round-off 1e-17) is given a unit scale
    std = np.where(np.nanmax(x, axis=(0, 1)) > np.nanmin(x, axis=(0, 1)), std, 1.0)
    for i in range(xg.shape[0]):
        seg = xg[i, : n_used[i]]
        if not np.all(np.isfinite(seg)) or np.any(np.abs(seg - mean) > threshold * std):
            return True
    if "z" in run and not np.all(np.isfinite(run["z"].values)):
        return True
    return False


def observed_spectrum_distance(x: np.ndarray, generated: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                       sigma: float) -> tuple[np.ndarray, int]:
    """D_H per channel over the common length of all trials' windows, and that length.

    Spectra need gap-free series and nothing is filled in, so test data with missing samples
    inside the window are compared over each trial's longest fully observed stretch (cut to the
    shortest of them), against the free run at the same steps. A stretch shorter than
    :func:`min_spectrum_length` gives NaN: the smoothing kernel would span its whole spectrum.
    ``x`` / ``generated``: (trial, time, channel); ``starts`` / ``lengths``: each trial's window.
    Also how teacher forcing scores a free run against training data with gaps.
    """
    common = int(np.min(lengths - starts))
    xt = np.stack([x[i, s:s + common] for i, s in enumerate(starts)])
    xg = np.stack([generated[i, s:s + common] for i, s in enumerate(starts)])
    if not np.all(np.isfinite(xt)):
        spans = [longest_observed_stretch(trial) for trial in xt]
        n = min(length for _, length in spans)
        if n < min_spectrum_length(sigma):
            warnings.warn(f"the test data have missing samples inside the evaluation window and their longest "
                          f"fully observed stretch is {n} of {common} samples, shorter than D_H's "
                          f"{min_spectrum_length(sigma)} (16 × sigma); D_H is NaN.", RuntimeWarning, stacklevel=3)
            return np.full(x.shape[2], np.nan), 0
        warnings.warn(f"the test data have missing samples inside the evaluation window; D_H compares the "
                      f"longest fully observed stretch ({n} of {common} samples) with the free run at the same "
                      "steps (nothing is filled in).", RuntimeWarning, stacklevel=3)
        xt = np.stack([trial[a:a + n] for trial, (a, _) in zip(xt, spans)])
        xg = np.stack([trial[a:a + n] for trial, (a, _) in zip(xg, spans)])
        common = n
    elif np.any(lengths - starts != common):
        warnings.warn(f"test trials differ in length; D_H compares the first {common} samples of each.",
                      RuntimeWarning, stacklevel=3)
    return np.asarray(power_spectrum_distance(xt, xg, sigma=sigma, per_channel=True)), common


def _run_step(dt: float | None, run: Any, test: Any, fitted: Any) -> float:
    """The step the free run was generated at: ``dt`` if given, else the run's own record, else the
    test Dataset's step, else the model's (a plain array carries none: as_dataset's 1.0 is no record)."""
    if dt is not None:
        return float(dt)
    if "dt" in getattr(run, "attrs", {}):
        return float(run.attrs["dt"])
    if isinstance(test, xr.Dataset) and "dt" in test.attrs:
        return float(test.attrs["dt"])
    return float(getattr(fitted, "dt", 1.0))


def _check_step(test: Any, fitted: Any, dt: float | None) -> None:
    """Refuse test data whose own sampling step disagrees with the model's when no ``dt`` says
    which to use (:func:`dsident.data.container.check_model_step`): the free run would be
    compared with data on another time axis, and D_H's spectra with it."""
    if dt is None:
        from ..data.container import check_model_step

        check_model_step(test, getattr(fitted, "dt", None), argname="test")


def min_spectrum_length(sigma: float) -> int:
    """The fewest samples D_H compares: 16 σ, so that the smoothing kernel (±4 σ bins) covers at
    most half of the ``n // 2 + 1`` frequency bins; 20 for ``sigma = 0``."""
    return max(20, int(np.ceil(16 * sigma)))


def true_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, stops)`` of each run of True in a 1-D boolean ``mask`` (stops exclusive), in order."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.asarray(mask, dtype=int), [0]])))
    return edges[::2], edges[1::2]


def longest_observed_stretch(series: np.ndarray) -> tuple[int, int]:
    """(start, length) of the longest run of fully observed samples of a (time, channel) series
    (the first of equally long runs; (0, 0) when no sample is fully observed)."""
    starts, stops = true_runs(np.all(np.isfinite(np.asarray(series, dtype=float)), axis=1))
    if starts.size == 0:
        return 0, 0
    longest = int(np.argmax(stops - starts))
    return int(starts[longest]), int(stops[longest] - starts[longest])


def _gap_free_trials(data: Any) -> list[np.ndarray]:
    """Every run of fully observed samples (time, channel) of each trial, in order: a missing
    sample splits a trial instead of ending it (before session 51 only the run before a trial's
    first gap was used, so one gap early in a recording left no stretch for its floor)."""
    out = []
    for trial in as_trials(data, "dataset"):
        starts, stops = true_runs(np.all(np.isfinite(trial), axis=1))
        out += [trial[a:b] for a, b in zip(starts, stops)]
    return out


def _model_config(model: Any) -> dict[str, Any]:
    """A JSON-able description of the model: estimator parameters or the module configs."""
    if hasattr(model, "get_params"):
        try:
            return {"estimator": type(model).__name__, "params": model.get_params()}
        except Exception as err:  # a third-party estimator with an unusual get_params: record why
            return {"estimator": type(model).__name__, "params_error": repr(err)}
    fitted = model.model_ if hasattr(model, "model_") else model
    if callable(getattr(fitted, "config", None)):
        return {"model": type(fitted).__name__, "config": fitted.config()}
    cfg: dict[str, Any] = {"model": type(fitted).__name__}
    for part in ("dynamics", "observation"):
        comp = getattr(fitted, part, None)
        if comp is not None:
            cfg[part] = {"class": type(comp).__name__,
                         **(comp.config() if callable(getattr(comp, "config", None)) else {})}
    if hasattr(fitted, "dt"):
        cfg["dt"] = float(fitted.dt)
    return cfg
