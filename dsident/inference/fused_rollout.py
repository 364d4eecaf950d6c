"""The forced rollout of a (shallow) PLRNN as one autograd node with a hand-written backward pass.

Teacher forcing on a CPU spends its time on the dispatch of small operations, not on
arithmetic: a window of L steps of a batch of 16 is a chain of ≈ 14 L tiny tensor operations,
each recorded by autograd and replayed backwards. For the two piecewise-linear models (the
recommended models for chaotic data, and the benchmark cells' models) the whole window is
written out here. One step is ``z_t = f(z̃_{t-1})`` followed by the forcing
``z̃_t = z_t K_t + d_t``:

* the shallow PLRNN, ``p_t = W_2 z̃_{t-1}``, ``f = a ⊙ z̃_{t-1} + W_1 φ(p_t) + h_1`` with
  ``φ(p) = relu(p + h2) − relu(p)`` (clipped) or ``relu(p + h2)``;
* the PLRNN, ``f = a ⊙ z̃_{t-1} + W relu(z̃_{t-1}) + h`` (``W`` with a zero diagonal);
* forcing through per-unit weights ``w_t`` (identity readout): ``K_t = diag(1 − α_t w_t)``,
  ``d_t = α_t w_t ⊙ ẑ_t``; through one orthogonal projector ``P = B⁺B`` (a linear readout of
  fewer channels than units, every channel observed): ``K_t = I − α_t P``, ``d_t = α_t ẑ_t P``;
  or none (BPTT's free run).

The forward pass runs without recording, three to four operations a step (φ is a clamp and a
scaled shift; ``K_t`` is formed once per distinct α); the backward pass walks the window once,
carrying only the (B, M) and (B, H) products the chain needs, and forms the parameter gradients
afterwards from the stored states in a few batched contractions. Buffers are time-major
(L, B, ·), so that every step reads and writes contiguous slices in place, and the window-sized
ones come from :data:`~dsident.inference.buffer_pool.POOL`, so that an update reuses the
memory of the last one instead of faulting fresh pages in (at a batch of 256 that cost more than
the arithmetic). The teacher carries
no gradient (it is data, and the projector is built from the detached loadings), so the node
returns gradients for the initial state and the dynamics' parameters only.
``benchmarks/bench_fused_rollout.py`` measures the gain; the tests compare it with autograd
through the step-by-step rollout and with finite differences.

Shape legend: ``B`` batch, ``L`` window length, ``M`` latent_dim, ``H`` hidden_dim.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .buffer_pool import POOL

__all__ = ["fused_forced_rollout", "fused_free_run", "can_fuse"]


def can_fuse(model: Any, teacher: Any, u: Tensor | None) -> bool:
    """Whether :func:`fused_forced_rollout` computes this rollout: a PLRNN or shallow PLRNN
    without inputs, forced by a teacher that carries no gradient through per-unit weights or one
    projector (``teacher=None``: a free run, :func:`fused_free_run`)."""
    from ..dynamics.plrnn import PLRNN, ShallowPLRNN

    if type(model.dynamics) not in (ShallowPLRNN, PLRNN) or u is not None:
        return False
    if teacher is None:
        return True
    if teacher.z_hat.requires_grad:
        return False
    if teacher.weight is not None:
        return not teacher.weight.requires_grad
    # several projectors (missing channels) would need one per sample and step: the steps do it
    projector = teacher.projector
    return projector is not None and projector.shape[0] == 1 and not projector.requires_grad


def fused_forced_rollout(model: Any, teacher: Any, alphas: Tensor) -> tuple[Tensor, Tensor]:
    """The forced rollout of :func:`~dsident.inference.teacher_forcing.forced_rollout`, fused.

    Parameters
    ----------
    model : StateSpaceModel
        With :class:`~dsident.dynamics.ShallowPLRNN` or :class:`~dsident.dynamics.PLRNN`
        dynamics (see :func:`can_fuse`).
    teacher : TeacherSignal
        ``z_hat`` (B, L, M) and per-unit ``weight`` (B, L, M) or (B, L, 1), or one ``projector``
        (1, M, M).
    alphas : Tensor of shape (L,)
        Forcing strength of every step (entry 0 unused: ``z̃_0 = ẑ_0``).

    Returns
    -------
    predicted : Tensor of shape (B, L - 1, M)
    forced : Tensor of shape (B, L, M)
    """
    z_hat = teacher.z_hat
    if teacher.weight is not None:
        strength = alphas.to(z_hat)[None, :, None] * teacher.weight
        forcing = _Forcing(keep=1.0 - strength, drive=strength * z_hat)
    else:
        projector = teacher.projector[0].to(z_hat)
        forcing = _Forcing(projector=projector, alphas=[float(a) for a in alphas],
                           drive=alphas.to(z_hat)[None, :, None] * (z_hat @ projector.t()))
    return _ForcedRollout.apply(z_hat[:, 0], forcing, *_cell_and_parameters(model.dynamics))


def fused_free_run(model: Any, z0: Tensor, length: int) -> Tensor:
    """The free run of BPTT (:func:`~dsident.inference.bptt.free_run`), fused: a forced rollout
    with no forcing. ``z0`` (B, M) may carry a gradient (a learned initial state or readout).

    Returns
    -------
    Tensor of shape (B, length, M)
        ``z0`` followed by ``length − 1`` steps of the model.
    """
    return _ForcedRollout.apply(z0, _Forcing(length=length), *_cell_and_parameters(model.dynamics))[1]


def _cell_and_parameters(dynamics: Any) -> tuple[Any, ...]:
    """The node's step for these dynamics, then the tensors it differentiates, in the order the
    cell's ``gradients`` returns theirs."""
    from ..dynamics.plrnn import ShallowPLRNN

    if type(dynamics) is ShallowPLRNN:
        return _ShallowCell(dynamics.clip), dynamics.a, dynamics.W1, dynamics.W2, dynamics.h1, dynamics.h2
    # W_offdiag is formed outside the node, so autograd masks W's gradient as in the steps
    return _PLRNNCell(), dynamics.a, dynamics.W_offdiag, dynamics.h


class _Forcing:
    """``z̃_t = z_t K_t + d_t`` for a whole window, and its transpose for the backward pass.

    Exactly one of: ``keep`` (B, L, M) or (B, L, 1) (``K_t = diag(keep_t)``); ``projector``
    (M, M) with per-step ``alphas`` (``K_t = I − α_t P``, one matrix per distinct α); neither
    (``K_t = I``, ``d_t = 0``: a free run of ``length`` steps). ``drive`` (B, L, M) is ``d``.
    """

    def __init__(self, *, keep: Tensor | None = None, drive: Tensor | None = None,
                 projector: Tensor | None = None, alphas: list[float] | None = None,
                 length: int | None = None) -> None:
        self.keep_t = None if keep is None else keep.transpose(0, 1).contiguous()
        self.drive_t = None if drive is None else drive.transpose(0, 1).contiguous()
        self.length = length if drive is None else drive.shape[1]
        # per step, the matrices the forward and the backward pass multiply by (None: K_t = I)
        self.matrix: list[Tensor | None] = []
        self.matrix_t: list[Tensor | None] = []
        if projector is not None:
            eye = torch.eye(projector.shape[0], dtype=projector.dtype, device=projector.device)
            by_alpha = {a: eye - a * projector for a in set(alphas[1:]) if a != 0.0}
            transposed = {a: k.t().contiguous() for a, k in by_alpha.items()}
            self.matrix = [transposed.get(a) for a in alphas]
            self.matrix_t = [by_alpha.get(a) for a in alphas]

    def forward(self, t: int, out: Tensor, dest: Tensor) -> None:
        """``dest = z̃_t`` from ``out = z_t`` (both (B, M))."""
        if self.keep_t is not None:
            torch.addcmul(self.drive_t[t], out, self.keep_t[t], out=dest)
        elif self.matrix and self.matrix[t] is not None:
            torch.addmm(self.drive_t[t], out, self.matrix[t], out=dest)
        elif self.drive_t is not None:
            torch.add(self.drive_t[t], out, out=dest)
        else:
            dest.copy_(out)

    def backward(self, t: int, g_pred: Tensor, g_tilde: Tensor, dest: Tensor) -> None:
        """``dest = dL/dz_t = g_pred + K_tᵀ-applied g_tilde`` (g_tilde = dL/dz̃_t)."""
        if self.keep_t is not None:
            torch.addcmul(g_pred, self.keep_t[t], g_tilde, out=dest)
        elif self.matrix and self.matrix[t] is not None:
            torch.addmm(g_pred, g_tilde, self.matrix_t[t], out=dest)
        else:
            torch.add(g_pred, g_tilde, out=dest)


class _ShallowCell:
    """One step of the shallow PLRNN and its backward pass; parameters (a, W1, W2, h1, h2)."""

    def __init__(self, clip: bool) -> None:
        self.clip = clip

    def begin(self, params: tuple[Tensor, ...], length: int, n_batch: int) -> None:
        a, W1, W2, h1, h2 = params
        self.params = params
        # kept until the node's graph is released (a retained graph runs the backward again)
        self.pre_all = POOL.take((length - 1, n_batch, W2.shape[0]), W2.dtype, W2.device)
        POOL.give_when_freed(self, self.pre_all)
        self.act = torch.empty(n_batch, W2.shape[0], dtype=W2.dtype, device=W2.device)
        # φ(p) = clamp(p, low, high) · sign + shift elementwise (:func:`_clamp_form`): two operations
        # instead of four, and exactly 0 where both ReLUs are off, as in the step-by-step route (folding
        # sign and shift into W1 and h1 would leave round-off there, which Adam turns into full-size
        # steps of the columns of W1 that belong to silent units)
        self.form = _clamp_form(h2, self.clip)
        self.w1t, self.w2t = W1.t(), W2.t()

    def step(self, t: int, z: Tensor, out: Tensor) -> None:
        a, _, _, h1, _ = self.params
        low, high, sign, shift = self.form
        pre, act = self.pre_all[t - 1], self.act
        torch.mm(z, self.w2t, out=pre)
        torch.clamp(pre, low, high, out=act)
        if self.clip:
            torch.addcmul(shift, act, sign, out=act)
        else:
            act.add_(shift)
        torch.addmm(h1, act, self.w1t, out=out).addcmul_(a, z)

    def begin_backward(self, z_prev: Tensor) -> None:
        # φ'(p) = sign · (1[p > low] − 1[p > high]) (1[p > low] unclipped), the one full-size buffer
        # the backward pass keeps: each step overwrites its slice with dL/dp, and the gradients reuse
        # it. Fresh (L, B, H) buffers cost a page fault per 4 KiB on first touch, which made a batch
        # of 256 slower than autograd when the backward made seven of them.
        low, high, sign, _ = self.form
        # comparisons written straight into float buffers: a bool result converted afterwards
        # took ten times as long on a CPU
        shape, dtype, device = self.pre_all.shape, self.pre_all.dtype, self.pre_all.device
        slope = torch.gt(self.pre_all, low, out=POOL.take(shape, dtype, device))
        if self.clip:
            above = torch.gt(self.pre_all, high, out=POOL.take(shape, dtype, device))
            slope.sub_(above).mul_(sign)
            POOL.give(above)
        self.g_pre_all = slope
        self.g_act = torch.empty_like(self.act)

    def step_backward(self, t: int, g_out: Tensor) -> Tensor:
        """dL/dz̃_{t-1} from dL/dz_t."""
        a, W1, W2, _, _ = self.params
        g_pre = self.g_pre_all[t - 1]
        g_pre.mul_(torch.mm(g_out, W1, out=self.g_act))                       # dL/dp_t = φ'(p_t) ⊙ W1ᵀ g
        return torch.addmm(g_out * a, g_pre, W2)

    def gradients(self, g_out_all: Tensor, z_prev: Tensor) -> tuple[Tensor, ...]:
        """Gradients of (a, W1, W2, h1, h2) from every step's dL/dz_t (L-1, B, M) and z̃_{t-1}."""
        W1, h2 = self.params[1], self.params[4]
        m, n_hidden = z_prev.shape[-1], self.pre_all.shape[-1]
        g_out_flat = g_out_all.reshape(-1, m)
        grad_a = (g_out_all * z_prev).sum((0, 1))
        grad_h1 = g_out_flat.sum(0)
        # (zᵀ g)ᵀ rather than gᵀ z: a long contraction into an (H, M) product with M of a few
        # units ran six times slower than into (M, H)
        grad_w2 = (z_prev.reshape(-1, m).t() @ self.g_pre_all.reshape(-1, n_hidden)).t()
        # dL/dh2 = Σ relu'(p + h2) · (W1ᵀ g_out) = Σ_m W1[m, ·] · (g_outᵀ relu'(p + h2))[m, ·]
        on = torch.gt(self.pre_all, -h2, out=self.g_pre_all)                 # dL/dp is spent: reuse it
        grad_h2 = (W1 * (g_out_flat.t() @ on.reshape(-1, n_hidden))).sum(0)
        # φ(p) formed again as in the forward pass, for one contraction (the stored p stays
        # intact, so that a retained graph can run the backward again)
        low, high, sign, shift = self.form
        phi = torch.clamp(self.pre_all, low, high, out=on)
        if self.clip:
            torch.addcmul(shift, phi, sign, out=phi)
        else:
            phi.add_(shift)
        grad_w1 = g_out_flat.t() @ phi.reshape(-1, n_hidden)
        POOL.give(self.g_pre_all)
        del self.g_pre_all
        return grad_a, grad_w1, grad_w2, grad_h1, grad_h2


class _PLRNNCell:
    """One step of the PLRNN and its backward pass; parameters (a, W_offdiag, h)."""

    def begin(self, params: tuple[Tensor, ...], length: int, n_batch: int) -> None:
        a, W, h = params
        self.params = params
        self.act = torch.empty(n_batch, W.shape[0], dtype=W.dtype, device=W.device)
        self.wt = W.t()

    def step(self, t: int, z: Tensor, out: Tensor) -> None:
        a, _, h = self.params
        torch.clamp(z, min=0.0, out=self.act)                                 # relu(z̃_{t-1})
        torch.addmm(h, self.act, self.wt, out=out).addcmul_(a, z)

    def begin_backward(self, z_prev: Tensor) -> None:
        self.on = torch.gt(z_prev, 0.0, out=POOL.take(z_prev.shape, z_prev.dtype, z_prev.device))  # relu'(z̃_{t-1})
        self.g_relu = torch.empty_like(self.act)

    def step_backward(self, t: int, g_out: Tensor) -> Tensor:
        a, W, _ = self.params
        torch.mm(g_out, W, out=self.g_relu).mul_(self.on[t - 1])
        return torch.addcmul(self.g_relu, g_out, a)

    def gradients(self, g_out_all: Tensor, z_prev: Tensor) -> tuple[Tensor, ...]:
        m = z_prev.shape[-1]
        g_out_flat = g_out_all.reshape(-1, m)
        grad_a = (g_out_all * z_prev).sum((0, 1))
        grad_w = g_out_flat.t() @ torch.relu(z_prev).reshape(-1, m)
        POOL.give(self.on)
        del self.on
        return grad_a, grad_w, g_out_flat.sum(0)


class _ForcedRollout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z0: Tensor, forcing: _Forcing, cell: Any, *params: Tensor) -> tuple[Tensor, Tensor]:
        n_batch, m = z0.shape
        length = forcing.length
        opts = {"dtype": z0.dtype, "device": z0.device}
        forced = torch.empty(length, n_batch, m, **opts)
        predicted = torch.empty(length - 1, n_batch, m, **opts)
        cell.begin(params, length, n_batch)
        forced[0] = z0
        for t in range(1, length):
            out = predicted[t - 1]
            cell.step(t, forced[t - 1], out)
            forcing.forward(t, out, forced[t])
        ctx.forcing, ctx.cell = forcing, cell
        ctx.save_for_backward(forced)
        return predicted.transpose(0, 1), forced.transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_pred: Tensor | None, g_forced: Tensor | None) -> tuple[Tensor | None, ...]:
        (forced,) = ctx.saved_tensors
        forcing, cell = ctx.forcing, ctx.cell
        length, n_batch, m = forced.shape
        z_prev = forced[:-1]
        cell.begin_backward(z_prev)
        shape, dtype, device = (length - 1, n_batch, m), forced.dtype, forced.device
        g_pred_t = POOL.take(shape, dtype, device)
        if g_pred is None:
            g_pred_t.zero_()
        else:
            g_pred_t.copy_(g_pred.transpose(0, 1))
        g_forced_t = None if g_forced is None else POOL.take(forced.shape, dtype, device).copy_(g_forced.transpose(0, 1))
        g_tilde = torch.zeros_like(forced[0]) if g_forced_t is None else g_forced_t[-1].clone()
        g_out_all = POOL.take(shape, dtype, device)
        for t in range(length - 1, 0, -1):
            g_out = g_out_all[t - 1]
            forcing.backward(t, g_pred_t[t - 1], g_tilde, g_out)                 # dL/dz_t
            g_tilde = cell.step_backward(t, g_out)                              # dL/dz̃_{t-1}
            if g_forced_t is not None:
                g_tilde += g_forced_t[t - 1]
        grads = cell.gradients(g_out_all, z_prev)
        for buf in (g_pred_t, g_forced_t, g_out_all):
            if buf is not None:
                POOL.give(buf)
        return (g_tilde, None, None, *grads)


def _clamp_form(h2: Tensor, clip: bool) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """(low, high, sign, shift) with φ(p) = clamp(p, low, high) · sign + shift, per hidden unit.

    relu(p + h2) = clamp(p, −h2, ∞) + h2; the clipped relu(p + h2) − relu(p) is
    clamp(p, −h2, 0) + h2 where h2 ≥ 0 and −clamp(p, 0, −h2) where h2 < 0.
    """
    if not clip:
        return -h2, None, torch.ones_like(h2), h2
    zero = torch.zeros_like(h2)
    positive = h2 >= 0
    return (torch.minimum(-h2, zero), torch.maximum(-h2, zero), torch.where(positive, 1.0, -1.0).to(h2),
            torch.where(positive, h2, zero))
