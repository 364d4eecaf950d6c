"""Trials as device tensors, and the windows the SVI engine trains on.

Shape legend: ``R`` trials in the data set, ``B`` windows in a batch, ``T`` time steps,
``N`` obs_dim, ``K`` input_dim, ``W`` window length.

Long recordings are fitted by random windows: each step draws ``B`` windows of ``W`` steps,
a trial chosen with probability proportional to its length and a start uniform over the
positions where the window fits (a trial shorter than ``W`` gives its whole length, padded and
masked). Validation uses fixed windows that tile the validation trials, so that its ELBO is
comparable from one evaluation to the next.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from ...data.container import to_arrays
from ...model import StateSpaceModel
from .pyro_model import Batch


@dataclass(frozen=True)
class TrialData:
    """All trials of a data set on the fitting device.

    Attributes
    ----------
    x : Tensor of shape (R, T, N)
        Observations, 0 where missing or past a trial's end.
    mask : Tensor of shape (R, T, N), bool
        True where observed.
    u : Tensor of shape (R, T, K) or None
    length : ndarray of shape (R,), int
        Valid time steps per trial.
    dt : float or Tensor of shape (R, T)
        Sampling step: one number for all, or per step (irregular sampling): ``dt[:, t]`` is
        the time from sample ``t-1`` to sample ``t`` (column 0 and the padding hold the nominal step).
    """

    x: Tensor
    mask: Tensor
    u: Tensor | None
    length: np.ndarray
    dt: float | Tensor

    @property
    def n_trials(self) -> int:
        return int(self.x.shape[0])

    def batch(self, trials: np.ndarray, starts: np.ndarray, window: int) -> Batch:
        """Windows ``[start, start + window)`` of the given trials (past a trial's end: masked)."""
        device = self.x.device
        offs = np.arange(window)
        t_idx = starts[:, None] + offs[None, :]                                   # (B, W)
        inside = t_idx < self.length[trials][:, None]
        t_idx = np.minimum(t_idx, self.x.shape[1] - 1)
        tr = torch.as_tensor(trials, device=device)[:, None]
        ti = torch.as_tensor(t_idx, device=device)
        time_mask = torch.as_tensor(inside, device=device)
        x = self.x[tr, ti]
        mask = self.mask[tr, ti] & time_mask[..., None]
        u = None if self.u is None else self.u[tr, ti] * time_mask[..., None].to(self.x.dtype)
        dt = self.dt if not isinstance(self.dt, Tensor) else self.dt[tr, ti]
        return Batch(x=x * mask.to(x.dtype), mask=mask, time_mask=time_mask, u=u, dt=dt)

    def full_trials(self, trials: np.ndarray | None = None) -> Batch:
        """Whole trials as one batch, cut to the longest of them."""
        trials = np.arange(self.n_trials) if trials is None else np.asarray(trials)
        width = int(self.length[trials].max())
        return self.batch(trials, np.zeros(len(trials), dtype=np.int64), width)


def prepare_trials(ds: xr.Dataset, model: StateSpaceModel, *, device: torch.device,
                   dtype: torch.dtype) -> TrialData:
    """Check a canonical dataset against the model and move it to ``device``.

    Raises
    ------
    ValueError
        When the channels do not match ``model.observation.obs_dim``, inputs are missing for a
        model that takes them (or given to one that takes none, or contain NaN inside a
        trial), or ``sample_time`` does not increase within a trial.
    """
    arr = to_arrays(ds)
    n_obs = model.observation.obs_dim
    if arr.x.shape[2] != n_obs:
        raise ValueError(f"`data` has {arr.x.shape[2]} channels but the model's observation expects "
                         f"obs_dim={n_obs}.")
    k = int(getattr(model.dynamics, "input_dim", 0) or 0)
    u = arr.u
    if k and u is None:
        raise ValueError(f"the model's dynamics take input_dim={k} external inputs but `data` has no 'u' variable.")
    if not k and u is not None:
        raise ValueError(f"`data` carries inputs 'u' with {u.shape[2]} columns but the model's dynamics take none "
                         "(input_dim=0); build the model with input_dim or drop 'u'.")
    if u is not None:
        if u.shape[2] != k:
            raise ValueError(f"`data` has {u.shape[2]} input columns but the dynamics expect input_dim={k}.")
        inside = np.arange(u.shape[1])[None, :] < arr.length[:, None]
        if not np.isfinite(u[inside]).all():
            raise ValueError("`data.u` contains NaN or inf inside a trial; external inputs cannot be missing.")
        u = np.where(inside[..., None], u, 0.0)
    mask = arr.mask
    x = np.where(mask, arr.x, 0.0)
    dt: float | Tensor = float(arr.dt)
    if getattr(arr, "time", None) is not None:
        steps = np.diff(arr.time, axis=1, prepend=arr.time[:, :1])
        inside = np.arange(1, steps.shape[1])[None, :] < arr.length[:, None]
        if not (np.isfinite(steps[:, 1:][inside]).all() and (steps[:, 1:][inside] > 0).all()):
            raise ValueError("`data.sample_time` must increase strictly within every trial.")
        steps[:, 0] = arr.dt
        steps[:, 1:][~inside] = arr.dt
        dt = torch.as_tensor(steps, dtype=dtype, device=device)
    return TrialData(
        x=torch.as_tensor(x, dtype=dtype, device=device),
        mask=torch.as_tensor(mask, device=device),
        u=None if u is None else torch.as_tensor(u, dtype=dtype, device=device),
        length=np.asarray(arr.length, dtype=np.int64),
        dt=dt,
    )


def tiling_windows(data: TrialData, window: int, max_windows: int) -> tuple[np.ndarray, np.ndarray]:
    """Trials and starts of consecutive windows covering every trial (at most ``max_windows``,
    evenly spaced when there are more)."""
    trials, starts = [], []
    for r, n in enumerate(data.length):
        s = np.arange(0, int(n), window)
        s = s[(int(n) - s >= 2) | (s == 0)]       # a 1-step tail window carries no transition
        trials.append(np.full(len(s), r))
        starts.append(s)
    tr, st = np.concatenate(trials), np.concatenate(starts)
    if len(tr) > max_windows:
        pick = np.linspace(0, len(tr) - 1, max_windows).round().astype(int)
        tr, st = tr[pick], st[pick]
    return tr, st


def random_windows(data: TrialData, window: int, batch_size: int,
                   generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``batch_size`` (trial, start) pairs: trials ∝ length, starts uniform where the window fits."""
    weights = torch.as_tensor(data.length, dtype=torch.float64)
    trials = torch.multinomial(weights, batch_size, replacement=True, generator=generator).numpy()
    room = np.maximum(data.length[trials] - window, 0) + 1
    u = torch.rand(batch_size, generator=generator, dtype=torch.float64).numpy()
    starts = np.minimum((u * room).astype(np.int64), room - 1)
    return trials, starts
