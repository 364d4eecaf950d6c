"""Poisson observations for spike counts, with an exp or softplus link and a bin size.

Shape legend: ``...`` leading dims (trial, time), ``N`` obs_dim (neurons), ``M`` latent_dim.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from .readout import Readout, ReadoutObservation

#: links: name -> (rate per unit time as a function of eta, its inverse)
LINKS = ("exp", "softplus")

#: pseudo-count added to observed counts before taking the inverse link (initialisation and
#: inversion only), so that empty bins map to a finite log-rate
PSEUDO_COUNT = 0.5

#: smallest rate used inside logarithms, so a softplus that underflows stays finite
_TINY_RATE = 1e-30


class Poisson(ReadoutObservation):
    r"""Poisson likelihood of spike counts per bin.

    .. math:: x_{n,t} \sim \operatorname{Poisson}(\lambda_{n,t}), \qquad
              \lambda_t = f(B\, g(z_t) + b)\,\Delta

    with link ``f`` = exp or softplus and bin size Δ.

    Parameters
    ----------
    obs_dim : int
        N, number of recorded units.
    latent_dim : int
        M, size of the latent state.
    link : {"exp", "softplus"}
        ``f``: the rate per unit time as a function of the predictor.
    readout : {"linear", "relu", "identity"} or Readout
    bin_size : float
        Δ, the bin width in the unit of the time coordinate; rates are per that unit.

    Attributes
    ----------
    B : Parameter of shape (N, M)
    b : Parameter of shape (N,)

    Notes
    -----
    Counts must be non-negative integers (missing bins are NaN); anything else raises
    ``ValueError``. With the exp link the Hessian in ``eta`` is ``-lambda`` whatever the counts
    (concave, equal to minus the Fisher information); with softplus it depends on the counts and
    can be positive, so Laplace-type methods may prefer :meth:`fisher_information`.
    """

    discrete = True

    _fill_value = 0.0

    def __init__(self, obs_dim: int, latent_dim: int, link: str = "exp", readout: str | Readout = "linear",
                 bin_size: float = 1.0) -> None:
        super().__init__(obs_dim, latent_dim, readout)
        if link not in LINKS:
            raise ValueError(f"`link` must be one of {list(LINKS)}; got link={link!r}.")
        if (isinstance(bin_size, (bool, np.bool_)) or not isinstance(bin_size, numbers.Real)
                or not math.isfinite(bin_size) or bin_size <= 0):
            raise ValueError(f"`bin_size` must be a positive finite bin width; got bin_size={bin_size!r}.")
        self.link = link
        self.bin_size = float(bin_size)

    # -- rates -----------------------------------------------------------------------------
    def rate(self, z: Tensor) -> Tensor:
        """Expected count per bin ``f(eta) * bin_size``: (..., M) -> (..., N)."""
        return self._rate(self.predictor(z))

    def _rate(self, eta: Tensor) -> Tensor:
        base = eta.exp() if self.link == "exp" else F.softplus(eta)
        return base * self.bin_size

    def _log_rate(self, eta: Tensor) -> Tensor:
        if self.link == "exp":
            return eta + math.log(self.bin_size)
        return F.softplus(eta).clamp_min(_TINY_RATE).log() + math.log(self.bin_size)

    # -- interface -------------------------------------------------------------------------
    def mean(self, z: Tensor) -> Tensor:
        """E[x | z] = rate per bin: (..., M) -> (..., N)."""
        return self.rate(z)

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Counts x ~ Poisson(rate): (..., M) -> (..., N)."""
        lam = self.rate(z).detach()
        bad = ~torch.isfinite(lam)             # a diverged run: NaN stays NaN instead of failing the draw
        x = torch.poisson(lam.masked_fill(bad, 0.0).cpu(), generator=generator).to(dtype=lam.dtype, device=lam.device)
        return x.masked_fill(bad, float("nan"))

    def _check_support(self, x_observed: Tensor) -> None:
        if (x_observed < 0).any():
            bad = x_observed[x_observed < 0][:3].tolist()
            raise ValueError(f"Poisson observations must be non-negative counts; got negative values such as {bad}.")
        if (x_observed != torch.round(x_observed)).any():
            bad = x_observed[x_observed != torch.round(x_observed)][:3].tolist()
            raise ValueError(f"Poisson observations must be integer counts per bin; got non-integer values such as "
                             f"{bad}. Bin spike times into counts first, or use the Gaussian observation model "
                             "for continuous signals.")

    def _channel_log_prob(self, x: Tensor, eta: Tensor) -> Tensor:
        return x * self._log_rate(eta) - self._rate(eta) - torch.lgamma(x + 1.0)

    def _channel_grad(self, x: Tensor, eta: Tensor) -> Tensor:
        if self.link == "exp":
            return x - self._rate(eta)
        s, sig = F.softplus(eta).clamp_min(_TINY_RATE), torch.sigmoid(eta)
        return (x / s - self.bin_size) * sig

    def _channel_hess(self, x: Tensor, eta: Tensor) -> Tensor:
        if self.link == "exp":
            return -self._rate(eta)
        s, sig = F.softplus(eta).clamp_min(_TINY_RATE), torch.sigmoid(eta)
        # d/deta [(x/s - Δ) σ] with s' = σ and σ' = σ(1 - σ)
        return -x * sig.square() / s.square() + (x / s - self.bin_size) * sig * (1.0 - sig)

    def _channel_fisher(self, eta: Tensor) -> Tensor:
        # (dλ/dη)² / λ
        if self.link == "exp":
            return self._rate(eta)
        s, sig = F.softplus(eta).clamp_min(_TINY_RATE), torch.sigmoid(eta)
        return self.bin_size * sig.square() / s

    def _predictor_target(self, x: Tensor) -> Tensor:
        """Inverse link of the smoothed rate (x + PSEUDO_COUNT) / bin_size ("log-rates" for exp)."""
        rate = (x + PSEUDO_COUNT) / self.bin_size
        if self.link == "exp":
            return rate.log()
        return rate + torch.log(-torch.expm1(-rate))          # softplus^{-1}, stable for large rates
