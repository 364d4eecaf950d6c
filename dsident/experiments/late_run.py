"""Every benchmark point's free run beyond the scored stretch: did it stay on its attractor?

The protocol (SPEC-metrics §4) scores the first ``T`` steps after a burn-in of ``T / 4``. A
model can spend those steps on a long chaotic transient and then fall into a fixed point
(tutorial 1's rPLRNN does, near step 15 000 of a 10 000-step evaluation), and the score cannot
tell. :func:`point_regime` therefore runs each fitted point twice as far, from the same first
test sample, and records

- ``regime``: the verdict of :func:`dsident.analysis.free_run_regime` over
  :func:`analysis_length` steps (fixed point, attracting cycle, periodic or quasi-periodic,
  chaotic, diverged),
- ``lambda_max``: its largest Lyapunov exponent per unit of the data's time,
- ``D_stsp`` and ``D_H`` of the *late* stretch: the same :func:`dsident.metrics.evaluate`
  with a burn-in of ``1.25 T``, so the compared window is steps ``[1.25 T, 2.25 T)`` instead
  of ``[0.25 T, 1.25 T)``;
- where the test data burst, the bursts of the run and of the test stretch
  (:func:`.scoring.run_bursts`): median period, spikes a burst, and the period's CV.

Data with inputs are not analysed (the free run would need the inputs beyond the test stretch).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["point_regime", "late_run_record", "analysis_length", "first_observation", "LATE_BURN_IN", "BURST_KEYS"]

#: burn-in of the late stretch, in units of the evaluation length T: scored window [1.25 T, 2.25 T)
LATE_BURN_IN = 1.25

#: what a point records of the bursts, where its test data burst: the late run's, then the test's
BURST_KEYS = ("burst_period", "spikes_per_burst", "burst_cv", "data_burst_period", "data_spikes_per_burst",
              "data_burst_cv")


def analysis_length(eval_length: int | None) -> int:
    """Steps of the analysed free run: twice the evaluation length, within [2 000, 20 000]."""
    return int(min(20_000, max(2_000, 2 * int(eval_length or 10_000))))


def first_observation(data: Any) -> np.ndarray | None:
    """The first fully observed sample ``(channel,)`` of the first trial; None if there is none."""
    x = np.asarray(data["x"].values[0], dtype=float)
    rows = np.flatnonzero(np.isfinite(x).all(axis=1))
    return x[rows[0]] if rows.size else None


def point_regime(model: Any, test: xr.Dataset, *, seed: int = 0) -> dict[str, Any]:
    """The late free run of one fitted point.

    Parameters
    ----------
    model : fitted estimator or StateSpaceModel
    test : xarray.Dataset
        The scored test stretch (its length is the evaluation length ``T``).
    seed : int
        Seed of the free runs (as in the evaluation).

    Returns
    -------
    dict
        ``regime`` (str, one of :data:`dsident.analysis.VERDICTS`, or None with ``reason``),
        ``lambda_max`` (per unit of time), ``D_stsp`` and ``D_H`` of the late stretch (NaN when
        it diverged), ``steps`` (length of the analysed run), ``zero_tol`` (per unit of time:
        an exponent within it counts as zero over that many steps); with bursting test data also
        ``burst_period``, ``spikes_per_burst``, ``burst_cv`` of the analysed run (NaN when it
        does not burst) and ``data_burst_period``, ``data_spikes_per_burst``, ``data_burst_cv``
        of the test stretch.
    """
    from .. import metrics
    from ..analysis import free_run_regime
    from .scoring import extract_scores

    if "u" in test:
        return {"regime": None, "reason": "the data have inputs; the late free run is not analysed",
                "lambda_max": math.nan, "D_stsp": math.nan, "D_H": math.nan, "steps": 0}
    n_time = int(test.sizes["time"])
    n_steps = analysis_length(n_time)
    x0 = first_observation(test)
    if x0 is None:
        raise ValueError("`test` has no fully observed sample to start the late free run from.")
    # the verdict and λ_max need the leading exponent only: O(M²) a step, not the spectrum's O(M³)
    regime = free_run_regime(model, n_steps=n_steps, transient=n_steps // 10, x0=x0, seed=int(seed), n_exponents=1)
    with warnings.catch_warnings():
        # a late divergence is the finding here, reported as `regime`, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        scores = extract_scores(metrics.evaluate(model, test, burn_in_fraction=LATE_BURN_IN, pe_steps=1,
                                                 seed=int(seed)))
    # a run that leaves the data's range by the scores' rule (divergence_threshold sd) is diverged
    # here too, though finite: the table beside this verdict calls it so
    verdict = "diverged" if scores["diverged"] else regime.verdict
    out = {"regime": verdict, "lambda_max": regime.max_lyapunov, "D_stsp": scores["D_stsp"],
           "D_H": scores["D_H"], "steps": n_steps, "zero_tol": float(regime.zero_tol) / float(regime.dt)}
    return {**out, **_bursts(test, regime.trajectory if verdict != "diverged" else None)}


def _bursts(test: xr.Dataset, run: xr.Dataset | None) -> dict[str, float]:
    """The bursts of ``run`` (None: a diverged run, no bursts) and of ``test``
    (:func:`.scoring.run_bursts`) as flat numbers; empty when the test data do not burst."""
    from .scoring import run_bursts

    found = run_bursts(test, run)
    if found is None:
        return {}
    out = {}
    for prefix, b in (("", found["generated"]), ("data_", found["data"])):
        out.update({f"{prefix}burst_period": b.period if b else math.nan,
                    f"{prefix}spikes_per_burst": b.spikes_per_burst if b else math.nan,
                    f"{prefix}burst_cv": b.period_cv if b else math.nan})
    return out


def late_run_record(model: Any, test: xr.Dataset, *, seed: int = 0) -> dict[str, Any]:
    """:func:`point_regime`, or ``{"regime": None, "reason": ...}`` when it fails: what a grid
    point and ``dsident fit`` / ``evaluate`` record, since their scores stand without it."""
    try:
        return point_regime(model, test, seed=seed)
    except Exception as err:
        return {"regime": None, "reason": f"{type(err).__name__}: {err}"}
