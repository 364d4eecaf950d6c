"""Fixed points and cycles: exact ones for the PLRNN, Newton's method for any dynamics.

Shape legend: ``n`` objects found, ``k`` period, ``M`` latent_dim, ``R`` candidate regions.

A PLRNN is affine inside each *linear region*, the orthant with sign pattern
``d = 1[z > 0]`` (seed 004, eq. 4): ``F(z) = J_d z + h`` with ``J_d = diag(A) + W diag(d)``.
Inside a region a fixed point solves ``(I - J_d) z = h`` (eq. 8), and a k-cycle through
regions ``d_1, ..., d_k`` solves ``(I - J_k ... J_1) z_1 = c`` (eq. 10), with ``c`` the offset of
the composed affine map. A solution is a true fixed point or cycle only if every point lies
in the region that was assumed for it ("consistent"). Small M: every region (or tuple of
regions) is tried, vectorised. Large M: candidate regions are those visited by simulated
trajectories plus random ones, and each inconsistent solution proposes the regions of its
own points as the next candidate (a fixed-point iteration on regions).
"""
from __future__ import annotations

import copy
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
import xarray as xr
from scipy.linalg.lapack import dgecon as _gecon, dgetrf as _getrf, dgetrs as _getrs

from .._threads import one_blas_thread
from .._version import __version__
from ..dynamics.base import LatentDynamics
from ..dynamics.plrnn import PLRNN, PLRNNParams
from ..dynamics.solvers import check_run_step
from ..inference.training import check_int, check_number
from ._resolve import resolve_dynamics

__all__ = ["FixedPoints", "fixed_points", "cycles", "plrnn_cycles", "newton_fixed_points",
           "classify_eigenvalues"]

_MARGINAL_TOL = 1e-6
#: the largest condition number (1-norm) of I - J for which a region's system is solved
_MAX_COND = 1e12
#: the most memory one batch of region solves may take (bytes; see _solve_in_chunks)
_SOLVE_BYTES = 128 * 2 ** 20


@dataclass
class FixedPoints:
    """Fixed points (``period == 1``) or k-cycles found in a latent dynamics.

    Attributes
    ----------
    points : ndarray of shape (n, k, M)
        The ``k`` points of each cycle (``k = 1``: the fixed points), in iteration order.
    eigenvalues : complex ndarray of shape (n, M)
        Eigenvalues of the Jacobian of the k-fold map ``F^k`` at the cycle (for ``k = 1`` the
        Jacobian of ``F`` at the fixed point), sorted by decreasing modulus.
    stable : bool ndarray of shape (n,)
        All eigenvalues strictly inside the unit circle.
    kind : list of str, length n
        "stable node", "stable spiral", "unstable node", "unstable spiral", "saddle" or
        "marginal" (an eigenvalue within 1e-6 of the unit circle and none outside it; a point
        with a growing direction is a saddle or unstable whatever its neutral directions).
        PLRNN only: "border", a point on a region border (a coordinate within ``tol`` of 0)
        whose sides' Jacobians disagree about stability. A point on a border gets the
        eigenvalues of its least stable side, so it is ``stable`` only when every side is.
    regions : bool ndarray of shape (n, k, M) or None
        Sign patterns ``z > 0`` of the points (PLRNN only).
    period : int
    method : str
        "enumerate", "search" or "newton".
    info : dict
        Search settings and counts (e.g. ``n_candidates``, ``n_singular``, ``tol``, ``seed``
        (-1: none)) and ``package_version``.
    """

    points: np.ndarray
    eigenvalues: np.ndarray
    stable: np.ndarray
    kind: list[str]
    regions: np.ndarray | None = None
    period: int = 1
    method: str = "enumerate"
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    def __repr__(self) -> str:
        # a table a person can read at the prompt; the arrays stay available as attributes
        what = "fixed point" if self.period == 1 else f"{self.period}-cycle"
        head = (f"FixedPoints: {len(self)} {what}{'s' if len(self) != 1 else ''} "
                f"(method {self.method!r}{', truncated search' if self.info.get('truncated') else ''})")
        rows = [f"  [{i}] {self.kind[i]:<15} |λ|max = {self.max_abs_eigenvalue[i]:.4g}   "
                f"z = {np.array2string(self.points[i, 0], precision=3, max_line_width=10_000, threshold=8)}"
                for i in range(len(self))]
        return "\n".join([head, *rows])

    @property
    def max_abs_eigenvalue(self) -> np.ndarray:
        """Spectral radius of each object's Jacobian, shape (n,)."""
        return np.abs(self.eigenvalues).max(axis=1) if len(self) else np.zeros(0)

    def to_xarray(self) -> xr.Dataset:
        """The result as a Dataset: ``point(cycle, phase, latent)``, ``eigenvalue_real/imag``,
        ``stable(cycle)``, ``kind(cycle)``; settings in attrs."""
        n, k, m = self.points.shape
        ds = xr.Dataset(
            {"point": (("cycle", "phase", "latent"), self.points),
             "eigenvalue_real": (("cycle", "eigen"), self.eigenvalues.real),
             "eigenvalue_imag": (("cycle", "eigen"), self.eigenvalues.imag),
             "stable": (("cycle",), self.stable),
             "kind": (("cycle",), np.asarray(self.kind, dtype=str).reshape(n))},
            coords={"cycle": np.arange(n), "phase": np.arange(k), "latent": np.arange(m)},
            attrs={"period": self.period, "method": self.method,
                   **{key: int(value) if isinstance(value, bool) else value
                      for key, value in self.info.items() if isinstance(value, (int, float, str))}},
        )
        return ds


def classify_eigenvalues(eigenvalues: np.ndarray, tol: float = _MARGINAL_TOL) -> tuple[np.ndarray, list[str]]:
    """Stability flag and type of discrete-time maps from their Jacobian eigenvalues.

    Parameters
    ----------
    eigenvalues : complex ndarray of shape (n, M)
    tol : float
        Moduli within ``tol`` of 1 count as marginal.

    Returns
    -------
    stable : bool ndarray of shape (n,)
    kind : list of str
    """
    eigenvalues = np.asarray(eigenvalues)
    if eigenvalues.ndim != 2:
        raise ValueError(f"`eigenvalues` must have shape (n, M), one row per point; got shape {eigenvalues.shape}.")
    modulus = np.abs(eigenvalues)
    if np.isnan(modulus).any():
        # a NaN modulus fails every comparison below and came out a 'saddle'
        row = int(np.flatnonzero(np.isnan(modulus).any(axis=1))[0])
        raise ValueError(f"`eigenvalues` row {row} holds NaN; a point with undefined eigenvalues has no "
                         f"stability type: {eigenvalues[row]!r}.")
    stable = np.all(modulus < 1.0 - tol, axis=1) if eigenvalues.size else np.zeros(len(eigenvalues), bool)
    kinds: list[str] = []
    for mod, lam in zip(modulus, eigenvalues):
        spiral = bool(np.any(np.abs(lam.imag) > 1e-12))
        outside, on = mod > 1.0 + tol, np.abs(mod - 1.0) <= tol
        # a direction that grows decides the type whatever the neutral ones do (the ODE-RFWP's
        # fast weights give many eigenvalues of exactly 1); only without one is a point marginal
        if outside.any():
            if np.all(outside | on):
                kinds.append("unstable spiral" if spiral else "unstable node")
            else:
                kinds.append("saddle")
        elif on.any():
            kinds.append("marginal")
        elif np.all(mod < 1.0):
            kinds.append("stable spiral" if spiral else "stable node")
        else:
            kinds.append("saddle")
    return stable, kinds


def _sorted_eigenvalues(matrices: np.ndarray) -> np.ndarray:
    lam = np.linalg.eigvals(matrices)
    order = np.argsort(-np.abs(lam), axis=-1, kind="stable")
    return np.take_along_axis(lam, order, axis=-1)


# ----------------------------------------------------------------------------------------------
# PLRNN: exact solutions region by region
# ----------------------------------------------------------------------------------------------
def _as_params(model: Any, u: np.ndarray | None = None) -> PLRNNParams:
    """PLRNN parameters with a constant input folded into the bias (``h + C u``)."""
    if isinstance(model, PLRNNParams):
        p = PLRNNParams(*(np.asarray(q, dtype=float) for q in model))
    else:
        dyn, _ = resolve_dynamics(model)
        if not isinstance(dyn, PLRNN):
            raise TypeError(f"exact fixed points and cycles need a PLRNN; got {type(dyn).__name__}. "
                            "Use newton_fixed_points() for other dynamics.")
        p = dyn.params()
    bad = [name for name in ("A", "W", "h") if not np.isfinite(getattr(p, name)).all()]
    if bad:        # every region's solve would fail: "no fixed points" would be a wrong answer
        raise ValueError(f"the PLRNN's parameters must be finite; {', '.join(bad)} hold NaN or inf "
                         "(a diverged fit?).")
    if u is None:
        return p
    u = np.asarray(u, dtype=float).reshape(-1)
    if u.shape != (p.C.shape[1],) or not np.isfinite(u).all():
        raise ValueError(f"`u` must be a finite constant input of shape ({p.C.shape[1]},); got {u!r}.")
    return p._replace(h=p.h + p.C @ u)


def _region_maps(p: PLRNNParams, regions: np.ndarray) -> np.ndarray:
    """J_d = diag(A) + W diag(d) for each sign pattern, (R, M) -> (R, M, M)."""
    return np.diag(p.A)[None] + p.W[None] * regions[:, None, :].astype(float)


def _solve_cycles(p: PLRNNParams, tuples: np.ndarray, tol: float) -> dict[str, Any]:
    """Solve every k-tuple of regions, (R, k, M) bool.

    Returns ``points`` (consistent solutions, (n, k, M)), ``n_singular``, and for every
    candidate ``regular`` (R,) and ``proposal`` (R, k, M), the regions its points lie in.
    """
    n_cand, k, m = tuples.shape
    jac = [_region_maps(p, tuples[:, i]) for i in range(k)]
    # compose the affine maps z -> J_i z + h, i = 1..k, starting from the first (not from the
    # identity: at k = 1 a product with it would cost three times the solve)
    prod, offset = jac[0], np.broadcast_to(p.h, (n_cand, m))
    for i in range(1, k):
        prod = jac[i] @ prod
        offset = np.einsum("rij,rj->ri", jac[i], offset) + p.h
    regular, z1 = _solve_regular(np.eye(m)[None] - prod, offset)
    return _cycle_points(p, tuples, jac, z1, regular, tol)


def _cycle_points(p: PLRNNParams, tuples: np.ndarray, jac: list[np.ndarray], z1: np.ndarray,
                  regular: np.ndarray, tol: float) -> dict[str, Any]:
    """The cycles' points from their first ones ``z1`` (R, M), and which lie in their regions."""
    n_cand, k, m = tuples.shape
    points = np.empty((n_cand, k, m))
    points[:, 0] = z1
    for i in range(1, k):
        points[:, i] = np.einsum("rij,rj->ri", jac[i - 1], points[:, i - 1]) + p.h
    # consistency: every point lies in the region assumed for it (with a tolerance at the borders)
    scale = 1.0 + np.abs(points)
    positive_ok = np.where(tuples, points > -tol * scale, points < tol * scale)
    consistent = regular & np.all(positive_ok, axis=(1, 2))
    return {"points": points[consistent], "n_singular": int((~regular).sum()), "proposal": points > 0,
            "regular": regular}


def _solve_regular(system: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve each system (n, M, M) x = rhs (n, M) that is not (nearly) singular.

    Returns ``regular`` (n,) and the solutions (n, M), NaN where not regular. A (nearly) singular
    system, 1-norm condition number above ``_MAX_COND`` (LAPACK's estimate from the LU factors),
    is a continuum of solutions or none: reported, not solved. One LU a system serves both the
    estimate and the solve; the singular values that ``numpy.linalg.cond`` computes cost ten
    times the solve at M = 300.
    """
    n, m = rhs.shape
    regular, z = np.zeros(n, dtype=bool), np.full((n, m), np.nan)
    for i in range(n):
        a = system[i]
        if not math.isfinite(a.sum()):
            continue
        lu, piv, info = _getrf(a)
        if info != 0:                                   # an exactly zero pivot
            continue
        rcond, info = _gecon(lu, np.abs(a).sum(axis=0).max(), norm="1")
        if info != 0 or not rcond * _MAX_COND > 1.0:
            continue
        z[i], _ = _getrs(lu, piv, rhs[i])
        regular[i] = True
    return regular, z


def _solve_in_chunks(p: PLRNNParams, tuples: np.ndarray, tol: float,
                     deadline: float | None = None) -> dict[str, Any]:
    """:func:`_solve_cycles` on batches of at most ``_SOLVE_BYTES`` of matrices, results joined.

    Each candidate holds k + 5 (M, M) arrays at once (the k region maps, their product, the
    system and the solvers' copies): a search round of 15 000 candidates at M = 300 took 13 GB
    in one batch. With a ``deadline`` (a ``time.perf_counter()`` value) no batch starts after
    it; ``"n_solved"`` says how many of the tuples (a prefix) were solved.
    """
    n_cand, k, m = tuples.shape
    chunk = max(1, _SOLVE_BYTES // ((k + 5) * m * m * 8))
    parts = []
    for i in range(0, n_cand, chunk):
        if deadline is not None and time.perf_counter() >= deadline:
            break
        parts.append(_solve_cycles(p, tuples[i:i + chunk], tol))
    if not parts:                       # nothing to solve, or the deadline came first
        return {"points": np.zeros((0, k, m)), "n_singular": 0, "proposal": np.zeros((0, k, m), dtype=bool),
                "regular": np.zeros(0, dtype=bool), "n_solved": 0}
    return {"points": np.concatenate([q["points"] for q in parts]),
            "n_singular": sum(q["n_singular"] for q in parts),
            "proposal": np.concatenate([q["proposal"] for q in parts]),
            "regular": np.concatenate([q["regular"] for q in parts]),
            "n_solved": min(n_cand, len(parts) * chunk)}


def _has_smaller_period(points: np.ndarray, tol: float) -> bool:
    """True when a k-cycle (k, M) repeats with a period q < k dividing k."""
    k = points.shape[0]
    return any(np.allclose(np.tile(points[:q], (k // q, 1)), points, atol=tol, rtol=tol)
               for q in range(1, k) if k % q == 0)


def _canonical_rotation(points: np.ndarray) -> np.ndarray:
    """Rotate a cycle so that it starts at its lexicographically smallest point."""
    start = min(range(points.shape[0]), key=lambda i: tuple(np.round(points[i], 8)))
    return np.roll(points, -start, axis=0)


def _unique_cycles(p: PLRNNParams, sol: dict[str, np.ndarray], period: int,
                   tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop repeats (other rotations, shorter periods); return points, F^k eigenvalues and whether
    a point on a region border has sides that disagree about its stability (:func:`_border_sides`)."""
    kept: list[np.ndarray] = []
    for pts in sol["points"]:
        if period > 1 and _has_smaller_period(pts, 1e-7):
            continue
        pts = _canonical_rotation(pts)
        # compare with every rotation: rounding can make two copies of one cycle start at different points
        if any(np.allclose(np.roll(pts, shift, axis=0), other, atol=tol, rtol=tol)
               for other in kept for shift in range(period)):
            continue
        kept.append(pts)
    m = p.A.shape[0]
    if not kept:
        return np.zeros((0, period, m)), np.zeros((0, m), dtype=complex), np.zeros(0, dtype=bool)
    points = np.stack(kept)
    eig = _cycle_eigenvalues(p, points > 0)
    disputed = np.zeros(len(points), dtype=bool)
    for n in range(len(points)):
        eig[n], disputed[n] = _border_sides(p, points[n], eig[n], tol)
    return points, eig, disputed


def _cycle_eigenvalues(p: PLRNNParams, regions: np.ndarray) -> np.ndarray:
    """Sorted eigenvalues of F^k's Jacobian for cycles whose k points lie in ``regions`` (n, k, M):
    the product of the region maps along each cycle."""
    n, k, m = regions.shape
    prod = np.broadcast_to(np.eye(m), (n, m, m)).copy()
    for i in range(k):
        prod = _region_maps(p, regions[:, i]) @ prod
    return _sorted_eigenvalues(prod)


#: the most sides of a region border whose Jacobians are compared at a point on it
_MAX_SIDES = 64


def _border_sides(p: PLRNNParams, points: np.ndarray, eig: np.ndarray, tol: float) -> tuple[np.ndarray, bool]:
    """Eigenvalues of the least stable side of a cycle (k, M) that lies on region borders, and
    whether its sides disagree about stability.

    A coordinate within ``tol`` of 0 lies on the border of two regions, and the map's Jacobian
    differs on either side (``points > 0`` picks one arbitrarily): every combination of sides (at
    most ``_MAX_SIDES``, the rest drawn with a fixed seed) is compared.
    """
    on = np.flatnonzero((np.abs(points) <= tol * (1.0 + np.abs(points))).ravel())
    if on.size == 0:
        return eig, False
    k, m = points.shape
    combos = ((np.arange(2 ** on.size)[:, None] >> np.arange(on.size)[None]) & 1).astype(bool) \
        if on.size <= 6 else np.random.default_rng(0).random((_MAX_SIDES, on.size)) < 0.5
    sides = np.repeat((points > 0).reshape(1, -1), len(combos), axis=0)
    sides[:, on] = combos
    lam = _cycle_eigenvalues(p, sides.reshape(-1, k, m))
    radius = np.abs(lam).max(axis=1)
    stable = radius < 1.0 - _MARGINAL_TOL
    return lam[int(np.argmax(radius))], bool(stable.any() and not stable.all())


def _all_regions(m: int) -> np.ndarray:
    """Every sign pattern of M units, (2^M, M) bool."""
    return ((np.arange(2 ** m)[:, None] >> np.arange(m)[None]) & 1).astype(bool)


def _enumerate(p: PLRNNParams, period: int, tol: float, chunk: int = 65536) -> tuple[list[np.ndarray], int, int]:
    m = p.A.shape[0]
    regions = _all_regions(m)
    n_total = len(regions) ** period
    found, n_singular = [], 0
    index_iter = itertools.product(range(len(regions)), repeat=period)
    while True:
        block = np.fromiter(itertools.chain.from_iterable(itertools.islice(index_iter, chunk)), dtype=np.int64)
        if block.size == 0:
            break
        sol = _solve_in_chunks(p, regions[block.reshape(-1, period)], tol)
        found.append(sol["points"])
        n_singular += sol["n_singular"]
    return found, n_singular, n_total


def _simulate_regions(p: PLRNNParams, n_trajectories: int, n_steps: int, rng: np.random.Generator,
                      scale: float) -> np.ndarray:
    """Sign patterns visited by trajectories from random initial states, (n_trajectories, n_steps, M)."""
    m = p.A.shape[0]
    z = rng.normal(0.0, scale, size=(n_trajectories, m))
    visited = np.empty((n_trajectories, n_steps, m), dtype=bool)
    for t in range(n_steps):
        z = z * p.A + np.maximum(z, 0.0) @ p.W.T + p.h
        bad = ~np.all(np.isfinite(z), axis=1) | (np.abs(z).max(axis=1) > 1e8)
        if bad.any():                     # restart diverging trajectories instead of overflowing
            z[bad] = rng.normal(0.0, scale, size=(int(bad.sum()), m))
        visited[:, t] = z > 0
    return visited


def _search(p: PLRNNParams, period: int, tol: float, *, n_trajectories: int, n_steps: int, n_random: int,
            max_iter: int, max_candidates: int, rng: np.random.Generator, scale: float,
            deadline: float | None = None) -> tuple[list[np.ndarray], int, int, bool, bool]:
    """Returns the points found, singular count, tuples solved, truncated, and stopped by the deadline."""
    m = p.A.shape[0]
    visited = _simulate_regions(p, n_trajectories, n_steps, rng, scale)
    # candidate k-tuples: consecutive windows of visited patterns (a cycle visits its regions in order)
    windows = np.stack([visited[:, i: n_steps - period + 1 + i] for i in range(period)], axis=2)
    candidates = windows.reshape(-1, period, m)
    candidates = np.concatenate([candidates, rng.random((n_random, period, m)) < 0.5])
    flat, counts = np.unique(candidates.reshape(len(candidates), -1), axis=0, return_counts=True)
    candidates = flat.reshape(-1, period, m)
    if deadline is not None:
        # a search that may stop early solves the regions the runs spent most time in first
        candidates = candidates[np.lexsort((rng.random(len(counts)), -counts))]
    seen = {c.tobytes() for c in candidates}
    found, n_singular, n_tried, truncated, timed_out = [], 0, 0, False, False
    for _ in range(max_iter):
        if len(candidates) == 0:
            break
        if n_tried + len(candidates) > max_candidates:      # budget: keep a random part of this round
            keep = max(max_candidates - n_tried, 0)
            candidates = candidates[rng.permutation(len(candidates))[:keep]]
            truncated = True
            if keep == 0:
                break
        sol = _solve_in_chunks(p, candidates, tol, deadline)
        found.append(sol["points"])
        n_singular += sol["n_singular"]
        n_tried += sol["n_solved"]
        if sol["n_solved"] < len(candidates):
            truncated = timed_out = True
            break
        # inconsistent solutions propose the regions their points actually lie in
        proposals = sol["proposal"][sol["regular"]]
        # (n, period * m) spelt out: with every solve singular there are no proposals, and -1 is undefined
        fresh = [q for q in np.unique(proposals.reshape(len(proposals), period * m), axis=0).reshape(-1, period, m)
                 if q.tobytes() not in seen]
        if fresh and deadline is not None and time.perf_counter() >= deadline:
            truncated = timed_out = True     # regions proposed but never solved: the search is incomplete
            break
        seen.update(q.tobytes() for q in fresh)
        candidates = np.stack(fresh) if fresh else np.zeros((0, period, m), dtype=bool)
    return found, n_singular, n_tried, truncated, timed_out


def plrnn_cycles(model: Any, period: int = 1, *, method: str = "auto", max_enumerate: int = 2 ** 16,
                 n_trajectories: int = 50, n_steps: int = 300, n_random: int = 1000, max_iter: int = 20,
                 max_candidates: int = 50_000, init_scale: float = 1.0, tol: float = 1e-9,
                 u: np.ndarray | None = None, seed: int | np.random.Generator | None = None,
                 time_budget: float | None = None) -> FixedPoints:
    """Exact fixed points (``period=1``) or k-cycles of a PLRNN.

    Parameters
    ----------
    model : PLRNN, StateSpaceModel with PLRNN dynamics, fitted estimator, or PLRNNParams
        Inputs are taken as zero (autonomous system) unless ``u`` is given.
    period : int, default 1
        k; only cycles of minimal period exactly k are returned.
    method : {"auto", "enumerate", "search"}
        "enumerate" tries all ``2^(M k)`` region tuples; "search" seeds candidates from
        simulated trajectories and random patterns; "auto" enumerates when
        ``2^(M k) <= max_enumerate``.
    max_enumerate : int
        Largest number of region tuples "auto" enumerates.
    n_trajectories, n_steps : int
        Simulations (from N(0, init_scale^2) initial states) whose visited regions seed "search".
    n_random : int
        Additional random region tuples for "search".
    max_iter : int
        Rounds of the region iteration in "search".
    max_candidates : int
        Budget of region tuples "search" solves; when it is reached ``info["truncated"]`` is
        True and the result may be incomplete.
    tol : float
        Relative tolerance at region borders (consistency) and for deduplication.
    u : ndarray of shape (K,), optional
        A constant input; the fixed points are those of ``F(z) = A z + W relu(z) + C u + h``.
    seed : int or numpy Generator, optional
        For "search" only.
    time_budget : float, optional
        Seconds the "search" may take (None: no limit). No batch of solves starts after it is
        spent (a batch holds at most 128 MiB of matrices: at M = 300 a few tenths of a second);
        the regions the simulated runs visited most are solved first, and the result is marked
        ``info["truncated"]`` and ``info["timed_out"]``. For wide models, whose k-cycle searches
        take minutes (M = 300: about 20 minutes for k ≤ 4).

    Returns
    -------
    FixedPoints
        ``info`` holds ``n_candidates`` (region tuples tried), ``n_singular`` (tuples whose
        system ``I - J`` was singular: a continuum of solutions, e.g. an exact manifold
        attractor, or none; these are not reported as points), ``truncated`` (a budget cut the
        search short: objects may be missing), ``timed_out`` (the cut was the time budget) and
        ``seconds`` (the search's wall time).

    Notes
    -----
    Seed 004, eqs. 8 and 10. "search" can miss objects whose regions are never proposed;
    the count of candidates tried is reported so that coverage can be judged.
    """
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 1:
        raise ValueError(f"`period` must be an integer >= 1; got period={period!r}.")
    if method not in ("auto", "enumerate", "search"):
        raise ValueError(f"`method` must be 'auto', 'enumerate' or 'search'; got method={method!r}.")
    time_budget = check_number("time_budget", time_budget, allow_none=True)
    # a negative tol rejects every solution as off its region: "no fixed points", silently
    tol = check_number("tol", tol)
    max_enumerate = check_int("max_enumerate", max_enumerate, 1)
    n_trajectories, n_steps = check_int("n_trajectories", n_trajectories, 0), check_int("n_steps", n_steps, 1)
    n_random, max_iter = check_int("n_random", n_random, 0), check_int("max_iter", max_iter, 1)
    max_candidates = check_int("max_candidates", max_candidates, 1)
    init_scale = check_number("init_scale", init_scale, positive=True)
    t0 = time.perf_counter()
    deadline = None if time_budget is None else t0 + float(time_budget)
    p = _as_params(model, u)
    m = p.A.shape[0]
    n_tuples = 2 ** (m * int(period))          # an exact int: 2.0 ** 1200 (M = 300, k = 4) overflows
    if method == "auto":
        method = "enumerate" if n_tuples <= max_enumerate else "search"
    # many small batched solves and eigen-decompositions: one BLAS thread (dsident._threads)
    with one_blas_thread():
        if method == "enumerate":
            if n_tuples > 2 ** 26:
                raise ValueError(f"enumerating 2^(M k) = 2^{m * period} region tuples is too many; "
                                 "use method='search'.")
            found, n_singular, n_tried = _enumerate(p, int(period), tol)
            truncated = timed_out = False
        else:
            rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
            found, n_singular, n_tried, truncated, timed_out = _search(
                p, int(period), tol, n_trajectories=n_trajectories, n_steps=n_steps, n_random=n_random,
                max_iter=max_iter, max_candidates=max_candidates, rng=rng, scale=init_scale, deadline=deadline)
        sol = {"points": np.concatenate(found) if found else np.zeros((0, period, m))}
        points, eig, disputed = _unique_cycles(p, sol, int(period), max(tol, 1e-8))
    stable, kind = classify_eigenvalues(eig)
    kind = ["border" if d else k for k, d in zip(kind, disputed)]
    return FixedPoints(points=points, eigenvalues=eig, stable=stable, kind=kind, regions=points > 0,
                       period=int(period), method=method,
                       info={"n_candidates": int(n_tried), "n_singular": int(n_singular),
                             "truncated": bool(truncated), "timed_out": bool(timed_out), "tol": float(tol),
                             "seconds": float(time.perf_counter() - t0),
                             "seed": -1 if seed is None or isinstance(seed, np.random.Generator) else int(seed),
                             "package_version": __version__})


def cycles(model: Any, period: int, **options: Any) -> FixedPoints:
    """k-cycles of a PLRNN (``period >= 2``); see :func:`plrnn_cycles` for the options."""
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 2:
        raise ValueError(f"`period` must be an integer >= 2 (use fixed_points for 1); got period={period!r}.")
    return plrnn_cycles(model, period, **options)


# ----------------------------------------------------------------------------------------------
# Generic dynamics: Newton's method from many starts
# ----------------------------------------------------------------------------------------------
def _batched_jacobian(dyn: LatentDynamics | None, step: Callable, z: torch.Tensor,
                      dt: float | None = None, u: torch.Tensor | None = None) -> torch.Tensor:
    """d step / d z at each row of ``z``, shape (B, M, M); ``dt`` is the step ``step`` takes
    (an analytic ``jacobian`` of continuous-time dynamics needs it: without it, it is taken
    over one time unit), ``u`` the constant input (K,) it is taken at."""
    if dyn is not None and type(dyn).jacobian is not LatentDynamics.jacobian:
        return dyn.jacobian(z, None if u is None else u.expand(len(z), -1), dt)
    return torch.func.vmap(torch.func.jacrev(lambda zi: step(zi[None])[0]))(z)


def off_graph(value: Any) -> Any:
    """``value`` detached and on the CPU when it is a torch tensor (a Parameter, a slice of a
    model's output, a GPU tensor), so that ``np.asarray`` takes it; anything else as it is."""
    return value.detach().cpu() if isinstance(value, torch.Tensor) else value


def _constant_input(dyn: LatentDynamics, u: Any) -> torch.Tensor | None:
    """``u`` as a float64 (1, K) tensor for ``dyn``'s steps, checked against its ``input_dim``."""
    if u is None:
        return None
    k = int(getattr(dyn, "input_dim", 0))
    if k == 0:
        raise ValueError(f"`u`={u!r} was given, but {type(dyn).__name__} takes no inputs (input_dim 0).")
    arr = np.asarray(u.detach().cpu() if isinstance(u, torch.Tensor) else u, dtype=float)
    if arr.size != k or arr.ndim > 2 or (arr.ndim == 2 and 1 not in arr.shape) or not np.isfinite(arr).all():
        raise ValueError(f"`u` must be a finite constant input of shape ({k},); got {u!r}.")
    return torch.as_tensor(arr.reshape(1, k), dtype=torch.float64)


def _check_finite_starts(starts: np.ndarray) -> None:
    """Refuse starts with NaN or inf: Newton cannot move them, and they came back as "no fixed points"."""
    bad = ~np.isfinite(starts).all(axis=1)
    if bad.any():
        raise ValueError(f"`starts` must be finite; {int(bad.sum())} of its {len(starts)} rows hold NaN or inf "
                         f"(the first is row {int(np.flatnonzero(bad)[0])}). Drop them, e.g. starts[np.isfinite(starts)"
                         ".all(axis=1)].")


def newton_fixed_points(model: Any, *, starts: np.ndarray | None = None, n_starts: int = 200,
                        init_scale: float = 1.0, dt: float | None = None, max_iter: int = 100,
                        patience: int = 10, tol: float = 1e-9, speed_threshold: float = 1e-6, dedup_tol: float = 1e-5,
                        seed: int | None = None, root_check: bool = True, u: Any = None) -> FixedPoints:
    """Fixed points of any dynamics by damped Newton iteration on ``G(z) = step(z) - z``.

    Parameters
    ----------
    model : LatentDynamics, StateSpaceModel, fitted estimator, or callable
        A callable maps a (B, M) float64 tensor to (B, M) (``latent_dim`` must then be
        inferable from ``starts``).
    starts : ndarray of shape (n_starts, M), optional
        Initial guesses, e.g. latent states visited by a simulation. Default: ``n_starts``
        draws from N(0, init_scale^2).
    dt : float, optional
        Step passed to ``step`` (continuous-time models); a StateSpaceModel's ``dt`` by default.
        Refused for a plain callable, which is called as ``model(z)``.
    max_iter : int
        Newton iterations.
    patience : int
        A start is abandoned after this many iterations without a decrease of its residual.
    tol : float
        Stop a start once ``max |G(z)|`` falls below it.
    speed_threshold : float
        Keep a converged point only if ``||step(z) - z||_2 < speed_threshold``.
    dedup_tol : float
        Points closer than this (Euclidean) are merged.
    seed : int, optional
    root_check : bool
        Keep a point only if its next Newton step is shorter than ``dedup_tol``, i.e. it is the
        root it converged to, not a slow point where Newton stalled: ``speed_threshold`` bounds
        ``step(z) - z``, which for a flow is ``dt`` times its speed, so a small ``dt`` let the
        stalled points of a gnODE (at a kink of its relu layers, the run passing by and leaving)
        through as "stable nodes". False keeps every point under ``speed_threshold``.
    u : array_like of shape (K,), optional
        A constant input held at every step (a model fitted with ``input_dim`` K); the fixed
        points are those of ``step(z, u)``, as :func:`plrnn_cycles`' ``u`` for a PLRNN. Default:
        none (a model with inputs then steps with zero input). Refused for a plain callable and
        for a model without inputs.

    Returns
    -------
    FixedPoints
        ``method="newton"``; eigenvalues are those of the Jacobian of ``step`` (so a fixed
        point of a continuous-time model is stable iff they lie inside the unit circle).
    """
    if callable(model) and not isinstance(model, torch.nn.Module) and not hasattr(model, "model_"):
        if dt is not None:      # a plain callable is called as model(z): a step would be dropped unused
            raise ValueError(f"`dt`={dt!r} applies to a model's dynamics; a plain callable is called as model(z) and "
                             "takes none. Close over the step instead: lambda z: f(z, dt).")
        if u is not None:
            raise ValueError(f"`u`={u!r} applies to a model's dynamics; a plain callable is called as model(z) and "
                             "takes none. Close over the input instead: lambda z: f(z, u).")
        dyn, step_dt = None, dt
        if starts is None:
            raise ValueError("`starts` is required when `model` is a plain callable (latent_dim is unknown).")
        m = int(np.asarray(off_graph(starts)).shape[1])
        base_step = model
    else:
        dyn, step_dt = resolve_dynamics(model, dt)
        if dt is not None:
            check_run_step(dyn, dt, resolve_dynamics(model)[1])
        m = dyn.latent_dim
        base_step = None
    max_iter, patience = check_int("max_iter", max_iter, 1), check_int("patience", patience, 1)
    tol, dedup_tol = check_number("tol", tol), check_number("dedup_tol", dedup_tol)
    speed_threshold = check_number("speed_threshold", speed_threshold, positive=True)
    if starts is None:
        n_starts = check_int("n_starts", n_starts, 1)
        init_scale = check_number("init_scale", init_scale, positive=True)
        starts = np.random.default_rng(seed).normal(0.0, init_scale, size=(int(n_starts), m))
    starts = np.asarray(off_graph(starts), dtype=float)
    if starts.ndim != 2 or starts.shape[1] != m:
        raise ValueError(f"`starts` must have shape (n_starts, {m}); got {starts.shape}.")
    _check_finite_starts(starts)

    u_t = None if dyn is None else _constant_input(dyn, u)
    if dyn is not None:
        dyn_work = copy.deepcopy(dyn).double()   # float64 Newton without touching the user's model

        def step(z: torch.Tensor) -> torch.Tensor:
            return dyn_work.step(z, None if u_t is None else u_t.expand(len(z), -1), step_dt)
    else:
        def step(z: torch.Tensor) -> torch.Tensor:
            return base_step(z)
    with torch.no_grad():
        z = torch.tensor(starts, dtype=torch.float64)          # a copy: the caller's starts stay as given
        eye = torch.eye(m, dtype=torch.float64)
        best = torch.full((len(z),), float("inf"), dtype=torch.float64)
        stalled = torch.zeros(len(z), dtype=torch.long)
        for _ in range(max_iter):
            g = step(z) - z
            res = g.abs().amax(dim=1)
            # a start whose residual has not improved for `patience` iterations is abandoned
            # (Newton can cycle between linear regions of a piecewise-linear map)
            improved = res < best * (1.0 - 1e-3)
            stalled = torch.where(improved, torch.zeros_like(stalled), stalled + 1)
            best = torch.minimum(best, res)
            active = torch.isfinite(res) & (res > tol) & (stalled < patience)
            if not active.any():
                break
            za, ga = z[active], g[active]
            jac = _batched_jacobian(dyn_work if dyn is not None else None, step, za, step_dt, u_t) - eye
            delta = torch.linalg.lstsq(jac, -ga[..., None]).solution[..., 0]
            # backtracking: halve the step while the residual grows (at most 10 times)
            lam = torch.ones(len(za), 1, dtype=torch.float64)
            norm0 = ga.norm(dim=1)
            for _ in range(10):
                trial = za + lam * delta
                worse = ~((step(trial) - trial).norm(dim=1) < norm0)
                if not worse.any():
                    break
                lam[worse] *= 0.5
            z[active] = za + lam * delta
        g = step(z) - z
        speed = g.norm(dim=1)
        keep = torch.isfinite(speed) & (speed < speed_threshold)
        if root_check and keep.any():
            # a slow point is not a root: where Newton stalled (at a kink of a relu flow, say) the
            # displacement can be below speed_threshold (it scales with a flow's dt) while the
            # linearisation puts the root, if any, far away. Keep a point only when its next
            # Newton step is shorter than dedup_tol: the root it converged to is this point.
            zk = z[keep]
            jac_k = _batched_jacobian(dyn_work if dyn is not None else None, step, zk, step_dt, u_t) - eye
            delta = torch.linalg.lstsq(jac_k, -g[keep][..., None]).solution[..., 0]
            keep[keep.clone()] = delta.norm(dim=1) < dedup_tol
        cand = z[keep].numpy()
        points: list[np.ndarray] = []
        for c in cand:
            if not any(np.linalg.norm(c - q) < dedup_tol for q in points):
                points.append(c)
        pts = np.stack(points) if points else np.zeros((0, m))
        if len(pts):
            jac = _batched_jacobian(dyn_work if dyn is not None else None, step,
                                    torch.as_tensor(pts, dtype=torch.float64), step_dt, u_t).numpy()
            eig = _sorted_eigenvalues(jac)
        else:
            eig = np.zeros((0, m), dtype=complex)
    stable, kind = classify_eigenvalues(eig)
    return FixedPoints(points=pts[:, None, :], eigenvalues=eig, stable=stable, kind=kind, regions=None,
                       period=1, method="newton",
                       info={"n_starts": int(len(starts)), "n_converged": int(keep.sum()),
                             "speed_threshold": float(speed_threshold), "tol": float(tol),
                             "seed": -1 if seed is None else int(seed), "package_version": __version__})


def fixed_points(model: Any, *, method: str = "auto", **options: Any) -> FixedPoints:
    """Fixed points of a fitted model, exact for the PLRNN and by Newton's method otherwise.

    Parameters
    ----------
    model : fitted estimator, StateSpaceModel, LatentDynamics or PLRNNParams
    method : {"auto", "enumerate", "search", "newton"}
        "auto": exact (:func:`plrnn_cycles`) for a PLRNN, :func:`newton_fixed_points` otherwise.
    **options
        Passed to the chosen routine.

    Returns
    -------
    FixedPoints
    """
    if method not in ("auto", "enumerate", "search", "newton"):
        raise ValueError(f"`method` must be one of 'auto', 'enumerate', 'search', 'newton'; got method={method!r}.")
    if isinstance(model, PLRNNParams):
        is_plrnn = True
    else:
        dyn, _ = resolve_dynamics(model)
        is_plrnn = isinstance(dyn, PLRNN)
    if method == "newton" or (method == "auto" and not is_plrnn):
        return newton_fixed_points(model, **options)
    return plrnn_cycles(model, 1, method=method, **options)
