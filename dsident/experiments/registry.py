"""Model names used by the command line and the benchmark → estimator classes.

The estimators live in :mod:`dsident.models` and land one by one; a model whose class cannot
be imported stays listed with the reason, so the benchmark table can say *why* a row is
missing instead of silently dropping it.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

#: command-line model name -> (estimator class name in :mod:`dsident.models`, what it is)
MODEL_NAMES: dict[str, tuple[str, str]] = {
    "rplrnn": ("PLRNN", "piecewise-linear RNN with the manifold-attractor regularizer (Schmidt et al. 2021)"),
    "shplrnn": ("ShallowPLRNN", "shallow PLRNN z' = A z + W1 relu(W2 z + h2) + h1 (Hess et al. 2023)"),
    "gnode": ("GatedNODE", "gated neural ODE (Kim et al. 2023)"),
    "ltc": ("LTC", "liquid time-constant network (Hasani et al. 2021)"),
    "rfwp": ("RecurrentFWP", "ODE recurrent fast-weight programmer (Irie et al. 2022)"),
    "organics": ("ORGaNICs", "oscillatory recurrent gated neural integrator circuits (Rawat et al. 2024)"),
}

#: inference methods the command line offers, in the order the table lists them
METHOD_NAMES: tuple[str, ...] = ("laplace-em", "svi", "bptt", "teacher-forcing")


@dataclass(frozen=True)
class ModelEntry:
    """One row of :func:`available_models`."""

    name: str                  #: command-line name, e.g. "shplrnn"
    class_name: str            #: estimator class name in dsident.models
    description: str
    estimator: type | None     #: the class, or None when it could not be imported
    error: str | None          #: why it is unavailable (None when available)

    @property
    def available(self) -> bool:
        return self.estimator is not None


def _import_estimator(class_name: str) -> tuple[type | None, str | None]:
    try:
        module = importlib.import_module("dsident.models")
    except Exception as err:  # an estimator package still under construction must not break the CLI
        return None, f"dsident.models does not import: {type(err).__name__}: {err}"
    cls = getattr(module, class_name, None)
    if cls is None:
        return None, f"dsident.models has no class {class_name!r} yet"
    return cls, None


def available_models() -> dict[str, ModelEntry]:
    """Every known model name with its estimator class or the reason it is unavailable.

    Returns
    -------
    dict
        ``name -> ModelEntry``, in the order of :data:`MODEL_NAMES`.
    """
    out = {}
    for name, (class_name, description) in MODEL_NAMES.items():
        cls, err = _import_estimator(class_name)
        out[name] = ModelEntry(name, class_name, description, cls, err)
    return out


def check_model_name(model: str) -> str:
    """Validate a command-line model name (case-insensitive) and return it in lower case."""
    if not isinstance(model, str) or model.lower() not in MODEL_NAMES:
        raise ValueError(f"`model` must be one of {sorted(MODEL_NAMES)}; got {model!r}.")
    return model.lower()


def get_estimator_class(model: str) -> type:
    """The estimator class behind a model name; ValueError saying why when it is unavailable."""
    entry = available_models()[check_model_name(model)]
    if entry.estimator is None:
        raise ValueError(f"model {model!r} ({entry.class_name}) is not available in this build: {entry.error}")
    return entry.estimator


def make_estimator(model: str, params: dict[str, Any]) -> Any:
    """Build the estimator for ``model`` with hyperparameters ``params`` (names checked)."""
    cls = get_estimator_class(model)
    accepted = estimator_param_names(cls)
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise ValueError(f"model {model!r} ({cls.__name__}) has no hyperparameter(s) {unknown}; "
                         f"it accepts {sorted(accepted)}.")
    return cls(**params)


def estimator_param_names(cls: type) -> set[str]:
    """Hyperparameter names of an estimator class (its ``__init__`` keywords)."""
    import inspect

    sig = inspect.signature(cls.__init__)
    return {n for n, p in sig.parameters.items()
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
