"""Piecewise-linear recurrent neural networks: the PLRNN and the shallow PLRNN.

Shape legend: ``B`` batch (trials), ``M`` latent_dim, ``H`` hidden_dim, ``K`` input_dim.

The PLRNN (Schmidt, Koppe et al., ICLR 2021, eq. 1) is

.. math::

    z_t = A z_{t-1} + W \\phi(z_{t-1}) + C s_t + h, \\qquad \\phi = \\mathrm{relu},

with ``A`` diagonal and ``W`` off-diagonal. Its *manifold-attractor regularizer* (eq. 3)
pulls the first ``M_reg`` units towards ``A_ii = 1``, ``W_{i,:} = 0``, ``h_i = 0``: every point
of their subspace then becomes a marginally stable fixed point, a memory that neither decays
nor explodes. The shallow PLRNN of later DSR work replaces ``W phi(z)`` by a one-hidden-layer
ReLU network.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor, nn

from .base import LatentDynamics, check_state, run_steps

#: the penalties of the paper's Table 1 that the PLRNN offers (``penalty=`` argument).
PENALTIES = ("manifold", "none", "iplrnn", "l2p", "l2f", "orthogonal")
_NORMALIZATIONS = ("sum", "mean")
#: which units the manifold / l2p penalty acts on
REG_UNITS = ("first", "last")


class PLRNNParams(NamedTuple):
    """PLRNN parameters as float64 numpy arrays (the numerical core works on these).

    Attributes
    ----------
    A : ndarray of shape (M,)
        Diagonal of the auto-regression matrix.
    W : ndarray of shape (M, M)
        Coupling matrix with its diagonal set to zero.
    h : ndarray of shape (M,)
        Bias.
    C : ndarray of shape (M, K)
        Input weights (K may be 0).
    """

    A: np.ndarray
    W: np.ndarray
    h: np.ndarray
    C: np.ndarray


class QuadraticPenalty(NamedTuple):
    """A penalty of the form ``sum(w * (theta - target)**2)`` for each of ``a``, ``W``, ``h``.

    Every field is a float64 ndarray shaped like the parameter it refers to. Laplace-EM uses
    these as ridge terms of its closed-form M-step (the weights already include the
    normalization, ``sum`` or ``mean``).
    """

    a_weight: np.ndarray
    a_target: np.ndarray
    W_weight: np.ndarray
    W_target: np.ndarray
    h_weight: np.ndarray
    h_target: np.ndarray


def _check_positive_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {name}={value!r}.")
    return int(value)


def _check_nonnegative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"`{name}` must be a finite number >= 0; got {name}={value!r}.")
    return float(value)


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> Tensor:
    # drawn in float64 numpy so that a seed gives the same numbers whatever torch's default dtype
    return torch.as_tensor(rng.normal(0.0, std, size=shape), dtype=torch.get_default_dtype())


def _offdiag_mask(m: int) -> Tensor:
    return 1.0 - torch.eye(m, dtype=torch.get_default_dtype())


def _check_input(u: Tensor | None, input_dim: int, z: Tensor) -> bool:
    """True when an input term must be added; a width that does not match ``input_dim`` is an error."""
    if u is None:
        return False
    if u.shape[-1] != input_dim:
        raise ValueError(f"`u` must have a last dimension of size input_dim={input_dim}; got shape {tuple(u.shape)}.")
    return input_dim > 0


class PLRNN(LatentDynamics):
    r"""Piecewise-linear RNN with the manifold-attractor regularizer (rPLRNN).

    Parameters
    ----------
    latent_dim : int
        M, number of latent units.
    input_dim : int, default 0
        K, number of external inputs ``s_t``.
    reg_fraction : float in [0, 1], default 0.5
        Fraction of units that are regularized, ``M_reg = round(reg_fraction * M)``; the first
        ``M_reg`` units form the "memory" subsystem. Used by ``penalty="manifold"`` and
        ``"l2p"``.
    reg_units : {"first", "last"}, default "first"
        Which units are regularized: the first ``M_reg`` (the paper's convention) or the last.
        With an identity readout, which reads the first N units, "last" keeps the penalty off
        the observed units (as the authors' dendPLRNN teacher-forcing code does).
    tau : float >= 0, default 1.0
        Common regularization weight; ``tau_A``, ``tau_W``, ``tau_h`` default to it (the
        paper uses one common value for all experiments).
    tau_A, tau_W, tau_h : float >= 0 or None
        Separate weights of the three sums of eq. 3. ``penalty="orthogonal"`` uses ``tau_W``.
    penalty : {"manifold", "none", "iplrnn", "l2p", "l2f", "orthogonal"}, default "manifold"
        (None means "none".) The baselines of the paper's Table 1:

        ============  ===============================================================  ==========
        penalty       ``regularization()``                                             init
        ============  ===============================================================  ==========
        manifold      eq. 3: (A_ii-1)^2, W_ij^2 (j != i), h_i^2 for i < M_reg          reg units
                                                                                       A=1,W=0,h=0
        none          0 (vanilla PLRNN, Koppe et al. 2019)                             random
        iplrnn        0                                                                A=I,W=0,h=0
        l2p           true L2, A_ii^2 + W_ij^2 + h_i^2 for i < M_reg                   random
        l2f           true L2 on all A, W, h                                           random
        orthogonal    ``||(A+W)(A+W)^T - I||_F^2`` (oPLRNN)                              random
        ============  ===============================================================  ==========
    reg_normalization : {"sum", "mean"}, default "sum"
        "sum" is eq. 3 as printed; "mean" averages each of the three terms over its
        regularized entries, as the authors' SGD code does (their tau = 5 is relative to means).
    seed : int or None
        Seed of the random initialization.

    Attributes
    ----------
    a : Parameter of shape (M,)
        Diagonal of ``A``.
    W : Parameter of shape (M, M)
        Coupling; its diagonal is ignored (masked to zero in :meth:`step`).
    h : Parameter of shape (M,)
    C : Parameter of shape (M, K)
        Zero-size when ``input_dim == 0``.
    n_regularized : int
        ``M_reg``.

    Notes
    -----
    The random part of the initialization follows the authors' code (seed 004, section 1.5):
    the full ``A + W`` is drawn i.i.d. N(0, 1/M) and, if its spectral radius exceeds 1, scaled
    down to 0.99 so the untrained network is not expanding; ``A`` is its diagonal and ``W`` the
    rest; ``h`` ~ N(0, 1/M), ``C`` ~ N(0, 0.01/M). The regularized units are then overwritten
    (``penalty="manifold"``) or all units (``"iplrnn"``).

    References
    ----------
    D. Schmidt, G. Koppe, Z. Monfared, M. Beutelspacher, D. Durstewitz, "Identifying nonlinear
    dynamical systems with multiple time scales and long-range dependencies", ICLR 2021,
    eqs. 1, 3, 4.

    Examples
    --------
    >>> import torch
    >>> from dsident.dynamics import PLRNN
    >>> f = PLRNN(latent_dim=4, seed=0)
    >>> f.step(torch.zeros(3, 4)).shape
    torch.Size([3, 4])
    >>> f.n_regularized
    2
    """

    piecewise_linear = True

    def __init__(self, latent_dim: int, input_dim: int = 0, *, reg_fraction: float = 0.5,
                 tau: float = 1.0, tau_A: float | None = None, tau_W: float | None = None,
                 tau_h: float | None = None, penalty: str = "manifold",
                 reg_normalization: str = "sum", reg_units: str = "first", seed: int | None = None) -> None:
        super().__init__()
        m = _check_positive_int("latent_dim", latent_dim)
        k = _check_positive_int("input_dim", input_dim, minimum=0)
        if isinstance(reg_fraction, bool) or not isinstance(reg_fraction, (int, float, np.floating)) \
                or not 0.0 <= reg_fraction <= 1.0:
            raise ValueError(f"`reg_fraction` must be a number in [0, 1]; got reg_fraction={reg_fraction!r}.")
        if penalty is None:     # "no penalty" as Python says it (and the CLI parses `penalty=none`)
            penalty = "none"
        if penalty not in PENALTIES:
            raise ValueError(f"`penalty` must be one of {PENALTIES}; got penalty={penalty!r}.")
        if reg_units not in REG_UNITS:
            raise ValueError(f"`reg_units` must be one of {REG_UNITS}; got reg_units={reg_units!r}.")
        if reg_normalization not in _NORMALIZATIONS:
            raise ValueError(f"`reg_normalization` must be one of {_NORMALIZATIONS}; "
                             f"got reg_normalization={reg_normalization!r}.")
        _check_nonnegative("tau", tau)
        for name, value in (("tau_A", tau_A), ("tau_W", tau_W), ("tau_h", tau_h)):
            if value is not None:
                _check_nonnegative(name, value)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"`seed` must be an int or None; got seed={seed!r}.")
        if seed is not None and seed < 0:      # numpy said only "expected non-negative integer"
            raise ValueError(f"`seed` must be a non-negative integer or None; got seed={seed!r}.")
        # every constructor argument under its own name (config() relies on it)
        self.latent_dim, self.input_dim = m, k
        self.reg_fraction = float(reg_fraction)
        self.tau, self.tau_A, self.tau_W, self.tau_h = float(tau), tau_A, tau_W, tau_h
        self.penalty, self.reg_normalization, self.reg_units = penalty, reg_normalization, reg_units
        self.seed = None if seed is None else int(seed)
        # Python's round() is banker's rounding; round half up keeps M_reg = M/2 for odd M sensible
        self.n_regularized = int(np.floor(self.reg_fraction * m + 0.5))

        rng = np.random.default_rng(seed)
        aw = rng.normal(0.0, 1.0 / np.sqrt(m), size=(m, m))
        rho = float(np.max(np.abs(np.linalg.eigvals(aw))))
        if rho > 1.0:
            aw *= 0.99 / rho
        a = torch.as_tensor(np.diag(aw).copy(), dtype=torch.get_default_dtype())
        w = torch.as_tensor(aw - np.diag(np.diag(aw)), dtype=torch.get_default_dtype())
        h = _normal(rng, (m,), 1.0 / np.sqrt(m))
        c = _normal(rng, (m, k), 0.1 / np.sqrt(m))
        init = torch.as_tensor(self._unit_mask() if penalty == "manifold" else
                               np.full(m, penalty == "iplrnn"))
        a[init], w[init], h[init] = 1.0, 0.0, 0.0
        self.a, self.W, self.h, self.C = nn.Parameter(a), nn.Parameter(w), nn.Parameter(h), nn.Parameter(c)
        self.register_buffer("offdiag", _offdiag_mask(m), persistent=False)

    # -- effective weights ------------------------------------------------------------------
    @property
    def taus(self) -> tuple[float, float, float]:
        """(tau_A, tau_W, tau_h) with ``None`` replaced by ``tau``."""
        return tuple(self.tau if t is None else float(t) for t in (self.tau_A, self.tau_W, self.tau_h))

    @property
    def W_offdiag(self) -> Tensor:
        """``W`` with its diagonal zeroed, (M, M)."""
        return self.W * self.offdiag.to(self.W.dtype)

    def params(self) -> PLRNNParams:
        """The parameters as float64 numpy arrays (diagonal of ``W`` zeroed)."""
        with torch.no_grad():
            return PLRNNParams(A=self.a.detach().cpu().double().numpy().copy(),
                               W=self.W_offdiag.detach().cpu().double().numpy().copy(),
                               h=self.h.detach().cpu().double().numpy().copy(),
                               C=self.C.detach().cpu().double().numpy().copy())

    @torch.no_grad()
    def set_params(self, A: np.ndarray | Tensor | None = None, W: np.ndarray | Tensor | None = None,
                   h: np.ndarray | Tensor | None = None, C: np.ndarray | Tensor | None = None) -> "PLRNN":
        """Overwrite some parameters in place (e.g. after a closed-form M-step); returns self.

        ``A`` may be the diagonal (M,) or a full (M, M) matrix whose diagonal is taken.
        """
        for name, value, param in (("A", A, self.a), ("W", W, self.W), ("h", h, self.h), ("C", C, self.C)):
            if value is None:
                continue
            v = torch.as_tensor(np.asarray(value) if not isinstance(value, Tensor) else value)
            if name == "A" and v.ndim == 2:
                v = torch.diagonal(v)
            if tuple(v.shape) != tuple(param.shape):
                raise ValueError(f"`{name}` must have shape {tuple(param.shape)}; got {tuple(v.shape)}.")
            param.copy_(v.to(param.dtype))
        return self

    # -- the interface ------------------------------------------------------------------------
    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """``z * a + relu(z) @ W_offdiag.T + u @ C.T + h``; ``dt`` is ignored (discrete time).

        Parameters
        ----------
        z : Tensor of shape (B, M)
        u : Tensor of shape (B, K) or None
            Input at the new time step (``s_t``); None means zero input.

        Returns
        -------
        Tensor of shape (B, M)
        """
        check_state(z, self.latent_dim, u)
        out = z * self.a + torch.relu(z) @ self.W_offdiag.T + self.h
        if _check_input(u, self.input_dim, z):
            out = out + u @ self.C.T
        return out

    @torch.no_grad()
    def rollout(self, z0: Tensor, n_steps: int, dt: float | None = None) -> Tensor:
        """:meth:`step` repeated without inputs, in place: the same operations in the same order
        (so the same numbers), with the masked coupling formed once instead of every step
        (``benchmarks/bench_plrnn.py`` measures the gain). Shapes as
        :meth:`LatentDynamics.rollout`."""
        wt, a, h = self.W_offdiag.T, self.a, self.h
        act, coupled, out = torch.empty_like(z0), torch.empty_like(z0), torch.empty_like(z0)

        def step_into(t: int, z: Tensor, dest: Tensor) -> None:
            torch.clamp(z, min=0.0, out=act)                                   # relu(z)
            torch.matmul(act, wt, out=coupled)
            torch.mul(z, a, out=out).add_(coupled)
            torch.add(out, h, out=dest)

        return run_steps(z0, n_steps, step_into)

    def jacobian(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """``diag(a) + W_offdiag diag(z > 0)`` (eq. 4's ``W_Omega``), shape (B, M, M)."""
        check_state(z, self.latent_dim)
        jac = self.W_offdiag[None] * (z > 0).to(z.dtype)[:, None, :]
        jac.diagonal(dim1=-2, dim2=-1).add_(self.a)       # the diagonal of W_offdiag is zero
        return jac

    # -- penalties ------------------------------------------------------------------------------
    def _unit_mask(self) -> np.ndarray:
        m = self.latent_dim
        if self.penalty in ("manifold", "l2p"):
            if self.reg_units == "last":
                return np.arange(m) >= m - self.n_regularized
            return np.arange(m) < self.n_regularized
        if self.penalty == "l2f":
            return np.ones(m, dtype=bool)
        return np.zeros(m, dtype=bool)

    def quadratic_penalty(self) -> QuadraticPenalty:
        """The penalty as per-entry weights and targets, ``sum(w * (theta - target)**2)``.

        Defined for every ``penalty`` except "orthogonal" (which is not quadratic in the
        parameters). Rows ``i`` of ``W`` of a regularized unit are penalized in all columns
        ``j != i``; the diagonal of ``W`` is never penalized (it is unused).

        Raises
        ------
        ValueError
            For ``penalty="orthogonal"``.
        """
        if self.penalty == "orthogonal":
            raise ValueError("`penalty='orthogonal'` is not a quadratic penalty on (a, W, h); "
                             "use regularization() instead.")
        m = self.latent_dim
        units = self._unit_mask().astype(float)
        tau_a, tau_w, tau_h = self.taus
        w_mask = units[:, None] * (1.0 - np.eye(m))
        a_w, w_w, h_w = tau_a * units, tau_w * w_mask, tau_h * units
        if self.reg_normalization == "mean":
            a_w = a_w / max(units.sum(), 1.0)
            h_w = h_w / max(units.sum(), 1.0)
            w_w = w_w / max(w_mask.sum(), 1.0)
        a_target = units.copy() if self.penalty == "manifold" else np.zeros(m)
        return QuadraticPenalty(a_w, a_target, w_w, np.zeros((m, m)), h_w, np.zeros(m))

    def regularization(self) -> Tensor:
        """The training penalty of the chosen ``penalty`` (a scalar tensor, 0 for none/iplrnn).

        For "manifold" this is eq. 3 of the paper (``reg_normalization="sum"``)::

            tau_A sum_{i<M_reg} (A_ii - 1)^2 + tau_W sum_{i<M_reg} sum_{j!=i} W_ij^2 + tau_h sum_{i<M_reg} h_i^2
        """
        if self.penalty == "orthogonal":
            m = self.latent_dim
            aw = torch.diag(self.a) + self.W_offdiag
            eye = torch.eye(m, dtype=aw.dtype, device=aw.device)
            dev = ((aw @ aw.T - eye) ** 2).sum()
            if self.reg_normalization == "mean":
                dev = dev / (m * m)
            return self.taus[1] * dev
        if self.penalty in ("none", "iplrnn") or not self._unit_mask().any():
            return torch.zeros((), dtype=self.a.dtype, device=self.a.device)
        q = self.quadratic_penalty()
        dtype, device = self.a.dtype, self.a.device

        def term(param: Tensor, weight: np.ndarray, target: np.ndarray) -> Tensor:
            w = torch.as_tensor(weight, dtype=dtype, device=device)
            t = torch.as_tensor(target, dtype=dtype, device=device)
            return (w * (param - t) ** 2).sum()

        return (term(self.a, q.a_weight, q.a_target) + term(self.W, q.W_weight, q.W_target)
                + term(self.h, q.h_weight, q.h_target))


class ShallowPLRNN(LatentDynamics):
    r"""Shallow PLRNN: a diagonal linear part plus a one-hidden-layer ReLU network.

    .. math::

        z_t = A z_{t-1} + W_1 \phi(W_2 z_{t-1} + h_2) + h_1 + C s_t

    and, with ``clip=True`` (the "clipped" shallow PLRNN of Hess et al. 2023),

    .. math::

        z_t = A z_{t-1} + W_1 [\phi(W_2 z_{t-1} + h_2) - \phi(W_2 z_{t-1})] + h_1 + C s_t .

    The clipped nonlinearity is bounded (each hidden unit contributes at most ``|h_2|``), so
    orbits stay bounded whenever ``||A||_2 < 1``.

    Parameters
    ----------
    latent_dim : int
        M.
    hidden_dim : int, default 50
        H, width of the hidden ReLU layer.
    input_dim : int, default 0
        K.
    clip : bool, default False
        Use the clipped nonlinearity.
    seed : int or None
        Seed of the random initialization.

    Attributes
    ----------
    a : Parameter (M,)
        Diagonal of ``A``; initialised in [0.5, 0.9] (slowly decaying, contracting linear part).
    W1 : Parameter (M, H)
    W2 : Parameter (H, M)
    h1 : Parameter (M,)
    h2 : Parameter (H,)
    C : Parameter (M, K)

    Notes
    -----
    Jacobian: ``diag(a) + W1 diag(d) W2`` with ``d = 1[W2 z + h2 > 0]`` (clipped:
    ``d = 1[W2 z + h2 > 0] - 1[W2 z > 0]``).
    """

    piecewise_linear = False

    def __init__(self, latent_dim: int, hidden_dim: int = 50, input_dim: int = 0, *,
                 clip: bool = False, seed: int | None = None) -> None:
        super().__init__()
        m = _check_positive_int("latent_dim", latent_dim)
        hd = _check_positive_int("hidden_dim", hidden_dim)
        k = _check_positive_int("input_dim", input_dim, minimum=0)
        if not isinstance(clip, (bool, np.bool_)):
            raise TypeError(f"`clip` must be a bool; got clip={clip!r}.")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"`seed` must be an int or None; got seed={seed!r}.")
        if seed is not None and seed < 0:      # numpy said only "expected non-negative integer"
            raise ValueError(f"`seed` must be a non-negative integer or None; got seed={seed!r}.")
        self.latent_dim, self.hidden_dim, self.input_dim = m, hd, k
        self.clip = bool(clip)
        self.seed = None if seed is None else int(seed)
        rng = np.random.default_rng(seed)
        dtype = torch.get_default_dtype()

        def uniform(shape: tuple[int, ...], bound: float) -> Tensor:
            return torch.as_tensor(rng.uniform(-bound, bound, size=shape), dtype=dtype)

        self.a = nn.Parameter(torch.as_tensor(rng.uniform(0.5, 0.9, size=m), dtype=dtype))
        self.W1 = nn.Parameter(uniform((m, hd), 1.0 / np.sqrt(hd)))
        self.W2 = nn.Parameter(uniform((hd, m), 1.0 / np.sqrt(m)))
        self.h1 = nn.Parameter(torch.zeros(m, dtype=dtype))
        self.h2 = nn.Parameter(uniform((hd,), 1.0))
        self.C = nn.Parameter(uniform((m, k), 1.0 / np.sqrt(max(k, 1))))

    def _hidden(self, z: Tensor) -> Tensor:
        pre = z @ self.W2.T
        act = torch.relu(pre + self.h2)
        return act - torch.relu(pre) if self.clip else act

    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """One step, (B, M) -> (B, M); ``dt`` is ignored (discrete time)."""
        check_state(z, self.latent_dim, u)
        out = z * self.a + self._hidden(z) @ self.W1.T + self.h1
        if _check_input(u, self.input_dim, z):
            out = out + u @ self.C.T
        return out

    @torch.no_grad()
    def rollout(self, z0: Tensor, n_steps: int, dt: float | None = None) -> Tensor:
        """:meth:`step` repeated without inputs, in place: the same operations in the same order
        (so the same numbers) into preallocated buffers. Shapes as :meth:`LatentDynamics.rollout`."""
        w1t, w2t, a, h1, h2 = self.W1.T, self.W2.T, self.a, self.h1, self.h2
        n_hidden = self.W2.shape[0]
        pre, act, off = (z0.new_empty(z0.shape[0], n_hidden) for _ in range(3))
        hidden, out = torch.empty_like(z0), torch.empty_like(z0)

        def step_into(t: int, z: Tensor, dest: Tensor) -> None:
            torch.matmul(z, w2t, out=pre)
            torch.add(pre, h2, out=act).relu_()
            if self.clip:
                act.sub_(torch.clamp(pre, min=0.0, out=off))                   # − relu(pre)
            torch.matmul(act, w1t, out=hidden)
            torch.mul(z, a, out=out).add_(hidden)
            torch.add(out, h1, out=dest)

        return run_steps(z0, n_steps, step_into)

    def jacobian(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """``diag(a) + W1 diag(d) W2``, shape (B, M, M) (see Notes for ``d``)."""
        check_state(z, self.latent_dim)
        pre = z @ self.W2.T
        d = (pre + self.h2 > 0).to(z.dtype)
        if self.clip:
            d = d - (pre > 0).to(z.dtype)
        jac = (self.W1[None] * d[:, None, :]) @ self.W2
        jac.diagonal(dim1=-2, dim2=-1).add_(self.a)
        return jac
