"""n-step prediction error PE(n): short-term forecasting from data-initialised states.

For every test time ``t`` whose observation is complete, the latent state is inferred from
``x(t)`` (the observation model's inverse, or a supplied latent path such as smoothed posterior
means), the deterministic dynamics are iterated ``n`` steps, and the decoded prediction is
compared with ``x(t + n)`` (``SPEC-metrics.md`` §3). All start times are advanced together in
batches, so the cost is ``n`` batched model steps, not ``n × T`` single ones.

The model only needs this protocol (``dsident.StateSpaceModel`` has it; a fitted estimator
exposes one as ``model_``)::

    encode(x (B, N)) -> z (B, M)          # latent state consistent with an observation
    step(z (B, M), u (B, K) | None, dt) -> z (B, M)   # deterministic transition
    decode(z (B, M)) -> x (B, N)          # observation mean

A ``torch.nn.Module`` receives tensors of its own dtype and device; any other object
receives float64 ndarrays.

Shape legend: ``B`` start times in a batch, ``N`` channels, ``M`` latent, ``K`` inputs.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from .._checks import check_bool
from ..data.container import check_model_step, sample_gaps
from .state_space import as_trials

__all__ = ["prediction_error"]


def prediction_error(model: Any, data: Any, n: int = 20, *, curve: bool = False, latent: Any = None,
                     u: Any = None, dt: float | None = None, batch_size: int = 8_192,
                     channels: Any = None) -> float | np.ndarray:
    """Mean squared n-step-ahead prediction error PE(n).

    Parameters
    ----------
    model : estimator, StateSpaceModel, or any object with ``encode``, ``step``, ``decode``
        See the module docstring for the protocol.
    data : array-like of shape (time, channel) or (trial, time, channel), or Dataset
        Test observations; NaN marks missing samples, which are excluded as start points and
        as targets. A Dataset's ``u`` variable is used as the external input.
    n : int
        Prediction horizon in steps.
    curve : bool
        Return the whole curve PE(1), …, PE(n) instead of PE(n).
    latent : array-like of shape (trial, time, latent), optional
        Start states to use instead of ``model.encode(x(t))`` (e.g. smoothed posterior means).
    u : array-like of shape (trial, time, input), optional
        External inputs (overrides the Dataset's ``u``); ``u(t + k)`` drives step k.
    dt : float, optional
        Passed to ``model.step``; None lets the model use its own sampling step, or, for a
        Dataset with per-sample times (``sample_time``, irregular sampling) and continuous-time
        dynamics, step k integrates over the actual gap from sample ``t+k-1`` to ``t+k``.
    batch_size : int
        Start times advanced together (bounds memory).
    channels : sequence of int or of bool, optional
        Positions of the channels whose errors count, or a boolean mask over them (default: all). The model still starts
        from, and predicts, every channel; :func:`~dsident.metrics.evaluate` passes the data's
        own channels here, leaving out auxiliary ones (:mod:`dsident.data.slow_channels`).

    Returns
    -------
    float, or ndarray of shape (n,) with ``curve=True``
        Mean over all start times and observed channels of ``(x̂(t+k) − x(t+k))²``. NaN where
        no start time has an observed target or a prediction was NaN; inf where a prediction
        overflowed to ±inf (an error without bound, which a mean cannot soften).

    Raises
    ------
    TypeError
        When ``model`` lacks ``encode``/``step``/``decode``.
    ValueError
        For a non-positive ``n`` or data shorter than ``n + 1`` steps.
    """
    if hasattr(model, "model_"):
        model = model.model_
    missing = [name for name in ("encode", "step", "decode") if not callable(getattr(model, name, None))]
    if missing:
        raise TypeError(f"`model` must provide encode(x), step(z, u, dt) and decode(z) (e.g. a StateSpaceModel "
                        f"or a fitted estimator); {type(model).__name__} lacks {missing}.")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"`n` must be a positive integer number of steps; got {n!r}.")
    n = int(n)
    check_bool("curve", curve)     # "no" is truthy: the curve where PE(n) was asked for
    if dt is not None:
        from ..dynamics.solvers import check_run_step

        check_run_step(getattr(model, "dynamics", model), dt, getattr(model, "dt", None))
    continuous = getattr(model, "_continuous_time", None)
    if dt is None and not (isinstance(data, xr.Dataset) and "sample_time" in data
                           and (not callable(continuous) or continuous())):
        # per-sample times set each step themselves (continuous-time models); otherwise a step of
        # its own that disagrees would be predicted at the model's
        check_model_step(data, getattr(model, "dt", None), argname="data")
    x = as_trials(data, "data")
    if u is None and hasattr(data, "data_vars") and "u" in data:
        u = data["u"].values
    uu = None if u is None else as_trials(u, "u")
    input_dim = int(getattr(getattr(model, "dynamics", None), "input_dim", 0) or 0)
    if uu is None and input_dim > 0:
        # the steps ran with no drive at all and scored an input-driven model on a run it never makes
        raise ValueError(f"the model's dynamics take input_dim={input_dim} input(s); pass `u` of shape (trial, time, "
                         f"{input_dim}) or a Dataset with a `u` variable (zeros for an autonomous run).")
    if uu is not None and uu.shape[:2] != x.shape[:2]:
        raise ValueError(f"`u` must cover the same (trial, time) as the data {x.shape[:2]}; got {uu.shape[:2]}.")
    if x.shape[1] <= n:
        raise ValueError(f"`data` has {x.shape[1]} time steps; PE({n}) needs at least {n + 1}.")
    keep = np.arange(x.shape[2]) if channels is None else _channel_positions(channels, x.shape[2])
    if batch_size is None or isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer; got {batch_size!r}.")
    zz = None
    if latent is not None:
        zz = as_trials(latent, "latent")
        if zz.shape[:2] != x.shape[:2]:
            raise ValueError(f"`latent` must have the (trial, time) shape of the data {x.shape[:2]}; got {zz.shape[:2]}.")
    start_ok = np.all(np.isfinite(x if zz is None else zz), axis=2)[:, : x.shape[1] - n]
    trial_idx, time_idx = np.nonzero(start_ok)
    sq_sum = np.zeros(n)
    count = np.zeros(n)
    backend = _Backend(model)
    gaps = _sample_gaps(model, data) if dt is None else None
    for lo in range(0, trial_idx.size, batch_size):
        tr, t0 = trial_idx[lo:lo + batch_size], time_idx[lo:lo + batch_size]
        z = backend.encode(x[tr, t0]) if zz is None else backend.to_model(zz[tr, t0])
        for k in range(1, n + 1):
            step_dt = dt if gaps is None else backend.to_model(gaps[tr, t0 + k - 1][:, None])
            z = backend.step(z, None if uu is None else uu[tr, t0 + k], step_dt)
            pred = backend.decode(z)[..., keep]
            target = x[tr, t0 + k][..., keep]
            observed = np.isfinite(target)
            diff = np.where(observed, pred - np.where(observed, target, 0.0), 0.0)
            sq_sum[k - 1] += float(np.sum(diff * diff))
            count[k - 1] += float(observed.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        errors = np.where(count > 0, sq_sum / np.maximum(count, 1), np.nan)
    return errors if curve else float(errors[-1])


def _sample_gaps(model: Any, data: Any) -> np.ndarray | None:
    """(trial, time - 1) gaps between successive samples of irregularly sampled data, for
    continuous-time dynamics; None otherwise (the model steps by its own dt). Gaps past a
    trial's end (whose targets are NaN) hold the model's dt."""
    continuous = getattr(model, "_continuous_time", None)
    if not (hasattr(data, "data_vars") and "sample_time" in data and callable(continuous) and continuous()):
        return None
    return sample_gaps(data["sample_time"].values, model.dt)


def _channel_positions(channels: Any, n_channels: int) -> np.ndarray:
    """Integer positions of ``channels`` (positions, or a boolean mask over all channels), checked."""
    arr = np.asarray(channels).reshape(-1)
    if arr.dtype == bool:
        if arr.size != n_channels:
            raise ValueError(f"`channels` as a boolean mask must have one entry per channel ({n_channels}); "
                             f"got {arr.size}.")
        arr = np.flatnonzero(arr)
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"`channels` must be integer positions in 0..{n_channels - 1} or a boolean mask; "
                         f"got {channels!r}.")
    if arr.size == 0 or arr.min() < 0 or arr.max() >= n_channels:
        raise ValueError(f"`channels` must be positions in 0..{n_channels - 1}; got {channels!r}.")
    return arr.astype(int)


class _Backend:
    """Calls the protocol with tensors (torch modules) or ndarrays, always returning ndarrays from decode."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.torch = None
        try:
            import torch
            if isinstance(model, torch.nn.Module):
                self.torch = torch
                p = next(model.parameters(), None)
                self.dtype = p.dtype if p is not None else torch.float64
                self.device = p.device if p is not None else torch.device("cpu")
        except ImportError:  # torch is a dependency; this only keeps the numpy path importable alone
            self.torch = None

    def to_model(self, a: np.ndarray) -> Any:
        if self.torch is None:
            return a
        return self.torch.as_tensor(a, dtype=self.dtype, device=self.device)

    def encode(self, x: np.ndarray) -> Any:
        with self._no_grad():
            return self.model.encode(self.to_model(x))

    def step(self, z: Any, u: np.ndarray | None, dt: float | None) -> Any:
        with self._no_grad():
            return self.model.step(z, None if u is None else self.to_model(u), dt)

    def decode(self, z: Any) -> np.ndarray:
        with self._no_grad():
            out = self.model.decode(z)
        if self.torch is not None:
            return out.detach().cpu().double().numpy()
        return np.asarray(out, dtype=float)

    def _no_grad(self) -> Any:
        if self.torch is None:
            import contextlib
            return contextlib.nullcontext()
        return self.torch.no_grad()
