"""Inference engines. Each engine is a function

    fit_<engine>(model: StateSpaceModel, data: xarray.Dataset, *, seed=None, progress=True, **options)
        -> dict  (the fit history: per-iteration losses / log-likelihoods and the settings used)

that updates ``model``'s parameters in place (keeping the best state it saw) and registers
itself in :data:`ENGINES` under its method name(s). Estimators in :mod:`dsident.models` call
``get_engine(method)``.
"""
from __future__ import annotations

import importlib
from typing import Callable

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
