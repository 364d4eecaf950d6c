"""The figure of a fit's training: its loss, and the free runs it scored on the way.

Like :mod:`dsident.plotting`, the function builds a :class:`matplotlib.figure.Figure` without
pyplot, returns it and writes a PNG when ``save`` is given. ``dsident fit`` draws it as
``history.png``.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from matplotlib.figure import Figure

from .inference.training_trend import as_floats, training_trend
from .plotting import _finish

__all__ = ["plot_training_history"]

#: (x key, y key, label) of each engine's per-update loss, the first present one is drawn:
#: gradient engines (teacher forcing, BPTT), SVI, Laplace-EM
_LOSS_SERIES = (("epoch", "train_loss", "training loss (per epoch)"), ("step", "loss", "loss (negative ELBO)"),
                (None, "log_likelihood", "log-likelihood (per EM iteration)"))


def plot_training_history(history: Mapping[str, Any], *, title: str | None = None,
                          save: str | Path | None = None) -> Figure:
    """A fit's training at a glance.

    Left, the loss the engine minimised (teacher forcing and BPTT: ``train_loss`` per epoch,
    with BPTT's ``val_loss``; SVI: ``loss`` per step; Laplace-EM: ``log_likelihood`` per
    iteration), on a log axis when it stays positive. Right, when the fit scored free runs
    (``eval_epoch``, ``state_space_divergence``): their training-side D_stsp per epoch on a log
    axis, the kept epoch starred, and the medians that
    :func:`~dsident.inference.training_trend.training_trend` compares drawn over the third and
    last quarters of the epochs, its verdict in the panel's title; a ``polish`` stage's best
    run is a diamond after the last epoch.

    Parameters
    ----------
    history : mapping
        A fitted estimator's ``history_`` (or a saved one: NaN scores may be None).
    title : str, optional
        The figure's title.
    save : path, optional
        Write the figure there as PNG.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(history, Mapping):
        raise ValueError(f"`history` must be a fit's history mapping (an estimator's history_); "
                         f"got {type(history).__name__}.")
    for key in ("train_loss", "loss", "log_likelihood", "val_loss", "epoch", "step", "eval_epoch",
                "state_space_divergence"):
        values = history.get(key)
        if values is None:
            continue
        try:
            if isinstance(values, (str, bytes)):
                raise TypeError
            as_floats(values)
        except (TypeError, ValueError):
            raise ValueError(f"`history[{key!r}]` must be a list of numbers (None for a missing one); got "
                             f"{values!r:.60}.") from None
    loss = next(((xk, yk, label) for xk, yk, label in _LOSS_SERIES if len(history.get(yk) or []) > 0), None)
    scored = len(history.get("eval_epoch") or []) > 0 and \
        len(history.get("state_space_divergence") or []) == len(history.get("eval_epoch") or [])
    if loss is None and not scored:
        raise ValueError(f"`history` holds no loss series ({', '.join(k for _, k, _ in _LOSS_SERIES)}) and no "
                         f"scored free runs; got the keys {sorted(history)}.")
    n_panels = int(loss is not None) + int(scored)
    fig = Figure(figsize=(5.0 * n_panels, 3.6))
    axes = [fig.add_subplot(1, n_panels, i + 1) for i in range(n_panels)]
    if loss is not None:
        ax = axes[0]
        xk, yk, label = loss
        y = as_floats(history[yk])
        x = as_floats(history[xk]) if xk and len(history.get(xk) or []) == len(y) else np.arange(len(y), dtype=float)
        # a fit of one epoch has one loss value: a line through one point draws nothing
        ax.plot(x, y, color="tab:blue", lw=1, label=yk, marker="o" if len(y) == 1 else None, ms=4)
        val = None
        if len(history.get("val_loss") or []) == len(history.get("eval_epoch") or []) and history.get("val_loss"):
            val = as_floats(history["val_loss"])
            ax.plot(as_floats(history["eval_epoch"]), val, color="tab:orange", lw=1, label="val_loss",
                    marker="o" if len(val) == 1 else None, ms=4)
        # one NaN loss (an epoch that failed, saved as None) is a gap; it left a loss falling over
        # decades on a linear axis, flat after its first epochs
        drawn = np.concatenate([y, val]) if val is not None else y
        drawn = drawn[np.isfinite(drawn)]
        if drawn.size and np.all(drawn > 0):
            ax.set_yscale("log")
        ax.set_xlabel({"epoch": "epoch", "step": "step"}.get(xk or "", "iteration"))
        ax.set_title(label, fontsize="medium")
        ax.legend(fontsize="small")
    if scored:
        ax = axes[-1]
        epochs = as_floats(history["eval_epoch"])
        scores = as_floats(history["state_space_divergence"])
        ok = np.isfinite(scores) & (scores > 0)
        ax.plot(epochs[ok], scores[ok], ".", color="0.4", ms=3, label="scored free runs")
        best = history.get("best_epoch")
        at_best = np.flatnonzero(epochs == best)[:1] if best is not None else np.zeros(0, dtype=int)
        if at_best.size and np.isfinite(scores[at_best[0]]):
            ax.plot([best], [scores[at_best[0]]], "*", color="tab:red", ms=12, label=f"kept (epoch {int(best)})")
        polish = history.get("polish") or {}
        after = polish.get("score_after")
        if after is not None and math.isfinite(float(after)) and float(after) > 0:
            # the polish stage's best run, drawn after the fit's last epoch
            end = float(history.get("n_epochs_run") or (np.nanmax(epochs) + 1))
            ax.plot([end], [float(after)], "D", color="tab:purple", ms=7,
                    label=f"polish stage ({'kept' if polish.get('kept') else 'not kept'})")
        trend = training_trend(history)
        if trend is not None:
            n = trend["n_epochs"]
            ax.plot([0.5 * n, 0.75 * n], [trend["median_third"]] * 2, color="tab:green", lw=2,
                    label="medians, 3rd / last quarter")
            ax.plot([0.75 * n, n], [trend["median_last"]] * 2, color="tab:green", lw=2)
        ax.set_title("still improving when it stopped" if trend is not None and trend["still_improving"]
                     else "scored free runs (training D_stsp)", fontsize="medium")
        if ok.any():
            ax.set_yscale("log")
        else:       # an empty panel would look like a plotting failure: say what the runs did
            regimes = [str(r) for r in history.get("free_run_regime") or []]
            why = (f"all {len(scores)} diverged" if regimes and all(r == "diverged" for r in regimes)
                   else f"none of the {len(scores)} has a finite D_stsp")
            ax.text(0.5, 0.5, f"scored free runs: {why}", transform=ax.transAxes, ha="center", va="center",
                    color="tab:red")
        ax.set_xlabel("epoch")
        ax.set_ylabel("D_stsp (training data)")
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _finish(fig, save, dpi=110)
