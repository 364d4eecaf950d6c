"""Categorical (softmax) observations, as in the rPLRNN paper's eq. 54.

Shape legend: ``...`` leading dims (trial, time), ``N`` obs_dim (number of classes),
``M`` latent_dim.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .readout import Readout, ReadoutObservation, channel_mask

#: pseudo-count added to every class before the log (initialisation and inversion only)
SMOOTHING = 0.5


class Categorical(ReadoutObservation):
    r"""Categorical likelihood of one-hot observations through a softmax (rPLRNN eq. 54).

    .. math:: p_{i,t} = \frac{\exp(\eta_{i,t})}{\sum_j \exp(\eta_{j,t})}, \qquad
              \eta_t = B\, g(z_t) + b, \qquad \log p(x_t | z_t) = \sum_i x_{i,t} \log p_{i,t}

    Parameters
    ----------
    obs_dim : int
        N, number of classes; an observation is a one-hot vector over N channels.
    latent_dim : int
        M, size of the latent state.
    readout : {"linear", "relu", "identity"} or Readout

    Attributes
    ----------
    B : Parameter of shape (N, M)
    b : Parameter of shape (N,)

    Notes
    -----
    One time step is one categorical draw, so it is observed only when all its N channels are:
    a step with any NaN (or any masked channel) contributes nothing. Observed steps must be
    one-hot (entries 0/1 summing to 1), else ``ValueError``. The softmax is invariant to adding
    a constant to all logits, so ``B`` and ``b`` have one redundant direction (as in the paper).

    References
    ----------
    Schmidt, Koppe et al. (2021), ICLR, eq. 54 (``shared/reference/seeds/004_rplrnn.md`` §1.2).
    """

    discrete = True

    def __init__(self, obs_dim: int, latent_dim: int, readout: str | Readout = "linear") -> None:
        super().__init__(obs_dim, latent_dim, readout)

    def probabilities(self, z: Tensor) -> Tensor:
        """Class probabilities softmax(eta): (..., M) -> (..., N)."""
        return torch.softmax(self.predictor(z), dim=-1)

    def mean(self, z: Tensor) -> Tensor:
        """E[x | z] = class probabilities: (..., M) -> (..., N)."""
        return self.probabilities(z)

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """One-hot draws: (..., M) -> (..., N)."""
        p = self.probabilities(z).detach()
        bad = ~torch.isfinite(p).all(-1, keepdim=True)   # a diverged run: its rows stay NaN
        flat = p.masked_fill(bad, 1.0).reshape(-1, self.obs_dim).cpu()
        idx = torch.multinomial(flat, 1, generator=generator)[:, 0]
        onehot = torch.nn.functional.one_hot(idx, self.obs_dim).to(dtype=p.dtype)
        return onehot.reshape(p.shape).to(p.device).masked_fill(bad, float("nan"))

    # -- rows, not channels, are the unit of observation ----------------------------------------
    def _prepare(self, x: Any, z: Tensor, mask: Any | None) -> tuple[Tensor, Tensor, Tensor]:
        """(x with missing rows zeroed, per-row observed mask (...,), eta (..., N))."""
        xt, obs = self._checked_data(x, z, mask)
        row_obs = obs.all(-1)
        xt = torch.where(row_obs[..., None], xt, torch.zeros_like(xt))
        return xt, row_obs, self.predictor(z)

    def _check_observed(self, x: Tensor, observed: Tensor) -> None:
        """Observed entries are 0/1 and every fully observed row sums to 1."""
        values = x[observed]
        bad = (values != 0) & (values != 1)
        if bad.any():
            raise ValueError(f"Categorical observations must be one-hot (0/1 entries); got values such as "
                             f"{values[bad][:3].tolist()}.")
        rows = x[observed.all(-1)]
        bad_sum = rows.sum(-1) != 1
        if bad_sum.any():
            raise ValueError(f"Categorical observations must be one-hot rows (entries summing to 1 over the "
                             f"{self.obs_dim} classes); got a row {rows[bad_sum][0].tolist()}.")

    def log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """log p(x | z) of one-hot rows: x (..., N), z (..., M) -> (...); unobserved rows give 0."""
        xt, row_obs, eta = self._prepare(x, z, mask)
        lp = (xt * torch.log_softmax(eta, dim=-1)).sum(-1)
        return torch.where(row_obs, lp, torch.zeros_like(lp))

    def grad_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """Analytic gradient ``J^T (x - p)``, (..., M)."""
        xt, row_obs, eta = self._prepare(x, z, mask)
        d1 = (xt - torch.softmax(eta, dim=-1)) * row_obs[..., None].to(eta.dtype)
        return torch.einsum("...n,...nm->...m", d1, self.predictor_jacobian(z))

    def hess_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """Analytic Hessian ``-J^T (diag p - p p^T) J``, (..., M, M) (independent of x)."""
        _, row_obs, eta = self._prepare(x, z, mask)
        return -self._latent_fisher(eta, z, row_obs)

    def fisher_information(self, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """``J^T (diag p - p p^T) J``, (..., M, M); rows with any masked channel give 0."""
        eta = self.predictor(z)
        row_obs = torch.ones(eta.shape[:-1], dtype=torch.bool, device=eta.device)
        if mask is not None:
            row_obs = channel_mask(mask, eta.shape, eta.device).all(-1)
        return self._latent_fisher(eta, z, row_obs)

    def _latent_fisher(self, eta: Tensor, z: Tensor, row_obs: Tensor) -> Tensor:
        p = torch.softmax(eta, dim=-1)
        jac = self.predictor_jacobian(z)                          # (..., N, M)
        jp = torch.einsum("...n,...nm->...m", p, jac)             # J^T p
        fi = torch.einsum("...nm,...n,...nk->...mk", jac, p, jac) - jp[..., :, None] * jp[..., None, :]
        return fi * row_obs[..., None, None].to(fi.dtype)

    # per-channel pieces required by the base class; the methods above use full matrices
    def _channel_log_prob(self, x: Tensor, eta: Tensor) -> Tensor:
        """x_i log p_i: summed over channels it gives the row's log-probability."""
        return x * torch.log_softmax(eta, dim=-1)

    def _channel_grad(self, x: Tensor, eta: Tensor) -> Tensor:
        """d log p(x | eta) / d eta_i = x_i - (sum_j x_j) p_i."""
        return x - x.sum(-1, keepdim=True) * torch.softmax(eta, dim=-1)

    def _channel_hess(self, x: Tensor, eta: Tensor) -> Tensor:
        """Diagonal of the eta-Hessian, -p_i (1 - p_i) (the full one is -(diag p - p p^T))."""
        return -self._channel_fisher(eta)

    def _channel_fisher(self, eta: Tensor) -> Tensor:
        """Diagonal of the eta-Fisher information, p_i (1 - p_i)."""
        p = torch.softmax(eta, dim=-1)
        return p * (1.0 - p)

    def _predictor_target(self, x: Tensor) -> Tensor:
        """Log of smoothed class frequencies, centred over classes (softmax is shift invariant)."""
        logp = torch.log((x + SMOOTHING) / (1.0 + self.obs_dim * SMOOTHING))
        return logp - logp.mean(-1, keepdim=True)
