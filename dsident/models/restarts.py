"""Restarting a fit whose free runs never move on the data's attractor.

Some initialisations train into a dead end that no later epoch leaves: every scored free run
rests at a fixed point, leaves the data's range, or diverges, while the one-step loss falls
normally (the bursting neuron's ODE-RFWP, seed 2, was one: all 16 scored runs a fixed point).
The kept epoch cannot rescue such a fit, and the rest of its epochs are spent for nothing.
Others move but never come near the data (the bursting neuron's LTC, seed 4: every scored run
spiked tonically, D_stsp 14.2-16, where runs that burst score 1-7), which ``restart_above``
catches: a run whose D_stsp is not below it counts as not moved.
:class:`StuckWatch` watches the scored free runs of a fit as its ``callback`` and stops the fit
after ``restart_after`` epochs when none of them has moved on the data's grid;
:meth:`LatentModelEstimator.fit <dsident.models.base.LatentModelEstimator.fit>` then builds the
model afresh from the next seed (:func:`restart_seed`) and trains again. ``best_of`` trains
several models from the same seed sequence and keeps the one :func:`candidate_rank` ranks first.
"""
from __future__ import annotations

import math
from typing import Any

from ..inference.training import FitCallback

__all__ = ["StuckWatch", "any_free_run_moved", "candidate_rank", "candidate_score", "check_scored_refit",
           "is_restartable", "restart_seed", "REFIT_OPTIONS", "RESTART_SEED_STRIDE", "RESTARTABLE_METHODS"]

#: attempt k of a fit with seed s uses seed s + k × this (far from the small seeds of a grid)
RESTART_SEED_STRIDE = 10_000

#: inference methods whose fits score free runs while they train (what a restart is decided on)
RESTARTABLE_METHODS = ("teacher-forcing",)


def is_restartable(method: str) -> bool:
    """Whether ``method`` (or an alias of it, e.g. "gtf") is one of :data:`RESTARTABLE_METHODS`."""
    from ..inference import ENGINES

    return method in ENGINES and ENGINES[method] in {ENGINES[m] for m in RESTARTABLE_METHODS}


#: the fit options that build models afresh and decide on their scored free runs: what
#: :func:`check_scored_refit` guards, and what a fit going on from a saved model cannot take
REFIT_OPTIONS = ("best_of", "restarts")


def check_scored_refit(method: str, name: str, value: int, warm_start: bool, engine_options: dict[str, Any]) -> None:
    """Refuse a fit option that builds models afresh and decides on their scored free runs
    (``restarts``, ``best_of``; ``name`` and ``value`` are the option's) where the fit cannot
    give it that: a method that scores no free runs, ``eval_every=0``, ``warm_start`` or a
    ``checkpoint`` (which one fit would resume for all)."""
    if not is_restartable(method):
        raise ValueError(f"`{name}` decides on the free runs a fit scores while it trains, so it needs a method "
                         f"that scores them ({', '.join(RESTARTABLE_METHODS)}); got {name}={value} with "
                         f"method={method!r}.")
    if engine_options.get("eval_every", 1) == 0:
        raise ValueError(f"`{name}` decides on the scored free runs, so it needs eval_every > 0; got "
                         f"{name}={value} with eval_every=0.")
    if warm_start:
        raise ValueError(f"`{name}` builds the model afresh, which `warm_start` does not; got {name}={value} "
                         f"with warm_start=True.")
    if engine_options.get("checkpoint") is not None:
        raise ValueError(f"`{name}` cannot resume a checkpoint written by another fit; got {name}={value} with "
                         f"checkpoint={engine_options['checkpoint']!r}.")


def restart_seed(seed: int | None, attempt: int) -> int | None:
    """The seed of attempt ``attempt`` (0 = the fit's own) of a fit seeded with ``seed``; None stays
    None (every attempt then draws a fresh initialisation)."""
    return None if seed is None else int(seed) + attempt * RESTART_SEED_STRIDE


def moved(d_stsp: float, at_rest: Any, above: float | None = None) -> bool:
    """Whether one scored free run moved on the data's grid: a finite D_stsp (it neither diverged
    nor stayed outside the data's range), not at rest, and, with ``above``, a D_stsp below it."""
    d = float(d_stsp)
    return math.isfinite(d) and not bool(at_rest) and (above is None or d < above)


def any_free_run_moved(history: dict[str, Any], above: float | None = None) -> bool:
    """Whether any scored free run of a finished fit (its ``history``) moved on the data's grid
    (:func:`moved`, with the same ``above``)."""
    at_rest = history.get("free_run_at_rest", [])
    return any(moved(d, r, above) for d, r in zip(history.get("state_space_divergence", []), at_rest))


def candidate_score(history: dict[str, Any]) -> float:
    """What ``best_of`` ranks a finished fit by: the training D_stsp of its kept epoch's free run
    (``best_state_space_divergence``); inf when it has none or it is not finite (a fit whose every
    scored run diverged or missed the data's grid ranks last)."""
    d = history.get("best_state_space_divergence")
    return float(d) if d is not None and math.isfinite(float(d)) else math.inf


def candidate_rank(history: dict[str, Any]) -> tuple[bool, float]:
    """How ``best_of`` and ``polish`` order finished fits (lower first): a fit whose kept free run
    has the kind ``select_regime`` asked for before one that fell back to the lowest D_stsp of
    the wrong kind (``history["regime_fallback"]``), then by :func:`candidate_score`. Without
    ``select_regime`` this is the score alone."""
    return bool(history.get("regime_fallback", False)), candidate_score(history)


class StuckWatch:
    """A fit ``callback`` that stops training when, after ``restart_after`` epochs, no scored free
    run has moved on the data's grid.

    A scored run has moved when its D_stsp is finite (it did not diverge and it entered the
    data's range), it did not come to rest (the engine's ``free_run_at_rest``) and, when
    ``restart_above`` is given, its D_stsp is below that (a run that moves without coming near the
    data, e.g. tonic spiking where the data burst, does not count). One such run at any scored
    epoch clears the fit for good. The user's own ``callback`` is still called
    every epoch and may still stop the fit (that stop is not a restart).

    Attributes
    ----------
    stuck_at : int or None
        The epoch (0-based) at which the fit was stopped for a restart; None if it was not.
    n_scored : int
        Scored epochs seen.
    any_moved : bool
        Whether one of them moved (:func:`moved`); once True, the fit is never stopped.
    """

    def __init__(self, restart_after: int, callback: FitCallback | None = None,
                 restart_above: float | None = None) -> None:
        self.restart_after = int(restart_after)
        self.restart_above = None if restart_above is None else float(restart_above)
        self.callback = callback
        self.any_moved = False
        self.n_scored = 0
        self.stuck_at: int | None = None

    def __call__(self, epoch: int, record: dict[str, Any], model: Any) -> bool | None:
        user_stop = self.callback(epoch, record, model) if self.callback is not None else None
        if "state_space_divergence" in record:
            self.n_scored += 1
            if moved(record["state_space_divergence"], record.get("free_run_at_rest", False), self.restart_above):
                self.any_moved = True
        if user_stop is True:
            return True
        if not self.any_moved and self.n_scored > 0 and epoch + 1 >= self.restart_after:
            self.stuck_at = epoch
            return True
        return user_stop
