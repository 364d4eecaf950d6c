"""Continuous-time recurrent fast weight programmer (ODE-RFWP; Irie, Faccio & Schmidhuber, NeurIPS 2022).

Legend: ``B`` batch, ``D`` state_dim (the vector state), ``H`` n_heads, ``d`` head_dim,
``K`` input_dim, ``M = D + H d^2`` latent_dim.

Design choice for a generative state-space model (seed ``002_odefwp.md`` section 7.2)
-------------------------------------------------------------------------------------------
The paper's ODE-RFWP evolves only the vector state by an ODE and writes to the fast weights
with a *discrete* rule at observation times (its eqs. 26-27). Writing the observations
themselves into the fast weights would turn the model into a filter, which cannot be run
freely to generate data. We therefore use the paper's "fully continuous variant": a joint ODE on
``(y, W)`` in which the slow net reads the current state (and the exogenous input), emits key,
value, query and learning rate, the fast weights follow a continuous learning rule, and the
fast-weight read-out drives the vector state:

* latent = ``concat(y, flatten(W))``; ``y`` (the first ``state_dim`` units,
  :attr:`readout_slice`) is the observed part: observation models read only from it, and
  process noise is meant for it alone (the fast weights are deterministic given ``y``);
* the delta rule is the default, as it is dissipative (``d||W||^2/dt < 0`` whenever
  ``||W k|| > ||v||``), which keeps long free-running rollouts bounded; Hebb and Oja are offered.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import LatentDynamics
from .gnode import _check_choice, _check_positive_int, _check_positive_number
from .solvers import ODEStepMixin, check_method

__all__ = ["RecurrentFWP", "RULES"]

RULES = ("delta", "hebb", "oja")


class RecurrentFWP(ODEStepMixin, LatentDynamics):
    r"""ODE-RFWP latent dynamics: a vector state driven by a fast weight matrix that learns continuously.

    Parameters
    ----------
    state_dim : int
        D, size of the vector state ``y`` (the observed part of the latent).
    input_dim : int
        K, size of the external input.
    n_heads : int
        H, number of independent fast weight matrices.
    head_dim : int or None
        d, size of each head's key, value and query; default ``max(1, state_dim // n_heads)``.
    rule : {"delta", "hebb", "oja"}
        Continuous learning rule of the fast weights (paper eq. 21); delta by default.
    hidden_dim : int
        Width of the hidden layer of the state's vector field.
    tau : float
        Time constant of the state (and of the fast weights unless ``tau_fast`` is given), in
        time units.
    tau_fast : float or None
        Time constant of the fast weights, in time units; None uses ``tau``. A larger value
        gives the fast weights a memory longer than the state's own time scale.
    method : str
        Solver (:data:`dsident.dynamics.solvers.SOLVERS`); RK4 by default.
    n_substeps : int
        Solver sub-steps per sampling interval.
    seed : int or None
        Seed of the parameter initialisation.

    Attributes
    ----------
    latent_dim : int
        ``state_dim + n_heads * head_dim ** 2``.
    observed_latent_dim : int
        ``state_dim``: the number of leading latent units observation models read from.
    readout_slice : slice
        ``slice(0, state_dim)``, the vector part of the latent.

    Notes
    -----
    With ``[k~, v~, q~, beta~] = P [y; u] + p`` split per head, ``k = softmax(k~)``,
    ``q = softmax(q~)``, ``v = tanh(v~)``, ``beta = sigmoid(beta~)``:

    .. math::

        \tau_f \dot W_h = \beta_h \begin{cases}
            (v_h - W_h k_h) k_h^\top & \text{delta}\\
            v_h k_h^\top & \text{Hebb}\\
            v_h (k_h - W_h^\top v_h)^\top & \text{Oja}\end{cases}
        \qquad
        \tau \dot y = -y + A_2 \tanh\big(A_1 [y; \mathrm{concat}_h W_h q_h; u] + a_1\big) + a_2

    with ``tau_f = tau_fast`` (default ``tau``). The paper has no time constants (``tau = 1``
    in its time unit); ours set the model's time scale in the data's. The initial fast weights
    are zero (the paper's ``W_0 = 0``). The Jacobian uses autograd
    (the softmax/outer-product chain has no compact closed form worth maintaining).

    References
    ----------
    Irie, Faccio & Schmidhuber (2022), seed ``002_odefwp.md`` sections 1.7, 1.9, 1.11 and 7.2.
    """

    def __init__(self, state_dim: int, input_dim: int = 0, *, n_heads: int = 4, head_dim: int | None = None,
                 rule: str = "delta", hidden_dim: int = 64, tau: float = 1.0, tau_fast: float | None = None,
                 method: str = "rk4", n_substeps: int = 1, seed: int | None = None) -> None:
        super().__init__()
        state_dim = _check_positive_int("state_dim", state_dim)
        input_dim = _check_positive_int("input_dim", input_dim, 0)
        n_heads = _check_positive_int("n_heads", n_heads)
        hidden_dim = _check_positive_int("hidden_dim", hidden_dim)
        n_substeps = _check_positive_int("n_substeps", n_substeps)
        if head_dim is not None:
            head_dim = _check_positive_int("head_dim", head_dim)
        _check_choice("rule", rule, RULES)
        check_method(method)
        tau = _check_positive_number("tau", tau, "time units")
        if tau_fast is not None:
            tau_fast = _check_positive_number("tau_fast", tau_fast, "time units")
        self.tau_fast = None if tau_fast is None else float(tau_fast)
        self.state_dim, self.input_dim, self.n_heads, self.head_dim = state_dim, input_dim, n_heads, head_dim
        self.rule, self.hidden_dim, self.tau = rule, hidden_dim, float(tau)
        self.method, self.n_substeps, self.seed = method, n_substeps, seed
        d = head_dim if head_dim is not None else max(1, state_dim // n_heads)
        self._d = d
        self.latent_dim = state_dim + n_heads * d * d
        self.observed_latent_dim = state_dim
        self.readout_slice = slice(0, state_dim)

        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        self.slow = nn.Linear(state_dim + input_dim, n_heads * (3 * d + 1))
        self.hidden = nn.Linear(state_dim + n_heads * d + input_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim, state_dim)
        for layer in (self.slow, self.hidden, self.output):
            fan_in = layer.weight.shape[1]
            with torch.no_grad():
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) / math.sqrt(fan_in))
                layer.bias.zero_()

    def split_latent(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """``(y (B, D), W (B, H, d, d))`` from the latent (B, M)."""
        d = self._d
        return z[:, :self.state_dim], z[:, self.state_dim:].reshape(z.shape[0], self.n_heads, d, d)

    def vector_field(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """d(y, W)/dt, (B, M) -> (B, M)."""
        uu = self._inputs(z, u)
        y, w = self.split_latent(z)
        bsz, h, d = z.shape[0], self.n_heads, self._d
        slow_in = y if uu is None else torch.cat([y, uu], dim=-1)
        proj = self.slow(slow_in).reshape(bsz, h, 3 * d + 1)
        k = torch.softmax(proj[..., :d], dim=-1)                           # (B, H, d)
        v = torch.tanh(proj[..., d:2 * d])
        q = torch.softmax(proj[..., 2 * d:3 * d], dim=-1)
        beta = torch.sigmoid(proj[..., 3 * d:])                            # (B, H, 1)
        if self.rule == "delta":
            dw = (v - (w @ k[..., None])[..., 0])[..., :, None] * k[..., None, :]
        elif self.rule == "hebb":
            dw = v[..., :, None] * k[..., None, :]
        else:
            dw = v[..., :, None] * (k - (w.transpose(-1, -2) @ v[..., None])[..., 0])[..., None, :]
        dw = beta[..., None] * dw
        read = (w @ q[..., None])[..., 0].reshape(bsz, h * d)
        parts = [y, read] if uu is None else [y, read, uu]
        dy = -y + self.output(torch.tanh(self.hidden(torch.cat(parts, dim=-1))))
        tau_fast = self.tau if self.tau_fast is None else self.tau_fast
        return torch.cat([dy / self.tau, dw.reshape(bsz, -1) / tau_fast], dim=-1)
