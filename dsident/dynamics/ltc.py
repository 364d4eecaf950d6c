"""Liquid time-constant network (LTC; Hasani, Lechner et al., AAAI 2021).

Two parametrisations of one equation, ``dz/dt = -a(z, u) * z + b(z, u)`` with ``a >= 0``:

* ``form="compact"``: the paper's eq. 1, ``dz/dt = -[1/tau + f(z, u)] z + f(z, u) A`` with
  ``f = g * sigmoid(W z + U u + c)`` positive (``g >= 0`` per neuron).
* ``form="synaptic"``: the per-synapse conductance form of the reference code (its parameter
  count ``4 M^2 + 3 M`` is the paper's Table S2):
  ``C_i dv_i/dt = g_i (e_i - v_i) + sum_j w_ji s_ji(v) (E_ji - v_i) + sum_k w^_ki s^_ki(u) (E^_ki - v_i)``,
  ``s_ji(v) = sigmoid(sigma_ji (v_j - mu_ji))``.

Positive quantities (``tau, g, C, g_leak, w``) are softplus-parametrised, so no projection step
after the optimiser is needed. Legend: ``B`` batch, ``M`` latent_dim, ``K`` input_dim; index
``j`` presynaptic, ``i`` postsynaptic.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import LatentDynamics, check_state
from .gnode import _check_choice, _check_positive_int
from .solvers import ODEStepMixin, check_dt, check_method


__all__ = ["LTC"]


def _inv_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


class LTC(ODEStepMixin, LatentDynamics):
    r"""Liquid time-constant network as latent dynamics.

    Parameters
    ----------
    latent_dim : int
        M, number of neurons (the latent state).
    input_dim : int
        K, number of external inputs (sensory synapses).
    form : {"synaptic", "compact"}
        Per-synapse conductance form of the reference code (default) or the paper's eq. 1.
    method : str
        Solver; ``"fused"`` (the paper's eq. 4) by default, which keeps every state inside the
        convex hull of its reversal potentials for any step size. ``"euler"``, ``"rk4"`` and
        ``"dopri5"`` are available for comparison.
    n_substeps : int
        ODE unfolds per sampling interval (6 in the paper).
    time_constant : float, (float, float) or None
        Initial membrane time constant of the neurons, in the data's time unit: ``C / g_leak``
        in the synaptic form (``C`` is set, ``g_leak = 1``), ``tau`` in the compact form. A
        number starts every neuron there; a pair ``(fastest, slowest)`` spreads the neurons
        geometrically between the two (neuron i at ``fastest (slowest / fastest)^(i / (M-1))``),
        for data with fast and slow time scales at once (spikes riding on bursts). None keeps
        the reference starts (0.5 synaptic, 1 compact): 50 samples at dt = 0.01 but one sample
        at dt = 0.5 and 350 samples at dt = 1/700, so data sampled at other rates may want
        values of the order of their time scales, in the unit of ``dt``.
    seed : int or None
        Seed of the parameter initialisation.

    Notes
    -----
    .. math::

        \dot z = -\Big[\frac{1}{\tau} + f(z, u)\Big] \odot z + f(z, u) \odot A ,
        \qquad z' = \frac{z + \Delta t\, f A}{1 + \Delta t (1/\tau + f)}

    (Hasani et al. eqs. 1 and 4). The synaptic form has the same structure with a per-synapse
    reversal potential ``E_ji`` in place of ``A_i`` and a leak reversal ``e_i``. Theorem 1 bounds
    the liquid time constant ``tau / (1 + tau f)`` to ``[tau / (1 + tau g), tau]``
    (:meth:`time_constant_bounds`); Theorem 2 bounds the state to ``[min(0, A), max(0, A)]``
    (:meth:`state_bounds`), and the fused step keeps that bound for any ``dt``.

    The synaptic form is initialised as the reference code does (``mu ~ U(0.3, 0.8)``,
    ``sigma ~ U(3, 8)``, ``w ~ U(0.01, 1)``, reversal potentials ``+-1``, leak reversal
    ``U(-0.2, 0.2)``, ``g_leak = 1``, ``C = 0.5``, input map ``u * 1 + 0``). The compact form
    starts from ``W ~ N(0, 1/M)``, ``U ~ N(0, 1/K)``, ``c = 0``, ``g = 1``, ``tau = 1`` and
    ``A = +-1``. ``time_constant`` replaces ``C`` or ``tau``.

    All Jacobians are analytic.

    References
    ----------
    Hasani et al. (2021), seed ``001_ltc.md`` sections 1.3, 1.3a, 1.4 and 2.
    """

    def __init__(self, latent_dim: int, input_dim: int = 0, *, form: str = "synaptic", method: str = "fused",
                 n_substeps: int = 6, time_constant: float | tuple[float, float] | None = None,
                 seed: int | None = None) -> None:
        super().__init__()
        latent_dim = _check_positive_int("latent_dim", latent_dim)
        starts = _start_time_constants(time_constant, latent_dim)
        input_dim = _check_positive_int("input_dim", input_dim, 0)
        n_substeps = _check_positive_int("n_substeps", n_substeps)
        _check_choice("form", form, ("synaptic", "compact"))
        check_method(method)
        self.latent_dim, self.input_dim, self.form = latent_dim, input_dim, form
        self.method, self.n_substeps, self.seed = method, n_substeps, seed
        self.time_constant = (None if time_constant is None else float(time_constant)
                              if not isinstance(time_constant, (list, tuple, np.ndarray))
                              else [float(v) for v in time_constant])
        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        m, k = latent_dim, input_dim

        def uniform(shape: tuple[int, ...], lo: float, hi: float) -> nn.Parameter:
            return nn.Parameter(lo + (hi - lo) * torch.rand(shape, generator=gen))

        def signs(shape: tuple[int, ...]) -> nn.Parameter:
            return nn.Parameter(2.0 * torch.randint(0, 2, shape, generator=gen).to(torch.get_default_dtype()) - 1.0)

        if form == "compact":
            self.weight = nn.Parameter(torch.randn(m, m, generator=gen) / math.sqrt(m))
            self.input_weight = nn.Parameter(torch.randn(m, k, generator=gen) / math.sqrt(max(k, 1)))
            self.bias = nn.Parameter(torch.zeros(m))
            self.raw_gain = nn.Parameter(torch.full((m,), _inv_softplus(1.0)))
            self.raw_tau = nn.Parameter(_raw_time_constants(starts, 1.0, m))
            self.reversal = signs((m,))
        else:
            self.mu, self.sigma = uniform((m, m), 0.3, 0.8), uniform((m, m), 3.0, 8.0)
            self.raw_w = nn.Parameter(_softplus_inverse_tensor(uniform((m, m), 0.01, 1.0).data))
            self.erev = signs((m, m))
            self.sensory_mu, self.sensory_sigma = uniform((k, m), 0.3, 0.8), uniform((k, m), 3.0, 8.0)
            self.raw_sensory_w = nn.Parameter(_softplus_inverse_tensor(uniform((k, m), 0.01, 1.0).data))
            self.sensory_erev = signs((k, m))
            self.input_scale = nn.Parameter(torch.ones(k))
            self.input_shift = nn.Parameter(torch.zeros(k))
            self.leak_reversal = uniform((m,), -0.2, 0.2)
            self.raw_leak = nn.Parameter(torch.full((m,), _inv_softplus(1.0)))
            self.raw_capacitance = nn.Parameter(_raw_time_constants(starts, 0.5, m))

    # -- positive parameters ---------------------------------------------------------------------
    @property
    def tau(self) -> Tensor:
        """Compact form: membrane time constants tau (M,), time units."""
        return F.softplus(self.raw_tau)

    @property
    def gain(self) -> Tensor:
        """Compact form: the maximum of f per neuron, ``g`` (M,) (Theorem 1's ``W_i``)."""
        return F.softplus(self.raw_gain)

    def _sensory(self, u: Tensor | None, z: Tensor) -> tuple[Tensor, Tensor]:
        """Input conductance and input current per neuron, each (B, M); constant within a step."""
        if u is None:
            zero = torch.zeros_like(z)
            return zero, zero
        x = u * self.input_scale + self.input_shift
        act = torch.sigmoid(self.sensory_sigma * (x[:, :, None] - self.sensory_mu))   # (B, K, M)
        w = F.softplus(self.raw_sensory_w)
        # vecdot (multiply and reduce) is several times faster on CPU than the equivalent einsum
        return torch.linalg.vecdot(act, w, dim=1), torch.linalg.vecdot(act, w * self.sensory_erev, dim=1)

    # -- the transition ----------------------------------------------------------------------------
    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """Transition mean over one sampling interval ``dt`` (float, (B, 1) tensor, or None = 1).

        The synaptic form with the fused solver runs a dedicated loop that computes everything
        that is constant within the interval (positive parameters, the sensory conductances)
        once, instead of once per unfold; it is the same arithmetic as the generic solver path.
        When gradients are recorded (outside functorch transforms) the whole interval is one
        autograd node with a hand-written backward (``_FusedStep``, first derivatives only).

        Parameters
        ----------
        z : Tensor of shape (B, M)
        u : Tensor of shape (B, K) or None
        dt : float, Tensor of shape (B, 1), or None

        Returns
        -------
        Tensor of shape (B, M)
        """
        if self.form != "synaptic" or check_method(self.method) != "fused":
            return super().step(z, u, dt)
        check_state(z, self.latent_dim, u)
        h = check_dt(dt, z)
        uu = self._inputs(z, u)
        if (torch.is_grad_enabled() and not torch._C._are_functorch_transforms_active()
                and not (isinstance(h, Tensor) and h.requires_grad)):
            # training: the whole step is one autograd node with a hand-written backward
            # (_FusedStep); autograd would record about 20 small nodes plus 10 per unfold
            return _FusedStep.apply(z, uu, h, self.n_substeps, self.sigma, self.mu, self.raw_w, self.erev,
                                    self.sensory_sigma, self.sensory_mu, self.raw_sensory_w,
                                    self.sensory_erev, self.input_scale, self.input_shift,
                                    self.leak_reversal, self.raw_leak, self.raw_capacitance)
        w = F.softplus(self.raw_w)
        w_rev = w * self.erev
        neg_shift = -(self.sigma * self.mu)                 # sigma (v - mu) = sigma v - sigma mu
        s_cond, s_current = self._sensory(uu, z)
        leak = F.softplus(self.raw_leak)
        cm_t = F.softplus(self.raw_capacitance) / (h / self.n_substeps)      # C / sub-step
        num0 = leak * self.leak_reversal + s_current
        den0 = cm_t + leak + s_cond
        for _ in range(self.n_substeps):
            s = torch.sigmoid(torch.addcmul(neg_shift, z[:, :, None], self.sigma))     # (B, j, i)
            # z' = (C/h z + g e + sum w s E) / (C/h + g + sum w s): the fused step, eq. 4
            z = torch.addcmul(num0 + torch.linalg.vecdot(s, w_rev, dim=1), cm_t, z) \
                / (den0 + torch.linalg.vecdot(s, w, dim=1))
        return z

    # -- the split dz/dt = -a z + b ---------------------------------------------------------------
    def decay_and_drive(self, z: Tensor, u: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Decay rate ``a >= 0`` and drive ``b`` of ``dz/dt = -a z + b``, each (B, M)."""
        uu = self._inputs(z, u)
        if self.form == "compact":
            pre = z @ self.weight.T + self.bias
            if uu is not None:
                pre = pre + uu @ self.input_weight.T
            f = self.gain * torch.sigmoid(pre)
            return 1.0 / self.tau + f, f * self.reversal
        s = torch.sigmoid(self.sigma * (z[:, :, None] - self.mu))                         # (B, j, i)
        w = F.softplus(self.raw_w)
        cond = torch.linalg.vecdot(s, w, dim=1)
        current = torch.linalg.vecdot(s, w * self.erev, dim=1)
        s_cond, s_current = self._sensory(uu, z)
        leak = F.softplus(self.raw_leak)
        cap = F.softplus(self.raw_capacitance)
        return (leak + cond + s_cond) / cap, (leak * self.leak_reversal + current + s_current) / cap

    def decay_and_drive_jacobian(self, z: Tensor, u: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``a, b`` (B, M) and ``da/dz, db/dz`` (B, M, M) with rows = outputs, analytic."""
        uu = self._inputs(z, u)
        if self.form == "compact":
            pre = z @ self.weight.T + self.bias
            if uu is not None:
                pre = pre + uu @ self.input_weight.T
            sig = torch.sigmoid(pre)
            f = self.gain * sig
            df = (self.gain * sig * (1.0 - sig))[:, :, None] * self.weight                 # (B, i, j)
            return 1.0 / self.tau + f, f * self.reversal, df, self.reversal[None, :, None] * df
        s = torch.sigmoid(self.sigma * (z[:, :, None] - self.mu))                          # (B, j, i)
        w = F.softplus(self.raw_w)
        cap = F.softplus(self.raw_capacitance)
        leak = F.softplus(self.raw_leak)
        cond = torch.linalg.vecdot(s, w, dim=1)
        current = torch.linalg.vecdot(s, w * self.erev, dim=1)
        s_cond, s_current = self._sensory(uu, z)
        ds = s * (1.0 - s) * self.sigma * w                                                # d(w s_ji)/dv_j
        da = ds.transpose(1, 2) / cap[None, :, None]                                       # (B, i, j)
        db = (ds * self.erev).transpose(1, 2) / cap[None, :, None]
        return (leak + cond + s_cond) / cap, (leak * self.leak_reversal + current + s_current) / cap, da, db

    def vector_field(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """dz/dt = -a(z, u) z + b(z, u); (B, M) -> (B, M)."""
        a, b = self.decay_and_drive(z, u)
        return b - a * z

    def vector_field_jacobian(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """d(dz/dt)/dz = db - diag(z) da - diag(a), shape (B, M, M)."""
        a, _, da, db = self.decay_and_drive_jacobian(z, u)
        eye = torch.eye(z.shape[1], dtype=z.dtype, device=z.device)
        return db - z[:, :, None] * da - a[:, :, None] * eye

    # -- the paper's bounds --------------------------------------------------------------------------
    def liquid_time_constant(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """The system's time constant ``1 / a(z, u)`` (= ``tau / (1 + tau f)``), shape (B, M), time units."""
        return 1.0 / self.decay_and_drive(z, u)[0]

    def time_constant_bounds(self) -> tuple[Tensor, Tensor]:
        """Theorem 1: ``tau / (1 + tau g) <= tau_sys <= tau`` per neuron; two tensors (M,).

        In the synaptic form ``tau = C / g_leak`` and ``g`` is the summed maximal conductance
        (recurrent and sensory) divided by ``C``.
        """
        if self.form == "compact":
            tau, g = self.tau, self.gain
            return tau / (1.0 + tau * g), tau
        cap, leak = F.softplus(self.raw_capacitance), F.softplus(self.raw_leak)
        gmax = F.softplus(self.raw_w).sum(0)
        if self.input_dim > 0:
            gmax = gmax + F.softplus(self.raw_sensory_w).sum(0)
        return cap / (leak + gmax), cap / leak

    def state_bounds(self) -> tuple[Tensor, Tensor]:
        """Theorem 2: each neuron stays in ``[lower, upper]`` once it is there; two tensors (M,).

        Compact form: ``[min(0, A_i), max(0, A_i)]``. Synaptic form: the range of the leak
        reversal and of every reversal potential of the neuron's incoming synapses.
        """
        if self.form == "compact":
            zero = torch.zeros_like(self.reversal)
            return torch.minimum(zero, self.reversal), torch.maximum(zero, self.reversal)
        points = [self.leak_reversal[None, :], self.erev]
        if self.input_dim > 0:
            points.append(self.sensory_erev)
        allp = torch.cat(points, dim=0)
        return allp.min(0).values, allp.max(0).values


def _through_softplus(grad: Tensor, raw: Tensor) -> Tensor:
    """Gradient w.r.t. ``raw`` of ``F.softplus(raw)`` given ``grad`` w.r.t. its output (aten's own rule)."""
    return torch.ops.aten.softplus_backward(grad, raw, 1.0, 20.0)


def _unfolds_forward(z: Tensor, num0: Tensor, den0: Tensor, cm_t: Tensor, sigma: Tensor, neg_shift: Tensor,
                     w: Tensor, w_rev: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor]:
    """``n`` fused unfolds ``z' = N / D``; returns what the backward needs.

    ``s = sigmoid(sigma z_j + neg_shift)`` (B, j, i), ``N = num0 + cm_t z + sum_j s w_rev``,
    ``D = den0 + sum_j s w``. Returns the activations (n, B, M, M), the states (n + 1, B, M)
    (input of every unfold, then the result) and the denominators (n, B, M).
    """
    b, m = z.shape
    acts = z.new_empty((n, b, m, m))
    states = z.new_empty((n + 1, b, m))
    dens = z.new_empty((n, b, m))
    states[0] = z
    for k in range(n):
        zk = states[k]
        s = torch.sigmoid(torch.addcmul(neg_shift, zk[:, :, None], sigma), out=acts[k])
        # two vecdots (multiply and reduce) beat one on weights stacked as (j, 2, i) on CPU
        num = torch.linalg.vecdot(s, w_rev, dim=1).add_(num0).addcmul_(cm_t, zk)
        den = torch.add(den0, torch.linalg.vecdot(s, w, dim=1), out=dens[k])
        torch.div(num, den, out=states[k + 1])
    return acts, states, dens


def _unfolds_backward(grad: Tensor, acts: Tensor, states: Tensor, dens: Tensor, cm_t: Tensor, sigma: Tensor,
                      w: Tensor, w_rev: Tensor) -> tuple[Tensor, ...]:
    """Reverse pass of :func:`_unfolds_forward` by the chain rule written out.

    Returns the gradients of ``z``, ``num0``, ``den0`` (B, M), of ``cm_t`` per batch row (B, M),
    and of ``sigma``, ``neg_shift``, ``w``, ``w_rev`` (M, M).
    """
    n, b, m = acts.shape[:3]
    # g_nd[k, :, 0] = dL/dN and g_nd[k, :, 1] = -dL/dD = dL/dN z' of unfold k, (n, B, 2, M)
    g_nd = grad.new_empty((n, b, 2, m))
    # per-(batch, synapse) sums over the unfolds, reduced over the batch once at the end
    acc_wrev, acc_w, acc_shift, acc_sigma = (torch.zeros_like(acts[0]) for _ in range(4))
    g = grad
    for k in range(n - 1, -1, -1):
        s, zk, gk = acts[k], states[k], g_nd[k]
        gn = torch.div(g, dens[k], out=gk[:, 0])
        torch.mul(gn, states[k + 1], out=gk[:, 1])
        # dL/ds_ji = gN_i w_rev_ji + gD_i w_ji = gN_i (w_rev_ji - z'_i w_ji); q = s gN is shared
        # by the w_rev and w gradients and the sigmoid's chain rule
        q = s * gn[:, None, :]
        z_next = states[k + 1][:, None, :]
        acc_wrev.add_(q)
        acc_w.addcmul_(q, z_next, value=-1.0)
        t = q.mul_(torch.addcmul(w_rev, z_next, w, value=-1.0))
        gp = t.addcmul_(t, s, value=-1.0)                           # times (1 - s)
        acc_shift.add_(gp)
        acc_sigma.addcmul_(gp, zk[:, :, None])
        g = torch.addcmul(torch.linalg.vecdot(gp, sigma, dim=2), gn, cm_t)
    g_n, g_d = g_nd.sum(0).unbind(1)
    g_cm = torch.linalg.vecdot(g_nd[:, :, 0], states[:n], dim=0)
    return (g, g_n, g_d.neg_(), g_cm, acc_sigma.sum(0), acc_shift.sum(0), acc_w.sum(0), acc_wrev.sum(0))


class _FusedStep(torch.autograd.Function):
    r"""One sampling interval of the synaptic LTC (fused solver) as one autograd node.

    Same arithmetic as the plain loop in :meth:`LTC.step`: the positive parameters, the sensory
    conductance ``s_cond`` and current ``s_cur`` (B, M), ``num0 = g_leak e_leak + s_cur``,
    ``den0 = C n / dt + g_leak + s_cond``, then the unfolds of :func:`_unfolds_forward`. The
    backward is written out by hand, so that autograd keeps one node per step instead of about
    twenty plus ten per unfold. Only first derivatives are available (``once_differentiable``);
    functorch transforms (``jacrev``, ``vmap``) take the plain loop instead.
    """

    @staticmethod
    def forward(ctx, z: Tensor, u: Tensor | None, h: float | Tensor, n: int, sigma: Tensor, mu: Tensor,
                raw_w: Tensor, erev: Tensor, s_sigma: Tensor, s_mu: Tensor, raw_sw: Tensor, s_erev: Tensor,
                in_scale: Tensor, in_shift: Tensor, leak_rev: Tensor, raw_leak: Tensor,
                raw_cap: Tensor) -> Tensor:
        """Arguments in the order of :meth:`LTC.step`'s call; shapes as the LTC's parameters."""
        w = F.softplus(raw_w)
        w_rev = w * erev
        neg_shift = -(sigma * mu)
        leak = F.softplus(raw_leak)
        n_over_h = n / h                           # float, or (B, 1)
        cm_t = F.softplus(raw_cap) * n_over_h
        num0 = leak * leak_rev
        den0 = cm_t + leak
        sens = None
        if u is not None:
            x = u * in_scale + in_shift
            diff = x[:, :, None] - s_mu                                        # (B, K, M)
            sa = torch.sigmoid(s_sigma * diff)
            sw = F.softplus(raw_sw)
            num0 = num0 + torch.linalg.vecdot(sa, sw * s_erev, dim=1)
            den0 = den0 + torch.linalg.vecdot(sa, sw, dim=1)
            sens = (diff, sa, sw)
        num0 = num0.expand_as(z)
        acts, states, dens = _unfolds_forward(z, num0, den0, cm_t, sigma, neg_shift, w, w_rev, n)
        ctx.n_over_h = n_over_h if not isinstance(n_over_h, Tensor) else None
        ctx.has_u = u is not None
        saved = [acts, states, dens, cm_t, sigma, mu, raw_w, erev, w, w_rev, leak_rev, leak, raw_leak, raw_cap]
        if isinstance(n_over_h, Tensor):
            saved.append(n_over_h)
        if sens is not None:
            saved += [u, in_scale, s_sigma, s_erev, raw_sw, *sens]
        ctx.save_for_backward(*saved)
        return states[n].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        saved = list(ctx.saved_tensors)
        acts, states, dens, cm_t, sigma, mu, raw_w, erev, w, w_rev, leak_rev, leak, raw_leak, raw_cap = saved[:14]
        rest = saved[14:]
        n_over_h = ctx.n_over_h if ctx.n_over_h is not None else rest.pop(0)
        g_z, g_num0, g_den0, g_cm, g_sig_eff, g_shift, g_w, g_wrev = _unfolds_backward(
            grad, acts, states, dens, cm_t, sigma, w, w_rev)
        g_cm = g_cm + g_den0                                       # cm_t also enters den0
        # neg_shift = -sigma mu; w_rev = w erev; w = softplus(raw_w)
        g_sigma = g_sig_eff - g_shift * mu
        g_mu = -g_shift * sigma
        g_raw_w = _through_softplus(g_w + g_wrev * erev, raw_w)
        g_erev = g_wrev * w
        # num0 = leak e_leak + ..., den0 = cm_t + leak + ..., cm_t = softplus(raw_cap) n / h
        g_num0_m = g_num0.sum(0)
        g_raw_leak = _through_softplus(g_num0_m * leak_rev + g_den0.sum(0), raw_leak)
        g_leak_rev = g_num0_m * leak
        g_raw_cap = _through_softplus((g_cm * n_over_h).sum(0), raw_cap)
        g_u = g_ssig = g_smu = g_raw_sw = g_serev = g_scale = g_ishift = None
        if ctx.has_u:
            u, in_scale, s_sigma, s_erev, raw_sw, diff, sa, sw = rest
            # s_cur = sum_k sa sw E, s_cond = sum_k sa sw: their gradients are g_num0, g_den0
            p_cur = (sa * g_num0[:, None, :]).sum(0)                           # (K, M)
            p_cond = (sa * g_den0[:, None, :]).sum(0)
            g_raw_sw = _through_softplus(p_cond + p_cur * s_erev, raw_sw)
            g_serev = p_cur * sw
            g_sa = torch.addcmul(g_den0[:, None, :] * sw, g_num0[:, None, :], sw * s_erev)
            g_pre = g_sa * sa * (1.0 - sa)                                     # (B, K, M)
            g_ssig = (g_pre * diff).sum(0)
            g_diff = g_pre * s_sigma
            g_smu = -g_diff.sum(0)
            g_x = g_diff.sum(2)                                                # (B, K)
            g_scale = (g_x * u).sum(0)
            g_ishift = g_x.sum(0)
            g_u = g_x * in_scale if ctx.needs_input_grad[1] else None
        return (g_z, g_u, None, None, g_sigma, g_mu, g_raw_w, g_erev, g_ssig, g_smu, g_raw_sw, g_serev,
                g_scale, g_ishift, g_leak_rev, g_raw_leak, g_raw_cap)


def _softplus_inverse_tensor(y: Tensor) -> Tensor:
    return y + torch.log(-torch.expm1(-y))


def _raw_time_constants(starts: list[float] | Tensor | None, reference: float, m: int) -> Tensor:
    """softplus⁻¹ of the start values (M,): the reference for None, one value repeated, or a spread."""
    if starts is None or isinstance(starts, list):
        return torch.full((m,), _inv_softplus(reference if starts is None else starts[0]))
    return _softplus_inverse_tensor(starts)


def _start_time_constants(time_constant: Any, m: int) -> list[float] | Tensor | None:
    """What ``time_constant`` asks for: None (the reference start), ``[value]`` for every neuron,
    or a geometric spread (M,)."""
    if time_constant is None:
        return None
    values = list(time_constant) if isinstance(time_constant, (list, tuple, np.ndarray)) else [time_constant]
    ok = len(values) in (1, 2) and all(not isinstance(v, (bool, np.bool_)) and isinstance(v, numbers.Real)
                                       and math.isfinite(float(v)) and v > 0 for v in values)
    if ok and len(values) == 2 and values[0] > values[1]:
        ok = False
    if not ok:
        raise ValueError("`time_constant` must be a positive number of time units (the unit of dt) or a pair "
                         f"(fastest, slowest) with 0 < fastest <= slowest; got time_constant={time_constant!r}.")
    if len(values) == 1:
        return [float(values[0])]
    fastest, slowest = float(values[0]), float(values[1])
    steps = torch.arange(m, dtype=torch.float64) / max(m - 1, 1)
    return (fastest * (slowest / fastest) ** steps).to(torch.get_default_dtype())
