"""Estimators: scikit-learn style latent-dynamics models.

``PLRNN(...).fit(data, method=...)`` builds a :class:`~dsident.StateSpaceModel` (``model_``)
from the dynamics of the same name in :mod:`dsident.dynamics` and an observation model chosen
by name or instance, fits it with an inference engine (``history_``), and then
``generate``\\s, ``smooth``\\s, ``predict``\\s, ``score``\\s, ``save``\\s and ``load``\\s.

Estimators defined in other modules of this package (``GatedNODE``, ``LTC``,
``RecurrentFWP``, ``ORGaNICs``) are found on first access: every subclass of
:class:`LatentModelEstimator` registers itself by class name.

>>> import dsident
>>> est = dsident.models.PLRNN(latent_dim=8, reg_fraction=0.5, seed=0)
>>> est.get_params()["reg_fraction"]
0.5
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from .base import ESTIMATOR_REGISTRY, LatentModelEstimator
from .continuous import LTC, GatedNODE, LatentFeatureObservation, ORGaNICs, RecurrentFWP
from .plrnn import PLRNN, ShallowPLRNN

__all__ = ["LatentModelEstimator", "ESTIMATOR_REGISTRY", "PLRNN", "ShallowPLRNN", "GatedNODE", "LTC",
           "RecurrentFWP", "ORGaNICs", "LatentFeatureObservation"]

_LOADED_HERE = {"base", "plrnn", "continuous"}


def _discover() -> dict[str, str]:
    """Import the package's other modules (registering their estimators); name -> import error."""
    errors: dict[str, str] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _LOADED_HERE or info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{__name__}.{info.name}")
        except Exception as err:  # one broken model module must not hide the others
            errors[info.name] = f"{type(err).__name__}: {err}"
    return errors


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    errors = _discover()
    if name in ESTIMATOR_REGISTRY:
        return ESTIMATOR_REGISTRY[name]
    detail = f" (modules that failed to import: {errors})" if errors else ""
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; estimators available: "
                         f"{sorted(ESTIMATOR_REGISTRY)}{detail}")


def __dir__() -> list[str]:
    _discover()
    return sorted(set(globals()) | set(ESTIMATOR_REGISTRY))
