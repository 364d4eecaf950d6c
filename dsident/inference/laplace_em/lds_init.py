"""Linear-dynamical-system initialisation for Laplace-EM.

Route (the rPLRNN protocol's first step, implemented as PCA + linear-Gaussian EM):

1. PCA of the observations from the pairwise-complete channel covariance (missing samples
   are left out of every sum, never filled): B gets the leading principal directions scaled by
   the square root of their variances; latent units beyond the number of channels get small
   random loadings (seeded); b = channel means; Γ = channel variances.
2. ``n_iter`` EM iterations of the LDS z_t = F z_{t-1} + C s_t + h + ε, x_t = B z_t + b + η with
   Σ held fixed (the annealing's first level) and B, b, Γ free. The E-step of an LDS is exact: the
   same block-tridiagonal solve as the PLRNN E-step with φ replaced by the identity, i.e. a
   Kalman (RTS) smoother.
3. The PLRNN starts from A = diag(F), W = F - diag(F) (as the reference implementation does).
"""
from __future__ import annotations

import numpy as np

from .estep import Chain, laplace_estep
from .mstep import expected_stats, mstep
from .params import PLRNNParams

__all__ = ["pca_init", "fit_lds"]


def pca_init(chain: Chain, latent_dim: int, input_dim: int, *, readout: str = "linear",
             sigma: float = 1.0, initial_var: float = 1.0, seed: int | np.random.Generator | None = None
             ) -> PLRNNParams:
    """Initial parameters from a masked PCA of the observations.

    Parameters
    ----------
    chain : Chain
    latent_dim, input_dim : int
        M and K.
    readout : str
        Readout of the returned parameters ("identity" keeps B = [I 0]).
    sigma : float
        Process-noise variance (all units).
    initial_var : float
        Variance of the first state.
    seed : int or Generator, optional
        For the loadings of latent units beyond the number of channels.

    Returns
    -------
    PLRNNParams
    """
    rng = np.random.default_rng(seed)
    m = chain.mask.astype(float)
    cnt = np.maximum(m.sum(0), 1.0)
    mean = (chain.x * m).sum(0) / cnt
    xc = (chain.x - mean) * m
    pair = np.maximum(m.T @ m, 1.0)
    cov = (xc.T @ xc) / pair
    var = np.maximum(np.diag(cov), 1e-8)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    evals, evecs = np.maximum(evals[order], 1e-8), evecs[:, order]
    N, M = chain.x.shape[1], latent_dim
    B = 0.1 * rng.standard_normal((N, M))
    k = min(N, M)
    B[:, :k] = evecs[:, :k] * np.sqrt(evals[:k])
    b = mean.copy()
    if readout == "identity":
        B, b = np.eye(N, M), np.zeros(N)
    return PLRNNParams(A=np.full(M, 0.9), W=np.zeros((M, M)), h=np.zeros(M), C=np.zeros((M, input_dim)),
                       Sigma=np.full(M, float(sigma)), mu0=np.zeros(M), B=B, b=b, Gamma=var.copy(),
                       readout=readout, Sigma0=np.full(M, float(initial_var)))


def fit_lds(chain: Chain, params: PLRNNParams, *, n_iter: int = 20, tol: float = 1e-4,
            update_B: bool = True) -> tuple[PLRNNParams, list[float], np.ndarray]:
    """EM for the linear-Gaussian state-space model (linear readout, φ = identity), Σ fixed.

    Parameters
    ----------
    chain : Chain
    params : PLRNNParams
        Start; its ``readout`` is used unless it is "relu" (the LDS reads z linearly).
    n_iter : int
    tol : float
        Stop when the log-likelihood gain is below ``tol·|LL_0|``.

    Returns
    -------
    params : PLRNNParams
        With A = diag(F), W = F - diag(F) and the readout of the input ``params``.
    log_liks : list of float
        Exact log p(X) of the LDS after each E-step (monotone up to round-off).
    z : ndarray (n, M)
        Posterior means of the last E-step.
    """
    ro = params.readout
    p = params._replace(readout="linear" if ro == "relu" else ro, likelihood="gaussian")
    lls: list[float] = []
    z = None
    for _ in range(n_iter):
        post = laplace_estep(p, chain, None, linear_dynamics=True)
        z = post.mean
        lls.append(post.log_lik)
        if len(lls) > 1 and lls[-1] - lls[-2] < tol * abs(lls[0]):
            break
        st = expected_stats(post, chain, readout=p.readout, linear_dynamics=True)
        p = mstep(st, p, update_B=update_B, linear_dynamics=True)
    return p._replace(readout=ro, likelihood=params.likelihood), lls, z
