"""Bernoulli observations for binary channels (logistic link).

Shape legend: ``...`` leading dims (trial, time), ``N`` obs_dim, ``M`` latent_dim.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from .readout import Readout, ReadoutObservation

#: the 0/1 data are shrunk to (x + SMOOTHING) / (1 + 2 SMOOTHING) before the logit
#: (initialisation and inversion only), so that they map to finite log-odds
SMOOTHING = 0.5


class Bernoulli(ReadoutObservation):
    r"""Bernoulli likelihood with a logistic link.

    .. math:: x_{n,t} \sim \operatorname{Bernoulli}(p_{n,t}), \qquad
              p_t = \sigma(B\, g(z_t) + b)

    Parameters
    ----------
    obs_dim : int
        N, number of binary channels.
    latent_dim : int
        M, size of the latent state.
    readout : {"linear", "relu", "identity"} or Readout

    Attributes
    ----------
    B : Parameter of shape (N, M)
    b : Parameter of shape (N,)

    Notes
    -----
    Observations must be 0 or 1 (NaN = missing); anything else raises ``ValueError``. The logit
    is the canonical link, so the Hessian in ``eta`` is ``-p(1-p)`` whatever the data, equal to
    minus the Fisher information.
    """

    discrete = True

    def __init__(self, obs_dim: int, latent_dim: int, readout: str | Readout = "linear") -> None:
        super().__init__(obs_dim, latent_dim, readout)

    def mean(self, z: Tensor) -> Tensor:
        """P(x = 1 | z): (..., M) -> (..., N)."""
        return torch.sigmoid(self.predictor(z))

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """x ~ Bernoulli(p): (..., M) -> (..., N), values 0.0 / 1.0."""
        p = self.mean(z).detach()
        bad = ~torch.isfinite(p)               # a diverged run: NaN stays NaN instead of failing the draw
        x = torch.bernoulli(p.masked_fill(bad, 0.0).cpu(), generator=generator).to(dtype=p.dtype, device=p.device)
        return x.masked_fill(bad, float("nan"))

    def _check_support(self, x_observed: Tensor) -> None:
        bad = (x_observed != 0) & (x_observed != 1)
        if bad.any():
            raise ValueError(f"Bernoulli observations must be 0 or 1; got values such as {x_observed[bad][:3].tolist()}.")

    def _channel_log_prob(self, x: Tensor, eta: Tensor) -> Tensor:
        return x * eta - F.softplus(eta)

    def _channel_grad(self, x: Tensor, eta: Tensor) -> Tensor:
        return x - torch.sigmoid(eta)

    def _channel_hess(self, x: Tensor, eta: Tensor) -> Tensor:
        return -self._channel_fisher(eta)

    def _channel_fisher(self, eta: Tensor) -> Tensor:
        p = torch.sigmoid(eta)
        return p * (1.0 - p)

    def _predictor_target(self, x: Tensor) -> Tensor:
        return torch.logit((x + SMOOTHING) / (1.0 + 2.0 * SMOOTHING))
