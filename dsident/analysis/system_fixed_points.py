"""The true system's fixed points, in the data's channels, beside a reconstruction's.

A reconstruction of Lorenz-63 should have Lorenz's three saddles where Lorenz has them; one of
the bursting neuron should have its resting state. :func:`system_fixed_points` finds the zeros of
the vector field of the system named by a simulated benchmark set (its ``provenance``) and
carries them through the set's preprocessing (the z-score) into the units of the data's
channels. :func:`match_fixed_points` pairs them with the fixed points a model's observation
model reads out (:attr:`dsident.analysis.DynamicsReport.fixed_point_observations`).

Shape legend: ``n`` true fixed points, ``m`` model fixed points, ``D`` system dimension,
``N`` observed channels.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from .fixed_points import classify_eigenvalues

__all__ = ["SystemFixedPoints", "system_fixed_points", "FixedPointMatch", "match_fixed_points"]


@dataclass
class SystemFixedPoints:
    """Zeros of a benchmark system's vector field.

    Attributes
    ----------
    system : str
        Registry name of the system (:func:`dsident.data.systems.get_system`).
    state : ndarray of shape (n, D)
        The fixed points in the system's own variables and units.
    eigenvalues : complex ndarray of shape (n, D)
        Eigenvalues of the vector field's Jacobian there (1 / time unit), largest real part first.
    kind : list of str, length n
        Type of each point *as a fixed point of the sampled map* ``x ↦ φ_dt(x)``, whose Jacobian
        eigenvalues are ``exp(λ dt)``: the same words (:func:`classify_eigenvalues`) as a
        reconstruction's fixed points, so the two can be compared.
    stable : bool ndarray of shape (n,)
    channels : ndarray of shape (n, N) or None
        The fixed points in the data's channels, after the data's preprocessing (the z-score);
        None when the data do not observe the system's variables directly (e.g. spike counts
        driven by a latent Lorenz system).
    channel_names : list of str
        The system's variable names (also the data's channels when ``channels`` is given).
    dt : float
        The data's sampling step (time units).
    """

    system: str
    state: np.ndarray
    eigenvalues: np.ndarray
    kind: list[str]
    stable: np.ndarray
    channels: np.ndarray | None
    channel_names: list[str]
    dt: float
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(len(self.state))


def system_fixed_points(data: Any, *, n_starts: int = 200, seed: int = 0, residual_tol: float = 1e-8,
                        dedup_tol: float = 1e-6) -> SystemFixedPoints:
    """Fixed points of the true system behind a simulated benchmark set.

    Newton-type root finding (:func:`scipy.optimize.root`, the system's analytic Jacobian) on
    ``dx/dt = f(x)`` from states of the data (carried back through the z-score) and from
    Gaussian draws around them, so fixed points off the attractor are found too.

    Parameters
    ----------
    data : str or xarray.Dataset
        A shipped set's name (``"lorenz63"``, ``"bursting_neuron"``) or a dataset whose
        ``attrs["provenance"]`` names a system of :mod:`dsident.data.systems`.
    n_starts : int
        Starting states; half from the data, half from a Gaussian twice the data's spread.
    seed : int
        Seed of the starting states.
    residual_tol : float
        Keep a root only if ``max |f(x)| / state_scale`` falls below this (1 / time unit).
    dedup_tol : float
        Roots closer than this (relative to the system's ``state_scale``) are merged.

    Returns
    -------
    SystemFixedPoints
        Sorted by the first state variable.

    Raises
    ------
    ValueError
        When the data name no deterministic autonomous system (a recording, or the ECG), or
        ``n_starts`` is not a positive integer.
    """
    from ._resolve import resolve_benchmark_system

    if isinstance(data, str):
        from ..datasets import load

        data = load(data, split="test")     # its channels and z-score are needed below
    if isinstance(n_starts, bool) or not isinstance(n_starts, (int, np.integer)) or n_starts < 1:
        raise ValueError(f"`n_starts` must be a positive integer; got {n_starts!r}.")
    for name, value in (("residual_tol", residual_tol), ("dedup_tol", dedup_tol)):
        # a negative tolerance kept no root: "no fixed points" for the Lorenz system, without a word
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not np.isfinite(value) or value <= 0:
            raise ValueError(f"`{name}` must be a positive finite number (in units of the state scale); got {value!r}.")
    system, _, dt = resolve_benchmark_system(data)
    name = system.name
    probe = np.asarray(system.default_x0, dtype=float)
    if not np.allclose(system.rhs(0.0, probe), system.rhs(0.377, probe)):
        raise ValueError(f"`data` names the system {name!r}, whose vector field changes with time; a fixed point "
                         "needs an autonomous system.")
    names = [str(c) for c in system.channel_names]
    to_state = _channel_map(data, names)
    scale = np.asarray(system.state_scale, dtype=float)

    rng = np.random.default_rng(seed)
    if to_state is not None:
        x = np.asarray(data["x"].values, dtype=float).reshape(-1, len(names))
        x = x[np.isfinite(x).all(axis=1)]
        visited = x * to_state[1] + to_state[0] if len(x) else np.zeros((0, system.dim))
    else:
        visited = np.zeros((0, system.dim))
    if not len(visited):    # the variables are not observed: the attractor's typical size instead
        visited = np.asarray(system.default_x0, dtype=float) + scale * rng.standard_normal((n_starts, system.dim))
    from_data = visited[rng.integers(0, len(visited), size=(n_starts + 1) // 2)]
    around = visited.mean(axis=0) + 2.0 * visited.std(axis=0) * rng.standard_normal((n_starts // 2, system.dim))

    found: list[np.ndarray] = []
    for start in np.concatenate([from_data, around]):
        sol = optimize.root(lambda v: system.rhs(0.0, v), start, jac=lambda v: system.jacobian(v), method="hybr")
        root = np.asarray(sol.x, dtype=float)
        if not np.isfinite(root).all() or np.max(np.abs(system.rhs(0.0, root)) / scale) > residual_tol:
            continue
        if all(np.max(np.abs(root - other) / scale) > dedup_tol for other in found):
            found.append(root)
    state = np.array(sorted(found, key=lambda p: tuple(p)), dtype=float).reshape(-1, system.dim)
    eig = np.array([_sorted(np.linalg.eigvals(system.jacobian(p))) for p in state],
                   dtype=complex).reshape(-1, system.dim)
    stable, kind = classify_eigenvalues(np.exp(eig * dt))
    channels = None if to_state is None else (state - to_state[0]) / to_state[1]
    return SystemFixedPoints(system=name, state=state, eigenvalues=eig, kind=kind, stable=stable, channels=channels,
                             channel_names=names, dt=dt, info={"n_starts": int(n_starts), "seed": int(seed)})


@dataclass
class FixedPointMatch:
    """Which model fixed point stands for which true one.

    Attributes
    ----------
    paired : int ndarray of shape (n,)
        Index of the model fixed point paired with each true one (-1 when none is left: the
        model has fewer fixed points than the system). The pairing is one to one and minimises
        the summed distance.
    distance : ndarray of shape (n,)
        Distance to the paired point, Euclidean in units of the data's per-channel standard
        deviation (inf when unpaired).
    matched : bool ndarray of shape (n,)
        ``distance <= tol``.
    spurious : int ndarray
        Model fixed points not matched to any true one.
    tol : float
    """

    paired: np.ndarray
    distance: np.ndarray
    matched: np.ndarray
    spurious: np.ndarray
    tol: float

    def summary(self) -> str:
        """One phrase, e.g. ``"3 of 3 true fixed points matched within 0.5 sd (largest distance 0.42); 1 spurious"``."""
        n = len(self.distance)
        text = f"{int(self.matched.sum())} of {n} true fixed points matched within {self.tol:g} sd"
        if self.matched.any():
            text += f" (largest distance {float(self.distance[self.matched].max()):.2g})"
        return text + f"; {len(self.spurious)} spurious"


def match_fixed_points(true_points: Any, model_points: Any, *, scale: Any = None, tol: float = 0.5) -> FixedPointMatch:
    """Pair true fixed points with a model's, both in the data's channels.

    Parameters
    ----------
    true_points : array of shape (n, N)
        E.g. :attr:`SystemFixedPoints.channels`.
    model_points : array of shape (m, N)
        E.g. :attr:`DynamicsReport.fixed_point_observations` (the observation model's mean at
        each of the model's fixed points).
    scale : array of shape (N,), optional
        Per-channel unit of distance, e.g. the data's standard deviation; ones by default
        (z-scored data).
    tol : float
        A true fixed point counts as matched when its paired model fixed point lies within
        ``tol`` (Euclidean, in units of ``scale``); model fixed points not matched are spurious.
        Lorenz-63's three fixed points lie 2.9–3.4 sd apart in z-units.

    Returns
    -------
    FixedPointMatch
    """
    true = np.asarray(true_points, dtype=float)
    model = np.asarray(model_points, dtype=float)
    if true.ndim != 2:
        raise ValueError(f"`true_points` must have shape (n, channel); got {true.shape}.")
    if model.ndim != 2 or model.shape[1] != true.shape[1]:
        raise ValueError(f"`model_points` must have shape (m, {true.shape[1]}) to match `true_points`; "
                         f"got {model.shape}.")
    for name, points in (("true_points", true), ("model_points", model)):
        bad = ~np.isfinite(points).all(axis=1)
        if bad.any():     # scipy's assignment refused them as "matrix contains invalid numeric entries"
            raise ValueError(f"`{name}` must be finite; row {int(np.flatnonzero(bad)[0])} is {points[bad][0]!r}.")
    unit = np.ones(true.shape[1]) if scale is None else np.asarray(scale, dtype=float)
    if unit.shape != (true.shape[1],) or not np.all(np.isfinite(unit) & (unit > 0)):
        raise ValueError(f"`scale` must hold {true.shape[1]} positive finite values; got {scale!r}.")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be a positive distance; got {tol!r}.")
    paired = np.full(len(true), -1)
    distance = np.full(len(true), np.inf)
    if len(model) and len(true):
        dist = np.linalg.norm((true[:, None, :] - model[None, :, :]) / unit, axis=-1)
        # one model fixed point stands for at most one true one: the pairing of least total distance
        rows, cols = optimize.linear_sum_assignment(dist)
        paired[rows], distance[rows] = cols, dist[rows, cols]
    matched = distance <= tol
    spurious = np.setdiff1d(np.arange(len(model)), paired[matched])
    return FixedPointMatch(paired=paired.astype(int), distance=distance, matched=matched,
                           spurious=spurious.astype(int), tol=float(tol))


def _channel_map(data: Any, names: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mean, std)`` with ``state = channel · std + mean`` when the data's channels are the system's
    variables, z-scored or raw; None when they are something else (counts, delay embeddings)."""
    channels = [str(c) for c in data["channel"].values]
    if channels != names:
        return None
    from ..data.preprocessing import preprocessing_steps

    try:
        steps = preprocessing_steps(data)
    except (TypeError, ValueError):     # a malformed record: the channels cannot be trusted
        return None
    if not steps:
        return np.zeros(len(names)), np.ones(len(names))
    if len(steps) == 1 and steps[0].get("step") == "zscore" and list(steps[0].get("channel", [])) == names:
        return np.asarray(steps[0]["mean"], dtype=float), np.asarray(steps[0]["std"], dtype=float)
    return None


def _sorted(values: np.ndarray) -> np.ndarray:
    return values[np.argsort(-values.real, kind="stable")]
