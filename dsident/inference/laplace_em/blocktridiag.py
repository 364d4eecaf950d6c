"""Symmetric positive-definite block-tridiagonal systems: factor, solve, log-determinant and
selected inversion (diagonal and first off-diagonal blocks of the inverse), all in O(n·M³).

The matrix ``H`` (n blocks of size M×M) is given by its diagonal blocks ``D[i] = H[i, i]`` and its
lower off-diagonal blocks ``E[i] = H[i+1, i]`` (``H[i, i+1] = E[i].T``).

Algorithm: block cyclic reduction. Each level eliminates the odd-numbered blocks at once (their
Schur complement onto the even-numbered blocks is again block-tridiagonal), so every level is a
handful of *batched* operations on stacks of M×M matrices and there is no Python loop over
time — only one over the log2(n) levels. Per eliminated block the level keeps ``L^-1`` (Cholesky,
inverted by batched LAPACK triangular solves through torch) and ``L^-1 H[i, i±1]``, so the Schur
complement is made of Gram products. The inverse is recovered level by level in reverse with
the identity ``(H^-1)_ee = S^-1`` (S = Schur complement onto the kept blocks) and
``(H^-1)_oe = -H_oo^-1 H_oe (H^-1)_ee``. A sequential block-Cholesky recursion does the same
number of flops but costs ~10 µs of interpreter time per block, i.e. seconds at n = 10⁵; the
banded LAPACK route (``scipy.linalg.solveh_banded`` with bandwidth 2M-1) solves but gives no
selected inverse (see ``benchmarks/bench_laplace_em.py`` for the timings that decided this).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

__all__ = ["BlockTridiagFactor", "Workspace", "factor_block_tridiag", "solve_factored", "selected_inverse",
           "solve_block_tridiag", "block_tridiag_to_dense"]


class _Level(NamedTuple):
    n: int                 # number of blocks at this level
    Linv: np.ndarray       # (n_odd, M, M)  L_i^-1 for odd i, where D_i = L_i L_iᵀ (lower triangular)
    X: np.ndarray          # (n_odd, M, M)  L_i^-1 H[i, i-1]
    Y: np.ndarray          # (k_r, M, M)    L_i^-1 H[i, i+1] for the odd blocks with a right neighbour


class BlockTridiagFactor(NamedTuple):
    """Result of :func:`factor_block_tridiag`.

    Attributes
    ----------
    n : int
        Number of blocks of the original matrix.
    levels : list of reduction levels (internal).
    root_inv : ndarray (M, M)
        Inverse of the single block left after the last reduction.
    logdet : float
        log det H.
    """

    n: int
    levels: list
    root_inv: np.ndarray
    logdet: float


class Workspace:
    """Reusable output buffers for repeated factorisations of same-sized systems.

    Writing into memory that is already mapped is several times faster than filling fresh
    (n, M, M) arrays at large n (page faults). A factor built with a workspace shares its
    buffers: the next factor built with the same workspace overwrites it.
    """

    def __init__(self) -> None:
        self._bufs: dict = {}

    def get(self, key, shape: tuple) -> np.ndarray:
        a = self._bufs.get(key)
        if a is None or a.shape != shape:
            a = np.empty(shape)
            self._bufs[key] = a
        return a


def _chol_inv_logdet(blocks: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Inverse Cholesky factors ``L^-1`` (lower triangular) and summed log-determinant of a stack
    of SPD blocks (k, M, M); written into ``out`` when given."""
    Linv, logdets = _chol_inv_blocks(blocks, out)
    return Linv, float(logdets.sum())


def _chol_inv_blocks(blocks: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``L^-1`` and the log-determinant of each block, (k, M, M) and (k,)."""
    try:
        L = np.linalg.cholesky(blocks)
    except np.linalg.LinAlgError as err:
        raise np.linalg.LinAlgError(
            "block-tridiagonal matrix is not positive definite (a pivot block failed Cholesky); "
            "the posterior precision is singular or the parameters diverged") from err
    logdets = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
    Linv = np.empty_like(L) if out is None else out
    # batched LAPACK triangular solves L X = I (torch, float64 on the CPU) straight into Linv:
    # about 6x faster than a numpy 2x2-block recursion on stacks of 16x16 blocks
    k, M = L.shape[0], L.shape[-1]
    eye = torch.eye(M, dtype=torch.float64).expand(k, M, M)
    torch.linalg.solve_triangular(torch.from_numpy(L), eye, upper=False, out=torch.from_numpy(Linv))
    return Linv, logdets


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def factor_block_tridiag(D: np.ndarray, E: np.ndarray) -> BlockTridiagFactor:
    """Factor an SPD block-tridiagonal matrix by block cyclic reduction.

    Each level stores, for its odd-numbered blocks i, ``L_i^-1`` (D_i = L_i L_iᵀ),
    ``X_i = L_i^-1 H[i, i-1]`` and ``Y_i = L_i^-1 H[i, i+1]``; the Schur complement onto the
    even-numbered blocks is then ``D_j - X_{j+1}ᵀ X_{j+1} - Y_{j-1}ᵀ Y_{j-1}`` with new couplings
    ``-Y_iᵀ X_i`` (Gram products: no explicit D_i^-1 and no copy of the input is kept).

    Parameters
    ----------
    D : ndarray of shape (n, M, M)
        Diagonal blocks (symmetric; only the lower triangle is read by the first Cholesky).
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
    blocks = [D, E]
    del D, E
    return _factor_owned(blocks)


def _factor_owned(blocks: list, ws: Workspace | None = None, groups: np.ndarray | None = None
                  ) -> BlockTridiagFactor:
    """:func:`factor_block_tridiag` on ``blocks = [D, E]`` (validated float64), emptying the list
    so that the input blocks are freed after the first level when the caller holds no other
    reference (peak memory at large n). With ``ws`` the stored factors go into its buffers.

    ``groups`` (n,) int, optional: labels with ``D[i] == D[j]`` whenever
    ``groups[i] == groups[j]``. The first level then factors each distinct diagonal block once
    (the E-step's blocks repeat: they depend on t only through an on/off pattern)."""
    def buf(key, shape):
        return None if ws is None else ws.get(key, shape)
    D, E = blocks
    blocks.clear()
    n, M = D.shape[0], D.shape[1]
    levels = []
    logdet = 0.0
    while D.shape[0] > 1:
        m = D.shape[0]
        n_odd, n_even = m // 2, (m + 1) // 2
        k_r = n_even - 1                   # odd blocks that have a right neighbour
        lv = len(levels)
        if lv == 0 and groups is not None:
            _, first, inverse = np.unique(groups[1::2][:n_odd], return_index=True, return_inverse=True)
            inverse = inverse.ravel()
            Lu, ldu = _chol_inv_blocks(D[1::2][first])
            out = buf((lv, "Linv"), (n_odd, M, M))
            Linv = np.take(Lu, inverse, axis=0, out=out)
            logdet += float(ldu[inverse].sum())
            del Lu
        else:
            Linv, ld = _chol_inv_logdet(D[1::2], buf((lv, "Linv"), (n_odd, M, M)))
            logdet += ld
        Dn = D[0::2].copy()
        del D
        X = np.matmul(Linv, E[0::2][:n_odd], out=buf((lv, "X"), (n_odd, M, M)))      # L_i^-1 H[i, i-1]
        Y = np.matmul(Linv[:k_r], _mT(E[1::2]), out=buf((lv, "Y"), (k_r, M, M)))   # L_i^-1 H[i, i+1]
        del E
        tmp = np.matmul(_mT(X), X)
        Dn[:n_odd] -= tmp                                     # H[j,i] D_i^-1 H[i,j], j = i-1
        np.matmul(_mT(Y), Y, out=tmp[:k_r])
        Dn[1:] -= tmp[:k_r]                                   # and j = i+1
        En = np.matmul(_mT(Y), X[:k_r], out=tmp[:k_r])
        np.negative(En, out=En)                               # coupling between i-1 and i+1
        levels.append(_Level(m, Linv, X, Y))
        D, E = Dn, En
        del tmp, Dn, En, Linv, X, Y
    Linv, ld = _chol_inv_logdet(D[:1])
    logdet += ld
    return BlockTridiagFactor(n, levels, (_mT(Linv) @ Linv)[0], logdet)


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
        k_r = lev.Y.shape[0]
        w = np.matmul(lev.Linv, r[1::2])               # L_i^-1 b_i for odd i
        rn = r[0::2].copy()
        rn[:n_odd] -= np.matmul(_mT(lev.X), w)
        rn[1:] -= np.matmul(_mT(lev.Y), w[:k_r])
        stack.append(w)
        r = rn
    x = np.matmul(fac.root_inv, r)
    for lev, w in zip(reversed(fac.levels), reversed(stack)):
        n_odd = lev.n // 2
        k_r = lev.Y.shape[0]
        full = np.empty((lev.n,) + x.shape[1:])
        full[0::2] = x
        # x_i = D_i^-1 (b_i - H[i, i-1] x_{i-1} - H[i, i+1] x_{i+1}) = L_i^-T (w_i - X_i x_{i-1} - Y_i x_{i+1})
        w -= np.matmul(lev.X, x[:n_odd])
        w[:k_r] -= np.matmul(lev.Y, x[1:])
        full[1::2] = np.matmul(_mT(lev.Linv), w)
        x = full
    x = x[:fac.n]
    return x[..., 0] if vec else x


def selected_inverse(fac: BlockTridiagFactor, *, consume: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal and first lower off-diagonal blocks of ``H^-1``.

    Parameters
    ----------
    fac : BlockTridiagFactor
    consume : bool
        True releases the factor's levels while going (the factor is unusable afterwards); this
        lowers the peak memory at large n.

    Returns
    -------
    S_diag : ndarray (n, M, M)
        ``(H^-1)[i, i]``.
    S_off : ndarray (n-1, M, M)
        ``(H^-1)[i+1, i]``.
    """
    n, M = fac.n, fac.root_inv.shape[0]
    # level l's block j is block j·2^l of the original: the kept blocks of every level are a
    # strided view of the output, so the diagonal blocks are written in place, level by level
    Sd_full = np.empty((n, M, M))
    So_out = np.empty((max(n - 1, 0), M, M))
    levels = fac.levels if consume else list(fac.levels)
    stride = 2 ** len(levels)
    Sd_full[::stride] = fac.root_inv
    So = np.zeros((0, M, M))                             # Sigma[j+1, j] at the current level
    while levels:
        lev = levels.pop()
        stride //= 2
        m, n_odd = lev.n, lev.n // 2
        k_r = lev.Y.shape[0]
        Sd = Sd_full[::stride]                           # this level's blocks (m of them)
        S_ll = Sd[0:2 * n_odd:2]                         # Sigma[i-1, i-1]
        X, Y, Linv = lev.X, lev.Y, lev.Linv
        # U_l = X Sigma[i-1, i-1] + Y Sigma[i+1, i-1];  U_r = X Sigma[i-1, i+1] + Y Sigma[i+1, i+1]
        # (temporaries are freed as soon as used: this is the peak-memory phase of an E-step)
        U_l = np.matmul(X, S_ll)
        U_l[:k_r] += np.matmul(Y, So[:k_r])
        U_r = np.matmul(Y, Sd[2:2 * k_r + 1:2])
        U_r += np.matmul(X[:k_r], _mT(So[:k_r]))
        del So
        # Sigma[i, i-1] = -L^-T U_l,  Sigma[i, i+1] = -L^-T U_r  (from Sigma_oe = -D_oo^-1 H_oe Sigma_ee)
        So_new = So_out if stride == 1 else np.empty((m - 1, M, M))
        S_il = So_new[0::2]
        np.matmul(_mT(Linv), U_l, out=S_il)
        np.negative(S_il, out=S_il)
        del U_l
        S_ri = So_new[1::2]                              # Sigma[i+1, i] = -U_rᵀ L^-1, written in place
        np.matmul(_mT(U_r), Linv[:k_r], out=S_ri)
        np.negative(S_ri, out=S_ri)
        del U_r
        # Sigma[i, i] = D^-1 - D^-1 (H[i,i-1] Sigma[i-1,i] + H[i,i+1] Sigma[i+1,i])
        #             = L^-T (L^-1 - X Sigma[i, i-1]ᵀ - Y Sigma[i+1, i])
        R = np.matmul(X, _mT(S_il))
        R[:k_r] += np.matmul(Y, S_ri)
        np.subtract(Linv, R, out=R)
        S_ii = Sd[1::2]
        np.matmul(_mT(Linv), R, out=S_ii)
        np.add(S_ii, _mT(S_ii), out=R)                   # exact symmetry against round-off
        np.multiply(R, 0.5, out=S_ii)
        del R, S_ii, lev, X, Y, Linv
        So = So_new
    return Sd_full, So_out


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
