"""Gaussian observations with diagonal noise (rPLRNN eq. 2).

Shape legend: ``...`` leading dims (trial, time), ``N`` obs_dim, ``M`` latent_dim.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from torch import Tensor, nn

from .readout import Readout, ReadoutObservation

#: lower bound of the initial noise variance as a fraction of each channel's variance, so
#: that a PCA that explains everything does not start from a degenerate (zero-noise) model
MIN_NOISE_FRACTION = 0.05


class Gaussian(ReadoutObservation):
    r"""Gaussian likelihood with a readout and diagonal noise.

    .. math:: x_t = B\, g(z_t) + b + \eta_t, \qquad \eta_t \sim \mathcal N(0, \Gamma),
              \quad \Gamma = \operatorname{diag}(\exp(\texttt{log\_var}))

    Parameters
    ----------
    obs_dim : int
        N, number of observed channels.
    latent_dim : int
        M, size of the latent state.
    readout : {"linear", "relu", "identity"} or Readout
        ``g`` and whether ``B`` is learned (see :mod:`dsident.observations.readout`).
        ``"identity"`` reads the first N latent units (needs N <= M).
    noise_var : float
        Initial noise variance of every channel (replaced by :meth:`init_from_data`).

    Attributes
    ----------
    B : Parameter (or fixed buffer for the identity readout) of shape (N, M)
    b : Parameter (or fixed zero buffer) of shape (N,)
    log_var : Parameter of shape (N,)
        log of the diagonal of Γ, in squared units of ``x``.
    """

    def __init__(self, obs_dim: int, latent_dim: int, readout: str | Readout = "linear",
                 noise_var: float = 1.0) -> None:
        super().__init__(obs_dim, latent_dim, readout)
        if (isinstance(noise_var, (bool, np.bool_)) or not isinstance(noise_var, numbers.Real)
                or not math.isfinite(noise_var) or noise_var <= 0):
            raise ValueError(f"`noise_var` must be a positive finite variance; got noise_var={noise_var!r}.")
        self.noise_var = float(noise_var)
        self.log_var = nn.Parameter(torch.full((self.obs_dim,), math.log(self.noise_var)))

    @property
    def var(self) -> Tensor:
        """Diagonal of Γ, shape (N,)."""
        return self.log_var.exp()

    def mean(self, z: Tensor) -> Tensor:
        """E[x | z] = B g(z) + b: (..., M) -> (..., N)."""
        return self.predictor(z)

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """x ~ N(B g(z) + b, Γ): (..., M) -> (..., N)."""
        eta = self.predictor(z)
        noise = torch.randn(eta.shape, generator=generator, dtype=eta.dtype).to(eta.device)
        return eta + self.var.sqrt() * noise

    def _channel_log_prob(self, x: Tensor, eta: Tensor) -> Tensor:
        return -0.5 * (math.log(2 * math.pi) + self.log_var + (x - eta).square() / self.var)

    def _channel_grad(self, x: Tensor, eta: Tensor) -> Tensor:
        return (x - eta) / self.var

    def _channel_hess(self, x: Tensor, eta: Tensor) -> Tensor:
        return (-1.0 / self.var).expand(eta.shape)

    def _channel_fisher(self, eta: Tensor) -> Tensor:
        return (1.0 / self.var).expand(eta.shape)

    def _init_noise(self, target: np.ndarray, observed: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> None:
        """Noise variance = what the initial readout leaves unexplained, floored (see MIN_NOISE_FRACTION)."""
        total = np.diag(cov)
        B = self.B.detach().cpu().double().numpy()
        if self.learned_loadings:
            residual = total - np.einsum("nm,nm->n", B, B)
        else:
            residual = MIN_NOISE_FRACTION * total
        var = np.maximum(residual, MIN_NOISE_FRACTION * total)
        var = np.where(var > 0, var, 1e-6)          # constant channels keep a tiny positive variance
        with torch.no_grad():
            self.log_var.copy_(torch.as_tensor(np.log(var), dtype=self.log_var.dtype))


def reads_gaussian(observation: object) -> bool:
    """True for a Gaussian likelihood, also behind a wrapper that feeds it latent features
    (the ODE-RFWP's and ORGaNICs' ``LatentFeatureObservation.inner``)."""
    return isinstance(observation, Gaussian) or isinstance(getattr(observation, "inner", None), Gaussian)
