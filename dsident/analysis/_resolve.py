"""Turn what a user passes to an analysis function into a latent dynamics and its sampling step."""
from __future__ import annotations

from typing import Any

from ..dynamics.base import LatentDynamics


def resolve_dynamics(model: Any, dt: float | None = None) -> tuple[LatentDynamics, float | None]:
    """Return ``(dynamics, dt)`` for an estimator, a StateSpaceModel or a LatentDynamics.

    An estimator is recognised by its fitted ``model_`` attribute; a StateSpaceModel by its
    ``dynamics`` attribute (its ``dt`` is used unless ``dt`` is given).

    Raises
    ------
    TypeError
        For anything else, or for an estimator that has not been fitted.
    """
    if isinstance(model, LatentDynamics):
        return model, dt
    if hasattr(model, "model_"):
        model = model.model_
    elif hasattr(model, "fit") and not hasattr(model, "dynamics"):
        raise TypeError(f"the estimator {type(model).__name__} is not fitted yet; call fit() first.")
    dyn = getattr(model, "dynamics", None)
    if isinstance(dyn, LatentDynamics):
        return dyn, (getattr(model, "dt", None) if dt is None else dt)
    raise TypeError("`model` must be a fitted estimator, a StateSpaceModel or a LatentDynamics; "
                    f"got {type(model).__name__}.")


def resolve_benchmark_system(data: Any) -> tuple[Any, dict[str, Any], float]:
    """The true system behind a simulated benchmark set: ``(System, provenance, dt)``.

    ``data`` is a shipped set's name (its test split is read) or a dataset whose
    ``attrs["provenance"]`` names a system of :mod:`dsident.data.systems` and the sampling step.

    Raises
    ------
    ValueError
        When the provenance names no deterministic system (a recording, or a stochastic
        generator such as the ECG's).
    """
    import json

    from ..data.systems import get_system

    if isinstance(data, str):
        from ..datasets import load

        data = load(data, split="test")
    try:
        prov = json.loads(data.attrs["provenance"])
        name, dt = prov["system"], float(prov["dt"])
    except (AttributeError, KeyError, TypeError, ValueError):
        name, prov, dt = None, {}, float("nan")
    if not name:
        raise ValueError("`data` must be a simulated benchmark set whose attrs['provenance'] names its system and "
                         "dt (e.g. 'lorenz63', 'bursting_neuron'); this one names no deterministic system (a "
                         "recording, or a stochastic generator such as the ECG's).")
    return get_system(name, **(prov.get("params") or {})), prov, dt
