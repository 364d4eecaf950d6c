"""Latent dynamics: every model maps a batch of latent states one sampling step forward.

Discrete-time models (PLRNN family) implement ``step`` directly; continuous-time models
(gnODE, LTC, ODE-RFWP, ORGaNICs) implement a vector field integrated by :mod:`.solvers`.
All of them register in :data:`DYNAMICS_REGISTRY` by class name (used by save/load).
"""
from __future__ import annotations

import importlib

from .base import DYNAMICS_REGISTRY, LatentDynamics
from .plrnn import PENALTIES, PLRNN, PLRNNParams, QuadraticPenalty, ShallowPLRNN

__all__ = ["LatentDynamics", "DYNAMICS_REGISTRY", "PLRNN", "ShallowPLRNN", "PLRNNParams",
           "QuadraticPenalty", "PENALTIES"]

# -- continuous-time models ----------------------------------------------------------------
# These modules are written by the continuous-time room and may not exist yet in a given
# checkout. Only these known module names are tried, so a genuine import error inside an
# existing module is re-raised; the names they export are added to __all__ when present.
_CONTINUOUS_TIME = {
    "solvers": (),
    "gnode": ("GatedNODE",),
    "ltc": ("LTC",),
    "rfwp": ("RecurrentFWP",),
    "organics": ("ORGaNICs",),
}
for _module_name, _names in _CONTINUOUS_TIME.items():
    try:
        _module = importlib.import_module(f"{__name__}.{_module_name}")
    except ModuleNotFoundError as _err:
        if _err.name != f"{__name__}.{_module_name}":   # the module exists but one of its imports fails
            raise
        continue
    if _module_name == "solvers":
        globals()["solvers"] = _module
        __all__.append("solvers")
    for _name in _names:
        if hasattr(_module, _name):
            globals()[_name] = getattr(_module, _name)
            __all__.append(_name)
del _module_name, _names
