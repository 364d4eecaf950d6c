"""Observation models: a likelihood composed with a readout of the latent state.

================ ============================================ ===========================
name             likelihood                                   parameters
================ ============================================ ===========================
``gaussian``     x ~ N(B g(z) + b, diag(exp(log_var)))        ``B``, ``b``, ``log_var``
``poisson``      x ~ Poisson(f(B g(z) + b) · bin_size)        ``B``, ``b``
``bernoulli``    x ~ Bernoulli(sigmoid(B g(z) + b))           ``B``, ``b``
``categorical``  one-hot x ~ Categorical(softmax(B g(z) + b)) ``B``, ``b``
================ ============================================ ===========================

The readout ``g`` is ``"linear"`` (g = identity, learned B), ``"relu"`` (g = max(0, ·)) or
``"identity"`` (x reads the first N latent units; B, b fixed).  Pick a model by name with
:func:`make_observation`, or pass an instance wherever an ``observation`` is accepted.

>>> from dsident.observations import make_observation
>>> obs = make_observation("poisson", obs_dim=30, latent_dim=5, link="softplus", bin_size=0.01)
>>> obs.B.shape
torch.Size([30, 5])
"""
from __future__ import annotations

from typing import Any

from .base import OBSERVATION_REGISTRY, ObservationModel, draws_observations
from .bernoulli import Bernoulli
from .categorical import Categorical
from .gaussian import Gaussian
from .poisson import Poisson
from .readout import READOUTS, IdentityReadout, LinearReadout, Readout, ReadoutObservation, ReLUReadout

#: user-facing name -> observation class
OBSERVATIONS: dict[str, type[ObservationModel]] = {
    "gaussian": Gaussian,
    "poisson": Poisson,
    "bernoulli": Bernoulli,
    "categorical": Categorical,
}

__all__ = ["ObservationModel", "ReadoutObservation", "OBSERVATION_REGISTRY", "OBSERVATIONS", "make_observation",
           "draws_observations",
           "Gaussian", "Poisson", "Bernoulli", "Categorical",
           "Readout", "IdentityReadout", "LinearReadout", "ReLUReadout", "READOUTS"]


def make_observation(observation: str | ObservationModel, obs_dim: int, latent_dim: int,
                     **options: Any) -> ObservationModel:
    """Build an observation model from its name, or check an instance against the dimensions.

    Parameters
    ----------
    observation : str or ObservationModel
        A key of :data:`OBSERVATIONS` (case-insensitive) or an instance.
    obs_dim, latent_dim : int
        N channels and M latent units it must connect.
    **options
        Constructor arguments of the named class (e.g. ``readout="relu"``, ``link="softplus"``).
        Not allowed together with an instance.

    Returns
    -------
    ObservationModel
        A new model for a name; the instance itself otherwise.

    Raises
    ------
    ValueError
        Unknown name (the message lists the names), or an instance whose dimensions differ.
    TypeError
        Neither a string nor an ObservationModel, or options the class does not take.
    """
    if isinstance(observation, ObservationModel):
        if options:
            raise TypeError(f"options {sorted(options)} apply only when `observation` is a name; "
                            f"got an instance of {type(observation).__name__}.")
        if (observation.obs_dim, observation.latent_dim) != (obs_dim, latent_dim):
            raise ValueError(f"the `observation` instance has obs_dim={observation.obs_dim}, "
                             f"latent_dim={observation.latent_dim}; expected obs_dim={obs_dim}, latent_dim={latent_dim}.")
        return observation
    if not isinstance(observation, str):
        raise TypeError(f"`observation` must be a name {sorted(OBSERVATIONS)} or an ObservationModel instance; "
                        f"got {type(observation).__name__}.")
    key = observation.lower()
    if key not in OBSERVATIONS:
        raise ValueError(f"Unknown observation model {observation!r}; expected one of {sorted(OBSERVATIONS)} "
                         "or an ObservationModel instance.")
    cls = OBSERVATIONS[key]
    try:
        return cls(obs_dim, latent_dim, **options)
    except TypeError as err:
        raise TypeError(f"invalid options for observation {key!r}: {err}") from err
