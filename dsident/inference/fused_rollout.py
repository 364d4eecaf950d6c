"""The forced rollout of a shallow PLRNN as one autograd node with a hand-written backward pass.

Teacher forcing on a CPU spends its time on the dispatch of small operations, not on
arithmetic: a window of L steps of a batch of 16 is a chain of ≈ 14 L tiny tensor operations,
each recorded by autograd and replayed backwards. For the shallow PLRNN with an identity
readout (the recommended model for chaotic data, and the benchmark cells' model) the whole
window is written out here:

.. math::

    p_t = W_2 \\tilde z_{t-1}, \\quad
    z_t = a \\odot \\tilde z_{t-1} + W_1 \\phi(p_t) + h_1, \\quad
    \\tilde z_t = k_t \\odot z_t + d_t,

with ``φ(p) = relu(p + h2) − relu(p)`` (clipped) or ``relu(p + h2)``, ``k_t = 1 − α_t w_t`` and
``d_t = α_t w_t ⊙ ẑ_t`` (``w_t`` the forcing weights of the teacher, ``α_t`` the forcing
strength of step t). The forward pass runs without recording, six operations a step (φ is a
clamp and a scaled shift); the backward pass walks the window
once, carrying only the (B, M) and (B, H) products the chain needs, and forms the parameter
gradients afterwards from the stored pre-activations in a few batched contractions. Buffers
are time-major (L, B, ·), so that every step reads and writes contiguous slices in place.
``benchmarks/bench_fused_rollout.py`` measures the gain; the tests compare it with autograd through
the step-by-step rollout and with finite differences.

Shape legend: ``B`` batch, ``L`` window length, ``M`` latent_dim, ``H`` hidden_dim.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["fused_forced_rollout", "fused_free_run", "can_fuse"]


def can_fuse(model: Any, teacher: Any, u: Tensor | None) -> bool:
    """Whether :func:`fused_forced_rollout` computes this rollout: a shallow PLRNN without inputs,
    forced through per-unit weights (identity readout) by a teacher that carries no gradient
    (``teacher=None``: a free run, :func:`fused_free_run`)."""
    from ..dynamics.plrnn import ShallowPLRNN

    if type(model.dynamics) is not ShallowPLRNN or u is not None:
        return False
    return teacher is None or (teacher.weight is not None and not teacher.z_hat.requires_grad
                               and not teacher.weight.requires_grad)


def fused_forced_rollout(model: Any, teacher: Any, alphas: Tensor) -> tuple[Tensor, Tensor]:
    """The forced rollout of :func:`~dsident.inference.teacher_forcing.forced_rollout`, fused.

    Parameters
    ----------
    model : StateSpaceModel
        With :class:`~dsident.dynamics.ShallowPLRNN` dynamics (see :func:`can_fuse`).
    teacher : TeacherSignal
        ``z_hat`` (B, L, M) and per-unit ``weight`` (B, L, M) or (B, L, 1).
    alphas : Tensor of shape (L,)
        Forcing strength of every step (entry 0 unused: ``z̃_0 = ẑ_0``).

    Returns
    -------
    predicted : Tensor of shape (B, L - 1, M)
    forced : Tensor of shape (B, L, M)
    """
    dyn = model.dynamics
    z_hat = teacher.z_hat
    strength = alphas.to(z_hat)[None, :, None] * teacher.weight
    keep = 1.0 - strength
    drive = strength * z_hat
    return _ForcedRollout.apply(z_hat[:, 0], keep, drive, dyn.a, dyn.W1, dyn.W2, dyn.h1, dyn.h2, dyn.clip)


def fused_free_run(model: Any, z0: Tensor, length: int) -> Tensor:
    """The free run of BPTT (:func:`~dsident.inference.bptt.free_run`), fused: a forced rollout
    with no forcing. ``z0`` (B, M) may carry a gradient (a learned initial state or readout).

    Returns
    -------
    Tensor of shape (B, length, M)
        ``z0`` followed by ``length − 1`` steps of the model.
    """
    dyn = model.dynamics
    keep = torch.ones(1, length, 1, dtype=z0.dtype, device=z0.device).expand(z0.shape[0], -1, -1)
    drive = torch.zeros(1, length, 1, dtype=z0.dtype, device=z0.device).expand(z0.shape[0], -1, z0.shape[1])
    return _ForcedRollout.apply(z0, keep, drive, dyn.a, dyn.W1, dyn.W2, dyn.h1, dyn.h2, dyn.clip)[1]


class _ForcedRollout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, z0: Tensor, keep: Tensor, drive: Tensor, a: Tensor, W1: Tensor, W2: Tensor,
                h1: Tensor, h2: Tensor, clip: bool) -> tuple[Tensor, Tensor]:
        n_batch, length, m = drive.shape
        opts = {"dtype": drive.dtype, "device": drive.device}
        keep_t, drive_t = keep.transpose(0, 1).contiguous(), drive.transpose(0, 1).contiguous()
        forced = torch.empty(length, n_batch, m, **opts)
        predicted = torch.empty(length - 1, n_batch, m, **opts)
        pre_all = torch.empty(length - 1, n_batch, W2.shape[0], **opts)
        act = torch.empty(n_batch, W2.shape[0], **opts)
        # φ(p) = clamp(p, low, high) · sign + shift elementwise (:func:`_clamp_form`): two operations
        # instead of four, and exactly 0 where both ReLUs are off, as in the step-by-step route (folding
        # sign and shift into W1 and h1 would leave round-off there, which Adam turns into full-size
        # steps of the columns of W1 that belong to silent units)
        low, high, sign, shift = _clamp_form(h2, clip)
        w1t, w2t = W1.t(), W2.t()
        forced[0] = z0
        for t in range(1, length):
            z, pre, out = forced[t - 1], pre_all[t - 1], predicted[t - 1]
            torch.mm(z, w2t, out=pre)
            torch.clamp(pre, low, high, out=act)
            if clip:
                torch.addcmul(shift, act, sign, out=act)
            else:
                act.add_(shift)
            torch.addmm(h1, act, w1t, out=out).addcmul_(a, z)
            torch.addcmul(drive_t[t], out, keep_t[t], out=forced[t])
        ctx.clip = clip
        ctx.save_for_backward(forced, pre_all, keep_t, a, W1, W2, h2)
        return predicted.transpose(0, 1), forced.transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g_pred: Tensor | None, g_forced: Tensor | None) -> tuple[Tensor | None, ...]:
        forced, pre_all, keep_t, a, W1, W2, h2 = ctx.saved_tensors
        length, n_batch, m = forced.shape
        dtype = forced.dtype
        on = (pre_all > -h2).to(dtype)                                        # relu'(p + h2)
        slope = on - (pre_all > 0).to(dtype) if ctx.clip else on             # φ'(p)
        g_pred_t = (torch.zeros(length - 1, n_batch, m, dtype=dtype, device=forced.device) if g_pred is None
                    else g_pred.transpose(0, 1).contiguous())
        g_forced_t = None if g_forced is None else g_forced.transpose(0, 1).contiguous()
        g_tilde = torch.zeros_like(forced[0]) if g_forced_t is None else g_forced_t[-1]
        g_out_all = torch.empty_like(g_pred_t)
        g_pre_all = torch.empty_like(pre_all)
        for t in range(length - 1, 0, -1):
            g_out, g_pre = g_out_all[t - 1], g_pre_all[t - 1]
            torch.addcmul(g_pred_t[t - 1], keep_t[t], g_tilde, out=g_out)        # dL/dz_t
            torch.mm(g_out, W1, out=g_pre).mul_(slope[t - 1])                  # dL/dp_t
            g_tilde = torch.addmm(g_out * a, g_pre, W2)                       # dL/dz̃_{t-1}
            if g_forced_t is not None:
                g_tilde += g_forced_t[t - 1]
        z_prev = forced[:-1]
        g_out_flat = g_out_all.reshape(-1, m)
        grad_a = (g_out_all * z_prev).sum((0, 1))
        grad_h1 = g_out_flat.sum(0)
        # φ(p) formed again as in the forward pass, for one contraction
        low, high, sign, shift = _clamp_form(h2, ctx.clip)
        phi = torch.clamp(pre_all, low, high)
        phi = torch.addcmul(shift, phi, sign) if ctx.clip else phi + shift
        grad_w1 = g_out_flat.t() @ phi.reshape(-1, pre_all.shape[-1])
        grad_w2 = g_pre_all.reshape(-1, pre_all.shape[-1]).t() @ z_prev.reshape(-1, m)
        # dL/dh2 = Σ relu'(p + h2) · (W1ᵀ g_out) = Σ_m W1[m, ·] · (g_outᵀ relu'(p + h2))[m, ·]
        grad_h2 = (W1 * (g_out_flat.t() @ on.reshape(-1, on.shape[-1]))).sum(0)
        return g_tilde, None, None, grad_a, grad_w1, grad_w2, grad_h1, grad_h2, None


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
