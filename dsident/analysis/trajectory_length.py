"""Trajectory length: the LTC paper's expressivity measure, for any latent dynamics.

A circular 2-D input ``u(t) = (sin t, cos t)``, ``t in [0, 2 pi]``, drives the dynamics; the
latent trajectory is projected onto its first two principal components and its arc length
(the sum of chord lengths between consecutive samples) is compared with the input's own
length (Hasani et al. 2021, Section 5.1; seed ``001_ltc.md`` sections 3.1 and 3.7).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ._resolve import resolve_dynamics

__all__ = ["TrajectoryLength", "trajectory_length", "circle_input", "arc_length"]


@dataclass
class TrajectoryLength:
    """Result of :func:`trajectory_length`.

    Attributes
    ----------
    length : float
        Arc length of the latent trajectory in the plane of its first two principal components
        (latent units).
    input_length : float
        Arc length of the sampled input circle (close to ``2 pi``).
    explained_variance : ndarray of shape (2,)
        Fractions of the latent variance carried by the two components.
    projection : ndarray of shape (time, 2)
        The principal-component scores.
    states : ndarray of shape (time, latent)
        The latent trajectory.
    settings : dict
        ``n_samples``, ``dt``, ``input_scale``.
    """

    length: float
    input_length: float
    explained_variance: np.ndarray
    projection: np.ndarray
    states: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        """``length / input_length``: how much the dynamics stretch the input trajectory."""
        return self.length / self.input_length


def circle_input(n_samples: int = 100, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The input circle ``scale * (sin t, cos t)`` on ``n_samples`` points of ``[0, 2 pi]``.

    Returns
    -------
    t : ndarray of shape (time,)
    u : ndarray of shape (time, 2)
    """
    if not isinstance(n_samples, int) or n_samples < 3:
        raise ValueError(f"`n_samples` must be an integer >= 3; got {n_samples!r}.")
    t = np.linspace(0.0, 2.0 * math.pi, n_samples)
    return t, scale * np.stack([np.sin(t), np.cos(t)], axis=1)


def arc_length(points: np.ndarray) -> float:
    """Sum of the Euclidean distances between consecutive rows of ``points`` (time, dim)."""
    points = np.asarray(points, dtype=float)
    if points.ndim != 2:
        raise ValueError(f"`points` must have shape (time, dim); got shape {points.shape}.")
    return float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())


def trajectory_length(model: Any, *, n_samples: int = 100, input_scale: float = 1.0, z0: Any = None,
                      dt: float | None = None, warmup: int = 0) -> TrajectoryLength:
    """Arc length of the 2-PC projection of the latent response to a circular input.

    Parameters
    ----------
    model : LatentDynamics, StateSpaceModel or fitted estimator
        Must take at least two inputs (``input_dim >= 2``); the circle drives the first two
        input channels and the others are held at zero.
    n_samples : int
        Number of input samples on ``[0, 2 pi]`` (100 in the paper's code).
    input_scale : float
        Radius of the input circle.
    z0 : array of shape (latent,), optional
        Initial latent state (zeros, as in the paper's code).
    dt : float, optional
        Step passed to ``step``; default ``2 pi / (n_samples - 1)``, the input sampling interval,
        so a continuous-time model sees the circle at its true speed.
    warmup : int
        Number of extra laps of the circle run (and discarded) before measuring, to remove the
        transient from ``z0``.

    Returns
    -------
    TrajectoryLength
    """
    dyn, _ = resolve_dynamics(model, None)
    if getattr(dyn, "input_dim", 0) < 2:
        raise ValueError(f"trajectory_length needs dynamics with input_dim >= 2 (a 2-D circle drives them); "
                         f"got input_dim={getattr(dyn, 'input_dim', 0)}.")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"`warmup` must be a non-negative integer; got {warmup!r}.")
    _, circle = circle_input(n_samples, input_scale)
    step_dt = 2.0 * math.pi / (n_samples - 1) if dt is None else float(dt)
    work = copy.deepcopy(dyn).double()
    m, k = work.latent_dim, work.input_dim
    u = torch.zeros(n_samples, 1, k, dtype=torch.float64)
    u[:, 0, :2] = torch.as_tensor(circle)
    z = torch.zeros(1, m, dtype=torch.float64) if z0 is None else torch.as_tensor(
        np.asarray(z0, dtype=float).reshape(1, m))
    states = []
    with torch.no_grad():
        for lap in range(warmup + 1):
            for i in range(n_samples):
                if lap == warmup:
                    states.append(z[0].numpy().copy())
                z = work.step(z, u[i], step_dt)
    traj = np.stack(states)
    if not np.isfinite(traj).all():
        raise FloatingPointError("trajectory_length: the latent trajectory diverged (non-finite states).")
    centred = traj - traj.mean(axis=0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    n_pc = min(2, vt.shape[0])
    scores = centred @ vt[:n_pc].T
    if n_pc < 2:
        scores = np.concatenate([scores, np.zeros((len(scores), 2 - n_pc))], axis=1)
    total = float((sing ** 2).sum())
    explained = np.zeros(2)
    if total > 0:
        explained[:n_pc] = sing[:n_pc] ** 2 / total
    return TrajectoryLength(length=arc_length(scores), input_length=arc_length(circle),
                            explained_variance=explained, projection=scores, states=traj,
                            settings={"n_samples": n_samples, "dt": step_dt, "input_scale": float(input_scale),
                                      "warmup": warmup})
