"""Closed-form M-step: recovers known parameters from simulated data given the true latents."""
import numpy as np

from dsident.inference.laplace_em import (LaplacePosterior, PLRNNParams, expected_stats, make_chain, manifold_prior,
                                          mstep)
from dsident.inference.laplace_em.estep import ModeInfo


def _simulate(T=20000, seed=0):
    rng = np.random.default_rng(seed)
    M, N, K = 3, 4, 1
    W = np.array([[0.0, 0.2, -0.3], [0.25, 0.0, 0.1], [-0.2, 0.3, 0.0]])
    p = PLRNNParams(A=np.array([0.6, 0.5, 0.7]), W=W, h=np.array([0.3, -0.1, 0.2]), C=np.array([[0.5], [0.0], [-0.4]]),
                    Sigma=np.array([0.2, 0.3, 0.25]), mu0=np.zeros(M), B=rng.normal(size=(N, M)),
                    b=np.array([0.1, -0.2, 0.3, 0.0]), Gamma=np.array([0.1, 0.2, 0.05, 0.1]), readout="relu")
    u = rng.normal(size=(T, K))
    z = np.zeros((T, M))
    for t in range(1, T):
        z[t] = p.A * z[t - 1] + p.W @ np.maximum(z[t - 1], 0) + p.C @ u[t] + p.h + rng.normal(size=M) * np.sqrt(p.Sigma)
    x = np.maximum(z, 0) @ p.B.T + p.b + rng.normal(size=(T, N)) * np.sqrt(p.Gamma)
    return p, z, x, u


def _point_posterior(z):
    n, M = z.shape
    return LaplacePosterior(z, np.zeros((n, M, M)) + 1e-14 * np.eye(M), np.zeros((n - 1, M, M)), 0.0, 0.0,
                            ModeInfo(0, True, ""))


def test_recovers_parameters_from_true_latents():
    p, z, x, u = _simulate()
    chain = make_chain(x[None], u=u[None])
    st = expected_stats(_point_posterior(z), chain, readout="relu")
    start = p._replace(A=np.zeros(3), W=np.zeros((3, 3)), h=np.zeros(3), C=np.zeros((3, 1)), Sigma=np.ones(3),
                       B=np.zeros((4, 3)), b=np.zeros(4), Gamma=np.ones(4))
    est = mstep(st, start, update_sigma=True)
    np.testing.assert_allclose(est.A, p.A, atol=0.03)
    np.testing.assert_allclose(est.W, p.W, atol=0.03)
    np.testing.assert_allclose(est.h, p.h, atol=0.03)
    np.testing.assert_allclose(est.C, p.C, atol=0.03)
    np.testing.assert_allclose(est.Sigma, p.Sigma, rtol=0.05)
    np.testing.assert_allclose(est.B, p.B, atol=0.03)
    np.testing.assert_allclose(est.b, p.b, atol=0.03)
    np.testing.assert_allclose(est.Gamma, p.Gamma, rtol=0.05)
    assert np.all(np.diag(est.W) == 0)


def test_regularisation_pulls_toward_manifold_prior():
    p, z, x, u = _simulate(T=2000, seed=1)
    chain = make_chain(x[None], u=u[None])
    st = expected_stats(_point_posterior(z), chain, readout="relu")
    free = mstep(st, p)
    weak = mstep(st, p, manifold_prior(3, 2, 1e2, 1e2, 1e2))
    strong = mstep(st, p, manifold_prior(3, 2, 1e7, 1e7, 1e7))
    for e in (free, weak, strong):
        assert np.all(np.isfinite(e.A))
    # regularized units 0, 1: A -> 1, W rows -> 0, h -> 0, monotonically in the strength
    assert np.all(np.abs(strong.A[:2] - 1) < np.abs(weak.A[:2] - 1) + 1e-12)
    assert np.all(np.abs(weak.A[:2] - 1) <= np.abs(free.A[:2] - 1) + 1e-12)
    np.testing.assert_allclose(strong.A[:2], 1.0, atol=1e-3)
    np.testing.assert_allclose(strong.W[:2], 0.0, atol=1e-3)
    np.testing.assert_allclose(strong.h[:2], 0.0, atol=1e-3)
    # the unregularized unit's own parameters stay close to the unpenalized fit
    assert abs(strong.A[2] - free.A[2]) < 0.1


def test_masked_statistics_leave_out_exactly_the_missing_samples():
    from dsident.inference.laplace_em import laplace_estep, rectified_moments
    p, z, x, u = _simulate(T=60, seed=2)
    chain = make_chain(x[None], u=u[None])
    post = laplace_estep(p, chain)
    full = expected_stats(post, chain, readout="relu")
    mask = chain.mask.copy()
    mask[7, 0] = False
    masked = expected_stats(post, chain._replace(mask=mask), readout="relu")
    np.testing.assert_allclose(masked.gg[1:], full.gg[1:], atol=1e-10)
    mom = rectified_moments(post.mean, post.cov)
    e = mom.Ephi[7]
    egg = np.outer(e, e) + np.outer(mom.F[7], mom.F[7]) * post.cov[7]
    egg[np.diag_indices(3)] = mom.Ephi2[7]
    drop = np.zeros((4, 4))
    drop[:3, :3], drop[:3, 3], drop[3, :3], drop[3, 3] = egg, e, e, 1.0
    np.testing.assert_allclose(masked.gg[0], full.gg[0] - drop, atol=1e-10)
    np.testing.assert_allclose(masked.xg[0], full.xg[0] - x[7, 0] * np.append(e, 1.0), atol=1e-10)
    assert masked.count[0] == full.count[0] - 1
    np.testing.assert_allclose(masked.bb, full.bb)       # latent statistics do not depend on the mask


def test_poisson_loadings_recovered_by_numerical_mstep():
    from dsident.inference.laplace_em import mstep_glm_obs
    rng = np.random.default_rng(4)
    T, M, N = 5000, 2, 3
    z = rng.normal(size=(T, M))
    B = np.array([[0.5, -0.3], [0.2, 0.4], [-0.4, 0.1]])
    b = np.array([0.3, -0.2, 0.5])
    x = rng.poisson(np.exp(z @ B.T + b)).astype(float)
    p = PLRNNParams(A=np.zeros(M), W=np.zeros((M, M)), h=np.zeros(M), C=np.zeros((M, 0)), Sigma=np.ones(M),
                    mu0=np.zeros(M), B=np.zeros((N, M)), b=np.zeros(N), Gamma=np.ones(N), readout="linear",
                    likelihood="poisson")
    est = mstep_glm_obs(_point_posterior(z), make_chain(x[None]), p, n_steps=100)
    np.testing.assert_allclose(est.B, B, atol=0.05)
    np.testing.assert_allclose(est.b, b, atol=0.05)


def test_ridge_mstep_equals_augmented_least_squares_on_the_transitions():
    """Independent route: per row, minimise (1/Σ_i) Σ_t (z_ti − θ·β_t)² + Σ_k λ_k (θ_k − target_k)²
    by least squares on the raw transitions with the prior as extra rows. The process-noise
    variance weights the prior (the reference M-step's σ·τ ridge), so Σ_i ≠ 1 is used here."""
    p, z, x, u = _simulate(T=3000, seed=5)
    chain = make_chain(x[None], u=u[None])
    st = expected_stats(_point_posterior(z), chain, readout="relu")
    sigma = np.array([0.05, 0.3, 2.0])
    prior = manifold_prior(3, 2, 400.0, 250.0, 150.0)
    est = mstep(st, p._replace(Sigma=sigma), prior)
    zp, zc, phi = z[:-1], z[1:], np.maximum(z[:-1], 0)
    for i in range(3):
        others = [j for j in range(3) if j != i]
        design = np.column_stack([zp[:, i], phi[:, others], u[1:], np.ones(len(zc))])
        lam = np.concatenate([[prior.A_weight[i]], prior.W_weight[i, others], [0.0], [prior.h_weight[i]]])
        tgt = np.concatenate([[prior.A_target[i]], prior.W_target[i, others], [0.0], [prior.h_target[i]]])
        rows = np.vstack([design / np.sqrt(sigma[i]), np.diag(np.sqrt(lam))])
        rhs = np.concatenate([zc[:, i] / np.sqrt(sigma[i]), np.sqrt(lam) * tgt])
        theta = np.linalg.lstsq(rows, rhs, rcond=None)[0]
        np.testing.assert_allclose(est.A[i], theta[0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(est.W[i, others], theta[1:3], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(est.C[i], theta[3:4], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(est.h[i], theta[4], rtol=1e-7, atol=1e-9)
    # the prior matters here: without it the regularized rows differ
    free = mstep(st, p._replace(Sigma=sigma))
    assert np.abs(free.A[:2] - est.A[:2]).min() > 1e-3
