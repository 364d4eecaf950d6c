"""Closed-form M-step of Laplace-EM for the PLRNN (expected sufficient statistics + regressions).

Latent model, row by row (eq. 49 of the rPLRNN paper): z_{t,i} is regressed on
β_t = [z_{t-1}, φ(z_{t-1}), s_t, 1] restricted to the columns the model has for row i —
A_ii (z_{t-1,i}), W_ij for j ≠ i (φ(z_{t-1,j})), C_i (s_t), h_i (1). The manifold-attractor
penalty enters as a ridge prior, ``-½ Σ λ_k (θ_k - target_k)²`` added to the expected log joint,
which gives ``(Σ E[ββᵀ] + Σ_ii Λ) θ_i = Σ E[z_{t,i} β_t] + Σ_ii Λ target`` (A_ii -> 1,
W_ij -> 0, h_i -> 0 on the regularized units).

Expectations under the Laplace posterior use the closed-form rectified-Gaussian moments of
:func:`.estep.rectified_moments`: ``E[z_i φ(z_j)]`` exactly (Stein's lemma) and, for i ≠ j,
``E[φ(z_i) φ(z_j)] ≈ E[φ_i] E[φ_j] + P(z_i>0) P(z_j>0) Cov(z_i, z_j)`` (first order in the
correlation); the same-unit second moment ``E[φ(z_i)²]`` is exact.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .estep import Chain, LaplacePosterior, rectified_moments
from .params import PLRNNParams

__all__ = ["SufficientStats", "RidgePrior", "manifold_prior", "mstep_glm_obs", "expected_stats", "mstep_latent", "mstep_gaussian_obs",
           "mstep", "no_prior"]


class SufficientStats(NamedTuple):
    """Summed posterior expectations (float64).

    Attributes
    ----------
    bb : ndarray (2M+K+1, 2M+K+1)
        Σ_t E[β_t β_tᵀ] over transitions, β_t = [z_{t-1}, φ(z_{t-1}), s_t, 1].
    ab : ndarray (M, 2M+K+1)
        Σ_t E[z_t β_tᵀ].
    aa_diag : ndarray (M,)
        Σ_t E[z_{t,i}²].
    n_trans : int
        Number of transitions.
    z_start : ndarray (R, M)
        E[z] at each trial start; ``s_start`` (R, K) the inputs there.
    gg : ndarray (N, M+1, M+1)
        Per channel, Σ_{t observed} E[[g_t; 1][g_t; 1]ᵀ].
    xg : ndarray (N, M+1)
        Per channel, Σ_{t observed} x_tn E[[g_t; 1]].
    xx : ndarray (N,)
        Σ_{t observed} x_tn².
    count : ndarray (N,)
        Number of observed samples per channel.
    """

    bb: np.ndarray
    ab: np.ndarray
    aa_diag: np.ndarray
    n_trans: int
    z_start: np.ndarray
    s_start: np.ndarray
    gg: np.ndarray
    xg: np.ndarray
    xx: np.ndarray
    count: np.ndarray


def expected_stats(post: LaplacePosterior, chain: Chain, *, readout: str = "relu",
                   linear_dynamics: bool = False) -> SufficientStats:
    """Sum the posterior expectations the M-step needs (O(n·M²) memory beyond the posterior).

    Parameters
    ----------
    post : LaplacePosterior
    chain : Chain
    readout : {"relu", "linear", "identity"}
        g of the observation model.
    linear_dynamics : bool
        True uses z in place of φ(z) in β (the linear-dynamical-system M-step).

    Returns
    -------
    SufficientStats
    """
    mu, V, L = post.mean, post.cov, post.cov_lag
    n, M = mu.shape
    mom = rectified_moments(mu, V)
    # transitions t -> t+1 are the pairs (mu[:-1], mu[1:]) weighted by w = 1 where both steps are
    # in the same trial: views and weights instead of fancy-index copies (memory at large T)
    w = chain.nxt[:-1].astype(float)
    mp, mc, Vp = mu[:-1], mu[1:], V[:-1]
    S = chain.s[1:]
    wm = w[:, None]
    if linear_dynamics:
        Ep, Fp = mp, np.ones_like(mp)
        Vz_phi = np.einsum("t,tij->ij", w, Vp)
        phiphi = (mp * wm).T @ mp + Vz_phi
    else:
        Ep, Fp = mom.Ephi[:-1], mom.F[:-1]
        Vz_phi = np.einsum("t,tij,tj->ij", w, Vp, Fp)      # Σ Cov(z_i, z_j) P(z_j > 0)
        phiphi = (Ep * wm).T @ Ep + np.einsum("t,ti,tij,tj->ij", w, Fp, Vp, Fp)
        idx = np.arange(M)
        phiphi[idx, idx] = w @ mom.Ephi2[:-1]             # exact same-unit second moment
    zz = (mp * wm).T @ mp + np.einsum("t,tij->ij", w, Vp)
    zphi = (mp * wm).T @ Ep + Vz_phi
    n_tr = float(w.sum())
    bb = np.block([[zz, zphi, (mp * wm).T @ S, (w @ mp)[:, None]],
                   [zphi.T, phiphi, (Ep * wm).T @ S, (w @ Ep)[:, None]],
                   [(S * wm).T @ mp, (S * wm).T @ Ep, (S * wm).T @ S, (w @ S)[:, None]],
                   [(w @ mp)[None], (w @ Ep)[None], (w @ S)[None], np.array([[n_tr]])]])
    zc_zp = (mc * wm).T @ mp + np.einsum("t,tij->ij", w, L)
    zc_phip = (mc * wm).T @ Ep + np.einsum("t,tij,tj->ij", w, L, Fp)
    ab = np.concatenate([zc_zp, zc_phip, (mc * wm).T @ S, (w @ mc)[:, None]], axis=1)
    aa = w @ (mc ** 2) + w @ np.diagonal(V[1:], axis1=1, axis2=2)
    # observation statistics, per channel over observed samples
    m = chain.mask.astype(float)
    N = m.shape[1]
    full = bool(chain.mask.all())
    if readout == "relu":
        Eg = mom.Ephi
        if full:
            Sgg1 = Eg.T @ Eg + np.einsum("ti,tij,tj->ij", mom.F, V, mom.F)
        else:
            Sgg = np.einsum("tn,ti,tj->nij", m, Eg, Eg) + np.einsum("tn,ti,tij,tj->nij", m, mom.F, V, mom.F)
        idx = np.arange(M)
        diag2 = m.T @ mom.Ephi2                            # (N, M) exact E[φ²] per channel
    else:
        Eg = mu
        if full:
            Sgg1 = Eg.T @ Eg + V.sum(0)
        else:
            Sgg = np.einsum("tn,ti,tj->nij", m, Eg, Eg) + np.einsum("tn,tij->nij", m, V)
    if full:
        Sgg = np.repeat(Sgg1[None], N, 0)
    if readout == "relu":
        Sgg[:, idx, idx] = diag2
    Sg = m.T @ Eg
    cnt = m.sum(0)
    gg = np.zeros((N, M + 1, M + 1))
    gg[:, :M, :M] = Sgg
    gg[:, :M, M] = Sg
    gg[:, M, :M] = Sg
    gg[:, M, M] = cnt
    xm = chain.x * m
    xg = np.concatenate([xm.T @ Eg, xm.sum(0)[:, None]], axis=1)
    xx = (xm * chain.x).sum(0)
    starts = np.nonzero(chain.start)[0]
    return SufficientStats(bb, ab, aa, int(n_tr), mu[starts], chain.s[starts], gg, xg, xx, cnt)


class RidgePrior(NamedTuple):
    """Quadratic prior ``-½ Σ λ (θ - target)²`` on the latent parameters (LL units).

    Attributes: ``A_weight``/``A_target`` (M,), ``W_weight``/``W_target`` (M, M), ``h_weight``/``h_target`` (M,).
    """

    A_weight: np.ndarray
    A_target: np.ndarray
    W_weight: np.ndarray
    W_target: np.ndarray
    h_weight: np.ndarray
    h_target: np.ndarray

    def value(self, p: PLRNNParams) -> float:
        """The log prior (≤ 0) at ``p``."""
        return -0.5 * float(np.sum(self.A_weight * (p.A - self.A_target) ** 2)
                            + np.sum(self.W_weight * (p.W - self.W_target) ** 2)
                            + np.sum(self.h_weight * (p.h - self.h_target) ** 2))


def no_prior(M: int) -> RidgePrior:
    """A prior with zero weight (plain maximum likelihood)."""
    z = np.zeros(M)
    return RidgePrior(z, z, np.zeros((M, M)), np.zeros((M, M)), z, z)


def manifold_prior(M: int, n_reg: int, tau_A: float, tau_W: float, tau_h: float) -> RidgePrior:
    """Manifold-attractor prior: A_ii -> 1, W_ij -> 0 (j ≠ i), h_i -> 0 for the first ``n_reg`` units."""
    u = (np.arange(M) < n_reg).astype(float)
    return RidgePrior(tau_A * u, u.copy(), tau_W * u[:, None] * (1.0 - np.eye(M)), np.zeros((M, M)),
                      tau_h * u, np.zeros(M))


def mstep_latent(stats: SufficientStats, params: PLRNNParams, prior: RidgePrior | None = None, *,
                 update_sigma: bool = False, linear_dynamics: bool = False, sigma_floor: float = 1e-6
                 ) -> PLRNNParams:
    """Row-wise ridge regressions for A (diagonal), W (off-diagonal), C, h; optionally Σ; μ0.

    Parameters
    ----------
    stats : SufficientStats
    params : PLRNNParams
        Current parameters (Σ weights the prior; observation parameters pass through).
    prior : RidgePrior, optional
    update_sigma : bool
        Re-estimate the diagonal process noise (the annealing protocol holds it fixed).
    linear_dynamics : bool
        Fit W on z instead of φ(z) (the LDS initialisation); W then holds the off-diagonal part of
        the full transition matrix.

    Returns
    -------
    PLRNNParams
    """
    M, K = params.latent_dim, params.input_dim
    prior = no_prior(M) if prior is None else prior
    A, W, h, C = np.zeros(M), np.zeros((M, M)), np.zeros(M), np.zeros((M, K))
    sig = params.Sigma.copy()
    for i in range(M):
        cols = np.concatenate([[i], M + np.delete(np.arange(M), i), 2 * M + np.arange(K), [2 * M + K]])
        G = stats.bb[np.ix_(cols, cols)].copy()
        r = stats.ab[i, cols].copy()
        lam = np.concatenate([[prior.A_weight[i]], np.delete(prior.W_weight[i], i), np.zeros(K), [prior.h_weight[i]]])
        tgt = np.concatenate([[prior.A_target[i]], np.delete(prior.W_target[i], i), np.zeros(K), [prior.h_target[i]]])
        G[np.diag_indices_from(G)] += params.Sigma[i] * lam
        r += params.Sigma[i] * lam * tgt
        G[np.diag_indices_from(G)] += 1e-10 * (1.0 + np.abs(np.diag(G)))   # numerical floor only
        th = np.linalg.solve(G, r)
        A[i] = th[0]
        W[i, np.delete(np.arange(M), i)] = th[1:M]
        C[i] = th[M:M + K]
        h[i] = th[M + K]
        if update_sigma:
            Gs = stats.bb[np.ix_(cols, cols)]
            resid = stats.aa_diag[i] - 2.0 * th @ stats.ab[i, cols] + th @ Gs @ th
            sig[i] = max(resid / max(stats.n_trans, 1), sigma_floor)
    mu0 = (stats.z_start - stats.s_start @ C.T).mean(0)
    return params._replace(A=A, W=W, h=h, C=C, Sigma=sig, mu0=mu0)


def mstep_gaussian_obs(stats: SufficientStats, params: PLRNNParams, *, update_B: bool = True,
                       gamma_floor: float = 1e-5) -> PLRNNParams:
    """Per-channel regressions of x on E[g(z)] for B and b, then the diagonal noise Γ.

    ``update_B=False`` (annealing stages after the first) keeps B and refits only b and Γ;
    the identity readout keeps B = [I 0] and b (its fixed offset) as they are.
    """
    N, M = params.obs_dim, params.latent_dim
    B, b = params.B.copy(), params.b.copy()
    gamma = params.Gamma.copy()
    if params.readout == "identity":         # B = [I 0] and the offset b stay as they are
        B = np.eye(N, M)
    for n in range(N):
        if stats.count[n] == 0:
            continue
        G, r = stats.gg[n], stats.xg[n]
        if params.readout != "identity":
            if update_B:
                th = np.linalg.solve(G + 1e-10 * (1.0 + np.abs(np.diag(G))) * np.eye(M + 1), r)
                B[n], b[n] = th[:M], th[M]
            else:
                b[n] = (r[M] - B[n] @ G[M, :M]) / G[M, M]
        th = np.concatenate([B[n], [b[n]]])
        resid = stats.xx[n] - 2.0 * th @ r + th @ G @ th
        gamma[n] = max(resid / stats.count[n], gamma_floor)
    return params._replace(B=B, b=b, Gamma=gamma)


def mstep(stats: SufficientStats, params: PLRNNParams, prior: RidgePrior | None = None, *,
          update_sigma: bool = False, update_B: bool = True, linear_dynamics: bool = False,
          gamma_floor: float = 1e-5) -> PLRNNParams:
    """Full closed-form M-step for Gaussian observations (latent rows, then the observation model)."""
    p = mstep_latent(stats, params, prior, update_sigma=update_sigma, linear_dynamics=linear_dynamics)
    if params.likelihood == "gaussian":
        p = mstep_gaussian_obs(stats, p, update_B=update_B, gamma_floor=gamma_floor)
    return p


def mstep_glm_obs(post: LaplacePosterior, chain: Chain, params: PLRNNParams, *, update_B: bool = True,
                  n_steps: int = 20) -> PLRNNParams:
    """Numerical M-step for Poisson (exp link) / Bernoulli (logit) loadings: L-BFGS (torch).

    Maximises the expected log-likelihood under the Laplace posterior with η_tn = B_n g(z_t) + b_n
    summarised by its mean ``m = B E[g] + b`` and variance ``v = B Cov(g) Bᵀ`` (diagonal):
    Poisson ``E[x η - e^η] = x m - exp(m + v/2)`` (exact for a linear readout, moment-matched
    for ReLU); Bernoulli ``x m - softplus(m) - ½ σ(m)(1-σ(m)) v`` (second order in η).
    """
    import torch

    if params.readout == "identity":         # b: the fixed offset (log bin_size for Poisson)
        B0, b0 = np.eye(params.obs_dim, params.latent_dim), np.asarray(params.b, dtype=float)
    else:
        B0, b0 = params.B, params.b
    mu, V = post.mean, post.cov
    if params.readout == "relu":
        mom = rectified_moments(mu, V)
        Eg = mom.Ephi
        Cg = mom.F[:, :, None] * V * mom.F[:, None, :]
        idx = np.arange(mu.shape[1])
        Cg[:, idx, idx] = mom.Ephi2 - mom.Ephi ** 2
    else:
        Eg, Cg = mu, V
    tEg, tCg = torch.from_numpy(Eg), torch.from_numpy(Cg)
    x = torch.from_numpy(chain.x)
    m = torch.from_numpy(chain.mask.astype(float))
    B = torch.tensor(B0, requires_grad=update_B and params.readout != "identity")
    b = torch.tensor(b0, requires_grad=params.readout != "identity")
    free = [t for t in (B, b) if t.requires_grad]
    if not free:
        return params
    opt = torch.optim.LBFGS(free, max_iter=n_steps, line_search_fn="strong_wolfe")
    poisson = params.likelihood == "poisson"

    def closure():
        opt.zero_grad()
        mean = tEg @ B.T + b
        var = torch.einsum("nm,tmk,nk->tn", B, tCg, B).clamp_min(0.0)
        if poisson:
            ll = x * mean - torch.exp(torch.clamp(mean + 0.5 * var, max=700.0))
        else:
            sig = torch.sigmoid(mean)
            ll = x * mean - torch.nn.functional.softplus(mean) - 0.5 * sig * (1 - sig) * var
        loss = -(ll * m).sum() / m.sum().clamp_min(1.0)
        loss.backward()
        return loss

    opt.step(closure)
    B_new = B.detach().numpy().copy()
    b_new = b.detach().numpy().copy()
    if not (np.all(np.isfinite(B_new)) and np.all(np.isfinite(b_new))):
        return params
    return params._replace(B=B_new if params.readout != "identity" else params.B, b=b_new)
