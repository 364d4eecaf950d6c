"""Polishing a fit: more training from its kept state, kept only when its free run scores better.

A teacher-forcing fit ends on the epoch whose free run matched the training data best, but
the steps that led there were small batches at a decaying learning rate, each a noisy
estimate of the gradient. ``polish`` trains the kept model once more with other engine
options (typically many more windows per update and a lower learning rate), then compares the
best free run of that stage with the kept state's, both scored against the training data the
same way, and keeps whichever scores the lower D_stsp. The test data play no part, and the
training score can only go down.

Measured (docs/teacher_forcing.md "Polishing a fit"): on the bursting neuron's shallow PLRNN,
40 epochs of batches of 128 at a learning rate of 1e-4 → 1e-5 lowered the training score of
four fits of six and the test score of each of those four; 20 such epochs took the ECG rPLRNN
cell's median from 2.01 to 1.92 and the gnODE's from 2.40 to 2.16, and left the shallow PLRNN's
ECG cell where it was (the training scores fell by a tenth, the test scores as often rose).
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .restarts import candidate_rank, is_restartable, RESTARTABLE_METHODS

__all__ = ["SCORING_OPTIONS", "check_polish", "polish_fit"]

#: engine options that decide how a free run is scored: a polish that changed them would compare
#: its score with one measured another way
SCORING_OPTIONS = ("eval_steps", "eval_starts", "eval_data", "select_regime", "checkpoint", "resume")


def check_polish(method: str, polish: Any, engine_options: Mapping[str, Any]) -> dict[str, Any] | None:
    """Validate ``polish`` (a mapping of engine options for the second stage, or None).

    Returns the options as a dict, or None for no polish. Refuses, naming the argument: a
    non-mapping, a method that scores no free runs, options that change how runs are scored
    (:data:`SCORING_OPTIONS`), ``eval_every=0`` in the stage (nothing would be compared), and
    options the method's engine does not take (its own check, prefixed with ``polish``).
    """
    from ..inference import check_engine_options

    if polish is None:
        return None
    if not isinstance(polish, Mapping):
        raise ValueError(f"`polish` must be a mapping of engine options for a second training stage (e.g. "
                         f"{{'batch_size': 128, 'lr': 1e-4, 'n_epochs': 40}}) or None; got polish={polish!r}.")
    polish = dict(polish)
    if not polish:
        return None
    if not is_restartable(method):
        raise ValueError(f"`polish` keeps the second stage only if its scored free runs beat the fit's, so it needs a "
                         f"method that scores them ({', '.join(RESTARTABLE_METHODS)}); got method={method!r}.")
    fixed = sorted(set(polish) & set(SCORING_OPTIONS))
    if fixed:
        raise ValueError(f"`polish` compares its free runs with the fit's, scored the same way, so it cannot set "
                         f"{fixed}; set them for the whole fit instead. Got polish={polish!r}.")
    if {**engine_options, **polish}.get("eval_every", 1) == 0:
        raise ValueError(f"`polish` needs scored free runs (eval_every > 0) in its stage; got polish={polish!r} "
                         f"with eval_every={engine_options.get('eval_every')!r} for the fit.")
    try:
        check_engine_options(method, polish, reserved=("seed",))
    except ValueError as err:
        raise ValueError(f"`polish`: {err}") from err
    return polish


def polish_fit(engine: Any, model: Any, history: dict[str, Any], data: Any, *, seed: int | None,
               engine_options: Mapping[str, Any], polish: Mapping[str, Any]) -> dict[str, Any]:
    """Train ``model`` (the fit's kept state, changed in place) with ``{**engine_options, **polish}``
    (less the fit's ``checkpoint``: the stage is not checkpointed)
    and keep the result only if its best training-side D_stsp is lower than the fit's (with
    ``select_regime``: and it does not fall back to the wrong kind where the fit had the right
    one; :func:`~dsident.models.restarts.candidate_rank`).

    Returns the fit's ``history`` with ``history["polish"]``: the stage's options, both scores
    (``score_before``, ``score_after``), ``kept``, the stage's ``best_epoch`` and its own history.
    When the stage is kept, ``best_state_space_divergence`` is its score (``best_epoch`` stays
    the fit's).
    """
    before = candidate_rank(history)
    saved = copy.deepcopy(model.state_dict())
    options = {**dict(engine_options), **dict(polish)}
    # the fit's checkpoint belongs to the first stage: resumed here it would put back the fit's last
    # state and epoch count (a stage of no more epochs than the fit trained nothing at all)
    for name in ("checkpoint", "checkpoint_every", "resume"):
        options.pop(name, None)
    stage = engine(model, data, seed=seed, **options)
    after = candidate_rank(stage)
    # with select_regime a stage that fell back to the wrong kind never replaces a kept state of the right kind
    kept = after < before
    if not kept:                 # the stage's best run is no better: the fit's kept state stands
        model.load_state_dict(saved)
    record = {"options": dict(polish), "score_before": before[1], "score_after": after[1], "kept": bool(kept),
              "best_epoch": stage.get("best_epoch"), "history": stage}
    history = dict(history)
    history["polish"] = record
    if kept:
        history["best_state_space_divergence"] = after[1]
        if "regime_fallback" in stage:
            history["regime_fallback"] = stage["regime_fallback"]
    return history
