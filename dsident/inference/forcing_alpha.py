"""Teacher signals, the forcing step and the choice of the forcing strength α.

Generalized teacher forcing (GTF; Doya 1992, Hess et al. 2023) replaces the latent state the
model predicts, ``z_t``, by a convex combination with a state inferred from the data,
``ẑ_t``, before the next step is taken:

.. math::

    \\tilde z_t = z_t + \\alpha\\, P_t (\\hat z_t - z_t),

where ``P_t`` projects onto the latent directions that the observed channels at ``t``
determine. For an identity readout ``P_t`` selects the first N units (those that *are* the
observed channels), so the remaining units run freely ("partial forcing"); for a linear
readout ``x = B z + b`` it is ``B_o⁺ B_o`` over the observed rows ``o``, which is the identity
when ``B`` is square and invertible; then ``z̃_t = (1 − α) z_t + α ẑ_t``, the form of the GTF
paper. Sparse teacher forcing (STF; Mikhaeil et al. 2022) is the special case α = 1 every
τ-th step and α = 0 otherwise.

Because ``d z̃_t / d z_t = I − α P_t``, every factor of the Jacobian product that
backpropagation through time multiplies is shrunk by ``(1 − α)`` in the forced directions.
With ``G`` an upper bound on the geometric mean of the Jacobian spectral norms along the
trajectory, α = max(0, 1 − 1/G) keeps the products, and so the gradients, bounded for any
sequence length (Hess et al. 2023, Theorem 1 and the estimator of their §3.3). The adaptive
schedule of :class:`AlphaSchedule` starts at ``initial`` and follows the estimate: it jumps up
to a larger estimate at once and relaxes towards a smaller one with factor ``decay`` per
update.

Shape legend: ``B`` batch (windows), ``L`` window length (time), ``N`` obs_dim,
``M`` latent_dim, ``U`` distinct patterns of observed channels.

References
----------
K. Doya, "Bifurcations in the learning of recurrent neural networks", ISCAS 1992.
F. Hess, Z. Monfared, M. Brenner, D. Durstewitz, "Generalized teacher forcing for learning
chaotic dynamics", ICML 2023.
M. Mikhaeil, Z. Monfared, D. Durstewitz, "On the difficulty of learning chaotic dynamics with
RNNs", NeurIPS 2022.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["ALPHA_METHODS", "TeacherSignal", "make_teacher", "jacobian_norms", "norm_bound",
           "alpha_from_norm", "estimate_alpha", "AlphaSchedule"]

#: α estimators: how the Jacobian spectral norms along the forced trajectory become one bound G
ALPHA_METHODS = ("product_bound", "batch_maximum")
#: a projector closer than this to the identity (max abs entry) is treated as the identity
_IDENTITY_TOL = 1e-5


@dataclass
class TeacherSignal:
    """Data-inferred latent states of one batch and the subspace each of them pins down.

    Attributes
    ----------
    z_hat : Tensor of shape (B, L, M)
        ``observation.invert`` of the data (no gradient flows into it: the teacher is data).
    weight : Tensor of shape (B, L, M) or (B, L, 1), or None
        Diagonal projector (1 = forced unit) for the identity readout, or 1/0 per sample when
        the whole state is forced wherever something is observed.
    projector : Tensor of shape (U, M, M) or None
        Orthogonal projectors ``B_o⁺ B_o`` of the distinct observed-channel patterns (linear
        and ReLU readouts whose loadings do not span the latent space, or with missing data).
    pattern : LongTensor of shape (B, L) or None
        Index into ``projector`` for every sample.
    """

    z_hat: Tensor
    weight: Tensor | None = None
    projector: Tensor | None = None
    pattern: Tensor | None = None

    def force(self, z: Tensor, t: int, alpha: float | Tensor) -> Tensor:
        """``z + alpha · P_t (ẑ_t − z)`` for the samples of time step ``t``: (B, M) -> (B, M)."""
        delta = self.z_hat[:, t] - z
        if self.weight is not None:
            return z + alpha * self.weight[:, t] * delta
        if self.projector.shape[0] == 1:
            # one pattern (every channel observed): a plain product; a broadcast einsum over the
            # batch took twice as long, forward and backward, at every step of the window
            return z + alpha * (delta @ self.projector[0].mT)
        return z + alpha * torch.einsum("bij,bj->bi", self.projector[self.pattern[:, t]], delta)

    def forced_fraction(self) -> float:
        """Mean rank of the forced subspace divided by M (1 = the whole state is forced)."""
        m = self.z_hat.shape[-1]
        if self.weight is not None:
            return float(self.weight.expand_as(self.z_hat).mean())
        ranks = torch.diagonal(self.projector, dim1=-2, dim2=-1).sum(-1)       # trace = rank
        return float(ranks[self.pattern].mean() / m)


def make_teacher(observation: Any, x: Tensor, mask: Tensor) -> TeacherSignal:
    """Teacher states ``ẑ = observation.invert(x)`` and forcing projectors for a batch.

    Parameters
    ----------
    observation : ObservationModel
        Readout observations (``B`` loadings) get the projector of their observed rows; one that
        reads only the leading ``n_read`` units (``LatentFeatureObservation``) forces those
        units by its inner likelihood's rule and leaves the rest free (the whole read part for
        firing-rate features); any other model forces the whole state at every sample with an
        observed channel.
    x : Tensor of shape (B, L, N)
        Observations (values at masked entries are ignored).
    mask : bool Tensor of shape (B, L, N)
        True = observed.

    Returns
    -------
    TeacherSignal
    """
    with torch.no_grad():
        xn = torch.where(mask, x, torch.full_like(x, float("nan")))
        return _forcing_rule(observation, observation.invert(xn, mask).to(x.dtype), mask)


def _forcing_rule(observation: Any, z_hat: Tensor, mask: Tensor) -> TeacherSignal:
    """The teacher of :func:`make_teacher` for given teacher states ``z_hat`` (B, L, M)."""
    m, dtype = z_hat.shape[-1], z_hat.dtype
    n_read = getattr(observation, "n_read", None)
    if isinstance(n_read, int):
        # the likelihood reads only the leading n_read <= m units (ODE-RFWP's vector state,
        # ORGaNICs' principal neurons): the data say nothing about the rest (fast weights,
        # modulators), whose invert() entries are mere fill values, so those units run freely. With
        # n_read = m (ORGaNICs reading its modulators too) the inner readout's rule still applies:
        # forcing every unit to its pseudo-inverse teacher would pin the state to the row space
        inner = getattr(observation, "inner", None)
        if inner is not None and getattr(observation, "transfer", None) == "identity":
            # the read units are the inner likelihood's latent: force only what its readout
            # determines (a linear readout of fewer channels than units leaves directions free)
            return _embed_teacher(_forcing_rule(inner, z_hat[..., :n_read], mask), z_hat)
        weight = torch.zeros_like(z_hat)
        weight[..., :n_read] = mask.any(-1, keepdim=True).to(dtype)
        return TeacherSignal(z_hat=z_hat, weight=weight)
    loadings = getattr(observation, "B", None)
    if not isinstance(loadings, Tensor) or loadings.ndim != 2:
        return TeacherSignal(z_hat=z_hat, weight=mask.any(-1, keepdim=True).to(dtype))
    n = loadings.shape[0]
    if getattr(observation, "readout", None) == "identity":
        weight = torch.zeros_like(z_hat)
        weight[..., :n] = mask.to(dtype)
        return TeacherSignal(z_hat=z_hat, weight=weight)
    patterns, index = mask_patterns(mask.reshape(-1, n))
    B = loadings.detach().to(torch.float64)
    proj = torch.stack([_row_space_projector(B[p]) for p in patterns.to(B.device)])
    eye = torch.eye(m, dtype=proj.dtype, device=proj.device)
    full = (proj - eye).abs().amax(dim=(-2, -1)) < _IDENTITY_TOL
    empty = ~patterns.any(-1).to(proj.device)
    if bool((full | empty).all()):
        # every pattern pins the whole state (or nothing): a cheap per-sample weight does it
        weight = full.to(dtype)[index].reshape(*mask.shape[:-1], 1)
        return TeacherSignal(z_hat=z_hat, weight=weight)
    return TeacherSignal(z_hat=z_hat, projector=proj.to(dtype), pattern=index.reshape(mask.shape[:-1]))


def mask_patterns(mask: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct rows of a boolean mask and the index of each row among them.

    What ``torch.unique(mask, dim=0, return_inverse=True)`` gives, up to the order of the
    patterns, but through one integer code per row: ``unique(dim=0)`` sorts whole rows and
    took 12 % of a teacher-forcing fit of the rPLRNN (a window's 1 600 rows every update).

    Parameters
    ----------
    mask : bool Tensor of shape (K, N)

    Returns
    -------
    patterns : bool Tensor of shape (U, N)
    index : LongTensor of shape (K,)
        ``patterns[index] == mask``.
    """
    n = mask.shape[-1]
    if n > 62:                       # the codes would overflow int64
        return torch.unique(mask, dim=0, return_inverse=True)
    bits = torch.pow(2, torch.arange(n, device=mask.device, dtype=torch.int64))
    codes, index = torch.unique((mask.to(torch.int64) * bits).sum(-1), return_inverse=True)
    return (codes[:, None] & bits) != 0, index


def _embed_teacher(part: TeacherSignal, z_hat: Tensor) -> TeacherSignal:
    """A teacher of the leading ``k`` units, ``part`` (built on ``z_hat[..., :k]``), as one of all
    ``M`` units of ``z_hat`` (B, L, M), the others unforced."""
    k, m = part.z_hat.shape[-1], z_hat.shape[-1]
    if part.weight is not None:
        weight = torch.zeros_like(z_hat)
        weight[..., :k] = part.weight
        return TeacherSignal(z_hat=z_hat, weight=weight)
    proj = part.projector.new_zeros(part.projector.shape[0], m, m)
    proj[:, :k, :k] = part.projector
    return TeacherSignal(z_hat=z_hat, projector=proj, pattern=part.pattern)


def _row_space_projector(rows: Tensor) -> Tensor:
    """Orthogonal projector onto the row space of ``rows`` (k, M) -> (M, M); zero for k = 0."""
    m = rows.shape[1]
    if rows.shape[0] == 0:
        return torch.zeros(m, m, dtype=rows.dtype, device=rows.device)
    return torch.linalg.pinv(rows) @ rows


# ---------------------------------------------------------------------------------------------
# α from the Jacobians
# ---------------------------------------------------------------------------------------------
def jacobian_norms(dynamics: Any, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
    """Spectral norms of the dynamics' step Jacobians at a set of states.

    Parameters
    ----------
    dynamics : LatentDynamics
    z : Tensor of shape (B, L, M)
        States at which the step is linearised (e.g. the forced trajectory).
    u : Tensor of shape (B, L, K) or None
        Inputs of the steps taken *from* these states.
    dt : float, Tensor of shape (B, L) or None
        Sampling step of those steps.

    Returns
    -------
    Tensor of shape (B, L)
        ``||J(z_{b,t})||_2`` (largest singular value).
    """
    n_batch, n_time, m = z.shape
    with torch.no_grad():
        flat_u = None if u is None else u.reshape(n_batch * n_time, -1)
        flat_dt = dt.reshape(-1, 1) if isinstance(dt, Tensor) else dt
        jac = dynamics.jacobian(z.reshape(-1, m), flat_u, flat_dt)
        return torch.linalg.matrix_norm(jac.to(torch.float64), ord=2).reshape(n_batch, n_time)


def norm_bound(norms: Tensor, method: str = "product_bound") -> float:
    """One bound ``G`` on the per-step growth of the Jacobian products from per-step norms.

    Parameters
    ----------
    norms : Tensor of shape (B, L)
        Spectral norms along B trajectories (see :func:`jacobian_norms`).
    method : {"product_bound", "batch_maximum"}
        "product_bound": the geometric mean of the norms along each trajectory, maximised over
        the batch. ``G**L`` bounds the norm of the product of the L Jacobians (submultiplicativity),
        so this is the tightest of the bounds that hold trajectory by trajectory. "batch_maximum":
        the largest single norm (a bound for every product of every length, often loose).

    Returns
    -------
    float
    """
    if method not in ALPHA_METHODS:
        raise ValueError(f"`alpha_method` must be one of {ALPHA_METHODS}; got alpha_method={method!r}.")
    finite = torch.where(torch.isfinite(norms), norms, torch.full_like(norms, float("inf")))
    if method == "batch_maximum":
        return float(finite.max())
    log_norms = torch.log(finite.clamp_min(1e-300))
    return float(torch.exp(log_norms.mean(-1)).max())


def alpha_from_norm(norm: float) -> float:
    """The smallest forcing that bounds the gradients: ``max(0, 1 − 1/G)`` (1 for G = inf)."""
    if not math.isfinite(norm):
        return 1.0
    return max(0.0, 1.0 - 1.0 / norm) if norm > 0 else 0.0


def estimate_alpha(dynamics: Any, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None,
                   method: str = "product_bound") -> tuple[float, float]:
    """α estimate and the bound ``G`` it came from, for states ``z`` of shape (B, L, M)."""
    bound = norm_bound(jacobian_norms(dynamics, z, u, dt), method)
    return alpha_from_norm(bound), bound


@dataclass
class AlphaSchedule:
    """The forcing strength during training: constant or adapted to the Jacobian bound.

    Parameters
    ----------
    initial : float in [0, 1]
        α at the start.
    adaptive : bool
        Follow :func:`estimate_alpha` (else α stays at ``initial``).
    method : {"product_bound", "batch_maximum"}
        See :func:`norm_bound`.
    decay : float in [0, 1)
        When the estimate is below the current α, ``α ← decay · α + (1 − decay) · estimate``;
        an estimate above it is taken at once (the gradients must stay bounded now).
    update_every : int
        Re-estimate every this many batches.
    end : float in (0, 1], optional
        A constant α (``adaptive=False``) annealed geometrically over ``n_epochs`` epochs, from
        ``initial`` in the first to ``end`` in the last (:meth:`at_epoch`).
    n_epochs : int
        Length of that annealing.
    """

    initial: float = 1.0
    adaptive: bool = True
    method: str = "product_bound"
    decay: float = 0.99
    update_every: int = 5
    end: float | None = None
    n_epochs: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.initial, (bool, np.bool_)) or not (
                isinstance(self.initial, (int, float, np.integer, np.floating)) and 0.0 <= float(self.initial) <= 1.0):
            raise ValueError(f"`alpha` must be a number in [0, 1] or 'adaptive'; got {self.initial!r}.")
        if self.method not in ALPHA_METHODS:
            raise ValueError(f"`alpha_method` must be one of {ALPHA_METHODS}; got alpha_method={self.method!r}.")
        if not (isinstance(self.decay, (int, float, np.floating)) and 0.0 <= float(self.decay) < 1.0):
            raise ValueError(f"`alpha_decay` must be a number in [0, 1); got alpha_decay={self.decay!r}.")
        if isinstance(self.update_every, bool) or not isinstance(self.update_every, (int, np.integer)) \
                or self.update_every < 1:
            raise ValueError(f"`alpha_update_every` must be a positive integer; got {self.update_every!r}.")
        self.initial = float(self.initial)
        if self.end is not None:
            if self.adaptive:
                raise ValueError(f"`alpha_end` anneals a constant `alpha`; got alpha_end={self.end!r} with the "
                                 f"adaptive schedule.")
            if isinstance(self.end, bool) or not isinstance(self.end, (int, float, np.floating)) \
                    or not 0.0 < float(self.end) <= 1.0 or self.initial <= 0.0:
                raise ValueError(f"`alpha_end` must be a number in (0, 1] and `alpha` positive (a geometric "
                                 f"schedule); got alpha_end={self.end!r}, alpha={self.initial!r}.")
            self.end = float(self.end)

    def at_epoch(self, epoch: int) -> float:
        """The constant α of ``epoch``: ``initial · (end / initial) ** (epoch / (n_epochs − 1))``
        (``initial`` when it does not anneal)."""
        if self.end is None or self.n_epochs < 2:
            return self.initial
        return float(self.initial * (self.end / self.initial) ** (min(epoch, self.n_epochs - 1) / (self.n_epochs - 1)))

    def update(self, current: float, estimate: float) -> float:
        """The next α given the current one and a fresh estimate."""
        if not self.adaptive:
            return current
        if estimate > current:
            return float(estimate)
        return float(self.decay * current + (1.0 - self.decay) * estimate)
