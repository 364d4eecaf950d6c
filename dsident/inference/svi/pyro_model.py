"""The pyro model of a :class:`~dsident.StateSpaceModel`: the generative model itself, as pyro sees it.

Shape legend: ``B`` trials (or windows) in a batch, ``T`` time steps, ``M`` latent_dim,
``N`` obs_dim, ``K`` input_dim.

The generative model is exactly the state-space model's::

    z_1 ~ N(initial_mean, diag(initial_var))
    z_t ~ N(dynamics.step(z_{t-1}, u_t, dt), diag(process_var))     t = 2..T_b
    x_t ~ observation(x_t | z_t)                                    observed entries only

The whole latent path of a trial is one pyro sample site ``"z"`` whose distribution,
:class:`LatentPathPrior`, evaluates every transition of the path in one batched call of
``dynamics.step`` (the path is given, so the transitions are independent terms). Pyro only
sees two sites per batch (``"z"`` and the observation factor ``"x"``), which keeps its
bookkeeping negligible next to the numerical work, on CPU and GPU alike.

Irregular sampling: each transition receives its own step ``dt`` (from the data's
``sample_time``), so a continuous-time model integrates over the actual gap.

Ragged trials: time steps at or after a trial's length are excluded from every term by a
time mask; missing samples (NaN) are excluded from the observation term by the observation
mask. Their values never enter the likelihood: they are replaced by zeros *and* masked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pyro
import pyro.distributions as pdist
import torch
from pyro import poutine
from pyro.distributions import constraints
from torch import Tensor

from ...model import StateSpaceModel

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Batch:
    """One batch of trials or windows, as tensors on the fitting device.

    Attributes
    ----------
    x : Tensor of shape (B, T, N)
        Observations with every unobserved entry set to 0 (never NaN).
    mask : Tensor of shape (B, T, N), bool
        True where ``x`` was observed.
    time_mask : Tensor of shape (B, T), bool
        True for time steps inside the trial (before its length).
    u : Tensor of shape (B, T, K) or None
        External inputs (0 outside the trial).
    dt : float or Tensor of shape (B, T)
        Sampling step, in the unit of the data's time coordinate: one number for all, or (for
        irregularly sampled trials) ``dt[:, t]`` = the time from sample ``t-1`` to sample ``t``
        (column 0 is not used).
    """

    x: Tensor
    mask: Tensor
    time_mask: Tensor
    u: Tensor | None
    dt: float | Tensor

    @property
    def n_time_steps(self) -> Tensor:
        """Number of valid time steps in the batch (a scalar tensor), used to normalise losses."""
        return self.time_mask.sum()


def transition_means(model: StateSpaceModel, z_prev: Tensor, u_next: Tensor | None,
                     dt: float | Tensor) -> Tensor:
    """``dynamics.step`` applied to every time step of a batch of paths in one call.

    Parameters
    ----------
    model : StateSpaceModel
    z_prev : Tensor of shape (B, S, M)
        States at times ``0..S-1``.
    u_next : Tensor of shape (B, S, K) or None
        Inputs at times ``1..S`` (the input enters the transition *into* its time step).
    dt : float or Tensor of shape (B, S)
        Steps into times ``1..S``; every transition gets its own (a ``(B S, 1)`` tensor for ``step``).

    Returns
    -------
    Tensor of shape (B, S, M)
        Transition means ``E[z_{t+1} | z_t]``.
    """
    b, s, m = z_prev.shape
    flat_u = None if u_next is None else u_next.reshape(b * s, -1)
    flat_dt = dt
    if isinstance(dt, Tensor):
        flat_dt = dt.reshape(b * s, 1)
    return model.dynamics.step(z_prev.reshape(b * s, m), flat_u, flat_dt).reshape(b, s, m)


def normal_log_density(value: Tensor, loc: Tensor, log_scale: Tensor) -> Tensor:
    """Elementwise log N(value; loc, exp(log_scale)^2).

    Written out rather than through ``torch.distributions.Normal``, whose argument validation
    raises on a non-finite mean: a diverging model must give a non-finite loss (which the
    training loop detects and reports), not an exception from inside pyro.
    """
    return -0.5 * ((value - loc) * torch.exp(-log_scale)) ** 2 - log_scale - _HALF_LOG_2PI


class LatentPathPrior(pdist.TorchDistribution):
    """The state-space model's prior over whole latent paths, one path per trial.

    ``batch_shape = (B,)``, ``event_shape = (T, M)``. :meth:`log_prob` is the exact log
    density of the initial state plus all Gaussian transitions up to each trial's length,
    with the transitions evaluated in parallel. :meth:`sample` simulates the prior.

    Parameters
    ----------
    model : StateSpaceModel
    batch : Batch
        Supplies ``u``, ``dt`` and ``time_mask`` (and B, T).
    """

    arg_constraints: dict = {}
    support = constraints.independent(constraints.real, 2)
    has_rsample = False

    def __init__(self, model: StateSpaceModel, batch: Batch, validate_args: bool | None = None) -> None:
        self.model = model
        self.batch = batch
        b, t = batch.time_mask.shape
        super().__init__(torch.Size([b]), torch.Size([t, model.latent_dim]), validate_args=validate_args)

    def log_prob(self, z: Tensor) -> Tensor:
        """log p(z) for paths ``z`` of shape (B, T, M); returns (B,)."""
        model, batch = self.model, self.batch
        lp = normal_log_density(z[:, 0], model.initial_mean, 0.5 * model.log_initial_var).sum(-1)
        if z.shape[1] > 1:
            u_next = None if batch.u is None else batch.u[:, 1:]
            dt_next = batch.dt[:, 1:] if isinstance(batch.dt, Tensor) else batch.dt
            loc = transition_means(model, z[:, :-1], u_next, dt_next)
            trans = normal_log_density(z[:, 1:], loc, 0.5 * model.log_process_var).sum(-1)
            # Steps past a trial's end are not part of the model: zero them with where, not
            # a product, so a non-finite value there cannot leak into the gradient.
            lp = lp + torch.where(batch.time_mask[:, 1:], trans, torch.zeros_like(trans)).sum(-1)
        return lp

    def sample(self, sample_shape: torch.Size = torch.Size()) -> Tensor:
        """Simulate paths from the prior: (*sample_shape, B, T, M). Not reparameterized."""
        model, batch = self.model, self.batch
        shape = torch.Size(sample_shape) + self.batch_shape
        n = shape.numel()
        b, t = batch.time_mask.shape
        mean0 = model.initial_mean.detach()
        with torch.no_grad():
            z = mean0 + (0.5 * model.log_initial_var).exp() * torch.randn(n, model.latent_dim,
                                                                           dtype=mean0.dtype, device=mean0.device)
            sd = (0.5 * model.log_process_var).exp()
            out = [z]
            for i in range(1, t):
                u_i = None if batch.u is None else batch.u[:, i].repeat(n // b, 1)
                dt_i = batch.dt[:, i:i + 1].repeat(n // b, 1) if isinstance(batch.dt, Tensor) else batch.dt
                z = model.dynamics.step(z, u_i, dt_i) + sd * torch.randn_like(z)
                out.append(z)
        return torch.stack(out, 1).reshape(shape + self.event_shape)


def observation_log_prob(model: StateSpaceModel, z: Tensor, batch: Batch) -> Tensor:
    """Observation log likelihood of each trial, summed over its observed entries.

    Parameters
    ----------
    z : Tensor of shape (B, T, M)
    batch : Batch

    Returns
    -------
    Tensor of shape (B,)
    """
    mask = batch.mask & batch.time_mask[..., None]
    # Unobserved entries are zeroed as well as masked, so that no observation model can see
    # (or differentiate through) whatever value they held.
    x = torch.where(mask, batch.x, torch.zeros_like(batch.x))
    lp = model.observation.log_prob(x, z, mask)
    # A time step with no observed entry contributes nothing, whatever the observation model
    # does with an all-False mask row.
    return torch.where(mask.any(-1), lp, torch.zeros_like(lp)).sum(-1)


def svi_model(model: StateSpaceModel, batch: Batch, kl_scale: float = 1.0) -> None:
    """The pyro model: latent paths from the state-space prior, observations as a factor.

    ``kl_scale`` multiplies the latent site's log density (and the guide multiplies its
    own by the same factor), which scales the KL term of the ELBO: KL annealing.
    """
    b = batch.x.shape[0]
    with pyro.plate("trial", b, dim=-1):
        with poutine.scale(scale=kl_scale):
            z = pyro.sample("z", LatentPathPrior(model, batch))
        pyro.factor("x", observation_log_prob(model, z, batch))
