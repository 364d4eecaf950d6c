"""The benchmark's last question: do the best reconstructions have the true system's dynamics?

For the best point of each dataset, :func:`best_point_dynamics` runs
:func:`dsident.analysis.analyze_dynamics` on the saved model and puts its verdict, largest
Lyapunov exponent and Kaplan-Yorke dimension beside those of the true system
(:func:`dsident.analysis.system_lyapunov_spectrum`, when the data name one), and the model's
fixed points, read out in the data's channels, beside the true system's
(:func:`dsident.analysis.system_fixed_points`, :func:`dsident.analysis.match_fixed_points`). It writes
``<dataset>_dynamics.md`` and ``<dataset>_flow.png`` into the benchmark folder and returns one
line for ``results.md``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .late_run import analysis_length, first_observation

__all__ = ["ANALYSIS_TIME_BUDGET_S", "TRUE_SPECTRUM_STEPS", "best_point_dynamics", "fixed_point_comparison",
           "true_spectrum"]

#: seconds for the best point's PLRNN fixed-point and cycle searches: unlimited, the ECG cell's
#: rPLRNN (M = 300) took about 20 minutes after the grid itself; `dsident analyze POINT/model`
#: without --time-budget runs the full search (a report cut short says so)
ANALYSIS_TIME_BUDGET_S = 300.0


def best_point_dynamics(dataset: str, record: dict[str, Any], out: Path, *, say: Any = None) -> str | None:
    """Analyse the best point's saved model; write its report and flow figure; return a line.

    Parameters
    ----------
    dataset : str
        Dataset name or file, as in the benchmark grid.
    record : dict
        The point's record (``point_id``, ``config``).
    out : Path
        The benchmark folder (holding ``points/<point_id>/model``).
    say : callable, optional
        Where a failure is reported; the benchmark goes on without the line.

    Returns
    -------
    str or None
        A Markdown list item, or None when the point has no saved model or the analysis failed.
    """
    from .. import plotting
    from ..analysis import analyze_dynamics, dominant_period, kaplan_yorke_dimension
    from .registry import get_estimator_class

    say = say or (lambda *a, **k: None)
    cfg = record["config"]
    model_dir = Path(out) / "points" / record["point_id"] / "model"
    if not model_dir.is_dir():
        return None
    stem = Path(dataset).stem
    label = f"{cfg['model']} × {cfg['method']}, seed {cfg['seed']}"
    try:
        from .inputs import run_test

        est = get_estimator_class(cfg["model"]).load(model_dir)
        test = run_test(cfg)
        n_steps = analysis_length(cfg.get("eval_length"))
        # start where the evaluation's free runs start (a multistable model may have other attractors)
        report = analyze_dynamics(est, n_steps=n_steps, transient=n_steps // 10, seed=int(cfg.get("seed", 0)),
                                  x0=first_observation(test), name=f"{stem}: {label}",
                                  time_budget=ANALYSIS_TIME_BUDGET_S)
        truth, unit = true_spectrum(dataset, test, Path(out))
        text = report.to_markdown()
        if truth is not None:
            text += (f"\nTrue system: Lyapunov exponents {np.array2string(truth, precision=4)} per {unit}, "
                     f"Kaplan-Yorke dimension {kaplan_yorke_dimension(truth):.3f}.\n")
        fixed_text, fixed_phrase = fixed_point_comparison(test, report)
        text += fixed_text
        (Path(out) / f"{stem}_dynamics.md").write_text(text)
        dims = report.flow_dims()
        if dims is not None and report.verdict != "diverged":
            plotting.plot_flow_field(est, dims=dims, fixed_points=report.fixed_points,
                                     cycles=report.cycles or None, trajectory=report.trajectory,
                                     title=f"{stem}: {label} ({report.verdict})", save=Path(out) / f"{stem}_flow.png")
    except Exception as err:   # the scores stand without the analysis
        say(f"[dsident] dynamics of the best {dataset} point not analysed: {type(err).__name__}: {err}")
        return None
    line = (f"- {dataset}, best point ({label}): free run **{report.verdict}**; "
            f"λ_max = {_num(report.max_lyapunov)} per {unit}")
    if truth is not None:
        line += f" (true system {_num(truth[0])})"
    line += f"; Kaplan-Yorke dimension {_num(report.kaplan_yorke)}"
    if truth is not None:
        line += f" (true {_num(kaplan_yorke_dimension(truth))})"
    if math.isfinite(report.dominant_period):
        line += f"; dominant period {_num(report.dominant_period)} {'time units' if unit == 'time unit' else unit}"
        data_period = dominant_period(np.asarray(test["x"].values[0], dtype=float), float(test.attrs["dt"]))
        if math.isfinite(data_period):
            line += f" (data {_num(data_period)})"
    if fixed_phrase:
        line += f"; {fixed_phrase}"
    return line + f" ({stem}_dynamics.md)"


def fixed_point_comparison(test: Any, report: Any) -> tuple[str, str]:
    """The model's fixed points beside the true system's, both in the data's channels.

    Parameters
    ----------
    test : xarray.Dataset
        Data of a simulated benchmark set (its provenance names the system; its channels'
        standard deviations are the unit of distance).
    report : DynamicsReport
        The model's analysis; its ``fixed_point_observations`` must be in the data's units.

    Returns
    -------
    markdown, phrase : str, str
        A Markdown section (a table pairing each true fixed point with a model one, then the
        spurious ones) and a phrase for a summary line; both empty when the data name no
        system or do not observe its variables.
    """
    from ..analysis import match_fixed_points, system_fixed_points

    try:
        truth = system_fixed_points(test)
    except ValueError:        # a recording or the ECG: no true fixed points
        return "", ""
    observed = report.fixed_point_observations
    if truth.channels is None or len(truth) == 0 or observed is None or len(observed) != len(report.fixed_points):
        return "", ""
    x = np.asarray(test["x"].values, dtype=float).reshape(-1, truth.channels.shape[1])
    scale = np.nanstd(x, axis=0)
    if not np.all(np.isfinite(scale) & (scale > 0)):
        return "", ""
    match = match_fixed_points(truth.channels, observed, scale=scale)
    names = ", ".join(truth.channel_names)
    rows = ["", f"### Fixed points beside the true system's ({names}; data units)", "",
            "| true fixed point | true type | paired model fixed point | model type | distance (sd) |",
            "|---|---|---|---|---|"]
    kinds = report.fixed_points.kind
    for i, point in enumerate(truth.channels):
        j = int(match.paired[i])
        model_point = "–" if j < 0 else _vector(observed[j])
        model_kind = "–" if j < 0 else kinds[j]
        rows.append(f"| {_vector(point)} | {truth.kind[i]} | {model_point} | {model_kind} | "
                    f"{_num(float(match.distance[i]))} |")
    if len(match.spurious):
        rows += ["", "Model fixed points with no true one within "
                 f"{match.tol:g} sd: " + "; ".join(f"{_vector(observed[j])} ({kinds[j]})"
                                                    for j in match.spurious) + "."]
    return "\n".join(rows) + "\n", match.summary()


def _vector(values: np.ndarray) -> str:
    return "(" + ", ".join(f"{v:.3g}" for v in np.asarray(values, float)) + ")"


#: sampling steps the true system's spectrum is averaged over (system_lyapunov_spectrum's default)
TRUE_SPECTRUM_STEPS = 20_000


def true_spectrum(dataset: str, test: Any, out: Path) -> tuple[np.ndarray | None, str]:
    """The true system's spectrum (:data:`TRUE_SPECTRUM_STEPS` sampling steps; cached in ``out``)
    and the data's time unit; None for the spectrum when the data name no deterministic system."""
    from ..analysis import system_lyapunov_spectrum
    from ..data.time_units import time_unit

    unit = time_unit(test) or "time unit"
    cache = out / f"lyapunov_{Path(dataset).stem}.json"
    if cache.is_file():
        values = json.loads(cache.read_text())
        return (None if values is None else np.asarray(values, dtype=float)), unit
    try:
        truth = system_lyapunov_spectrum(test, duration=TRUE_SPECTRUM_STEPS * float(test.attrs["dt"]))
    except ValueError:          # a recording or a stochastic generator (the ECG): no truth to compare
        truth = None
    cache.write_text(json.dumps(None if truth is None else [float(v) for v in truth]))
    return truth, unit


def _num(value: float) -> str:
    return "–" if not math.isfinite(value) else f"{value:.3g}"
