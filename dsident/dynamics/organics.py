"""ORGaNICs: oscillatory recurrent gated neural integrator circuits (Rawat, Heeger & Martiniani, NeurIPS 2024).

Legend: ``B`` batch, ``n`` n_neurons (principal ``y`` and modulator ``a`` neurons each),
``K`` input_dim, latent ``z = [y, a]`` of size ``M = 2 n``.
Equation numbers are the paper's (seed ``003_organics.md``).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import LatentDynamics
from .gnode import _check_choice, _check_flag, _check_positive_int, _check_positive_number
from .solvers import ODEStepMixin, check_method

__all__ = ["ORGaNICs", "divisive_normalization"]

_SQRT_EPS = 1e-12   # a+ = sqrt(relu(a) + eps): keeps the gradient finite at a = 0


def divisive_normalization(z: Tensor, weight: Tensor, sigma: Tensor | float = 1.0, b0: Tensor | float = 1.0,
                           b: Tensor | float = 1.0) -> tuple[Tensor, Tensor]:
    """Closed-form steady-state firing rates of ORGaNICs with ``W_r = I`` (paper eqs. 2 and 5).

    Parameters
    ----------
    z : Tensor of shape (B, n)
        Input drive ``W_zx u``.
    weight : Tensor of shape (n, n)
        Non-negative normalisation weights ``W``.
    sigma, b0, b : float or Tensor of shape (n,)
        Semisaturation constant, gain on sigma and input gain.

    Returns
    -------
    (y_plus, y_minus) : two Tensors of shape (B, n)
        ``y+- = floor(+-b z)^2 / (b0^2 sigma^2 + W (b^2 z^2))``; with ``b = b0`` constant this is
        the normalisation equation ``floor(z)^2 / (sigma^2 + W z^2)`` (eq. 2).
    """
    bz = b * z
    denom = (b0 * sigma) ** 2 + (bz * bz) @ weight.T
    return torch.relu(bz) ** 2 / denom, torch.relu(-bz) ** 2 / denom


class ORGaNICs(ODEStepMixin, LatentDynamics):
    r"""ORGaNICs circuit (paper eq. 1 with ``p = 2``) as latent dynamics with state ``z = [y, a]``.

    Parameters
    ----------
    n_neurons : int
        n, number of principal (``y``) and of modulator (``a``) neurons; ``latent_dim = 2 n``.
    input_dim : int
        K, size of the input ``u``; the drive is ``z = W_zx u + c`` (``c`` a learned offset
        that lets the circuit run without inputs).
    recurrence : {"identity", "spectral", "free"}
        ``W_r = I`` (the provably stable case, Section 4), a matrix rescaled to maximum singular
        value 1 (Conjecture 5.3's regime), or an unconstrained matrix initialised at I.
    rectified : bool
        The rectified circuit of eqs. 87 / 135 (rectified input drive and recurrence,
        ``y+ = floor(y)^2`` in the ``a`` equation).
    max_rate_y, max_rate_a : float
        Upper bounds of ``1 / tau_y`` and ``1 / tau_a`` (per time unit); the rates are
        ``max_rate * sigmoid(p)`` as in the paper's eq. 135 parametrisation ``dt / tau = c sigmoid(p)``.
    learn_tau : bool
        False keeps the time constants at their initial values (``max_rate / 2``).
    method : str
        Solver; forward Euler, as the paper trains (eq. 135).
    n_substeps : int
        Solver sub-steps per sampling interval.
    norm_weight_scale : float
        Factor on the initial normalisation weights ``W`` (1: diagonal 1, off-diagonal in
        ``(1/e, 1]``, the reference code's start). The modulators grow without bound while the
        spectral radius of ``W diag(y^2)`` exceeds 1, so principal potentials of order 3 (a
        z-scored signal read out directly) make the circuit stiff at the default start, and its
        Euler steps diverge; a small factor (e.g. 0.05) starts it in the stable regime for
        ``|y| < 1 / sqrt(factor * n)``. ``W`` is learned from there.
    seed : int or None
        Seed of the parameter initialisation.

    Attributes
    ----------
    observed_latent_dim : int
        ``n``: the principal neurons ``y`` (the first ``n`` latent units) are the observed part.
    readout_slice : slice
        ``slice(0, n)``.

    Notes
    -----
    .. math::

        \tau_y \odot \dot y = -y + b \odot z + (1 - a^+) \odot \big(W_r (\sqrt{y^+} - \sqrt{y^-})\big),
        \qquad
        \tau_a \odot \dot a = -a + b_0^2 \odot \sigma^2 + W \big((y^+ + y^-) \odot (a^+)^2\big)

    with ``y+- = floor(+-y)^2``, ``a+ = sqrt(floor(a))`` (so ``sqrt(y+) - sqrt(y-) = y`` and
    ``y+ + y- = y^2``). Positivity by parametrisation: ``W = exp(log W) >= 0`` (diagonal initialised
    at 1, off-diagonal in ``(1/e, 1]`` as in the reference code), ``b = sigmoid(p_b + W_bx u)``,
    ``b0 = sigmoid(p_b0)``, ``sigma = 1`` (fixed; only ``b0 sigma`` is identifiable), rates in
    ``(0, max_rate)``. The firing rates ``y+`` (:meth:`firing_rates`) are what an observation model
    of recorded neurons should read. With ``W_r = I`` the fixed point is unique and given in closed
    form (eq. 4, :meth:`steady_state`) and it is asymptotically stable (Theorem 4.1;
    :meth:`stability`). All Jacobians are analytic (eq. 6 at the fixed point).

    References
    ----------
    Rawat, Heeger & Martiniani (2024), seed ``003_organics.md`` sections 1.2-1.8, 1.11-1.12 and 2.
    """

    def __init__(self, n_neurons: int, input_dim: int = 0, *, recurrence: str = "identity", rectified: bool = False,
                 max_rate_y: float = 1.0, max_rate_a: float = 1.0, learn_tau: bool = True, method: str = "euler",
                 n_substeps: int = 1, norm_weight_scale: float = 1.0, seed: int | None = None) -> None:
        super().__init__()
        n_neurons = _check_positive_int("n_neurons", n_neurons)
        input_dim = _check_positive_int("input_dim", input_dim, 0)
        n_substeps = _check_positive_int("n_substeps", n_substeps)
        _check_choice("recurrence", recurrence, ("identity", "spectral", "free"))
        check_method(method)
        rectified, learn_tau = _check_flag("rectified", rectified), _check_flag("learn_tau", learn_tau)
        max_rate_y = _check_positive_number("max_rate_y", max_rate_y, "1 / time unit")
        max_rate_a = _check_positive_number("max_rate_a", max_rate_a, "1 / time unit")
        norm_weight_scale = _check_positive_number("norm_weight_scale", norm_weight_scale, "a factor")
        self.n_neurons, self.input_dim, self.recurrence = n_neurons, input_dim, recurrence
        self.rectified, self.max_rate_y, self.max_rate_a = bool(rectified), float(max_rate_y), float(max_rate_a)
        self.learn_tau, self.method, self.n_substeps, self.seed = bool(learn_tau), method, n_substeps, seed
        self.norm_weight_scale = float(norm_weight_scale)
        self.latent_dim = 2 * n_neurons
        self.observed_latent_dim = n_neurons
        self.readout_slice = slice(0, n_neurons)
        n, k = n_neurons, input_dim
        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))

        bound = math.sqrt(6.0 / max(k, 1))   # Kaiming-uniform input weights, as in the paper's Table 4
        self.input_weight = nn.Parameter((2 * torch.rand(n, k, generator=gen) - 1) * bound)
        self.gain_input_weight = nn.Parameter((2 * torch.rand(n, k, generator=gen) - 1) * bound)
        self.drive_bias = nn.Parameter(torch.randn(n, generator=gen) / math.sqrt(n))
        self.raw_gain = nn.Parameter(torch.zeros(n))
        self.raw_gain0 = nn.Parameter(torch.randn(n, generator=gen))
        log_w = -torch.rand(n, n, generator=gen)
        log_w.fill_diagonal_(0.0)
        self.log_norm_weight = nn.Parameter(log_w + math.log(self.norm_weight_scale))
        self.register_buffer("sigma", torch.ones(n))
        if recurrence == "identity":
            self.recurrent_raw = None
        else:
            self.recurrent_raw = nn.Parameter(torch.eye(n) + 0.1 * torch.randn(n, n, generator=gen) / math.sqrt(n))
        raw_rates = torch.zeros(2, n)
        if self.learn_tau:
            self.raw_rates = nn.Parameter(raw_rates)
        else:
            self.register_buffer("raw_rates", raw_rates)

    # -- derived, constrained parameters ---------------------------------------------------------------
    @property
    def norm_weight(self) -> Tensor:
        """Normalisation weights ``W >= 0``, (n, n)."""
        return self.log_norm_weight.exp()

    @property
    def recurrent_weight(self) -> Tensor:
        """``W_r`` (n, n): I, rescaled to spectral norm 1, or free."""
        if self.recurrent_raw is None:
            return torch.eye(self.n_neurons, dtype=self.sigma.dtype, device=self.sigma.device)
        if self.recurrence == "spectral":
            return self.recurrent_raw / torch.linalg.matrix_norm(self.recurrent_raw, ord=2)
        return self.recurrent_raw

    @property
    def rates(self) -> tuple[Tensor, Tensor]:
        """``(1 / tau_y, 1 / tau_a)``, each (n,), per time unit."""
        r = torch.sigmoid(self.raw_rates)
        return self.max_rate_y * r[0], self.max_rate_a * r[1]

    def _inputs(self, batch: int, u: Tensor | None, like: Tensor) -> Tensor | None:
        if self.input_dim == 0:
            return None
        if u is None:
            return torch.zeros(batch, self.input_dim, dtype=like.dtype, device=like.device)
        if u.shape[-1] != self.input_dim:
            raise ValueError(f"`u` must have {self.input_dim} input channels; got shape {tuple(u.shape)}.")
        return u

    def drive_and_gains(self, batch: int, u: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Input drive ``z`` (B, n), input gain ``b`` (B, n) and ``b0`` (n,) for inputs ``u`` (B, K)."""
        uu = self._inputs(batch, u, self.drive_bias)
        z = self.drive_bias.expand(batch, -1)
        pb = self.raw_gain.expand(batch, -1)
        if uu is not None:
            z = z + uu @ self.input_weight.T
            pb = pb + uu @ self.gain_input_weight.T
        if self.rectified:
            z = torch.relu(z)
        return z, torch.sigmoid(pb), torch.sigmoid(self.raw_gain0)

    def firing_rates(self, state: Tensor) -> Tensor:
        """Principal-neuron firing rates ``y+ = floor(y)^2``: latent (..., 2n) -> (..., n)."""
        return torch.relu(state[..., :self.n_neurons]) ** 2

    # -- vector field and Jacobian ---------------------------------------------------------------------------
    def vector_field(self, state: Tensor, u: Tensor | None = None) -> Tensor:
        """d[y, a]/dt, (B, 2n) -> (B, 2n)."""
        n = self.n_neurons
        y, a = state[:, :n], state[:, n:]
        z, b, b0 = self.drive_and_gains(state.shape[0], u)
        rate_y, rate_a = self.rates
        a_pos = torch.relu(a)
        a_plus = torch.sqrt(a_pos + _SQRT_EPS)
        rec = y @ self.recurrent_weight.T
        if self.rectified:
            rec, y_sq = torch.relu(rec), torch.relu(y) ** 2
        else:
            y_sq = y * y
        dy = rate_y * (-y + b * z + (1.0 - a_plus) * rec)
        da = rate_a * (-a + (b0 * self.sigma) ** 2 + (y_sq * a_pos) @ self.norm_weight.T)
        return torch.cat([dy, da], dim=-1)

    def vector_field_jacobian(self, state: Tensor, u: Tensor | None = None) -> Tensor:
        """d(d[y, a]/dt)/d[y, a], shape (B, 2n, 2n); equals eq. 6 at the fixed point when ``W_r = I``."""
        n = self.n_neurons
        y, a = state[:, :n], state[:, n:]
        rate_y, rate_a = self.rates
        wr, w = self.recurrent_weight, self.norm_weight
        a_pos = torch.relu(a)
        on = (a > 0).to(state.dtype)
        a_plus = torch.sqrt(a_pos + _SQRT_EPS)
        rec = y @ wr.T
        eye = torch.eye(n, dtype=state.dtype, device=state.device)
        if self.rectified:
            open_ = (rec > 0).to(state.dtype)
            rec_out = torch.relu(rec)
            dyy = -eye + ((1.0 - a_plus) * open_)[:, :, None] * wr
            y_lin, y_sq = torch.relu(y), torch.relu(y) ** 2
        else:
            rec_out = rec
            dyy = -eye + (1.0 - a_plus)[:, :, None] * wr
            y_lin, y_sq = y, y * y
        dya = torch.diag_embed(-rec_out * on / (2.0 * a_plus))
        day = w[None] * (2.0 * y_lin * a_pos)[:, None, :]
        daa = -eye + w[None] * (y_sq * on)[:, None, :]
        top = torch.cat([dyy, dya], dim=-1) * rate_y[None, :, None]
        bottom = torch.cat([day, daa], dim=-1) * rate_a[None, :, None]
        return torch.cat([top, bottom], dim=1)

    # -- steady state and stability ----------------------------------------------------------------------
    def steady_state(self, u: Tensor | None = None, *, batch: int = 1, max_iter: int = 50,
                     tol: float = 1e-10) -> Tensor:
        """The normalisation fixed point ``[y_s, a_s]``, shape (B, 2n).

        ``W_r = I``: closed form (eq. 4; eq. 89 for the rectified circuit). Otherwise the
        paper's Algorithm 1 (fixed-point iteration for ``W_r`` of spectral norm 1), stopped when the
        residual of the ``y`` equation is below ``tol`` or after ``max_iter`` iterations (a
        RuntimeWarning-free ``ValueError`` is raised if it did not converge).
        """
        bsz = u.shape[0] if u is not None else batch
        z, b, b0 = self.drive_and_gains(bsz, u)
        w = self.norm_weight
        base = (b0 * self.sigma) ** 2
        bz = b * z
        if self.recurrence == "identity" and not self.rectified:
            a_s = base + (bz * bz) @ w.T
            return torch.cat([bz / torch.sqrt(a_s), a_s.expand_as(bz)], dim=-1)
        if self.recurrence == "identity":
            pos = torch.relu(bz)
            a_s = base + (pos * pos) @ w.T
            return torch.cat([pos / torch.sqrt(a_s) - torch.relu(-bz), a_s.expand_as(bz)], dim=-1)
        if self.rectified:
            raise ValueError("steady_state: no closed form or Algorithm-1 iteration for the rectified circuit "
                             "with recurrence != 'identity'; integrate the dynamics instead "
                             "(dsident.analysis.ct_tools.find_fixed_points).")
        wr = self.recurrent_weight
        eye = torch.eye(self.n_neurons, dtype=z.dtype, device=z.device)
        a = base + ((bz @ wr.T) ** 2) @ w.T
        y = (bz @ wr.T) / torch.sqrt(a)
        for _ in range(max_iter):
            resid = (y - bz - (1.0 - torch.sqrt(a)) * (y @ wr.T)).abs().max()
            if float(resid) < tol:
                break
            mats = eye - wr + torch.sqrt(a)[:, :, None] * wr               # (I - W_r + D(sqrt a) W_r)
            y = torch.linalg.solve(mats, bz)
            a = base + (y * y * a) @ w.T
        else:
            raise ValueError(f"steady_state: Algorithm 1 did not converge in max_iter={max_iter} iterations "
                             f"(residual {float(resid):.3g} > tol={tol}); W_r may have spectral norm > 1.")
        return torch.cat([y, a], dim=-1)

    def stability(self, u: Tensor | None = None, state: Tensor | None = None, *, batch: int = 1) -> tuple[Tensor, Tensor]:
        """Eigenvalues of the Jacobian at the fixed point and the spectral abscissa.

        Returns
        -------
        eigenvalues : complex Tensor of shape (B, 2n)
        abscissa : Tensor of shape (B,)
            ``max Re(lambda)``; negative means asymptotically stable (units 1 / time).
        """
        if state is None:
            state = self.steady_state(u, batch=batch)
        eig = torch.linalg.eigvals(self.vector_field_jacobian(state, u))
        return eig, eig.real.max(dim=-1).values
