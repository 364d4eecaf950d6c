"""Bridge from a fitted model to the five numbers of a benchmark cell.

The metrics themselves live in :mod:`dsident.metrics` (one implementation of each); this
module only calls :func:`dsident.metrics.evaluate` / :func:`dsident.metrics.floor` with a run
configuration's settings and reads the numbers back under stable names:

``D_stsp``, ``D_H``, ``PE``, ``diverged`` (0/1), and ``coverage`` (the share of the test
samples whose D_stsp bin the free run visits; NaN where a result has none, e.g. the floor)
"""
from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import xarray as xr

#: stable result name -> names the metrics module may use for it
METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "D_stsp": ("D_stsp", "state_space_divergence", "d_stsp", "dstsp"),
    "D_H": ("D_H", "power_spectrum_distance", "d_h", "dh", "hellinger"),
    "PE": ("PE", "prediction_error", "pe", "PE(20)"),
    "diverged": ("diverged", "divergence", "is_diverged"),
    "coverage": ("coverage", "state_space_coverage"),
}
SCORE_NAMES: tuple[str, ...] = ("D_stsp", "D_H", "PE", "diverged")


def _call_with_supported(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` with only the keyword arguments its signature accepts."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return func(*args, **kwargs)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return func(*args, **kwargs)
    return func(*args, **{k: v for k, v in kwargs.items() if k in params})


def _as_float(value: Any) -> float:
    if isinstance(value, xr.DataArray):
        value = value.values
    arr = np.asarray(value, dtype=float)
    if arr.size == 0:
        return math.nan
    if arr.size > 1:  # a per-dimension or per-trial array: the protocol's summary is the mean
        return float(np.nanmean(arr)) if np.isfinite(arr).any() else math.nan
    return float(arr.reshape(-1)[0])


def extract_scores(result: Any) -> dict[str, float]:
    """Read D_stsp, D_H, PE, diverged and coverage out of an ``evaluate``/``floor`` result.

    Accepts an ``xarray.Dataset`` (data variables or attrs) or a mapping. Missing numbers are NaN.
    """
    if isinstance(result, xr.Dataset):
        lookup: Mapping[str, Any] = {**result.attrs, **{k: result[k] for k in result.data_vars}}
    elif isinstance(result, Mapping):
        lookup = result
    else:
        raise TypeError(f"`result` must be an xarray.Dataset or a mapping; got {type(result).__name__}.")
    out = {}
    for name, aliases in METRIC_ALIASES.items():
        value = next((lookup[a] for a in aliases if a in lookup), None)
        out[name] = math.nan if value is None else _as_float(value)
    if math.isnan(out["diverged"]):
        out["diverged"] = 0.0 if math.isfinite(out["D_stsp"]) else math.nan
    return out


def evaluate_model(model: Any, test: xr.Dataset, *, pe_steps: int = 20, seed: int = 0,
                   return_run: bool = False) -> tuple[Any, ...]:
    """SPEC-metrics §4 evaluation of ``model`` on ``test``.

    ``model`` is an estimator or a ``StateSpaceModel`` (``dsident.metrics.evaluate`` takes both).
    Returns ``(scores, raw)``, or ``(scores, raw, run)`` with ``return_run=True``: ``run`` is
    the free run the scores compared (for figures and ``generated.nc``), laid out like ``test``;
    ``raw`` then also holds ``state_space_projections(channel, other_channel)`` where
    :func:`run_projections` gives one (which channels and pairs the free run misses).
    """
    from .. import metrics

    if return_run:
        raw, run = metrics.evaluate(model, test, pe_steps=pe_steps, seed=seed, return_run=True)
        projections = run_projections(test, run, raw)
        if projections is not None:
            raw = raw.assign(state_space_projections=projections)
        return extract_scores(raw), raw, run
    raw = metrics.evaluate(model, test, pe_steps=pe_steps, seed=seed)
    return extract_scores(raw), raw


def run_projections(test: xr.Dataset, run: xr.Dataset, raw: xr.Dataset) -> Any:
    """The binned D_stsp of each scored channel and channel pair of the compared free run ``run``
    (:func:`dsident.metrics.state_space_projections`, with the settings ``raw`` records); None
    with fewer than two scored channels, for a diverged run or for the Gaussian-mixture D_stsp
    (whose projections would not be the binned estimator's)."""
    from ..data.slow_channels import scored_channels
    from ..metrics import state_space_projections

    keep = scored_channels(test)
    if keep.size < 2 or bool(raw["diverged"]) or raw.attrs.get("stsp_method_used", "bins") != "bins":
        return None
    return state_space_projections(test["x"].values[..., keep], run["x"].values[..., keep],
                                   n_bins=int(raw.attrs.get("n_bins", 30)),
                                   smoothing_alpha=float(raw.attrs.get("smoothing_alpha", 1e-5)),
                                   direction=str(raw.attrs.get("direction", "forward")),
                                   channels=test["channel"].values[keep])


def run_periods(test: xr.Dataset, run: xr.Dataset) -> dict[str, Any] | None:
    """The fundamental period of the data and of the compared free run, on one channel.

    D_H smooths the spectra over 20 frequency bins, so a free run whose rhythm is tens of per
    cent off can score a small D_H on a short test stretch; the period says it in the data's
    time unit. Both come from :func:`dsident.analysis.rhythm_period` (the lowest spectral line
    with at least half the strongest one's power, among lines standing well above their
    surroundings, over the longest fully observed stretch: a spike train's second harmonic can
    be its strongest line) of the first trial's most variable scored channel that has a rhythm
    (the data pick it, so both are of one variable). A chaotic channel's broadband spectrum has
    none (Lorenz-63's x and y; its z has the 0.76-time-unit oscillation).

    Returns
    -------
    dict or None
        ``channel`` (name), ``data`` and ``generated`` (periods in the data's time unit; NaN when
        a series is flat, non-finite, too short or without a rhythm: ``data`` NaN when no scored
        channel has one), ``ratio`` (generated / data). None when
        ``test`` has no scored channel with two distinct finite values.
    """
    from ..analysis import rhythm_period
    from ..data.slow_channels import scored_channels

    x = np.asarray(test["x"].values[0], dtype=float)
    g = np.asarray(run["x"].values[0], dtype=float)
    keep = scored_channels(test)
    if keep.size == 0 or x.shape[0] < 4:
        return None
    with np.errstate(all="ignore"):
        var = np.array([np.nanvar(x[:, k]) if np.isfinite(x[:, k]).sum() > 1 else np.nan for k in keep])
    if not np.isfinite(var).any() or np.nanmax(var) <= 0:
        return None
    dt = float(test.attrs["dt"])
    # the most variable channel with a rhythm (Lorenz-63's z: its x and y are broadband)
    order = [int(keep[i]) for i in np.argsort(-np.nan_to_num(var, nan=-np.inf)) if np.isfinite(var[i])]
    k, data = order[0], math.nan
    for c in order:
        data = rhythm_period(x[:, c], dt)
        if math.isfinite(data):
            k = c
            break
    generated = rhythm_period(g[:, k], dt) if k < g.shape[1] and math.isfinite(data) else math.nan
    ratio = generated / data if math.isfinite(data) and math.isfinite(generated) and data > 0 else math.nan
    return {"channel": str(test["channel"].values[k]), "data": data, "generated": generated, "ratio": ratio}


#: bursts a test stretch must hold, and spikes a burst in the median, for fit.md to compare a
#: free run's bursts with them: fewer than find_bursts asks before it names a period, because
#: this describes and decides nothing (10 000 held-out samples of the chaotic Hindmarsh-Rose
#: voltage hold 11 bursts of 2.5 spikes in the median, its whole recording 3)
COMPARED_MIN_BURSTS = 4
COMPARED_MIN_SPIKES = 2


def run_bursts(test: xr.Dataset, run: xr.Dataset | None) -> dict[str, Any] | None:
    """The bursts of the data and of the compared free run, on one channel.

    A chaotic burster has no spectral line (:func:`run_periods` gives no period), but its
    bursts can be counted: :func:`dsident.analysis.bursts.find_bursts` on the first trial's most
    variable scored channel that bursts (at least :data:`COMPARED_MIN_BURSTS` bursts of
    :data:`COMPARED_MIN_SPIKES` or more spikes in the median), and on the same channel of the run.

    Returns
    -------
    dict or None
        ``channel`` (name), ``data`` and ``generated`` (:class:`~dsident.analysis.bursts.Bursts`;
        ``generated`` None when the run does not burst, or is None: a diverged run). None when no
        scored channel of ``test`` bursts.
    """
    from ..analysis.bursts import find_bursts
    from ..data.slow_channels import scored_channels

    x = np.asarray(test["x"].values[0], dtype=float)
    g = None if run is None else np.asarray(run["x"].values[0], dtype=float)
    dt = float(test.attrs["dt"])
    keep = [int(k) for k in scored_channels(test) if np.isfinite(x[:, k]).sum() > 1]
    for k in sorted(keep, key=lambda c: -float(np.nanvar(x[:, c]))):
        data = find_bursts(x[:, k], dt, min_bursts=COMPARED_MIN_BURSTS, min_spikes=COMPARED_MIN_SPIKES)
        if data is not None:
            generated = (find_bursts(g[:, k], dt, min_bursts=COMPARED_MIN_BURSTS, min_spikes=COMPARED_MIN_SPIKES)
                         if g is not None and k < g.shape[1] and np.isfinite(g[:, k]).all() else None)
            return {"channel": str(test["channel"].values[k]), "data": data, "generated": generated}
    return None


def recording_floor(cfg: Mapping[str, Any]) -> tuple[dict[str, float], Any]:
    """The floor of a data file, which names no true system: the same metrics between the test
    stretch a run is scored on and up to 5 other stretches of the same length from the recording
    (SPEC-metrics §5 with the recording standing in for the true system).

    The test stretch is the first ``eval_length`` samples (at most) of the held-out ends
    (``test_fraction``) or of ``test_data``; the other stretches come from the training part,
    consecutive and non-overlapping, split at missing samples (:func:`dsident.metrics.floor`
    with ``pairing="first"``). Scores are the mean over those pairs; ``PE`` is NaN (a noisy
    recording cannot forecast itself, so there is no PE floor to quote), ``diverged`` 0.
    ``D_stsp_at_rest`` is the D_stsp of a run resting at the test stretch's mean, the yardstick of
    :func:`.tables.floor_discriminates`; ``length`` the samples compared.

    Raises
    ------
    ValueError
        The run holds out no test data (a file fitted and scored whole), or the training part
        has no stretch as long as the test stretch.
    """
    from .. import metrics
    from .inputs import held_out_split, load_data, read_options_for

    if cfg.get("test_fraction") is not None:
        other, test = held_out_split(cfg)
    elif cfg.get("test_data"):
        test = load_data(cfg["test_data"], split="test", dt=cfg.get("dt"),
                         read=read_options_for(cfg, cfg["test_data"]))
        other = load_data(cfg["dataset"], split="train", dt=cfg.get("dt"), read=cfg.get("read"))
    else:
        raise ValueError(f"the data file {cfg.get('dataset')!r} holds out no test data (`test_fraction` or "
                         "`test_data`), so it has no stretch of its own to compare with.")
    if cfg.get("delay_embedding") is not None:      # compared in the space the models are scored in
        other, test = _embedded_pair(cfg, other, test)
    length = min(int(cfg.get("eval_length") or test.sizes["time"]), int(test.sizes["time"]))
    # the stretch a free run is scored on (the first trial's), against the training part's
    test = test.isel(trial=[0], time=slice(0, length))
    raw = metrics.floor(test, other, length=length, pairing="first")
    scores = extract_scores(raw)
    scores["PE"], scores["diverged"] = math.nan, 0.0
    # a run at rest at the test stretch's mean: on a short stretch (mostly empty bins) it can
    # score within a few times the floor, and then D_stsp tells nothing apart
    x = test["x"].values[0, :length]
    x = x[np.isfinite(x).all(axis=1)]
    scores["D_stsp_at_rest"] = float(metrics.state_space_divergence(x, np.repeat(x.mean(0, keepdims=True), len(x), 0)))
    scores["length"] = float(length)
    return scores, raw


#: the run keys a recording's floor depends on besides its dataset and ``eval_length``: which part
#: is held out, how the file is read and embedded, how much of it the embedding is chosen on
FLOOR_KEYS = ("test_fraction", "test_data", "read", "delay_embedding", "train_length")

#: what a floor compares, by the kind of data (:func:`run_floor`)
FLOOR_KINDS = {"true system": "the true system's independent stretches",
               "recording": "the recording's other stretches against its test stretch"}


def run_floor(cfg: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    """The floor a run's test scores compare with, at its ``eval_length``, and what it compares
    (:data:`FLOOR_KINDS`): a shipped set's true system (:func:`floor_scores`), or for a data file
    the recording's own other stretches against its test stretch (:func:`recording_floor`).

    Raises
    ------
    ValueError
        No floor applies: a file scored whole, or a shipped set fitted delay-embedded (its true
        system's floor is of the set's own channels).
    """
    from .inputs import is_path_like

    if is_path_like(str(cfg["dataset"])):
        return recording_floor(cfg)[0], FLOOR_KINDS["recording"]
    if cfg.get("delay_embedding") is not None:
        raise ValueError("the true system's floor is of the set's own channels, not of a delay embedding")
    scores, _ = floor_scores(str(cfg["dataset"]), eval_length=int(cfg["eval_length"]),
                             pe_steps=int(cfg.get("pe_steps", 20)))
    return scores, FLOOR_KINDS["true system"]


def cached_floor(cfg: Mapping[str, Any], out: Path, say: Any = None) -> dict[str, float]:
    """:func:`run_floor` (its scores; NaN when there is none, said through ``say``), cached in
    ``out/floor_<dataset>_<length>[_<tag>].json`` (the tag tells a recording's held-out settings
    and file contents apart). The benchmark's floor row and a sweep's floor line."""
    import hashlib
    import json

    from .data_files import data_digests
    from .inputs import is_path_like

    dataset = str(cfg["dataset"])
    length = cfg.get("eval_length")
    # a recording's floor depends on which part is held out and how the file is read
    # and on what its files hold, so that a file edited in place gets a floor of its own
    held = json.dumps({**{k: cfg.get(k) for k in FLOOR_KEYS}, "files": data_digests(cfg)}, sort_keys=True,
                      default=str)
    tag = f"_{hashlib.sha1(held.encode()).hexdigest()[:8]}" if is_path_like(dataset) else ""
    cache = Path(out) / f"floor_{Path(dataset).stem}_{length}{tag}.json"
    if cache.is_file():
        return {k: (math.nan if v is None else v) for k, v in json.loads(cache.read_text()).items()}
    try:
        scores, _ = run_floor(cfg)
    except Exception as err:  # the table stands without its floor, and says so
        if say is not None:
            say(f"[dsident] no floor for {dataset}: {type(err).__name__}: {err}")
        return {"D_stsp": math.nan, "D_H": math.nan, "PE": math.nan, "diverged": math.nan}
    cache.write_text(json.dumps({k: (None if not math.isfinite(v) else v) for k, v in scores.items()}))
    return scores


def _embedded_pair(cfg: Mapping[str, Any], train: Any, test: Any) -> tuple[Any, Any]:
    """The training part and test data of a run delay-embedded as its fit embeds them: with its
    resolved delays, or those ``"auto"`` chooses on the training data (cut to ``train_length``)."""
    from .inputs import _embedded, cut, embedding_for_fit

    spec = cfg["delay_embedding"]
    if not (isinstance(spec, dict) and isinstance(spec.get("delays"), list)):
        fitted = train if not cfg.get("train_length") else cut(train, int(cfg["train_length"]))
        _, spec = embedding_for_fit(fitted, spec)
    return _embedded(train, {"delay_embedding": spec}), _embedded(test, {"delay_embedding": spec})


def floor_scores(dataset: str, *, eval_length: int, pe_steps: int = 20) -> tuple[dict[str, float], Any]:
    """The floor (SPEC-metrics §5) of a shipped dataset at the evaluation length."""
    from .. import metrics

    raw = _call_with_supported(metrics.floor, dataset, length=eval_length)
    scores = extract_scores(raw)
    # the true system predicts itself exactly (PE floor 0 on clean data) and never diverges
    scores["PE"], scores["diverged"] = 0.0, 0.0
    return scores, raw
