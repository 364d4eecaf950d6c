"""The smoother an SVI fit leaves on the model: the trained guide run over whole trials.

After :func:`~dsident.inference.svi.fit_svi`, ``model.smoother_`` is an :class:`SVISmoother`:
``model.smoother_(ds)`` returns the posterior means ``z(trial, time, latent)`` and variances
``z_var(trial, time, latent)`` of the guide, and :meth:`SVISmoother.elbo` the evidence lower
bound of a data set. It is a plain object (not an ``nn.Module``), so it never shows up in the
model's ``parameters()`` or ``state_dict()``.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
import xarray as xr

from ...data.container import as_dataset
from ...model import StateSpaceModel
from .guides import Guide
from .pyro_model import LatentPathPrior, observation_log_prob
from .windows import prepare_trials


def moments_minimum(guide: Guide | str) -> int:
    """Fewest paths that estimate a marginal variance: 2 for a Monte Carlo guide (one path has
    none), 1 for the mean-field guide, whose moments are exact."""
    name = guide if isinstance(guide, str) else guide.name
    return 1 if name == "mean-field" else 2


def check_n_samples(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int; ValueError naming ``name`` unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        why = " (a variance needs at least two sample paths)" if minimum == 2 else ""
        raise ValueError(f"`{name}` must be an integer >= {minimum}{why}; got {name}={value!r}.")
    return int(value)


class SVISmoother:
    """Posterior marginals and ELBO of a fitted state-space model under its trained guide.

    Parameters
    ----------
    model : StateSpaceModel
    guide : Guide
    n_samples : int
        Paths drawn per trial to estimate marginal moments when the guide has no closed form
        (the Markov guide); the mean-field guide's moments are exact.
    seed : int
        Seed of those draws (so that smoothing the same data twice gives the same answer).
    chunk : int
        Trials processed together (bounds the memory of long recordings).
    """

    def __init__(self, model: StateSpaceModel, guide: Guide, *, n_samples: int = 64, seed: int = 0,
                 chunk: int = 64) -> None:
        self.model, self.guide = model, guide
        self.n_samples = check_n_samples("n_samples", n_samples, moments_minimum(guide))
        self.seed, self.chunk = int(seed), int(chunk)

    def _device_dtype(self) -> tuple[torch.device, torch.dtype]:
        p = next(self.model.parameters())
        return p.device, p.dtype

    def _generator(self, seed: int | None) -> torch.Generator:
        device, _ = self._device_dtype()
        return torch.Generator(device=device).manual_seed(self.seed if seed is None else int(seed))

    @torch.no_grad()
    def __call__(self, data: Any, *, n_samples: int | None = None, seed: int | None = None) -> xr.Dataset:
        """Posterior means and variances of every trial's latent path.

        Parameters
        ----------
        data : xarray.Dataset or array-like
            Anything :func:`dsident.data.as_dataset` accepts, with the model's channels.
        n_samples, seed : int, optional
            Override the smoother's defaults for this call.

        Returns
        -------
        xarray.Dataset
            ``z(trial, time, latent)`` and ``z_var(trial, time, latent)`` (NaN past each
            trial's end), with the input's ``trial`` and ``time`` coordinates.
        """
        ds = as_dataset(data)
        device, dtype = self._device_dtype()
        trials = prepare_trials(ds, self.model, device=device, dtype=dtype)
        n = self.n_samples if n_samples is None else check_n_samples("n_samples", n_samples,
                                                                      moments_minimum(self.guide))
        gen = self._generator(seed)
        was_training = self.guide.training
        self.guide.eval()
        r, t_max, m = trials.n_trials, ds.sizes["time"], self.model.latent_dim
        mean = np.full((r, t_max, m), np.nan)
        var = np.full((r, t_max, m), np.nan)
        for lo in range(0, r, self.chunk):
            idx = np.arange(lo, min(lo + self.chunk, r))
            batch = trials.full_trials(idx)
            mu, v = self.guide.marginals(batch, n_samples=n, generator=gen)
            keep = batch.time_mask.cpu().numpy()
            width = keep.shape[1]
            mu_np, v_np = mu.double().cpu().numpy(), v.double().cpu().numpy()
            mu_np[~keep], v_np[~keep] = np.nan, np.nan
            mean[idx, :width], var[idx, :width] = mu_np, v_np
        self.guide.train(was_training)
        coords = {"trial": ds["trial"].values, "time": ds["time"].values, "latent": np.arange(m)}
        settings = {"engine": "svi", "guide": self.guide.name, "n_samples": n,
                    "seed": self.seed if seed is None else int(seed)}
        return xr.Dataset(
            {"z": (("trial", "time", "latent"), mean), "z_var": (("trial", "time", "latent"), var)},
            coords=coords,
            attrs={"dt": float(ds.attrs.get("dt", 1.0)), "smoother": json.dumps(settings)},
        )

    @torch.no_grad()
    def elbo(self, data: Any, *, n_samples: int = 16, seed: int | None = None) -> float:
        """Evidence lower bound of ``data`` (nats, summed over trials), averaged over ``n_samples`` draws.

        The bound is the model's full log joint minus the guide's log density, on whole
        trials; ``E_q[log p(x, z) - log q(z | x)] <= log p(x)``.
        """
        n_samples = check_n_samples("n_samples", n_samples, 1)
        ds = as_dataset(data)
        device, dtype = self._device_dtype()
        trials = prepare_trials(ds, self.model, device=device, dtype=dtype)
        gen = self._generator(seed)
        total = 0.0
        for lo in range(0, trials.n_trials, self.chunk):
            idx = np.arange(lo, min(lo + self.chunk, trials.n_trials))
            batch = trials.full_trials(idx)
            for _ in range(int(n_samples)):
                q = self.guide.posterior(batch, gen)
                z = q.rsample()
                value = (LatentPathPrior(self.model, batch).log_prob(z)
                         + observation_log_prob(self.model, z, batch) - q.log_prob(z))
                total += float(value.sum()) / int(n_samples)
        return total
