"""Symmetric positive-definite block-tridiagonal systems: factor, solve, log-determinant and
selected inversion (diagonal and first off-diagonal blocks of the inverse), all in O(n·M³).

The matrix ``H`` (n blocks of size M×M) is given by its diagonal blocks ``D[i] = H[i, i]`` and its
lower off-diagonal blocks ``E[i] = H[i+1, i]`` (``H[i, i+1] = E[i].T``).

Algorithm: block cyclic reduction. Each level eliminates the odd-numbered blocks at once (their
Schur complement onto the even-numbered blocks is again block-tridiagonal), so every level is a
handful of *batched* numpy operations on stacks of M×M matrices and there is no Python loop over
time — only one over the log2(n) levels. The inverse is recovered level by level in reverse with
the identity ``(H^-1)_ee = S^-1`` (S = Schur complement onto the kept blocks) and
``(H^-1)_oe = -H_oo^-1 H_oe (H^-1)_ee``. A sequential block-Cholesky recursion does the same
number of flops but costs ~10 µs of interpreter time per block, i.e. seconds at n = 10⁵; the
banded LAPACK route (``scipy.linalg.solveh_banded`` with bandwidth 2M-1) solves but gives no
selected inverse (see ``benchmarks/bench_laplace_em.py`` for the timings that decided this).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["BlockTridiagFactor", "factor_block_tridiag", "solve_factored", "selected_inverse",
           "solve_block_tridiag", "block_tridiag_to_dense"]


class _Level(NamedTuple):
    n: int                 # number of blocks at this level
    Dinv: np.ndarray       # (n_odd, M, M)  D_i^-1  for odd i
    El: np.ndarray         # (n_odd, M, M)  H[i, i-1]
    Er: np.ndarray         # (k_r, M, M)    H[i+1, i] for the odd blocks that have a right neighbour


def _pad_to(a: np.ndarray, k: int) -> np.ndarray:
    """Append zero blocks along axis 0 until ``a`` has ``k`` entries."""
    if a.shape[0] >= k:
        return a[:k]
    return np.concatenate([a, np.zeros((k - a.shape[0],) + a.shape[1:])], axis=0)


class BlockTridiagFactor(NamedTuple):
    """Result of :func:`factor_block_tridiag`.

    Attributes
    ----------
    n : int
        Number of blocks of the original matrix.
    levels : tuple of reduction levels (internal).
    root_inv : ndarray (M, M)
        Inverse of the single block left after the last reduction.
    logdet : float
        log det H.
    """

    n: int
    levels: tuple
    root_inv: np.ndarray
    logdet: float


def _chol_inv_logdet(blocks: np.ndarray) -> tuple[np.ndarray, float]:
    """Inverse and summed log-determinant of a stack of SPD blocks (k, M, M)."""
    try:
        L = np.linalg.cholesky(blocks)
    except np.linalg.LinAlgError as err:
        raise np.linalg.LinAlgError(
            "block-tridiagonal matrix is not positive definite (a pivot block failed Cholesky); "
            "the posterior precision is singular or the parameters diverged") from err
    logdet = 2.0 * float(np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum())
    Linv = _tri_inv(L)
    return np.matmul(np.swapaxes(Linv, -1, -2), Linv), logdet


def _tri_inv(L: np.ndarray) -> np.ndarray:
    """Inverse of a stack of lower-triangular matrices (k, m, m) by 2×2 block recursion.

    ``[[L11, 0], [L21, L22]]^-1 = [[L11^-1, 0], [-L22^-1 L21 L11^-1, L22^-1]]``: only batched
    matmuls, ~1.5× faster than ``np.linalg.inv`` on stacks of 16×16 blocks.
    """
    m = L.shape[-1]
    if m == 1:
        return 1.0 / L
    k = m // 2
    top = _tri_inv(L[:, :k, :k])
    bottom = _tri_inv(L[:, k:, k:])
    out = np.zeros_like(L)
    out[:, :k, :k] = top
    out[:, k:, k:] = bottom
    out[:, k:, :k] = -np.matmul(bottom, np.matmul(L[:, k:, :k], top))
    return out


def factor_block_tridiag(D: np.ndarray, E: np.ndarray) -> BlockTridiagFactor:
    """Factor an SPD block-tridiagonal matrix by block cyclic reduction.

    Parameters
    ----------
    D : ndarray of shape (n, M, M)
        Diagonal blocks (symmetric).
    E : ndarray of shape (n-1, M, M)
        Lower off-diagonal blocks, ``E[i] = H[i+1, i]``.

    Returns
    -------
    BlockTridiagFactor

    Raises
    ------
    ValueError
        On inconsistent shapes.
    numpy.linalg.LinAlgError
        When H is not positive definite.
    """
    D = np.asarray(D, dtype=float)
    E = np.asarray(E, dtype=float)
    if D.ndim != 3 or D.shape[1] != D.shape[2]:
        raise ValueError(f"D must have shape (n, M, M); got {D.shape}")
    n, M = D.shape[0], D.shape[1]
    if E.shape != (max(n - 1, 0), M, M):
        raise ValueError(f"E must have shape ({max(n - 1, 0)}, {M}, {M}); got {E.shape}")
    levels = []
    logdet = 0.0
    while D.shape[0] > 1:
        m = D.shape[0]
        n_odd, n_even = m // 2, (m + 1) // 2
        k_r = n_even - 1                   # odd blocks that have a right neighbour
        Dinv, ld = _chol_inv_logdet(D[1::2])
        logdet += ld
        El = E[0::2][:n_odd]               # H[i, i-1] = E[i-1] for odd i (views: no copies)
        Er = E[1::2]                       # H[i+1, i] = E[i] for the first k_r odd i
        P = np.matmul(Dinv, El)                                # D_i^-1 H[i, i-1]
        Q = np.matmul(Dinv[:k_r], np.swapaxes(Er, -1, -2))     # D_i^-1 H[i, i+1]
        # Schur complement: subtract H[j,i] D_i^-1 H[i,j] from both even neighbours of odd i
        Dn = D[0::2] - _pad_to(np.matmul(np.swapaxes(El, -1, -2), P), n_even)
        Dn[1:] -= np.matmul(Er, Q)
        Dn += np.swapaxes(Dn, -1, -2)                  # keep exact symmetry against round-off
        Dn *= 0.5
        En = -np.matmul(Er, P[:k_r])                   # new coupling between i-1 and i+1
        levels.append(_Level(m, Dinv, El, Er))         # P and Q are recomputed when needed (memory)
        del P, Q
        D, E = Dn, En
    root_inv, ld = _chol_inv_logdet(D[:1])
    logdet += ld
    return BlockTridiagFactor(n, tuple(levels), root_inv[0], logdet)


def solve_factored(fac: BlockTridiagFactor, b: np.ndarray) -> np.ndarray:
    """Solve ``H x = b`` with a factor from :func:`factor_block_tridiag`.

    Parameters
    ----------
    fac : BlockTridiagFactor
    b : ndarray of shape (n, M) or (n, M, R)

    Returns
    -------
    ndarray with the shape of ``b``
    """
    b = np.asarray(b, dtype=float)
    vec = b.ndim == 2
    if b.shape[0] != fac.n:
        raise ValueError(f"b must have {fac.n} blocks along axis 0; got shape {b.shape}")
    r = b[..., None] if vec else b
    stack = []
    for lev in fac.levels:
        n_odd = lev.n // 2
        k_r = lev.Er.shape[0]
        y = np.matmul(lev.Dinv, r[1::2])               # D_i^-1 b_i for odd i
        rn = r[0::2].copy()
        rn[:n_odd] -= np.matmul(np.swapaxes(lev.El, -1, -2), y)
        rn[1:] -= np.matmul(lev.Er, y[:k_r])
        stack.append(y)
        r = rn
    x = np.matmul(fac.root_inv, r)
    for lev, y in zip(reversed(fac.levels), reversed(stack)):
        n_odd = lev.n // 2
        k_r = lev.Er.shape[0]
        full = np.empty((lev.n,) + x.shape[1:])
        full[0::2] = x
        # x_i = D_i^-1 (b_i - H[i, i-1] x_{i-1} - H[i, i+1] x_{i+1})
        rhs = np.matmul(lev.El, x[:n_odd])
        rhs[:k_r] += np.matmul(np.swapaxes(lev.Er, -1, -2), x[1:])
        full[1::2] = y - np.matmul(lev.Dinv, rhs)
        x = full
    x = x[:fac.n]
    return x[..., 0] if vec else x


def selected_inverse(fac: BlockTridiagFactor) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal and first lower off-diagonal blocks of ``H^-1``.

    Returns
    -------
    S_diag : ndarray (n, M, M)
        ``(H^-1)[i, i]``.
    S_off : ndarray (n-1, M, M)
        ``(H^-1)[i+1, i]``.
    """
    Sd = fac.root_inv[None].copy()
    So = np.zeros((0,) + fac.root_inv.shape)
    for lev in reversed(fac.levels):
        # Sd: (n_even, M, M) inverse blocks at the kept (even) positions; So[k] = Sigma[2k+2, 2k]
        n_odd, m = lev.n // 2, lev.n
        S_ll = Sd[:n_odd]                                # Sigma[i-1, i-1]
        S_rr = _pad_to(Sd[1:], n_odd)                    # Sigma[i+1, i+1] (zero if absent)
        S_rl = _pad_to(So, n_odd)                        # Sigma[i+1, i-1]
        S_lr = np.swapaxes(S_rl, -1, -2)                 # Sigma[i-1, i+1]
        # Sigma[i, i-1] and Sigma[i, i+1] for odd i (from Sigma_oe = -D_oo^-1 H_oe Sigma_ee)
        P = np.matmul(lev.Dinv, lev.El)
        Q = _pad_to(np.matmul(lev.Dinv[:lev.Er.shape[0]], np.swapaxes(lev.Er, -1, -2)), n_odd)
        S_il = -(np.matmul(P, S_ll) + np.matmul(Q, S_rl))
        S_ir = -(np.matmul(P, S_lr) + np.matmul(Q, S_rr))
        S_ii = lev.Dinv - np.matmul(P, np.swapaxes(S_il, -1, -2)) - np.matmul(Q, np.swapaxes(S_ir, -1, -2))
        del P, Q, S_rr, S_rl, S_lr
        S_ii = 0.5 * (S_ii + np.swapaxes(S_ii, -1, -2))
        nd = np.empty((m,) + Sd.shape[1:])
        nd[0::2] = Sd
        nd[1::2] = S_ii
        no = np.empty((m - 1,) + Sd.shape[1:])
        no[0::2] = S_il                                  # Sigma[i, i-1] (lower block of pair (i-1, i))
        no[1::2] = np.swapaxes(S_ir, -1, -2)[:(m - 1) // 2]   # Sigma[i+1, i]
        Sd, So = nd, no
    return Sd[:fac.n], So[:max(fac.n - 1, 0)]


def solve_block_tridiag(D: np.ndarray, E: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Convenience: factor and solve ``H x = b`` in one call (see :func:`factor_block_tridiag`)."""
    return solve_factored(factor_block_tridiag(D, E), b)


def block_tridiag_to_dense(D: np.ndarray, E: np.ndarray) -> np.ndarray:
    """Assemble the dense (n·M, n·M) matrix; for tests and small problems only."""
    n, M = D.shape[0], D.shape[1]
    H = np.zeros((n * M, n * M))
    for i in range(n):
        H[i * M:(i + 1) * M, i * M:(i + 1) * M] = D[i]
        if i < n - 1:
            H[(i + 1) * M:(i + 2) * M, i * M:(i + 1) * M] = E[i]
            H[i * M:(i + 1) * M, (i + 1) * M:(i + 2) * M] = E[i].T
    return H
