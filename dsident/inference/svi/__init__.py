"""Stochastic variational inference (pyro) for any latent dynamics × observation model.

``fit_svi(model, data, ...)`` is the engine registered as ``method="svi"``; see
:mod:`dsident.inference.svi.training` for its options. The pieces:

- :mod:`~dsident.inference.svi.pyro_model`: the state-space model as a pyro model;
- :mod:`~dsident.inference.svi.guides`: the Markov (deep-Markov-model style) and mean-field guides;
- :mod:`~dsident.inference.svi.windows`: trials on the device and the random training windows;
- :mod:`~dsident.inference.svi.checkpoint`: best/last checkpoints;
- :mod:`~dsident.inference.svi.smoother`: ``model.smoother_``, the fitted guide over whole trials.
"""
from __future__ import annotations

from .guides import GUIDES, MarkovGuide, MeanFieldGuide, make_guide
from .smoother import SVISmoother
from .training import LR_SCHEDULES, fit_svi

__all__ = ["fit_svi", "SVISmoother", "GUIDES", "MarkovGuide", "MeanFieldGuide", "make_guide", "LR_SCHEDULES"]
