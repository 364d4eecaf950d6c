"""dsident — dynamical systems reconstruction from time series.

Fit a generative latent-dynamics state-space model (rPLRNN, shallow PLRNN, gnODE, LTC,
ODE-RFWP, ORGaNICs) to recorded trials, run it freely, and score how well it reproduces
the attractor geometry (D_stsp) and time scales (D_H) of the data.

Submodules are imported on first use, so ``import dsident`` stays fast and a CLI call
that only lists datasets does not pay for torch.

>>> import dsident
>>> train = dsident.datasets.load("lorenz63", split="train")        # doctest: +SKIP
>>> m = dsident.models.PLRNN(latent_dim=16).fit(train)               # doctest: +SKIP
"""
from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_SUBMODULES = {
    "data", "datasets", "observations", "dynamics", "inference", "metrics", "analysis",
    "experiments", "models", "plotting", "plotting_spikes", "plotting_training", "cli",
}
_ATTRIBUTES = {
    "StateSpaceModel": "dsident.model",
    "as_dataset": "dsident.data",
}

__all__ = ["__version__", "StateSpaceModel", "as_dataset", *sorted(_SUBMODULES)]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"dsident.{name}")
    if name in _ATTRIBUTES:
        return getattr(importlib.import_module(_ATTRIBUTES[name]), name)
    raise AttributeError(f"module 'dsident' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
