"""StateSpaceModel: latent dynamics × observation model (+ process noise, initial-state prior).

PROVISIONAL core written at the start of the project so that every room can code against
it; the state-space-core issue completes it (save/load, validation, smooth/predict).

Generative model (shape legend: B trials, T time, M latent_dim, N obs_dim, K input_dim)::

    z_1 ~ N(mu0, diag(initial_var))
    z_t ~ N(dynamics.step(z_{t-1}, u_t, dt), diag(process_var))      t = 2..T
    x_t ~ observation(x | z_t)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import xarray as xr
from torch import Tensor, nn

from .dynamics.base import LatentDynamics
from .observations.base import ObservationModel


class StateSpaceModel(nn.Module):
    """Compose a latent dynamics and an observation model into a generative state-space model.

    Parameters
    ----------
    dynamics : LatentDynamics
    observation : ObservationModel
    process_noise : float
        Initial diagonal process-noise *variance* (Σ); learned by the engines unless fixed.
    initial_var : float
        Variance of the initial-state prior around ``initial_mean`` (zeros).
    dt : float
        Sampling step the model was fitted at (unit of the data's time coordinate).
    """

    def __init__(self, dynamics: LatentDynamics, observation: ObservationModel, *,
                 process_noise: float = 0.01, initial_var: float = 1.0, dt: float = 1.0) -> None:
        super().__init__()
        self.dynamics = dynamics
        self.observation = observation
        m = dynamics.latent_dim
        self.log_process_var = nn.Parameter(torch.full((m,), float(np.log(process_noise))))
        self.initial_mean = nn.Parameter(torch.zeros(m))
        self.log_initial_var = nn.Parameter(torch.full((m,), float(np.log(initial_var))))
        self.dt = float(dt)

    @property
    def latent_dim(self) -> int:
        return self.dynamics.latent_dim

    @property
    def process_var(self) -> Tensor:
        """Diagonal of Σ, shape (M,)."""
        return self.log_process_var.exp()

    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """Deterministic transition mean (B, M) -> (B, M)."""
        return self.dynamics.step(z, u, self.dt if dt is None else dt)

    def encode(self, x: Tensor) -> Tensor:
        """Latent state consistent with observations x (..., N) -> (..., M)."""
        return self.observation.invert(x)

    def decode(self, z: Tensor) -> Tensor:
        """Observation mean (..., M) -> (..., N)."""
        return self.observation.mean(z)

    @torch.no_grad()
    def generate(self, n_steps: int, *, n_trials: int = 1, z0: Any = None, x0: Any = None, u: Any = None,
                 noise: bool = False, observation_noise: bool = False, seed: int | None = None,
                 dt: float | None = None) -> xr.Dataset:
        """Run the model freely for ``n_steps`` from z0 (or the state encoded from x0, or the prior mean).

        Returns an ``xarray.Dataset`` with ``x(trial, time, channel)`` (observation mean, or a sample
        with ``observation_noise=True``) and ``z(trial, time, latent)``; ``attrs['diverged']`` is
        True when the latent state became non-finite.
        """
        gen = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        p = next(self.parameters())
        dtype, device = p.dtype, p.device
        if z0 is not None:
            z = torch.as_tensor(np.asarray(z0), dtype=dtype, device=device).reshape(-1, self.latent_dim)
        elif x0 is not None:
            z = self.encode(torch.as_tensor(np.asarray(x0), dtype=dtype, device=device).reshape(-1, self.observation.obs_dim))
        else:
            z = self.initial_mean.expand(n_trials, -1).clone()
        if z.shape[0] == 1 and n_trials > 1:
            z = z.expand(n_trials, -1).clone()
        n_trials = z.shape[0]
        uu = None if u is None else torch.as_tensor(np.asarray(u), dtype=dtype, device=device).reshape(n_trials, n_steps, -1)
        sd = self.process_var.sqrt()
        zs = torch.empty(n_trials, n_steps, self.latent_dim, dtype=dtype, device=device)
        zs[:, 0] = z
        for t in range(1, n_steps):
            z = self.step(z, None if uu is None else uu[:, t], dt)
            if noise:
                z = z + sd * torch.randn(z.shape, generator=gen, dtype=dtype).to(device)
            zs[:, t] = z
        diverged = bool(~torch.isfinite(zs).all())
        xs = self.observation.sample(zs, generator=gen) if observation_noise else self.decode(zs)
        ds = xr.Dataset(
            {"x": (("trial", "time", "channel"), xs.cpu().numpy().astype(float)),
             "z": (("trial", "time", "latent"), zs.cpu().numpy().astype(float))},
            coords={"time": np.arange(n_steps) * (self.dt if dt is None else float(dt))},
            attrs={"dt": self.dt if dt is None else float(dt), "diverged": int(diverged), "seed": -1 if seed is None else int(seed)},
        )
        return ds
