"""Long-memory benchmark tasks as datasets: the addition and multiplication problems.

Seed 004 (rPLRNN paper), section 3.1 / Suppl. 6.1.7: each trial presents two input channels
for ``T`` steps. Channel ``value`` holds numbers drawn from U[0, 1]; channel ``marker`` is zero
except for two ones, at a random time ``t1 < 10`` and a random time ``t2 < T/2`` (redrawn
until ``t1 != t2``). The target, scored only at the last step, is the sum (addition) or the
product (multiplication) of the two marked values, so every trial needs a memory of at least
T/2 steps.

Layout (so that any dsident engine can train on it): the dataset has ``T + 1`` time steps.
Index 0 is the initial state (no input; under :class:`dsident.StateSpaceModel` the input at a
step drives the transition *into* that step, so the first input would be unused) and the
inputs ``s_1 .. s_T`` occupy indices ``1 .. T``. ``x(trial, time, channel="target")`` is NaN
(missing, hence masked out of every loss) except at the last step, which holds the target.
"""
from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .container import as_dataset

__all__ = ["addition_problem", "multiplication_problem", "fraction_correct", "CORRECT_THRESHOLD"]

#: a trial counts as solved when |prediction - target| < 0.04 (the authors' code; seed 004, 4.1)
CORRECT_THRESHOLD = 0.04


def _check_sizes(n_trials: object, seq_len: object) -> tuple[int, int]:
    if isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer)) or n_trials < 1:
        raise ValueError(f"`n_trials` must be a positive integer; got n_trials={n_trials!r}.")
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 22:
        # t1 < 10 and t2 < T/2 with t1 != t2 need T/2 > 10 to leave room for two distinct markers
        raise ValueError(f"`seq_len` must be an integer >= 22 (markers at t1 < 10 and t2 < T/2); "
                         f"got seq_len={seq_len!r}.")
    return int(n_trials), int(seq_len)


def _marked_inputs(n_trials: int, seq_len: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs (trial, T, 2) and the two marked values of each trial, (trial,), (trial,)."""
    values = rng.uniform(0.0, 1.0, size=(n_trials, seq_len))
    t1 = rng.integers(0, 10, size=n_trials)
    t2 = rng.integers(0, seq_len // 2, size=n_trials)
    clash = t1 == t2
    while clash.any():                      # redraw the second marker where it hit the first
        t2[clash] = rng.integers(0, seq_len // 2, size=int(clash.sum()))
        clash = t1 == t2
    markers = np.zeros((n_trials, seq_len))
    rows = np.arange(n_trials)
    markers[rows, t1] = 1.0
    markers[rows, t2] = 1.0
    return np.stack([values, markers], axis=-1), values[rows, t1], values[rows, t2]


def _task_dataset(name: str, n_trials: int, seq_len: int, seed: int | np.random.Generator | None) -> xr.Dataset:
    n_trials, seq_len = _check_sizes(n_trials, seq_len)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    inputs, first, second = _marked_inputs(n_trials, seq_len, rng)
    target = first + second if name == "addition" else first * second
    x = np.full((n_trials, seq_len + 1, 1), np.nan)
    x[:, -1, 0] = target
    u = np.zeros((n_trials, seq_len + 1, 2))
    u[:, 1:] = inputs
    ds = as_dataset(x, dt=1.0, u=u, channel_names=["target"], input_names=["value", "marker"],
                    name=f"{name}_problem_T{seq_len}",
                    provenance={"source": f"dsident.data.tasks.{name}_problem", "seq_len": seq_len,
                                "n_trials": n_trials,
                                "seed": seed if isinstance(seed, (int, np.integer)) or seed is None else "generator"})
    ds.attrs["task"] = json.dumps({"name": name, "seq_len": seq_len, "threshold": CORRECT_THRESHOLD})
    return ds


def addition_problem(n_trials: int, seq_len: int, *, seed: int | np.random.Generator | None = None) -> xr.Dataset:
    """The addition problem of length ``seq_len`` (T) as a dataset.

    Parameters
    ----------
    n_trials : int
        Number of independent trials (the paper uses 100 000 for training, 10 000 for testing).
    seq_len : int
        T, number of input steps (>= 22).
    seed : int or numpy Generator, optional

    Returns
    -------
    xarray.Dataset
        ``x(trial, time, channel)`` with ``T + 1`` time steps and one channel ``target``
        (NaN except at the last step); ``u(trial, time, input)`` with inputs ``value`` and
        ``marker`` (zero at time index 0); attrs ``task`` (JSON: name, seq_len, threshold).

    Examples
    --------
    >>> ds = addition_problem(4, 50, seed=0)
    >>> ds["x"].shape, ds["u"].shape
    ((4, 51, 1), (4, 51, 2))
    """
    return _task_dataset("addition", n_trials, seq_len, seed)


def multiplication_problem(n_trials: int, seq_len: int, *,
                           seed: int | np.random.Generator | None = None) -> xr.Dataset:
    """The multiplication problem: as :func:`addition_problem`, target = product of the marked values."""
    return _task_dataset("multiplication", n_trials, seq_len, seed)


def fraction_correct(prediction: np.ndarray, target: np.ndarray, threshold: float = CORRECT_THRESHOLD) -> float:
    """P_correct: the fraction of trials with ``|prediction - target| < threshold``.

    Parameters
    ----------
    prediction, target : ndarray of shape (trial,)
    threshold : float, default 0.04
    """
    prediction, target = np.asarray(prediction, dtype=float), np.asarray(target, dtype=float)
    if prediction.shape != target.shape:
        raise ValueError(f"`prediction` and `target` must have the same shape; got {prediction.shape} and {target.shape}.")
    return float(np.mean(np.abs(prediction - target) < threshold))
