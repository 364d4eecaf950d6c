"""Which EM iterate to keep: the free-run check behind ``select="bounded"``.

The paper's protocol keeps each annealing stage's highest-likelihood parameters. On data with
fast, strongly expanding events (the bursting neuron's spikes) the low-noise stages can make
the fitted map expansive enough that its free run leaves the data's range, although the
likelihood, which only ever sees one-step transitions near the data, keeps rising. The check
here runs every candidate's noise-free map from a few initial states and says which ones stay
within a widened box around the data, so that the fit can keep the best *bounded* iterate.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .params import PLRNNParams

__all__ = ["DataBox", "data_box", "free_run_exit", "free_run_observations"]


class _BatchedMap:
    """The noise-free, input-free maps of P candidates run together from S initial states each.

    ``z`` has shape (P, S, M); :meth:`step` applies ``z ← A∘z + W φ(z) + h`` and
    :meth:`mean_observation` gives (P, S, N): ``B g(z) + b``, or its ``exp`` for Poisson counts,
    or its logistic for Bernoulli probabilities.
    """

    def __init__(self, candidates: Sequence[PLRNNParams], z0: np.ndarray) -> None:
        P = len(candidates)
        self.A = np.stack([c.A for c in candidates])[:, None, :]        # (P, 1, M)
        self.Wt = np.stack([c.W.T for c in candidates])                 # (P, M, M)
        self.h = np.stack([c.h for c in candidates])[:, None, :]        # (P, 1, M)
        self.Bt = np.stack([c.B.T for c in candidates])                 # (P, M, N)
        self.b = np.stack([c.b for c in candidates])[:, None, :]        # (P, 1, N)
        self.relu_readout = candidates[0].readout == "relu"
        self.likelihood = candidates[0].likelihood
        M = self.A.shape[2]
        z0 = np.asarray(z0, dtype=float)
        if z0.ndim == 2:
            z0 = np.broadcast_to(z0, (P,) + z0.shape)
        if z0.ndim != 3 or z0.shape[0] != P or z0.shape[2] != M:
            raise ValueError(f"`z0` must have shape (S, {M}) or ({P}, S, {M}); got {z0.shape}")
        self.z = z0.copy()

    def step(self) -> None:
        self.z = self.A * self.z + np.matmul(np.maximum(self.z, 0.0), self.Wt) + self.h

    def mean_observation(self) -> np.ndarray:
        g = np.maximum(self.z, 0.0) if self.relu_readout else self.z
        eta = np.matmul(g, self.Bt) + self.b
        if self.likelihood == "poisson":
            return np.exp(eta)                                          # expected counts per bin
        if self.likelihood == "bernoulli":
            return 1.0 / (1.0 + np.exp(-eta))
        return eta


class DataBox(NamedTuple):
    """Per-channel bounds a bounded free run must stay within.

    Attributes
    ----------
    lo, hi : ndarray (N,)
        The observed range widened by ``margin`` times its width on each side (data units).
    """

    lo: np.ndarray
    hi: np.ndarray


def data_box(x: np.ndarray, mask: np.ndarray, margin: float = 1.0, min_width: float = 0.0) -> DataBox:
    """The box ``[min − margin·range, max + margin·range]`` of the observed samples, per channel.

    Parameters
    ----------
    x : ndarray (n, N)
        Observations (values under ``mask == False`` are ignored).
    mask : ndarray (n, N) of bool
        True = observed.
    margin : float
        Widening in units of each channel's observed range; must be ≥ 0.
    min_width : float
        Smallest range a channel is given: 1 for counts, so that a silent neuron (all 0) admits
        the small expected counts of a fitted low rate instead of a box of width ~0 that every
        free run leaves.
    """
    if not np.isfinite(margin) or margin < 0:
        raise ValueError(f"`bound_margin` must be a finite number >= 0; got {margin!r}")
    if not mask.any(axis=0).all():
        raise ValueError("every channel needs at least one observed sample to define the data's range")
    lo = np.where(mask, x, np.inf).min(axis=0)
    hi = np.where(mask, x, -np.inf).max(axis=0)
    # a constant channel still gets a box of nonzero width
    width = np.maximum(hi - lo, np.maximum(1e-6 * np.maximum(1.0, np.abs(hi)), min_width))
    return DataBox(lo - margin * width, hi + margin * width)


def free_run_exit(candidates: Sequence[PLRNNParams], z0: np.ndarray, box: DataBox, n_steps: int,
                  check_every: int = 10, latent_box: DataBox | None = None) -> np.ndarray:
    """Run each candidate's noise-free, input-free map and report when its observation leaves ``box``.

    All candidates (same M and readout) run together as one batched recursion
    ``z ← A∘z + W φ(z) + h`` from every initial state in ``z0``; the mean observation
    (``B g(z) + b``; ``exp`` of it for Poisson counts) is checked against the box every
    ``check_every`` steps and at the end. For Bernoulli observations, whose mean is bounded
    anyway, only a non-finite state counts as leaving.

    Parameters
    ----------
    candidates : sequence of PLRNNParams, length P
        Parameter sets with a common latent dimension M and readout.
    z0 : ndarray (S, M) or (P, S, M)
        Initial latent states (e.g. μ0 and each trial's smoothed first state), shared by all
        candidates or one set per candidate.
    box : DataBox
        Bounds per channel.
    n_steps : int
        Length of the free run (time steps).
    check_every : int
        Steps between checks; a non-finite state is caught at the next check.
    latent_box : DataBox, optional
        Bounds (M,) on the latent state itself. With a ReLU readout a unit can run off to −∞
        while the observation stays put (it is rectified away); such a state overflows
        eventually, so it counts as leaving too.

    Returns
    -------
    ndarray (P,) of int
        For each candidate, the first checked step at which some run was outside the box or
        non-finite, or ``-1`` if every run stayed inside for ``n_steps`` steps.
    """
    if n_steps < 1 or check_every < 1:
        raise ValueError(f"`check_steps` and `check_every` must be >= 1; got {n_steps} and {check_every}")
    P = len(candidates)
    if P == 0:
        return np.zeros(0, dtype=int)
    run = _BatchedMap(candidates, z0)
    exit_step = np.full(P, -1, dtype=int)
    live = np.ones(P, dtype=bool)

    def check(step: int) -> None:
        x = run.mean_observation()                                      # (P, S, N)
        if run.likelihood == "bernoulli":
            # probabilities are bounded anyway: only a non-finite latent state counts as an exit
            x = np.where(np.isfinite(x), 0.5 * (box.lo + box.hi), x)
        inside = np.isfinite(x) & (x >= box.lo) & (x <= box.hi)
        bad = ~np.all(inside, axis=(1, 2))
        if latent_box is not None:
            z = run.z
            bad |= ~np.all(np.isfinite(z) & (z >= latent_box.lo) & (z <= latent_box.hi), axis=(1, 2))
        new = bad & live
        exit_step[new] = step
        live[new] = False

    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(1, n_steps + 1):
            run.step()
            if t % check_every == 0 or t == n_steps:
                check(t)
                if not live.any():
                    break
    return exit_step


def free_run_observations(candidates: Sequence[PLRNNParams], z0: np.ndarray, n_steps: int) -> np.ndarray:
    """The mean observations of each candidate's noise-free, input-free free run.

    Parameters
    ----------
    candidates : sequence of PLRNNParams, length P
        Parameter sets with a common latent dimension M, readout and likelihood.
    z0 : ndarray (S, M) or (P, S, M)
        Initial latent states.
    n_steps : int
        Steps recorded after the initial state.

    Returns
    -------
    ndarray (P, S, n_steps, N)
        ``B g(z_t) + b`` (its ``exp`` for Poisson, logistic for Bernoulli) for t = 1..n_steps;
        non-finite where a run overflowed.
    """
    if n_steps < 1:
        raise ValueError(f"`n_steps` must be >= 1; got {n_steps}")
    run = _BatchedMap(candidates, z0)
    out = np.empty(run.z.shape[:2] + (n_steps, run.Bt.shape[2]))
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n_steps):
            run.step()
            out[:, :, t] = run.mean_observation()
    return out
