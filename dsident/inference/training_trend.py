"""Was a fit still getting better when it stopped? A reading of its scored free runs.

A teacher-forcing fit scores a free run every ``eval_every`` epochs (the training-side D_stsp in
``history["state_space_divergence"]``, at the epochs in ``history["eval_epoch"]``) and keeps the
best. When the kept epoch is one of the last and the typical score was still falling, the fit
had not settled: more training may well give a better model.

Measured on 42 recorded fits of five benchmark cells (docs/teacher_forcing.md "Was the fit still
improving?", session 37): 17 were flagged (4 of the 8 ECG gnODE fits, 5 of the 8 ECG shallow
PLRNN's, 4 of the 8 ECG rPLRNN's, 1 of 6 bursting shallow PLRNN's, 3 of 12 bursting rPLRNN's),
and none of 32 Lorenz-63 shallow PLRNN fits. A further stage of training (`polish`) lowered
the training score of 16 of the 17 flagged fits, against 16 of the 25 others.

The median of a quarter's scores, not its minimum, is compared: single scored runs jump from one
epoch to the next (a lucky draw is one of them), their median moves only when most runs do.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = ["training_trend"]


def as_floats(values: Any) -> np.ndarray:
    """A history's series as floats, None (a NaN saved to JSON) as NaN."""
    return np.asarray([math.nan if v is None else float(v) for v in values], dtype=float)


def training_trend(history: Mapping[str, Any], *, min_drop: float = 0.25, last_fraction: float = 0.1,
                   min_scores: int = 4) -> dict[str, Any] | None:
    """How the scored free runs of a fit moved over its last half.

    Parameters
    ----------
    history : mapping
        A fit's history with ``eval_epoch`` (epochs, 0-based) and ``state_space_divergence``
        (training-side D_stsp of each scored run; None or NaN where a run had none), plus
        ``n_epochs_run`` (else one more than the last scored epoch) and ``best_epoch``.
    min_drop : float
        The fall of the median score from the third quarter of the epochs to the last,
        as a fraction of the third quarter's, from which the fit counts as still improving.
    last_fraction : float
        ...and the kept epoch must lie in this last fraction of the epochs.
    min_scores : int
        Each quarter needs at least this many finite scores, else there is no verdict (None).

    Returns
    -------
    dict or None
        ``n_epochs``, ``best_epoch``, ``median_third`` and ``median_last`` (the median score of
        the runs scored in epochs [n/2, 3n/4) and [3n/4, n)), ``drop`` (1 − last / third),
        ``still_improving`` (bool) and a one-line ``message``; None for a history without enough
        scored runs (another method, ``eval_every=0``, a short fit).
    """
    if not 0.0 < min_drop < 1.0:
        raise ValueError(f"`min_drop` must lie in (0, 1) (a fraction of the third quarter's median); "
                         f"got {min_drop!r}.")
    if not 0.0 < last_fraction <= 1.0:
        raise ValueError(f"`last_fraction` must lie in (0, 1]; got {last_fraction!r}.")
    epochs = history.get("eval_epoch") or []
    raw = history.get("state_space_divergence") or []
    if len(epochs) != len(raw) or not epochs:
        return None
    epochs = np.asarray(epochs, dtype=float)
    scores = as_floats(raw)
    n = history.get("n_epochs_run") or int(epochs.max()) + 1
    n = float(n)
    third = (epochs >= 0.5 * n) & (epochs < 0.75 * n) & np.isfinite(scores)
    last = (epochs >= 0.75 * n) & np.isfinite(scores)
    if third.sum() < min_scores or last.sum() < min_scores:
        return None
    med_third, med_last = float(np.median(scores[third])), float(np.median(scores[last]))
    drop = 1.0 - med_last / med_third if med_third > 0 else 0.0
    best = int(history.get("best_epoch") if history.get("best_epoch") is not None else -1)
    late_best = best >= (1.0 - last_fraction) * n        # epochs count from 0: the last is n - 1
    improving = bool(drop >= min_drop and late_best)
    if improving:
        message = (f"still improving when it stopped: the kept epoch is {best} of {int(n)}, and the median "
                   f"training D_stsp of the scored runs fell {100 * drop:.0f} % from the third quarter of the "
                   f"epochs to the last ({med_third:.3g} → {med_last:.3g}); more training (n_epochs, or a polish "
                   f"stage) may help")
    else:
        message = (f"kept epoch {best} of {int(n)}; median training D_stsp of the scored runs "
                   f"{med_third:.3g} in the third quarter of the epochs, {med_last:.3g} in the last")
    return {"n_epochs": int(n), "best_epoch": best, "median_third": med_third, "median_last": med_last,
            "drop": drop, "still_improving": improving, "message": message}
