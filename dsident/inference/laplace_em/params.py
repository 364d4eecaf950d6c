"""Parameters of the Gaussian-noise PLRNN state-space model as float64 numpy arrays, and the
converters to and from a :class:`dsident.StateSpaceModel` (PLRNN dynamics × Gaussian, Poisson or
Bernoulli observation).

Model (one trial, t = 1..T; ``g`` = identity or ReLU readout, φ = ReLU)::

    z_1 ~ N(mu0 + C s_1, diag(Sigma0))          (Sigma0 = Sigma when None, as in the paper's EM)
    z_t ~ N(A ∘ z_{t-1} + W φ(z_{t-1}) + C s_t + h, diag(Sigma))
    x_t ~ N(B g(z_t) + b, diag(Gamma))          (Gaussian; Poisson/Bernoulli use eta = B g(z) + b)
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

__all__ = ["PLRNNParams", "params_from_model", "params_to_model", "check_laplace_model", "READOUTS"]

READOUTS = ("linear", "relu", "identity")
LIKELIHOODS = ("gaussian", "poisson", "bernoulli")


class PLRNNParams(NamedTuple):
    """PLRNN state-space parameters (float64 numpy; shape legend M latent, K input, N channel).

    Attributes
    ----------
    A : ndarray (M,)
        Diagonal of the auto-regression matrix.
    W : ndarray (M, M)
        Coupling through φ(z); its diagonal is zero.
    h : ndarray (M,)
        Bias.
    C : ndarray (M, K)
        Input weights (K may be 0).
    Sigma : ndarray (M,)
        Diagonal process-noise variance.
    mu0 : ndarray (M,)
        Mean of the first latent state (before the input term ``C s_1``).
    B : ndarray (N, M)
        Loadings.
    b : ndarray (N,)
        Observation bias.
    Gamma : ndarray (N,)
        Diagonal observation-noise variance (unused by Poisson/Bernoulli).
    readout : str
        "linear", "relu" (g = φ, the rPLRNN's DS setting) or "identity" (B = [I 0] and b fixed: 0, or
        log bin_size for Poisson, whose rate per bin is exp(z)·bin_size).
    Sigma0 : ndarray (M,) or None
        Variance of the initial state; None means ``Sigma`` (the paper's EM convention).
    likelihood : str
        "gaussian", "poisson" (link exp, counts per bin) or "bernoulli" (logit link).
    """

    A: np.ndarray
    W: np.ndarray
    h: np.ndarray
    C: np.ndarray
    Sigma: np.ndarray
    mu0: np.ndarray
    B: np.ndarray
    b: np.ndarray
    Gamma: np.ndarray
    readout: str = "relu"
    Sigma0: np.ndarray | None = None
    likelihood: str = "gaussian"

    @property
    def latent_dim(self) -> int:
        return int(self.A.shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.C.shape[1])

    @property
    def obs_dim(self) -> int:
        return int(self.B.shape[0])

    @property
    def initial_var(self) -> np.ndarray:
        """Sigma0, or Sigma when Sigma0 is None, shape (M,)."""
        return self.Sigma if self.Sigma0 is None else self.Sigma0

    def is_finite(self) -> bool:
        """True when every numeric field is finite."""
        return all(np.all(np.isfinite(np.asarray(v))) for v in self if isinstance(v, np.ndarray))


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().double().numpy().copy()


def check_laplace_model(model: Any) -> None:
    """Raise ValueError unless ``model`` is a StateSpaceModel that Laplace-EM can fit.

    Laplace-EM needs piecewise-linear dynamics (the PLRNN: ``A z + W relu(z) + C s + h``) and a
    Gaussian, Poisson or Bernoulli observation with an identity, linear or ReLU readout.
    """
    dyn = getattr(model, "dynamics", None)
    if dyn is None or not getattr(dyn, "piecewise_linear", False) or not all(
            hasattr(dyn, a) for a in ("a", "W", "h")):
        name = type(dyn).__name__ if dyn is not None else type(model).__name__
        raise ValueError(
            f"method='laplace-em' needs piecewise-linear PLRNN dynamics (z_t = A z + W relu(z) + C s + h); "
            f"got dynamics {name!r} (piecewise_linear={getattr(dyn, 'piecewise_linear', None)}). "
            "Use method='svi' (any dynamics) or method='bptt' / method='teacher-forcing' instead.")
    obs = getattr(model, "observation", None)
    lik = type(obs).__name__.lower()
    if lik not in LIKELIHOODS:
        raise ValueError(f"method='laplace-em' supports Gaussian, Poisson and Bernoulli observations; got "
                         f"{type(obs).__name__!r}. Use method='svi' for other observation models.")
    readout = getattr(obs, "readout", "linear")
    if readout not in READOUTS:
        raise ValueError(f"method='laplace-em' supports readouts {READOUTS}; got readout={readout!r}.")
    if lik == "poisson" and getattr(obs, "link", "exp") != "exp":
        raise ValueError(f"method='laplace-em' supports the Poisson observation with link='exp' only; got "
                         f"link={getattr(obs, 'link', None)!r}. Use method='svi' for other links.")


def params_from_model(model: Any) -> PLRNNParams:
    """Read a :class:`dsident.StateSpaceModel` (PLRNN dynamics) into :class:`PLRNNParams`.

    Parameters
    ----------
    model : StateSpaceModel
        ``model.dynamics`` a :class:`dsident.dynamics.PLRNN`; ``model.observation`` Gaussian,
        Poisson (link "exp", rates scaled by ``bin_size`` through ``b``) or Bernoulli.

    Returns
    -------
    PLRNNParams
    """
    check_laplace_model(model)
    dyn, obs = model.dynamics, model.observation
    m = dyn.latent_dim
    W = _np(dyn.W) * (1.0 - np.eye(m))
    C = _np(dyn.C) if getattr(dyn, "input_dim", 0) > 0 else np.zeros((m, 0))
    lik = type(obs).__name__.lower()
    b = _np(obs.b)
    if lik == "poisson":
        b = b + np.log(float(getattr(obs, "bin_size", 1.0)))   # rate·bin = exp(eta + log bin)
    gamma = np.exp(_np(obs.log_var)) if lik == "gaussian" else np.ones(obs.obs_dim)
    return PLRNNParams(A=_np(dyn.a), W=W, h=_np(dyn.h), C=C,
                       Sigma=np.exp(_np(model.log_process_var)), mu0=_np(model.initial_mean),
                       B=_np(obs.B), b=b, Gamma=gamma, readout=str(obs.readout),
                       Sigma0=np.exp(_np(model.log_initial_var)), likelihood=lik)


@torch.no_grad()
def params_to_model(params: PLRNNParams, model: Any) -> Any:
    """Write :class:`PLRNNParams` into ``model`` in place (the inverse of :func:`params_from_model`).

    Returns
    -------
    the same ``model``
    """
    check_laplace_model(model)
    dyn, obs = model.dynamics, model.observation

    def put(param: torch.Tensor, value: np.ndarray) -> None:
        param.copy_(torch.as_tensor(np.asarray(value), dtype=param.dtype, device=param.device).reshape(param.shape))

    put(dyn.a, params.A)
    put(dyn.W, params.W * (1.0 - np.eye(params.latent_dim)))
    put(dyn.h, params.h)
    if getattr(dyn, "input_dim", 0) > 0:
        put(dyn.C, params.C)
    put(model.log_process_var, np.log(params.Sigma))
    put(model.log_initial_var, np.log(params.initial_var))
    put(model.initial_mean, params.mu0)
    lik = type(obs).__name__.lower()
    if params.readout != "identity":
        b = params.b - np.log(float(getattr(obs, "bin_size", 1.0))) if lik == "poisson" else params.b
        put(obs.B, params.B)
        put(obs.b, b)
    if lik == "gaussian":
        put(obs.log_var, np.log(params.Gamma))
    return model
