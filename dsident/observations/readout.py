"""Readouts: the map from a latent state to the linear predictor of a likelihood.

Every likelihood in :mod:`dsident.observations` reads the latent state through

.. math:: \\eta = B\\, g(z) + b,

with a loading matrix ``B`` (N, M), a bias ``b`` (N,) and an elementwise transfer function
``g``.  The readout is the choice of ``g`` (and whether ``B`` is learned):

=========== =================== ==================================================
name        g(z)                loadings
=========== =================== ==================================================
identity    z                   fixed: ``B = [I_N 0]``, ``b = 0`` (first N units)
linear      z                   learned ``B``, ``b``
relu        max(0, z)           learned ``B``, ``b`` (rPLRNN eq. 2 with g = φ)
=========== =================== ==================================================

The likelihood classes combine one of these with a link and a noise model, so there is no
class per (likelihood, readout) pair.  This module also holds the likelihood-agnostic pieces
shared by all of them: :class:`ReadoutObservation` (the chain rule for the derivatives with
respect to ``z``, the masked least-squares inversion, the PCA initialisation of the loadings)
and the input-preparation helpers.

Shape legend: ``...`` leading dims (trial, time), ``N`` obs_dim, ``M`` latent_dim,
``R`` rows (flattened leading dims).
"""
from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from .base import ObservationModel


# --------------------------------------------------------------------------------------------
# readout pieces
# --------------------------------------------------------------------------------------------
class Readout:
    """An elementwise transfer function ``g`` with its derivative.

    Attributes
    ----------
    name : str
        Registry key (``"identity"``, ``"linear"``, ``"relu"``).
    learned_loadings : bool
        False when ``B`` and ``b`` are fixed (identity readout).
    """

    name: ClassVar[str] = ""
    learned_loadings: ClassVar[bool] = True

    def transfer(self, z: Tensor) -> Tensor:
        """g(z), elementwise, (..., M) -> (..., M)."""
        return z

    def transfer_derivative(self, z: Tensor) -> Tensor:
        """g'(z), elementwise, (..., M) -> (..., M). The second derivative is 0 almost everywhere."""
        return torch.ones_like(z)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class IdentityReadout(Readout):
    """x reads the first N latent units directly: ``eta = z[..., :N]``."""

    name = "identity"
    learned_loadings = False


class LinearReadout(Readout):
    """``eta = B z + b`` with learned loadings."""

    name = "linear"


class ReLUReadout(Readout):
    """``eta = B relu(z) + b`` (rPLRNN eq. 2 with g = φ); g'(0) is taken as 0, as autograd does."""

    name = "relu"

    def transfer(self, z: Tensor) -> Tensor:
        return torch.relu(z)

    def transfer_derivative(self, z: Tensor) -> Tensor:
        return (z > 0).to(z.dtype)


#: readout name -> class
READOUTS: dict[str, type[Readout]] = {cls.name: cls for cls in (IdentityReadout, LinearReadout, ReLUReadout)}


def get_readout(readout: str | Readout) -> Readout:
    """Return a readout piece from its name or an instance (ValueError listing the names)."""
    if isinstance(readout, Readout):
        return readout
    if isinstance(readout, str) and readout in READOUTS:
        return READOUTS[readout]()
    raise ValueError(f"`readout` must be one of {sorted(READOUTS)} or a Readout instance; got {readout!r}.")


# --------------------------------------------------------------------------------------------
# input helpers
# --------------------------------------------------------------------------------------------
def check_dim(name: str, value: Any, minimum: int = 1) -> int:
    """Validate a positive integer size argument and return it as int."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {name}={value!r}.")
    return int(value)


def as_tensor(x: Any, like: Tensor) -> Tensor:
    """x as a tensor with the dtype and device of ``like`` (numpy arrays and lists accepted)."""
    if isinstance(x, Tensor):
        return x.to(dtype=like.dtype, device=like.device)
    return torch.as_tensor(np.asarray(x, dtype=float), dtype=like.dtype, device=like.device)


def observed_mask(x: Tensor, mask: Any | None) -> Tensor:
    """Boolean mask (True = observed) combining ``mask`` with the NaN pattern of ``x``.

    A NaN in ``x`` is always a missing sample, whatever ``mask`` says; ``mask=None`` means every
    finite entry is observed.  Infinite observed values are refused.
    """
    obs = ~torch.isnan(x)
    if mask is not None:
        m = mask if isinstance(mask, Tensor) else torch.as_tensor(np.asarray(mask))
        if m.dtype != torch.bool:
            raise TypeError(f"`mask` must be boolean (True = observed); got dtype {m.dtype}.")
        if m.shape != x.shape:
            try:
                m = m.expand(x.shape)
            except RuntimeError:
                raise ValueError(f"`mask` shape {tuple(m.shape)} does not match `x` shape {tuple(x.shape)}.") from None
        obs = obs & m.to(x.device)
    if torch.isinf(x[obs]).any():
        raise ValueError("`x` contains infinite values at observed entries; mark missing samples with NaN instead.")
    return obs


def channel_mask(mask: Any, shape: tuple[int, ...], device: torch.device) -> Tensor:
    """``mask`` (True = observed) checked as :func:`observed_mask` checks it and broadcast to ``shape``
    (..., N), for the methods that take a mask but no data (``fisher_information``)."""
    m = mask if isinstance(mask, Tensor) else torch.as_tensor(np.asarray(mask))
    if m.dtype != torch.bool:
        raise TypeError(f"`mask` must be boolean (True = observed); got dtype {m.dtype}.")
    try:
        return m.to(device).expand(shape)
    except RuntimeError:
        raise ValueError(f"`mask` shape {tuple(m.shape)} does not match the predictor shape {tuple(shape)} "
                         f"(..., obs_dim).") from None


def flatten_rows(x: Any, mask: Any | None, obs_dim: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """Data of shape (time, N) or (trial, time, N) as rows (R, N) plus the observed mask (R, N)."""
    xt = as_tensor(x, like)
    if xt.ndim < 1 or xt.shape[-1] != obs_dim:
        raise ValueError(f"`x` must have a last (channel) dimension of size obs_dim={obs_dim}; got shape {tuple(xt.shape)}.")
    obs = observed_mask(xt, mask)
    return xt.reshape(-1, obs_dim), obs.reshape(-1, obs_dim)


def pairwise_covariance(data: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and covariance from the pairwise-complete observations (nothing is filled).

    Parameters
    ----------
    data : ndarray of shape (R, N)
    observed : bool ndarray of shape (R, N)

    Returns
    -------
    mean : ndarray of shape (N,)
    cov : ndarray of shape (N, N), made positive semi-definite by clipping negative eigenvalues
    """
    w = observed.astype(float)
    counts = w.sum(0)
    if (counts == 0).any():
        bad = np.flatnonzero(counts == 0).tolist()
        raise ValueError(f"channels {bad} of `x` have no observed samples; cannot initialise the readout from them.")
    vals = np.where(observed, data, 0.0)
    mean = vals.sum(0) / counts
    centred = np.where(observed, data - mean, 0.0)
    pair_counts = np.maximum(w.T @ w, 1.0)
    cov = centred.T @ centred / pair_counts
    evals, evecs = np.linalg.eigh((cov + cov.T) / 2)
    cov = (evecs * np.clip(evals, 0.0, None)) @ evecs.T
    return mean, cov


# --------------------------------------------------------------------------------------------
# likelihoods with a readout
# --------------------------------------------------------------------------------------------
class ReadoutObservation(ObservationModel, metaclass=ABCMeta):
    """Base of the likelihoods that read z through ``eta = B g(z) + b`` (not registered).

    Subclasses define the likelihood of ``x`` given ``eta`` channel by channel through
    :meth:`_channel_log_prob`, :meth:`_channel_grad` (d/deta), :meth:`_channel_hess`
    (d²/deta², diagonal) and :meth:`_channel_fisher`; the derivatives with respect to ``z``
    then follow by the chain rule with the Jacobian ``J = B diag(g'(z))`` (N, M):

    .. math::
        \\nabla_z \\log p = J^T \\partial_\\eta \\log p, \\qquad
        \\nabla_z^2 \\log p = J^T \\operatorname{diag}(\\partial^2_\\eta \\log p) J

    (exact wherever ``g`` is differentiable, since g'' = 0 for the identity and ReLU).

    Parameters set up here: ``B`` (N, M) and ``b`` (N,) — learned ``nn.Parameter``s, or fixed
    buffers for the identity readout (check :attr:`learned_loadings`).
    """

    _abstract: ClassVar[bool] = True

    def __init__(self, obs_dim: int, latent_dim: int, readout: str | Readout = "linear") -> None:
        super().__init__()
        self.obs_dim = check_dim("obs_dim", obs_dim)
        self.latent_dim = check_dim("latent_dim", latent_dim)
        self._readout = get_readout(readout)
        self.readout = self._readout.name        # the name is what config() saves
        n, m = self.obs_dim, self.latent_dim
        if self._readout.learned_loadings:
            # a deterministic start (channel i reads unit i); init_from_data replaces it
            self.B = nn.Parameter(torch.eye(n, m))
            self.b = nn.Parameter(torch.zeros(n))
        else:
            if n > m:
                raise ValueError(f"the identity readout reads the first obs_dim units, so obs_dim <= latent_dim is "
                                 f"required; got obs_dim={n}, latent_dim={m}. Use readout='linear' instead.")
            self.register_buffer("B", torch.eye(n, m))
            self.register_buffer("b", torch.zeros(n))

    # -- the readout -----------------------------------------------------------------------
    @property
    def learned_loadings(self) -> bool:
        """True when ``B`` and ``b`` are learned (False for the identity readout)."""
        return self._readout.learned_loadings

    def predictor(self, z: Tensor) -> Tensor:
        """Linear predictor ``eta = B g(z) + b``: (..., M) -> (..., N)."""
        self._check_latent(z)
        return self._readout.transfer(z) @ self.B.T + self.b

    def predictor_jacobian(self, z: Tensor) -> Tensor:
        """d eta / d z = ``B diag(g'(z))``: (..., M) -> (..., N, M)."""
        self._check_latent(z)
        return self.B * self._readout.transfer_derivative(z)[..., None, :]

    def _check_latent(self, z: Tensor) -> None:
        if z.shape[-1] != self.latent_dim:
            raise ValueError(f"`z` must have a last (latent) dimension of size latent_dim={self.latent_dim}; "
                             f"got shape {tuple(z.shape)}.")

    def _checked_data(self, x: Any, z: Tensor, mask: Any | None) -> tuple[Tensor, Tensor]:
        """x as a tensor like z and its observed mask, both (..., N), after the shape and support checks."""
        self._check_latent(z)
        xt = as_tensor(x, z)
        if xt.shape[-1] != self.obs_dim:
            raise ValueError(f"`x` must have a last (channel) dimension of size obs_dim={self.obs_dim}; "
                             f"got shape {tuple(xt.shape)}.")
        try:
            torch.broadcast_shapes(xt.shape[:-1], z.shape[:-1])
        except RuntimeError:
            raise ValueError(f"the leading (trial, time) dimensions of `x` {tuple(xt.shape[:-1])} and `z` "
                             f"{tuple(z.shape[:-1])} do not match (nor broadcast); expected one latent state "
                             "per observation.") from None
        obs = observed_mask(xt, mask)
        self._check_observed(xt, obs)
        return xt, obs

    def _prepare(self, x: Any, z: Tensor, mask: Any | None) -> tuple[Tensor, Tensor, Tensor]:
        """(x with missing entries set to a harmless value, observed mask, eta), all (..., N)."""
        xt, obs = self._checked_data(x, z, mask)
        # missing entries get a value inside the support so that no NaN reaches the gradients
        xt = torch.where(obs, xt, torch.full_like(xt, self._fill_value))
        eta = self.predictor(z)
        return xt, obs, eta

    # -- interface -------------------------------------------------------------------------
    def log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """log p(x | z) summed over observed channels.

        Parameters
        ----------
        x : Tensor or ndarray of shape (..., N)
            Observations; NaN marks a missing sample.
        z : Tensor of shape (..., M)
        mask : bool Tensor of shape (..., N), optional
            True = observed. Masked entries contribute nothing (neither value nor gradient).

        Returns
        -------
        Tensor of shape (...)
        """
        xt, obs, eta = self._prepare(x, z, mask)
        lp = self._channel_log_prob(xt, eta)
        return torch.where(obs, lp, torch.zeros_like(lp)).sum(-1)

    def grad_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """Analytic d log p(x|z) / dz, (..., M)."""
        xt, obs, eta = self._prepare(x, z, mask)
        d1 = torch.where(obs, self._channel_grad(xt, eta), torch.zeros_like(eta))
        return torch.einsum("...n,...nm->...m", d1, self.predictor_jacobian(z))

    def hess_log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """Analytic d² log p(x|z) / dz², (..., M, M)."""
        xt, obs, eta = self._prepare(x, z, mask)
        d2 = torch.where(obs, self._channel_hess(xt, eta), torch.zeros_like(eta))
        jac = self.predictor_jacobian(z)
        return torch.einsum("...nm,...n,...nk->...mk", jac, d2, jac)

    def fisher_information(self, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """Expected negative Hessian E_x[-d² log p(x|z) / dz²], (..., M, M), positive semi-definite.

        ``mask`` (..., N) drops channels that are missing. Equal to ``-hess_log_prob`` for the
        Gaussian, the Bernoulli and the exp-link Poisson (canonical links).
        """
        eta = self.predictor(z)
        fi = self._channel_fisher(eta)
        if mask is not None:
            fi = torch.where(channel_mask(mask, fi.shape, fi.device), fi, torch.zeros_like(fi))
        jac = self.predictor_jacobian(z)
        return torch.einsum("...nm,...n,...nk->...mk", jac, fi, jac)

    # -- inversion ---------------------------------------------------------------------------
    def invert(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """A latent state whose predictor matches the data in the least-squares sense.

        The data are first mapped to a target predictor by :meth:`_predictor_target` (the inverse
        link of a smoothed value); then

        - identity readout: the first N units are the target (0 where missing), the rest 0;
        - linear readout: the minimum-norm least-squares solution of ``B z = target - b`` over the
          observed channels (a tiny ridge keeps it unique);
        - relu readout: non-negative least squares for ``y = relu(z)`` (accelerated projected
          gradient), returning ``z = y``.

        Parameters
        ----------
        x : Tensor or ndarray of shape (..., N)
        mask : bool Tensor of shape (..., N), optional

        Returns
        -------
        Tensor of shape (..., M), dtype and device of ``B``
        """
        xt = as_tensor(x, self.B)
        if xt.shape[-1] != self.obs_dim:
            raise ValueError(f"`x` must have a last (channel) dimension of size obs_dim={self.obs_dim}; "
                             f"got shape {tuple(xt.shape)}.")
        obs = observed_mask(xt, mask)
        self._check_observed(xt, obs)
        lead = xt.shape[:-1]
        target = self._predictor_target(torch.where(obs, xt, torch.full_like(xt, self._fill_value)))
        rows = target.reshape(-1, self.obs_dim).double()
        obs_rows = obs.reshape(-1, self.obs_dim)
        with torch.no_grad():
            B, b = self.B.detach().double(), self.b.detach().double()
            if self._readout.name == "identity":
                z = torch.zeros(rows.shape[0], self.latent_dim, dtype=torch.float64, device=rows.device)
                z[:, : self.obs_dim] = torch.where(obs_rows, rows - b, torch.zeros_like(rows))
            else:
                z = _masked_least_squares(B, rows - b, obs_rows)
                if self._readout.name == "relu":
                    z = _masked_nonnegative_least_squares(B, rows - b, obs_rows, start=z.clamp_min(0.0))
        return z.to(self.B.dtype).reshape(*lead, self.latent_dim)

    # -- initialisation ----------------------------------------------------------------------
    def init_from_data(self, x: Any, mask: Any | None = None) -> "ReadoutObservation":
        """Initialise ``b`` and ``B`` by PCA of the target predictor of the data; returns self.

        ``b`` is the per-channel mean of the target predictor and the columns of ``B`` are its
        principal axes scaled by the square root of their variance (so the scores have unit
        variance).  With the relu readout the columns come in pairs ``(v, -v)``, because
        ``relu(s) - relu(-s) = s`` lets non-negative states represent signed scores.  Missing
        samples are left out (pairwise-complete covariance), never filled.  The identity
        readout keeps its fixed loadings.  Subclasses add their noise parameters.

        Parameters
        ----------
        x : Tensor or ndarray of shape (time, N) or (trial, time, N)
        mask : bool array of the same shape, optional
        """
        rows, obs = flatten_rows(x, mask, self.obs_dim, self.B)
        self._check_observed(rows, obs)
        target = self._predictor_target(torch.where(obs, rows, torch.full_like(rows, self._fill_value)))
        target_np, obs_np = target.detach().cpu().double().numpy(), obs.cpu().numpy()
        mean, cov = pairwise_covariance(target_np, obs_np)
        if self.learned_loadings:
            loadings = _pca_loadings(cov, self.latent_dim, pairs=self._readout.name == "relu")
            with torch.no_grad():
                self.B.copy_(torch.as_tensor(loadings, dtype=self.B.dtype))
                self.b.copy_(torch.as_tensor(mean, dtype=self.b.dtype))
        self._init_noise(target_np, obs_np, mean, cov)
        return self

    # -- hooks for the likelihoods -----------------------------------------------------------
    #: value given to missing entries before evaluating (inside the support; never used)
    _fill_value: ClassVar[float] = 0.0

    def _check_observed(self, x: Tensor, observed: Tensor) -> None:
        """Raise ValueError if observed entries of x (..., N) are outside the support."""
        self._check_support(x[observed])

    def _check_support(self, x_observed: Tensor) -> None:
        """Raise ValueError if observed values (1-D tensor) are outside the support."""

    def _predictor_target(self, x: Tensor) -> Tensor:
        """Data mapped to the predictor scale (inverse link of a smoothed value), (..., N)."""
        return x

    def _init_noise(self, target: np.ndarray, observed: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> None:
        """Initialise likelihood-specific parameters after the loadings (default: nothing)."""

    @abstractmethod
    def _channel_log_prob(self, x: Tensor, eta: Tensor) -> Tensor:
        """log p(x_n | eta_n) per channel, (..., N)."""

    @abstractmethod
    def _channel_grad(self, x: Tensor, eta: Tensor) -> Tensor:
        """d log p / d eta_n per channel, (..., N)."""

    @abstractmethod
    def _channel_hess(self, x: Tensor, eta: Tensor) -> Tensor:
        """d² log p / d eta_n² per channel, (..., N)."""

    @abstractmethod
    def _channel_fisher(self, eta: Tensor) -> Tensor:
        """E_x[-d² log p / d eta_n²] per channel, (..., N)."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.config().items())


# --------------------------------------------------------------------------------------------
# numerical kernels (plain functions on float64 tensors)
# --------------------------------------------------------------------------------------------
def _masked_least_squares(B: Tensor, target: Tensor, observed: Tensor, ridge: float = 1e-10) -> Tensor:
    """Minimum-norm least squares ``B z ≈ target`` per row over its observed channels.

    B (N, M), target (R, N), observed (R, N) bool -> z (R, M).  Rows with every channel
    observed share one pseudo-inverse; the others solve ridge-stabilised normal equations.
    """
    n_rows, m = target.shape[0], B.shape[1]
    z = torch.zeros(n_rows, m, dtype=B.dtype, device=B.device)
    full = observed.all(-1)
    if full.any():
        z[full] = target[full] @ torch.linalg.pinv(B).T
    part = ~full
    if part.any():
        w = observed[part].to(B.dtype)                                   # (r, N)
        gram = torch.einsum("nm,rn,nk->rmk", B, w, B)
        scale = gram.diagonal(dim1=-2, dim2=-1).mean(-1).clamp_min(1e-12)[:, None, None]
        gram = gram + ridge * scale * torch.eye(m, dtype=B.dtype, device=B.device)
        rhs = torch.einsum("nm,rn->rm", B, w * target[part])
        z[part] = torch.linalg.solve(gram, rhs[..., None])[..., 0]
    return z


def _masked_nonnegative_least_squares(B: Tensor, target: Tensor, observed: Tensor, start: Tensor,
                                      n_iter: int = 1000, tol: float = 1e-9) -> Tensor:
    """Non-negative least squares ``min_{y>=0} ||D (B y - target)||²`` by accelerated projected gradient.

    B (N, M), target (R, N), observed (R, N) bool, start (R, M) -> y (R, M).  The step is
    1 / ||B||₂², a Lipschitz bound for every row's masked problem.  The loop runs in numpy:
    its many tiny products are dominated by per-call overhead, which is far smaller there.
    """
    Bn = B.cpu().numpy()
    t = target.cpu().numpy()
    w = observed.cpu().numpy().astype(float)
    lipschitz = max(float(np.linalg.norm(Bn, 2)) ** 2, 1e-12)
    # stop on the KKT conditions (projected gradient ~ 0), not on the iterates: with
    # non-unique minimisers (e.g. paired relu loadings) the iterates may drift along a flat
    # direction long after the fit itself has converged
    scale = np.abs((w * t) @ Bn).max(initial=0.0) + 1e-300
    y = start.cpu().numpy().copy()
    y_prev = y.copy()
    for k in range(1, n_iter + 1):
        v = y + (k - 1) / (k + 2) * (y - y_prev)
        grad = (w * (v @ Bn.T - t)) @ Bn
        y_prev, y = y, np.maximum(v - grad / lipschitz, 0.0)
        if k % 5 == 0:
            g = (w * (y @ Bn.T - t)) @ Bn
            projected = np.where(y > 0, g, np.minimum(g, 0.0))
            if np.abs(projected).max(initial=0.0) <= tol * (scale + lipschitz * np.abs(y).max(initial=0.0)):
                break
    return torch.as_tensor(y, dtype=B.dtype, device=B.device)


def _pca_loadings(cov: np.ndarray, latent_dim: int, *, pairs: bool) -> np.ndarray:
    """Loadings (N, M) from the leading principal axes of ``cov`` scaled by sqrt(variance).

    With ``pairs`` the columns are ``(v1, -v1, v2, -v2, ...)``.  Columns beyond the available
    components stay 0.
    """
    n = cov.shape[0]
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    evals, evecs = np.clip(evals[order], 0.0, None), evecs[:, order]
    # a deterministic sign: the largest-magnitude entry of every axis is positive
    signs = np.sign(evecs[np.abs(evecs).argmax(0), np.arange(n)])
    evecs = evecs * np.where(signs == 0, 1.0, signs)
    axes = evecs * np.sqrt(evals)
    loadings = np.zeros((n, latent_dim))
    if pairs:
        k = min(latent_dim // 2, n)
        loadings[:, 0: 2 * k: 2] = axes[:, :k]
        loadings[:, 1: 2 * k: 2] = -axes[:, :k]
        if latent_dim % 2 == 1 and k < n:
            loadings[:, 2 * k] = axes[:, k]
    else:
        k = min(latent_dim, n)
        loadings[:, :k] = axes[:, :k]
    return loadings
