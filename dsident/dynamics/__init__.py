"""Latent dynamics: every model maps a batch of latent states one sampling step forward.

Discrete-time models (PLRNN family) implement ``step`` directly; continuous-time models
(gnODE, LTC, ODE-RFWP, ORGaNICs) implement a vector field integrated by :mod:`.solvers`.
All of them register in :data:`DYNAMICS_REGISTRY` by class name (used by save/load).

================ ============================================== =====================
class            model                                          module
================ ============================================== =====================
``PLRNN``        PLRNN / rPLRNN (manifold-attractor penalty)     ``plrnn``
``ShallowPLRNN`` shallow PLRNN (optionally clipped)              ``plrnn``
``GatedNODE``    gated neural ODE (gnODE)                        ``gnode``
``LTC``          liquid time-constant network                    ``ltc``
``RecurrentFWP`` ODE recurrent fast-weight programmer            ``rfwp``
``ORGaNICs``     oscillatory recurrent gated neural integrators  ``organics``
================ ============================================== =====================
"""
from __future__ import annotations

from . import solvers
from .base import DYNAMICS_REGISTRY, LatentDynamics
from .gnode import GatedNODE
from .ltc import LTC
from .organics import ORGaNICs
from .plrnn import PENALTIES, PLRNN, PLRNNParams, QuadraticPenalty, ShallowPLRNN
from .rfwp import RecurrentFWP

__all__ = ["LatentDynamics", "DYNAMICS_REGISTRY", "PLRNN", "ShallowPLRNN", "PLRNNParams", "QuadraticPenalty",
           "PENALTIES", "GatedNODE", "LTC", "RecurrentFWP", "ORGaNICs", "solvers"]
