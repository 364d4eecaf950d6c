"""Laplace E-step for the PLRNN state-space model: posterior mode, Laplace covariance blocks,
the Laplace approximation of log p(X), and rectified-Gaussian moments.

All trials are laid end to end in one *chain* of n = Σ_r T_r time steps (``Chain``); the
coupling between the last step of a trial and the first step of the next is zero, so the
negative Hessian of the log joint stays one block-tridiagonal matrix (blocks M×M) and one
call of :mod:`.blocktridiag` handles every trial at once.

Gaussian observations: given the ReLU on/off pattern ``d = 1[z > 0]`` the log joint is an exact
quadratic, so the mode within that linear region is one block-tridiagonal solve. The E-step
iterates "solve, recompute d" (the paper's eq. 46-47) with these rules:

* ``flip="all"``: every violated constraint flips at once; if the true (piecewise-quadratic) log
  joint falls, the search returns to the best point and holds the entries that changed at the
  kink (z = 0) for the next solve, so the log joint never decreases;
* ``flip="single"``: only the most violated constraint (largest |z|) flips per solve, as the
  reference code does in early EM iterations;
* entries held at the kink are released to the side their one-sided derivative favours; every
  visited pattern is hashed, and a pattern that comes back ends the search.

Poisson / Bernoulli observations: damped Newton (the same block-tridiagonal solve, with the
observation Hessian at the current point) with a backtracking line search on the log joint.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit, ndtr

from .blocktridiag import Workspace, _factor_owned, factor_block_tridiag, selected_inverse, solve_factored
from .params import PLRNNParams

__all__ = ["Chain", "make_chain", "LaplacePosterior", "RectifiedMoments", "log_joint", "precision_blocks",
           "posterior_mode", "laplace_estep", "rectified_moments", "chain_to_trials"]

_LOG2PI = float(np.log(2.0 * np.pi))
_CHUNK = 512           # time steps per chunk when assembling (n, M, M) blocks (1 MB temporaries: cache)
_STALL_RTOL = 1e-4     # relative gain of the log joint below which a mode-search solve counts as a stall


class Chain(NamedTuple):
    """All trials concatenated along time (n = total number of valid time steps).

    Attributes
    ----------
    x : ndarray (n, N)
        Observations with missing samples set to 0 (they carry zero weight).
    mask : ndarray (n, N) of bool
        True = observed.
    s : ndarray (n, K)
        External inputs (K may be 0).
    start : ndarray (n,) of bool
        True at the first step of each trial.
    nxt : ndarray (n,) of bool
        True where step t+1 belongs to the same trial (a transition t -> t+1 exists).
    index : tuple (trial_idx, time_idx) of int arrays (n,)
        Where each chain step sits in the (trial, time) layout.
    shape : tuple (n_trials, n_time)
    """

    x: np.ndarray
    mask: np.ndarray
    s: np.ndarray
    start: np.ndarray
    nxt: np.ndarray
    index: tuple
    shape: tuple

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    @property
    def n_transitions(self) -> int:
        return int(self.nxt.sum())


def make_chain(x: np.ndarray, mask: np.ndarray | None = None, u: np.ndarray | None = None,
               length: np.ndarray | None = None) -> Chain:
    """Build a :class:`Chain` from (trial, time, channel) arrays.

    Parameters
    ----------
    x : ndarray (trial, time, channel) or (time, channel)
        Observations; NaN = missing.
    mask : ndarray of bool, same shape as x, optional
        True = observed; default ``isfinite(x)``.
    u : ndarray (trial, time, input), optional
        External inputs (NaN-padded beyond ``length`` is fine).
    length : ndarray (trial,) of int, optional
        Valid steps per trial (ragged trials are NaN-padded); default: all steps.

    Returns
    -------
    Chain
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 2:
        x = x[None]
        u = None if u is None else np.asarray(u, dtype=float)[None] if np.ndim(u) == 2 else u
    if x.ndim != 3:
        raise ValueError(f"x must have shape (trial, time, channel); got {x.shape}")
    R, T, N = x.shape
    mask = np.isfinite(x) if mask is None else (np.asarray(mask, dtype=bool) & np.isfinite(x))
    if length is None:
        length = np.full(R, T, dtype=int)
    length = np.asarray(length, dtype=int)
    if length.shape != (R,) or np.any(length < 1) or np.any(length > T):
        raise ValueError(f"length must be {R} integers in [1, {T}]; got {length}")
    valid = np.arange(T)[None, :] < length[:, None]
    ti, tt = np.nonzero(valid)
    xs = np.where(mask, x, 0.0)[ti, tt]
    ms = mask[ti, tt]
    if u is None:
        s = np.zeros((len(ti), 0))
    else:
        u = np.asarray(u, dtype=float)
        if u.shape[:2] != (R, T):
            raise ValueError(f"u must have shape ({R}, {T}, K); got {u.shape}")
        s = u[ti, tt]
        if not np.all(np.isfinite(s)):
            raise ValueError("u (external inputs) has missing values inside the valid time steps; inputs must be known")
    start = tt == 0
    nxt = np.zeros(len(ti), dtype=bool)
    nxt[:-1] = ti[1:] == ti[:-1]
    return Chain(xs, ms, s, start, nxt, (ti, tt), (R, T))


def chain_to_trials(chain: Chain, values: np.ndarray) -> np.ndarray:
    """Scatter per-step values (n, ...) back to (trial, time, ...) with NaN padding."""
    out = np.full(chain.shape + values.shape[1:], np.nan)
    out[chain.index[0], chain.index[1]] = values
    return out


# ---------------------------------------------------------------------------------------------
# the log joint and its local quadratic form
# ---------------------------------------------------------------------------------------------
def _relu_pattern(z: np.ndarray, linear_dynamics: bool, readout: str) -> tuple[np.ndarray, np.ndarray]:
    """(d_dyn, d_obs): 0/1 float arrays (n, M) of the transfer slopes in the dynamics and readout."""
    d = (z > 0).astype(float)
    d_dyn = np.ones_like(d) if linear_dynamics else d
    d_obs = d if readout == "relu" else np.ones_like(d)
    return d_dyn, d_obs


def _readout_matrix(p: PLRNNParams) -> tuple[np.ndarray, np.ndarray]:
    if p.readout == "identity":               # B = [I 0]; b is a fixed offset (log bin_size for Poisson)
        N, M = p.obs_dim, p.latent_dim
        return np.eye(N, M), p.b
    return p.B, p.b


def _prior_means(p: PLRNNParams, chain: Chain, z: np.ndarray, linear_dynamics: bool) -> np.ndarray:
    """Mean of z_t given z_{t-1} (or the initial mean at trial starts), (n, M)."""
    c = p.h + chain.s @ p.C.T
    mean = np.empty_like(z)
    mean[0] = p.mu0 + chain.s[0] @ p.C.T
    phi = z if linear_dynamics else np.maximum(z, 0.0)
    mean[1:] = z[:-1] * p.A + phi[:-1] @ p.W.T + c[1:]
    mean[chain.start] = p.mu0 + chain.s[chain.start] @ p.C.T
    return mean


def _prior_precision(p: PLRNNParams, chain: Chain) -> np.ndarray:
    return np.where(chain.start[:, None], 1.0 / p.initial_var, 1.0 / p.Sigma)


def _obs_eta(p: PLRNNParams, z: np.ndarray) -> np.ndarray:
    B, b = _readout_matrix(p)
    g = np.maximum(z, 0.0) if p.readout == "relu" else z
    return g @ B.T + b


def _obs_log_prob(p: PLRNNParams, chain: Chain, eta: np.ndarray) -> float:
    m, x = chain.mask, chain.x
    if p.likelihood == "gaussian":
        r = (x - eta) ** 2 / p.Gamma + np.log(p.Gamma) + _LOG2PI
        return float(-0.5 * np.sum(r * m))
    if p.likelihood == "poisson":
        from scipy.special import gammaln
        return float(np.sum(m * (x * eta - np.exp(np.minimum(eta, 700.0)) - gammaln(x + 1.0))))
    # Bernoulli with logit link: x eta - log(1 + e^eta)
    return float(np.sum(m * (x * eta + _neg_softplus(eta))))


def _neg_softplus(eta: np.ndarray) -> np.ndarray:
    """-log(1 + exp(eta)), computed without overflow."""
    return -np.logaddexp(0.0, eta)


def log_joint(params: PLRNNParams, chain: Chain, z: np.ndarray, *, linear_dynamics: bool = False) -> float:
    """log p(X, Z) of the chain (all trials), including every normalising constant.

    Parameters
    ----------
    params : PLRNNParams
    chain : Chain
    z : ndarray (n, M)
    linear_dynamics : bool
        True replaces φ by the identity in the transition (the linear-dynamical-system case).

    Returns
    -------
    float
    """
    mean = _prior_means(params, chain, z, linear_dynamics)
    prec = _prior_precision(params, chain)
    lp = -0.5 * float(np.sum((z - mean) ** 2 * prec - np.log(prec) + _LOG2PI))
    return lp + _obs_log_prob(params, chain, _obs_eta(params, z))


def _obs_weights(p: PLRNNParams, chain: Chain, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Curvature weights w (n, N) and working residuals r (n, N) of the observation term at z.

    The observation log-likelihood's gradient w.r.t. eta is ``r`` and minus its second derivative
    is ``w``. For the Gaussian the quadratic is exact, and r is taken at eta = b so that the
    linear term ``G Bᵀ r`` plus the Hessian reproduce the exact region solve.
    """
    m = chain.mask
    if p.likelihood == "gaussian":
        _, b = _readout_matrix(p)
        w = m / p.Gamma
        return w, w * (chain.x - b)
    eta = _obs_eta(p, z)
    if p.likelihood == "poisson":
        lam = np.exp(np.minimum(eta, 700.0))
        return m * lam, m * (chain.x - lam)
    mu = expit(eta)
    return m * mu * (1.0 - mu), m * (chain.x - mu)


def _row_labels(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a boolean array (n, k): the index of each distinct row's first
    occurrence and the label (n,) of every row."""
    packed = np.packbits(bits, axis=1)
    keys = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1])))[:, 0]
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _pattern_blocks(d_dyn: np.ndarray, g: np.ndarray, w: np.ndarray | None, K_dd: np.ndarray, K1: np.ndarray,
                    Ob: np.ndarray | None, same: bool, B: np.ndarray) -> np.ndarray:
    """The pattern-dependent part of the diagonal blocks, (n, M, M): transition curvature of the
    next step plus the observation curvature (``w`` per step, or the constant ``Ob`` when None)."""
    n, M = d_dyn.shape
    D = np.empty((n, M, M))
    for lo in range(0, n, _CHUNK):       # chunks over time: small temporaries, cache-friendly
        sl = slice(lo, min(lo + _CHUNK, n))
        dc = d_dyn[sl]
        Dc = D[sl]
        np.multiply(dc[:, :, None] * dc[:, None, :], K_dd[None], out=Dc)
        T1 = dc[:, :, None] * K1[None]
        Dc += T1
        Dc += np.swapaxes(T1, 1, 2)
        if not same:
            gc = g[sl]
            if w is None:
                Dc += (gc[:, :, None] * gc[:, None, :]) * Ob[None]
            else:                        # observation curvature G Bᵀ diag(w_t) B G per step
                Bw = B[None, :, :] * w[sl, :, None]                  # (chunk, N, M)
                Dc += (gc[:, :, None] * gc[:, None, :]) * np.matmul(np.swapaxes(Bw, 1, 2), B)
    return D


def precision_blocks(params: PLRNNParams, chain: Chain, z: np.ndarray, *, linear_dynamics: bool = False
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Negative Hessian of the log joint (block-tridiagonal) and its linear term at the pattern of z.

    For Gaussian observations the log joint restricted to the linear region of ``z`` is exactly
    ``-½ Zᵀ H Z + vᵀ Z + const``; for Poisson/Bernoulli ``H`` holds the observation Hessian at
    ``z`` and ``v`` is the linear term of the second-order expansion (so that ``H⁻¹ v`` is the
    Newton point).

    Returns
    -------
    D : ndarray (n, M, M)
        Diagonal blocks.
    E : ndarray (n-1, M, M)
        Lower off-diagonal blocks ``H[t+1, t]``.
    v : ndarray (n, M)
    """
    p = params
    n, M = z.shape
    d_dyn, g = _relu_pattern(z, linear_dynamics, p.readout)
    s = 1.0 / p.Sigma
    nx = chain.nxt.astype(float)
    # J_t = diag(A) + W diag(d_t); J_tᵀ S J_t = diag(A s A) + d_i K1_ij + K1_ji d_j + d_i d_j K2_ij
    WtS = p.W.T * s[None, :]
    K1 = WtS * p.A[None, :]              # Wᵀ S A
    K2 = WtS @ p.W                       # Wᵀ S W
    ends = np.nonzero(~chain.nxt)[0]     # steps without a successor carry no transition term
    B, b = _readout_matrix(p)
    w, r = _obs_weights(p, chain, z)
    const_obs = p.likelihood == "gaussian" and bool(chain.mask.all())
    Ob = (B.T * w[0]) @ B if const_obs else None
    same = const_obs and (p.readout == "relu") != linear_dynamics   # g == d_dyn: one product serves both
    K_dd = (K2 + Ob) if same else K2
    # The transition blocks depend on t only through the on/off pattern of z_t (and, without
    # missing samples, so do the observation blocks), and long series revisit few patterns
    # (≈ 3 000 of 100 000 steps at M = 16): build each distinct block once and gather.
    first, inverse = _row_labels(z > 0)
    if const_obs:
        Du = _pattern_blocks(d_dyn[first], g[first], None, K_dd, K1, Ob, same, B)
        D = np.take(Du, inverse, axis=0)
        del Du
    else:
        D = _pattern_blocks(d_dyn, g, w, K_dd, K1, Ob, same, B)
    de = d_dyn[ends]                     # remove the transition terms at trial ends (few rows)
    D[ends] -= (de[:, :, None] * de[:, None, :]) * K2[None] + de[:, :, None] * K1[None] + K1.T[None] * de[:, None, :]
    diag = _prior_precision(p, chain) + nx[:, None] * (p.A * s * p.A)
    idx = np.arange(M)
    D[:, idx, idx] += diag
    # off-diagonal blocks -S J_t for t = 0..n-2
    SA, SW = np.diag(s * p.A), s[:, None] * p.W
    Eu = -(SW[None] * d_dyn[first][:, None, :] + SA[None])
    E = np.take(Eu, inverse[:max(n - 1, 0)], axis=0)
    E[ends[ends < n - 1]] = 0.0          # no coupling across trial boundaries
    # linear term
    c = p.h + chain.s @ p.C.T
    m0 = np.where(chain.start[:, None], p.mu0 + chain.s @ p.C.T, c)
    v = _prior_precision(p, chain) * m0
    y = np.zeros((n, M))
    y[:-1] = s * c[1:] * nx[:-1, None]                      # S c_{t+1}
    v -= p.A * y + d_dyn * (y @ p.W)                         # J_tᵀ S c_{t+1}
    if p.likelihood == "gaussian":
        v += g * (r @ B)
    else:
        # Newton linear term: grad + H_obs z, with grad = G Bᵀ r and H_obs z = G Bᵀ (w ∘ B G z)
        eta_lin = (g * z) @ B.T
        v += g * ((r + w * eta_lin) @ B)
    return D, E, v


# ---------------------------------------------------------------------------------------------
# mode search
# ---------------------------------------------------------------------------------------------
class ModeInfo(NamedTuple):
    n_solves: int
    converged: bool
    reason: str


def posterior_mode(params: PLRNNParams, chain: Chain, z_init: np.ndarray | None = None, *,
                   linear_dynamics: bool = False, flip: str = "all", max_iter: int = 50,
                   tol: float = 1e-8, max_halvings: int = 12, _factor_out: list | None = None
                   ) -> tuple[np.ndarray, ModeInfo]:
    """Posterior mode argmax_Z log p(X, Z) (a local maximum; the log joint is piecewise quadratic).

    Parameters
    ----------
    params : PLRNNParams
    chain : Chain
    z_init : ndarray (n, M), optional
        Start (e.g. the previous E-step's mode); default: the solve with every unit "on" for
        Gaussian observations, every unit at 1 (then damped Newton) for Poisson/Bernoulli.
    linear_dynamics : bool
        Use z instead of φ(z) in the transition (LDS; the problem is then a single solve for a
        linear Gaussian readout).
    flip : {"all", "single"}
        Constraint-flip rule for Gaussian observations (see the module docstring).
    max_iter : int
        Maximum number of block-tridiagonal solves.
    tol : float
        Relative tolerance on the log joint for the line search and Newton convergence.
    max_halvings : int
        Step halvings of the Newton line search (Poisson/Bernoulli).

    Returns
    -------
    z : ndarray (n, M)
    info : ModeInfo
    """
    if flip not in ("all", "single"):
        raise ValueError(f"flip must be 'all' or 'single'; got {flip!r}")
    n, M = chain.n, params.latent_dim
    f = lambda zz: log_joint(params, chain, zz, linear_dynamics=linear_dynamics)  # noqa: E731
    if z_init is None and params.likelihood != "gaussian":
        # for counts the solve at "every unit on" is a full Newton step from there, which can
        # overshoot by hundreds of log-rate units (a count of 56 under a loading of -2.8: the
        # log joint fell from -5.5e3 to -6.9e12 and 30 solves never came back); the damped
        # search below takes that step with its line search instead
        z_init = np.ones((n, M))
    if z_init is None:
        z = np.ones((n, M))
        D, E, v = precision_blocks(params, chain, z, linear_dynamics=linear_dynamics)
        blocks = [D, E]
        del D, E
        fac0 = _factor_owned(blocks)
        z = solve_factored(fac0, v)
        del v
        n_solves = 1
        if linear_dynamics and params.readout != "relu" and params.likelihood == "gaussian":
            if _factor_out is not None:
                _factor_out.append(fac0)
            return z, ModeInfo(1, True, "linear-Gaussian: one exact solve")
        del fac0                       # not the mode's pattern: free it before the search (memory)
    else:
        z = np.array(z_init, dtype=float)
        if z.shape != (n, M):
            raise ValueError(f"z_init must have shape ({n}, {M}); got {z.shape}")
        n_solves = 0
    f_cur = f(z)
    if params.likelihood == "gaussian":
        ws = Workspace()
        z, info, fac = _gaussian_active_set(params, chain, z, f_cur, f, n_solves, linear_dynamics, flip, max_iter,
                                            tol, ws)
        if _factor_out is not None:
            _factor_out.append(fac)
            _factor_out.append(ws if fac is None else None)   # buffers for the covariance factor
        return z, info
    alphas = 0.5 ** np.arange(0, max_halvings)
    while n_solves < max_iter:
        D, E, v = precision_blocks(params, chain, z, linear_dynamics=linear_dynamics)
        z_new = solve_factored(factor_block_tridiag(D, E), v)
        del D, E, v
        n_solves += 1
        scale = tol * max(1.0, abs(f_cur))
        # damped Newton: the best point of the halving sequence on z -> z_new by the log joint
        step = z_new - z
        best_f, best_z = f_cur, z
        for alpha in alphas:
            zt = z + alpha * step
            ft = f(zt)
            if np.isfinite(ft) and ft > best_f:
                best_f, best_z = ft, zt
            elif best_f > f_cur:
                break
        gain = best_f - f_cur
        z, f_cur = best_z, best_f
        if gain <= scale:
            return z, ModeInfo(n_solves, True, "Newton converged")
    return z, ModeInfo(n_solves, False, "max_iter reached")


def _block_groups(params: PLRNNParams, chain: Chain, state: np.ndarray) -> np.ndarray | None:
    """Labels (n,) of equal diagonal precision blocks for a search state (1 on, -1 off, 0 held
    at the kink), or None where blocks differ step by step (missing samples, non-Gaussian
    observations). A block depends on t only through the state of z_t and whether t starts or
    ends a trial."""
    if params.likelihood != "gaussian" or not chain.mask.all():
        return None
    bits = np.concatenate([state > 0, state == 0, chain.start[:, None], ~chain.nxt[:, None]], axis=1)
    return _row_labels(bits)[1]


def _clamped_blocks(D: np.ndarray, E: np.ndarray, v: np.ndarray, free: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fix the entries where ``free`` is False at 0 (identity rows/columns, zero right-hand side)."""
    fr = free.astype(float)
    for lo in range(0, D.shape[0], _CHUNK):          # in place, chunked (memory at large T)
        sl = slice(lo, lo + _CHUNK)
        D[sl] *= fr[sl, :, None] * fr[sl, None, :]
        if lo < E.shape[0]:
            E[sl] *= fr[lo + 1:lo + 1 + _CHUNK, :, None] * fr[sl, None, :][:E[sl].shape[0]]
    idx = np.arange(D.shape[1])
    D[:, idx, idx] += 1.0 - fr
    return D, E, v * fr


def _kink_gradients(params: PLRNNParams, chain: Chain, z: np.ndarray, on: np.ndarray, kink: np.ndarray,
                    linear_dynamics: bool) -> tuple[np.ndarray, np.ndarray]:
    """One-sided derivatives of the log joint at z: (going negative, going positive), each (n, M).

    Only the entries in ``kink`` (where z = 0) differ between the two sides: the ReLU slope of
    the entry itself (in the next transition and, for a ReLU readout, in the observation).
    O(n·M²), without building the Hessian blocks.
    """
    p = params
    prec = _prior_precision(p, chain)
    r = prec * (z - _prior_means(p, chain, z, linear_dynamics))         # residual of each step
    r_next = np.zeros_like(r)
    r_next[:-1] = r[1:] * chain.nxt[:-1, None]
    base = -r + p.A * r_next
    wterm = r_next @ p.W                                                # (Wᵀ r_{t+1})
    B, _ = _readout_matrix(p)
    oterm = ((chain.mask / p.Gamma) * (chain.x - _obs_eta(p, z))) @ B   # Bᵀ Γ⁻¹ (x - η)
    g_off = g_on = base
    for side_on, name in ((on, "off"), (on | kink, "on")):
        dyn = np.ones_like(z) if linear_dynamics else side_on.astype(float)
        obs = side_on.astype(float) if p.readout == "relu" else np.ones_like(z)
        g = base + dyn * wterm + obs * oterm
        if name == "off":
            g_off = g
        else:
            g_on = g
    return g_off, g_on


def _gaussian_active_set(params, chain, z, f_cur, f, n_solves, linear_dynamics, flip, max_iter, tol, ws=None):
    """Mode of the piecewise-quadratic log joint (Gaussian observations) by an active-set search.

    Every entry z_ti is in one of three states: on (z > 0), off (z < 0) or held at the kink
    (z = 0). One block-tridiagonal solve gives the maximiser of the exact quadratic of the current
    on/off pattern with the kink entries fixed at 0.

    * **Accepted solve** (the true log joint rose): free entries on the wrong side are flipped
      (``flip="all"``; ``"single"``: only the largest violation) — the paper's rule — or, if that
      pattern was visited before (a loop), held at the kink instead; an entry held at the kink
      is released to the side where the one-sided derivative of the log joint points up.
    * **Rejected solve** (the log joint fell: the flips overshot): the search goes back to the
      best point and its pattern, and holds every entry whose state the rejected pattern changed
      at the kink. The next solve therefore moves those entries to the boundary only, and the
      release rule lets through the ones whose derivative says so.

    The iterate never decreases the log joint. The search stops at a KKT point (no violation, no
    kink entry that wants to move: a local maximum, possibly on kinks, z_ti = 0, which a pure
    flip iteration can never reach), on a repeated pattern, or when two solves in a row bring
    no gain larger than ``_STALL_RTOL`` (10⁻⁴) of its magnitude (``ModeInfo.reason`` says which).

    Why the rejection rule: flipping every violated entry at once falls into a two-cycle of
    patterns on long series. At T = 100 000 (M = 16) about a fifth of all entries flipped back
    and forth at every solve; the search took 14 solves and ended at a log joint of 1.55·10⁵.
    With the rule it takes 10 solves at T = 10 000 and at T = 100 000 and reaches 2.70·10⁵
    (``benchmarks/bench_laplace_em.py``). Compared call by call inside bursting-neuron EM fits,
    the rule finds the higher mode about three times as often as it finds the lower one
    (docs/laplace_em.md).
    """
    # entries exactly at 0 start held at the kink: a warm start from a previous mode (EM) then
    # resumes that search's active set instead of re-deriving it from a sign pattern
    state = np.sign(z).astype(np.int8)
    best_state = None              # the pattern whose solve gave the current point z (none yet:
    #                                a start point is no region's maximiser, so the first solve is taken)
    fac = None
    seen: set[bytes] = set()
    stall, patience = 0, 2
    ws = Workspace() if ws is None else ws   # every solve's factor reuses the same buffers (speed at large T)
    while n_solves < max_iter:
        seen.add(state.tobytes())
        on, free = state == 1, state != 0
        zd = np.where(on, 1.0, -1.0)
        fac = None                     # drop the previous factor before the next assembly (memory)
        D, E, v = precision_blocks(params, chain, zd, linear_dynamics=linear_dynamics)
        if not free.all():
            D, E, v = _clamped_blocks(D, E, v, free)
        blocks = [D, E]
        del D, E                       # the factor frees them after its first level (memory at large T)
        fac = _factor_owned(blocks, ws, _block_groups(params, chain, state))
        z_sol = solve_factored(fac, v)
        del v
        n_solves += 1
        f_sol = f(z_sol)
        if best_state is not None and not f_sol > f_cur:
            stall += 1
            changed = state != best_state
            if stall >= patience or not changed.any():
                return z, ModeInfo(n_solves, False, f"no gain in {stall} solves"), None
            new = best_state.copy()
            new[changed] = 0
        else:
            # gains below _STALL_RTOL·|f| count towards the stall rule: on long series the last
            # solves can each gain ~1e-6 relative
            stall = 0 if f_sol - f_cur > _STALL_RTOL * max(1.0, abs(f_cur)) else stall + 1
            if best_state is None and f_sol < f_cur:
                stall = 0          # the start point was better than its pattern's solve: move on anyway
            z, f_cur, best_state = z_sol, f_sol, state
            if stall >= patience:
                return z, ModeInfo(n_solves, False, f"no gain in {patience} solves"), None
            viol = free & ((z > 0) != on)
            new = state.copy()
            if viol.any():
                if flip == "single":
                    k = np.argmax(np.where(viol, np.abs(z), -1.0))
                    new.flat[k] = -new.flat[k]
                else:
                    new[viol] = -new[viol]
                    if new.tobytes() in seen:          # a loop: hold the violators at the kink instead
                        new = state.copy()
                        new[viol] = 0
            kink = ~free
            if kink.any():
                g_off, g_on = _kink_gradients(params, chain, z, on, kink, linear_dynamics)
                scale = tol * (1.0 + np.abs(g_off) + np.abs(g_on))
                new[kink & (g_on > scale)] = 1
                new[kink & (g_off < -scale) & ~(g_on > scale)] = -1
            if np.array_equal(new, state):
                # without kink entries the last factor is the Hessian at the mode: hand it on for reuse
                return z, ModeInfo(n_solves, True, "local maximum (KKT)"), (fac if free.all() else None)
        if new.tobytes() in seen:
            return z, ModeInfo(n_solves, False, "pattern loop detected"), None
        state = new
    return z, ModeInfo(n_solves, False, "max_iter reached"), None


# ---------------------------------------------------------------------------------------------
# Laplace approximation and moments
# ---------------------------------------------------------------------------------------------
class LaplacePosterior(NamedTuple):
    """Gaussian (Laplace) posterior over the chain.

    Attributes
    ----------
    mean : ndarray (n, M)
        Posterior mode.
    cov : ndarray (n, M, M)
        Diagonal blocks of the covariance, Cov(z_t).
    cov_lag : ndarray (n-1, M, M)
        Cov(z_{t+1}, z_t) (meaningless across trial boundaries, where it is ~0).
    log_joint : float
        log p(X, Z*) at the mode.
    log_lik : float
        Laplace approximation of log p(X): log p(X, Z*) + nM/2 log 2π − ½ log det H.
    info : ModeInfo
    """

    mean: np.ndarray
    cov: np.ndarray
    cov_lag: np.ndarray
    log_joint: float
    log_lik: float
    info: ModeInfo


def laplace_estep(params: PLRNNParams, chain: Chain, z_init: np.ndarray | None = None, *,
                  linear_dynamics: bool = False, flip: str = "all", max_iter: int = 50,
                  tol: float = 1e-8, covariance: bool = True) -> LaplacePosterior:
    """E-step: mode, covariance blocks (inverse negative Hessian at the mode) and Laplace log p(X).

    Parameters are those of :func:`posterior_mode`; ``covariance=False`` skips the selected
    inversion (``cov`` and ``cov_lag`` are then empty arrays).

    Returns
    -------
    LaplacePosterior
    """
    if chain.s.shape[1] != params.input_dim:
        raise ValueError(f"the parameters take {params.input_dim} inputs but the chain has {chain.s.shape[1]} "
                         "(pass u to make_chain)")
    reuse: list = []
    z, info = posterior_mode(params, chain, z_init, linear_dynamics=linear_dynamics, flip=flip,
                             max_iter=max_iter, tol=tol, _factor_out=reuse)
    fac = reuse[0] if reuse and reuse[0] is not None else None
    ws = reuse[1] if len(reuse) > 1 else None      # the search's buffers, reused (no fresh pages)
    del reuse
    if fac is None:                # the Hessian at the mode's own on/off pattern (kinks count as off)
        D, E, _ = precision_blocks(params, chain, z, linear_dynamics=linear_dynamics)
        blocks = [D, E]
        del D, E                   # the factor frees them after its first level (memory at large T)
        fac = _factor_owned(blocks, ws, _block_groups(params, chain, np.where(z > 0, 1, -1)))
        del ws                     # the factor holds the buffers now; selected_inverse frees them
    lj = log_joint(params, chain, z, linear_dynamics=linear_dynamics)
    ll = lj + 0.5 * z.size * _LOG2PI - 0.5 * fac.logdet
    if covariance:
        cov, lag = selected_inverse(fac, consume=True)   # frees the factor level by level (memory)
    else:
        M = params.latent_dim
        cov, lag = np.zeros((0, M, M)), np.zeros((0, M, M))
    return LaplacePosterior(z, cov, lag, lj, ll, info)


class RectifiedMoments(NamedTuple):
    """Moments of φ(z) = max(z, 0) under the Gaussian posterior, per step.

    Attributes
    ----------
    sd : ndarray (n, M)
        Posterior standard deviation of each unit.
    F : ndarray (n, M)
        P(z > 0).
    Ephi : ndarray (n, M)
        E[φ(z)].
    Ephi2 : ndarray (n, M)
        E[φ(z)²] (exact).
    """

    sd: np.ndarray
    F: np.ndarray
    Ephi: np.ndarray
    Ephi2: np.ndarray


def rectified_moments(mean: np.ndarray, cov: np.ndarray) -> RectifiedMoments:
    """Closed-form moments of the rectified Gaussian, elementwise.

    With α = μ/σ: ``E[φ] = μ Φ(α) + σ ϕ(α)`` and ``E[φ²] = (μ² + σ²) Φ(α) + μ σ ϕ(α)``.
    Cross moments follow (see :mod:`.mstep`): ``E[z_i φ(z_j)] = μ_i E[φ_j] + C_ij Φ(α_j)`` (exact,
    Stein's lemma) and, for i ≠ j, ``E[φ_i φ_j] ≈ E[φ_i] E[φ_j] + Φ(α_i) Φ(α_j) C_ij``, the
    first-order term in the correlation of the exact bivariate expression (Price's theorem); it
    is exact when both units are surely on or surely off and when C_ij = 0.

    Parameters
    ----------
    mean : ndarray (n, M)
    cov : ndarray (n, M, M)

    Returns
    -------
    RectifiedMoments
    """
    var = np.maximum(np.diagonal(cov, axis1=1, axis2=2), 1e-300)
    sd = np.sqrt(var)
    alpha = mean / sd
    F = ndtr(alpha)
    pdf = np.exp(-0.5 * alpha ** 2) / np.sqrt(2.0 * np.pi)
    Ephi = mean * F + sd * pdf
    Ephi2 = (mean ** 2 + var) * F + mean * sd * pdf
    return RectifiedMoments(sd, F, Ephi, Ephi2)
