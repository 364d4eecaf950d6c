"""Inference engines. Each engine is a function

    fit_<engine>(model: StateSpaceModel, data: xarray.Dataset, *, seed=None, progress=True, **options)
        -> dict  (the fit history: per-iteration losses / log-likelihoods and the settings used)

that updates ``model``'s parameters in place (keeping the best state it saw) and registers
itself in :data:`ENGINES` under its method name(s). Estimators in :mod:`dsident.models` call
``get_engine(method)``.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Mapping

from .training_trend import training_trend  # noqa: F401  (was a fit still improving when it stopped?)

#: method name -> "module:function"; imported lazily so a missing optional engine costs nothing.
ENGINES: dict[str, str] = {
    "laplace-em": "dsident.inference.laplace_em:fit_laplace_em",
    "svi": "dsident.inference.svi:fit_svi",
    "bptt": "dsident.inference.bptt:fit_bptt",
    "teacher-forcing": "dsident.inference.teacher_forcing:fit_teacher_forcing",
    "gtf": "dsident.inference.teacher_forcing:fit_teacher_forcing",
}


def get_engine(method: str) -> Callable:
    """Return the fit function registered under ``method`` (ValueError listing the choices)."""
    if method not in ENGINES:
        raise ValueError(f"Unknown inference method {method!r}; expected one of {sorted(ENGINES)}.")
    module, func = ENGINES[method].split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as err:  # an engine not built yet must say so plainly
        raise ValueError(f"Inference method {method!r} is not available in this build of dsident: {err}") from err


def engine_option_names(engine: Callable) -> set[str] | None:
    """Keyword options ``engine`` accepts besides the model and the data (None: any keyword)."""
    params = inspect.signature(engine).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    return {n for n, p in params.items() if n not in ("model", "data")
            and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def check_engine_options(method: str, options: Mapping[str, Any], *, reserved: tuple[str, ...] = (),
                         also: tuple[str, ...] = (), owner: str = "PLRNN") -> None:
    """Refuse options the engine for ``method`` does not take, naming the ones it does.

    ``reserved`` are options the caller sets itself (the estimator passes its own ``seed``);
    ``also`` are options the caller takes besides the engine's (listed as accepted); ``owner``
    is the estimator's class name, used in the advice for a reserved option.
    """
    taken = sorted(set(options) & set(reserved))
    if taken:
        given = ", ".join(f"{k}={options[k]!r}" for k in taken)
        raise ValueError(f"{taken} cannot be given as inference option(s): the estimator sets them; got {given}. "
                         f"Give them to the estimator instead, e.g. {owner}(..., {given}).")
    names = engine_option_names(get_engine(method))
    if names is None:
        return
    unknown = sorted(set(options) - names)
    if unknown:
        accepted = sorted((names | set(also)) - set(reserved))
        # the sampling step is the data's, not the fit's: say where it goes
        hint = (" The sampling step belongs to the data: fit(dsident.as_dataset(x, dt=...))."
                if set(unknown) & {"dt", "fs"} else "")
        if set(unknown) & {"u", "inputs"}:
            hint += " External inputs belong to the data: fit(dsident.as_dataset(x, u=u)), one (time, input) per trial."
        raise ValueError(f"inference method {method!r} does not accept the option(s) {unknown}; "
                         f"it accepts {accepted}.{hint}")
