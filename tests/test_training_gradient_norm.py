"""gradient_step clips by a float64 gradient norm: finite float32 gradients whose squares overflow still train."""
from __future__ import annotations

import math

import torch

from dsident.inference.training import gradient_norm, gradient_step


def _step(scale: float, grad_clip: float | None, values=(0.5, -1.0, 2.0)):
    """One SGD(lr=1) step on loss = sum(scale * c * p): the gradient is scale * c (float32)."""
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float32))
    c = torch.tensor(values, dtype=torch.float32)
    opt = torch.optim.SGD([p], lr=1.0)
    norm, divergence = gradient_step((scale * c * p).sum(), opt, [p], grad_clip, epoch=0)
    return p.detach().clone(), norm, divergence, c


def test_huge_finite_gradient_is_clipped_not_refused():
    # entries of 1e20 are finite in float32, but their squares (1e40) are not
    p, norm, divergence, c = _step(1e20, grad_clip=10.0)
    assert divergence is None
    expected = 1e20 * math.sqrt(sum(float(v) ** 2 for v in c))         # the exact norm, in float64
    assert math.isclose(float(norm), expected, rel_tol=1e-6)
    # the step taken is the gradient rescaled to norm 10, in the gradient's direction
    assert math.isclose(float(torch.linalg.vector_norm(p.double())), 10.0, rel_tol=1e-5)
    torch.testing.assert_close(p / p.norm(), -c / c.norm())


def test_float32_norm_would_have_overflowed():
    # the situation the float64 norm exists for: torch's own float32 norm of the same gradient is inf
    g = 1e20 * torch.tensor([0.5, -1.0, 2.0], dtype=torch.float32)
    assert not torch.isfinite(torch.linalg.vector_norm(g))
    p = torch.nn.Parameter(torch.zeros(3))
    p.grad = g.clone()
    assert torch.isfinite(gradient_norm([p]))


def test_moderate_gradient_matches_torch_clipping():
    p, norm, divergence, _ = _step(40.0, grad_clip=1.0)
    q = torch.nn.Parameter(torch.zeros(3, dtype=torch.float32))
    ((40.0 * torch.tensor([0.5, -1.0, 2.0]) * q).sum()).backward()
    ref_norm = torch.nn.utils.clip_grad_norm_([q], 1.0)
    assert divergence is None
    assert math.isclose(float(norm), float(ref_norm), rel_tol=1e-6)
    torch.testing.assert_close(p, -q.grad)


def test_no_clip_leaves_gradient_unscaled():
    p, norm, divergence, c = _step(3.0, grad_clip=None)
    assert divergence is None
    torch.testing.assert_close(p, -3.0 * c)


def test_non_finite_gradient_is_refused():
    # sqrt at 0: a finite loss (0) with an infinite gradient
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float32))
    opt = torch.optim.SGD([p], lr=1.0)
    norm, divergence = gradient_step(torch.sqrt(p).sum(), opt, [p], 10.0, epoch=0)
    assert norm is None and "non-finite" in divergence
    assert torch.equal(p.detach(), torch.zeros(3))              # no step was taken
