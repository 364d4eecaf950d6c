"""StateSpaceModel: latent dynamics × observation model (+ process noise, initial-state prior).

Generative model (shape legend: B trials, T time, M latent_dim, N obs_dim, K input_dim)::

    z_1 ~ N(mu0, diag(initial_var))
    z_t ~ N(dynamics.step(z_{t-1}, u_t, dt), diag(process_var))      t = 2..T
    x_t ~ observation(x | z_t)

The input ``u_t`` at time t drives the transition *into* step t (``s_t`` in the PLRNN
paper's eq. 1), so ``u`` at the first step is not used.

A model is saved as a directory holding ``config.json`` (class names and constructor
arguments of both components, the package and file-format versions, and the sha256 of the
tensor file) and ``tensors.pt`` (the ``state_dict``, read back with
``torch.load(..., weights_only=True)``, so loading never unpickles arbitrary objects).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import xarray as xr
from torch import Tensor, nn

from ._checks import check_bool
from ._version import __version__
from .dynamics.base import DYNAMICS_REGISTRY, LatentDynamics, run_steps
from .observations.base import OBSERVATION_REGISTRY, ObservationModel

#: version of the on-disk layout written by :meth:`StateSpaceModel.save`
FORMAT_VERSION = 1
_FORMAT_NAME = "dsident-model"
_CONFIG_FILE = "config.json"
_TENSOR_FILE = "tensors.pt"
#: the state_dict entries that belong to the model (anything an engine attaches is left out)
_STATE_PREFIXES = ("dynamics.", "observation.", "log_process_var", "initial_mean", "log_initial_var")


def _positive_vector(name: str, value: Any, size: int) -> np.ndarray:
    """A positive finite scalar or vector of length ``size`` as a float64 vector."""
    raw = np.asarray(value.detach().cpu() if isinstance(value, Tensor) else value)
    if raw.dtype.kind not in "iuf":
        # "0.01" (a config read as text) or True passed float() as 0.01 and 1.0
        raise ValueError(f"`{name}` must be a positive finite variance (a number or an array of shape ({size},)); "
                         f"got {name}={value!r}.")
    arr = raw.astype(float)
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    if arr.shape != (size,) or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"`{name}` must be a positive finite variance (a number or an array of shape ({size},)); "
                         f"got {name}={value!r}.")
    return arr


class StateSpaceModel(nn.Module):
    """Compose a latent dynamics and an observation model into a generative state-space model.

    Parameters
    ----------
    dynamics : LatentDynamics
        Transition mean ``z_t = step(z_{t-1}, u_t, dt)``, shape (B, M) -> (B, M).
    observation : ObservationModel
        Likelihood ``p(x_t | z_t)`` with ``latent_dim == dynamics.latent_dim``. Both components
        must hold their parameters in one dtype on one device; the model's own parameters
        (process noise, initial state) follow them.
    process_noise : float or array of shape (M,)
        Initial diagonal process-noise *variance* (Σ); learned by the engines unless fixed.
    initial_var : float or array of shape (M,)
        Variance of the initial-state prior around ``initial_mean`` (zeros).
    dt : float
        Sampling step the model was fitted at (unit of the data's time coordinate).
    channel_names : sequence of str, optional
        Names of the N observed channels (used for the ``channel`` coordinate of generated data).

    Attributes
    ----------
    log_process_var : Parameter of shape (M,)
    initial_mean : Parameter of shape (M,)
    log_initial_var : Parameter of shape (M,)
    smoother_ : callable, optional
        Attached by an inference engine that can smooth: ``smoother_(ds)`` returns an
        ``xarray.Dataset`` with ``z(trial, time, latent)`` and ``z_var``.

    Examples
    --------
    >>> from dsident.model import StateSpaceModel
    >>> from dsident.dynamics import PLRNN
    >>> from dsident.observations import Gaussian
    >>> model = StateSpaceModel(PLRNN(4, seed=0), Gaussian(2, 4, readout="relu"), dt=0.01)
    >>> model.generate(100, n_trials=3, seed=0)["x"].shape
    (3, 100, 2)
    """

    def __init__(self, dynamics: LatentDynamics, observation: ObservationModel, *,
                 process_noise: float = 0.01, initial_var: float = 1.0, dt: float = 1.0,
                 channel_names: Any = None) -> None:
        super().__init__()
        if not isinstance(dynamics, LatentDynamics):
            raise TypeError(f"`dynamics` must be a dsident.dynamics.LatentDynamics; got {type(dynamics).__name__}.")
        if not isinstance(observation, ObservationModel):
            raise TypeError(f"`observation` must be a dsident.observations.ObservationModel; "
                            f"got {type(observation).__name__}.")
        if observation.latent_dim != dynamics.latent_dim:
            raise ValueError(f"the observation model reads latent_dim={observation.latent_dim} units but the dynamics "
                             f"have latent_dim={dynamics.latent_dim}; they must agree.")
        if isinstance(dt, bool) or not isinstance(dt, (int, float, np.integer, np.floating)) \
                or not math.isfinite(dt) or dt <= 0:
            raise ValueError(f"`dt` must be a positive finite sampling step; got dt={dt!r}.")
        m = dynamics.latent_dim
        process = _positive_vector("process_noise", process_noise, m)
        initial = _positive_vector("initial_var", initial_var, m)
        if channel_names is not None:
            channel_names = [str(c) for c in channel_names]
            if len(channel_names) != observation.obs_dim or len(set(channel_names)) != len(channel_names):
                raise ValueError(f"`channel_names` must be {observation.obs_dim} distinct names (one per observed "
                                 f"channel); got {channel_names!r}.")
        dtype, device = _components_dtype_device(dynamics, observation)
        self.dynamics = dynamics
        self.observation = observation
        self.log_process_var = nn.Parameter(torch.as_tensor(np.log(process), dtype=dtype, device=device))
        self.initial_mean = nn.Parameter(torch.zeros(m, dtype=dtype, device=device))
        self.log_initial_var = nn.Parameter(torch.as_tensor(np.log(initial), dtype=dtype, device=device))
        self.dt = float(dt)
        self.channel_names = channel_names

    # -- sizes and derived quantities -------------------------------------------------------
    @property
    def latent_dim(self) -> int:
        """M, the size of the latent state."""
        return self.dynamics.latent_dim

    @property
    def obs_dim(self) -> int:
        """N, the number of observed channels."""
        return self.observation.obs_dim

    @property
    def input_dim(self) -> int:
        """K, the number of external inputs (0 for autonomous dynamics)."""
        return int(getattr(self.dynamics, "input_dim", 0) or 0)

    @property
    def process_var(self) -> Tensor:
        """Diagonal of Σ, shape (M,)."""
        return self.log_process_var.exp()

    @property
    def initial_var(self) -> Tensor:
        """Diagonal of the initial-state prior covariance, shape (M,)."""
        return self.log_initial_var.exp()

    def _names(self) -> list[str]:
        return self.channel_names or [f"x{i}" for i in range(self.obs_dim)]

    def _dtype_device(self) -> tuple[torch.dtype, torch.device]:
        p = self.log_process_var
        return p.dtype, p.device

    def config(self) -> dict[str, Any]:
        """JSON-able description: component classes and constructor arguments, ``dt``, channel names."""
        return {
            "dynamics": {"class": type(self.dynamics).__name__, "config": self.dynamics.config()},
            "observation": {"class": type(self.observation).__name__, "config": self.observation.config()},
            "dt": self.dt,
            "channel_names": self.channel_names,
        }

    # -- the generative model ---------------------------------------------------------------
    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """Deterministic transition mean (B, M) -> (B, M); ``dt`` defaults to the model's."""
        return self.dynamics.step(z, u, self.dt if dt is None else dt)

    def encode(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """Latent state consistent with observations x (..., N) -> (..., M) (``observation.invert``)."""
        return self.observation.invert(x, mask)

    def decode(self, z: Tensor) -> Tensor:
        """Observation mean (..., M) -> (..., N)."""
        return self.observation.mean(z)

    def log_joint(self, x: Any, z: Tensor, mask: Any = None, u: Any = None, *,
                  length: Any = None) -> Tensor:
        """log p(x, z) of every trial under the model (differentiable).

        Parameters
        ----------
        x : Tensor or ndarray of shape (trial, time, N) or (time, N)
            Observations; NaN marks a missing sample (left out of the likelihood).
        z : Tensor of shape (trial, time, M) or (time, M)
            Latent path; taken in the model's dtype and device (gradients flow back to ``z``).
        mask : bool array of the shape of ``x``, optional
            True = observed.
        u : Tensor or ndarray of shape (trial, time, K) or (time, K), optional
            Inputs; ``u[:, t]`` drives the transition into step t.
        length : int array of shape (trial,), optional
            Valid steps of each trial; later steps contribute nothing (ragged trials).

        Returns
        -------
        Tensor of shape (trial,), or a scalar for 2-D input
        """
        single = z.ndim == 2
        zz = z[None] if single else z
        if zz.ndim != 3 or zz.shape[-1] != self.latent_dim:
            raise ValueError(f"`z` must have shape (trial, time, {self.latent_dim}) or (time, {self.latent_dim}); "
                             f"got {tuple(z.shape)}.")
        n_trials, n_time, m = zz.shape
        dtype, device = self._dtype_device()
        zz = zz.to(dtype=dtype, device=device)    # a float64 path for a float32 model (differentiable)
        xx = torch.as_tensor(np.asarray(x, dtype=float) if not isinstance(x, Tensor) else x).to(zz)
        xx = xx[None] if single else xx
        if xx.shape[:2] != (n_trials, n_time):
            raise ValueError(f"`x` must cover the same trials and times as `z` {(n_trials, n_time)}; "
                             f"got shape {tuple(np.shape(x))}.")
        mm = None
        if mask is not None:
            mm = torch.as_tensor(np.asarray(mask.cpu() if isinstance(mask, Tensor) else mask, dtype=bool),
                                 device=zz.device)
            mm = mm[None] if single else mm
        steps = torch.arange(n_time, device=zz.device)
        if length is None:
            valid = torch.ones(n_trials, n_time, dtype=torch.bool, device=zz.device)
        else:
            lengths = torch.as_tensor(np.asarray(length, dtype=np.int64), device=zz.device).reshape(-1)
            if lengths.shape[0] != n_trials or (lengths < 1).any() or (lengths > n_time).any():
                raise ValueError(f"`length` must give one length in [1, {n_time}] per trial ({n_trials}); "
                                 f"got {np.asarray(length).tolist()}.")
            valid = steps[None, :] < lengths[:, None]
        uu = self._inputs(u, n_trials, n_time, zz, "u")

        log2pi = math.log(2 * math.pi)
        init_var = self.initial_var
        lp = -0.5 * (log2pi + torch.log(init_var) + (zz[:, 0] - self.initial_mean).square() / init_var).sum(-1)
        if n_time > 1:
            prev = zz[:, :-1].reshape(-1, m)
            u_next = None if uu is None else uu[:, 1:].reshape(n_trials * (n_time - 1), -1)
            mean = self.step(prev, u_next).reshape(n_trials, n_time - 1, m)
            var = self.process_var
            trans = -0.5 * (log2pi + self.log_process_var + (zz[:, 1:] - mean).square() / var).sum(-1)
            lp = lp + torch.where(valid[:, 1:], trans, torch.zeros_like(trans)).sum(-1)
        obs = self.observation.log_prob(xx, zz, mm)
        lp = lp + torch.where(valid, obs, torch.zeros_like(obs)).sum(-1)
        return lp[0] if single else lp

    def _inputs(self, u: Any, n_trials: int, n_time: int, like: Tensor, argname: str) -> Tensor | None:
        """Inputs as a (trial, time, K) tensor, broadcasting a (time, K) array over trials."""
        k = self.input_dim
        if u is None:
            if k > 0:
                raise ValueError(f"the dynamics take input_dim={k} inputs; pass `{argname}` of shape "
                                 f"({n_time}, {k}) or ({n_trials}, {n_time}, {k}) (zeros for an autonomous run).")
            return None
        arr = u.detach().to(like) if isinstance(u, Tensor) else torch.as_tensor(
            np.asarray(u, dtype=float), dtype=like.dtype, device=like.device)
        if k == 0 and arr.numel() > 0:
            raise ValueError(f"`{argname}` was given (shape {tuple(arr.shape)}) but the dynamics take no inputs "
                             "(input_dim=0): leave it out, or fit a model on data with inputs `u`.")
        if arr.ndim == 2:
            arr = arr[None].expand(n_trials, -1, -1)
        if arr.ndim != 3 or arr.shape[0] != n_trials or arr.shape[1] < n_time or arr.shape[2] != k:
            raise ValueError(f"`{argname}` must have shape ({n_time}, {k}) or ({n_trials}, {n_time}, {k}) "
                             f"(time, input_dim={k}); got {tuple(arr.shape)}.")
        arr = arr[:, :n_time]
        if k > 0 and not torch.isfinite(arr[:, 1:]).all():
            raise ValueError(f"`{argname}` contains NaN or infinite values; inputs must be known at every step.")
        return arr if k > 0 else None

    @torch.no_grad()
    def generate(self, n_steps: int, *, n_trials: int = 1, z0: Any = None, x0: Any = None, u: Any = None,
                 noise: bool = False, observation_noise: bool = False, seed: int | None = None,
                 dt: float | None = None) -> xr.Dataset:
        """Run the model freely for ``n_steps`` steps, batched over trials.

        Parameters
        ----------
        n_steps : int
            Number of time steps returned, the start state included.
        n_trials : int
            Number of trials; a single start state is repeated for all of them.
        z0 : array of shape (M,) or (trial, M), optional
            Start state(s).
        x0 : array of shape (N,) or (trial, N), optional
            Start observation(s), encoded with ``observation.invert``: NaN entries are left out,
            with a warning; a row entirely NaN, or an infinite entry, is refused.
            With neither ``z0`` nor ``x0`` the run starts at the prior mean, or at a draw from the
            initial-state prior when ``noise=True``.
        u : array of shape (n_steps, K) or (trial, n_steps, K), optional
            Inputs (required when the dynamics take inputs); ``u[:, t]`` drives step t.
        noise : bool
            Add process noise N(0, diag(process_var)) at every step.
        observation_noise : bool
            Return samples of the observation model instead of its mean.
        seed : int, optional
            Seed of every random draw of this call.
        dt : float, optional
            Sampling step (default: the model's). Continuous-time dynamics integrate at it; a
            discrete-time map (PLRNN, shallow PLRNN) refuses any other than its own.

        Returns
        -------
        xarray.Dataset
            ``x(trial, time, channel)``, ``z(trial, time, latent)`` (and ``u`` when given);
            attrs ``dt``, ``seed`` (-1 for None), ``diverged`` (0/1: any trial became non-finite)
            and ``diverged_at`` (the first such step, -1 if none). A diverged trial is NaN from
            that step on (the others are unaffected) and a ``RuntimeWarning`` says so.
        """
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
            raise ValueError(f"`n_steps` must be an integer >= 1; got n_steps={n_steps!r}.")
        if isinstance(n_trials, bool) or not isinstance(n_trials, (int, np.integer)) or n_trials < 1:
            raise ValueError(f"`n_trials` must be an integer >= 1; got n_trials={n_trials!r}.")
        if z0 is not None and x0 is not None:
            raise ValueError("pass either `z0` (a latent start state) or `x0` (an observation to encode), not both.")
        # "no" is truthy: a noisy run where none was asked for
        check_bool("noise", noise), check_bool("observation_noise", observation_noise)
        if dt is not None:
            from .dynamics.solvers import check_run_step

            check_run_step(self.dynamics, dt, self.dt)
        n_steps, n_trials = int(n_steps), int(n_trials)
        # a map runs (and is labelled) at its own step; a dt it accepted agrees with that one
        step_dt = self.dt if dt is None or not self._continuous_time() else float(dt)
        if noise and abs(step_dt - self.dt) > 1e-9 * self.dt:
            # the drift is integrated over dt, but the noise is drawn per step with the fit's
            # per-step variance, so its spread per unit time changes by self.dt / dt
            warnings.warn(f"generate(noise=True, dt={step_dt:g}): the process noise is drawn once per step with the "
                          f"variance learned per step of the fit's dt={self.dt:g}, so this run diffuses "
                          f"{self.dt / step_dt:.3g}x as much per unit time as the fitted model; generate at the "
                          "fit's dt for noisy runs that match it.", UserWarning, stacklevel=3)
        _check_one_precision(self)
        gen = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        dtype, device = self._dtype_device()

        def randn(shape: tuple[int, ...]) -> Tensor:
            return torch.randn(shape, generator=gen, dtype=dtype).to(device)

        z = self._start_state(z0, x0, n_trials, dtype, device)
        if z is None:
            z = self.initial_mean.detach().expand(n_trials, -1).clone()
            if noise:
                z = z + self.initial_var.sqrt() * randn(tuple(z.shape))
        n_trials = z.shape[0]
        uu = self._inputs(u, n_trials, n_steps, z, "u")
        sd = self.process_var.sqrt()
        if noise or uu is not None:
            def step_into(t: int, z: Tensor, dest: Tensor) -> None:
                z = self.step(z, None if uu is None else uu[:, t], step_dt)
                dest.copy_(z + sd * randn(tuple(z.shape)) if noise else z)

            zs = run_steps(z.contiguous(), n_steps, step_into)
        else:
            # the same steps; a model may write them in place (the PLRNNs do, 1.75–2.9× faster)
            zs = self.dynamics.rollout(z.contiguous(), n_steps, step_dt)
        finite = torch.isfinite(zs).all(-1)                          # (trial, time)
        first_bad = torch.where(finite.all(-1), n_steps, (~finite).int().argmax(-1))
        after = torch.arange(n_steps, device=device)[None, :] >= first_bad[:, None]
        zs[after] = float("nan")                                     # a diverged trial stays NaN (no inf)
        diverged_at = int(first_bad.min()) if bool((first_bad < n_steps).any()) else -1
        if diverged_at >= 0:
            n_bad = int((first_bad < n_steps).sum())
            warnings.warn(f"generation diverged: the latent state of {n_bad} of {n_trials} trial(s) became "
                          f"non-finite (first at step {diverged_at} of {n_steps}); those trials are NaN from "
                          "there on (attrs['diverged'] = 1).", RuntimeWarning,
                          stacklevel=3)   # 3: past torch.no_grad's wrapper, to the caller's line
        xs = self.observation.sample(zs, generator=gen) if observation_noise else self.decode(zs)
        data_vars: dict[str, Any] = {
            "x": (("trial", "time", "channel"), xs.detach().cpu().double().numpy()),
            "z": (("trial", "time", "latent"), zs.detach().cpu().double().numpy()),
        }
        if uu is not None:
            data_vars["u"] = (("trial", "time", "input"), uu.detach().cpu().double().numpy())
        return xr.Dataset(
            data_vars,
            coords={"trial": np.arange(n_trials), "time": np.arange(n_steps) * step_dt,
                    "channel": self._names(), "latent": [f"z{i}" for i in range(self.latent_dim)]},
            attrs={"dt": step_dt, "diverged": int(diverged_at >= 0), "diverged_at": int(diverged_at),
                   "seed": -1 if seed is None else int(seed), "noise": int(bool(noise)),
                   "observation_noise": int(bool(observation_noise)), "dsident_version": __version__},
        )

    def _continuous_time(self) -> bool:
        """Whether the dynamics integrate an ODE over ``dt`` (so any step is meaningful)."""
        from .dynamics.solvers import ODEStepMixin

        return isinstance(self.dynamics, ODEStepMixin)

    def _start_state(self, z0: Any, x0: Any, n_trials: int, dtype: torch.dtype,
                     device: torch.device) -> Tensor | None:
        """Start states (trial, M) from z0 or x0, or None when neither is given."""
        if z0 is None and x0 is None:
            return None
        name, size = ("z0", self.latent_dim) if z0 is not None else ("x0", self.obs_dim)
        value = z0 if z0 is not None else x0
        if hasattr(value, "data_vars"):
            raise TypeError(f"`{name}` must be an array of shape ({size},) or (trial, {size}); got a Dataset. For the "
                            f"first samples of data use {name}=ds['x'].isel(time=0)." if name == "x0" else
                            f"`{name}` must be an array of shape ({size},) or (trial, {size}); got a Dataset.")
        try:
            values = np.asarray(value.detach().cpu() if isinstance(value, Tensor) else value, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"`{name}` must be a numeric array of shape ({size},) or (trial, {size}); got "
                            f"{type(value).__name__} {value!r:.60}.") from None
        arr = torch.as_tensor(values, dtype=dtype, device=device)
        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[1] != size:
            raise ValueError(f"`{name}` must have shape ({size},) or (trial, {size}); got {tuple(arr.shape)}.")
        if arr.shape[0] == 1 and n_trials > 1:
            arr = arr.expand(n_trials, -1)
        elif n_trials not in (1, arr.shape[0]):
            raise ValueError(f"`{name}` has {arr.shape[0]} rows but n_trials={n_trials}; give one row or one per trial.")
        if z0 is not None:
            if not torch.isfinite(arr).all():
                raise ValueError("`z0` contains NaN or infinite values.")
            return arr.clone()
        if torch.isinf(arr).any():
            raise ValueError("`x0` contains infinite values; give finite observations (NaN marks a missing one).")
        missing = torch.isnan(arr)
        if missing.all(-1).any():
            raise ValueError("a row of `x0` is entirely missing (NaN); cannot encode a start state from it.")
        if missing.any():
            # the missing channels' directions are then set by the observed ones alone: say so, once
            rows = sorted({int(r) for r in torch.nonzero(missing.any(-1)).flatten()})
            warnings.warn(f"`x0` misses {int(missing.sum())} of its {missing.numel()} entries (NaN) in row(s) "
                          f"{rows[:5]}{' ...' if len(rows) > 5 else ''}: the start state is encoded from the observed "
                          "channels alone.", UserWarning, stacklevel=3)
        return self.encode(arr).to(dtype=dtype, device=device)

    # -- inference hooks --------------------------------------------------------------------
    def smooth(self, data: Any) -> xr.Dataset:
        """Posterior means ``z(trial, time, latent)`` and variances ``z_var`` given the data.

        Delegates to ``self.smoother_``, which an inference engine that can smooth attaches
        after fitting (``"laplace-em"``, ``"svi"``).

        Raises
        ------
        RuntimeError
            When no smoother is attached (e.g. after ``"bptt"`` training or after :meth:`load`).
        """
        smoother: Callable[[xr.Dataset], xr.Dataset] | None = getattr(self, "smoother_", None)
        if smoother is None:
            raise RuntimeError("this model has no posterior smoother attached: smoothing needs a fit with "
                               "method='laplace-em' or method='svi' (they attach `model.smoother_`); BPTT and "
                               "teacher-forcing fits, SVI fits read with load() and models read with "
                               "StateSpaceModel.load() have none (an estimator's load() gives a Laplace-EM fit its "
                               "smoother back). Use predict() or encode() for data-initialised states instead.")
        from .data import as_dataset
        from .data.container import steps_agree

        if (isinstance(data, xr.Dataset) and "dt" in data.attrs and "sample_time" not in data
                and not steps_agree(float(data.attrs["dt"]), float(self.dt))):
            # the smoother is the fit's posterior, at the fit's step: data sampled at another step
            # were smoothed as if they had the model's (predict() refuses them too)
            raise ValueError(f"`data` is sampled every {float(data.attrs['dt']):g} (attrs['dt']) but the model was "
                             f"fitted at a step of {float(self.dt):g}; its smoother reads data at that step only: "
                             "resample the data to the model's step.")
        return smoother(as_dataset(data))

    @torch.no_grad()
    def predict(self, data: Any, n: int = 1) -> xr.Dataset:
        """n-step-ahead predictions of the observations from states encoded at every time step.

        For each time t the state ``encode(x_t)`` (over the observed channels of ``x_t``) is run
        ``n`` steps deterministically; the decoded result predicts ``x_{t+n}``. Continuous-time
        dynamics step over the data's actual gaps when it carries per-sample times
        (``sample_time``, irregular sampling), otherwise by the model's ``dt``.

        Parameters
        ----------
        data : anything :func:`dsident.data.as_dataset` accepts
            Observations (and inputs ``u`` when the dynamics take inputs).
        n : int
            Prediction horizon in steps (>= 1).

        Returns
        -------
        xarray.Dataset
            ``x(trial, time, channel)``: the prediction of ``x`` at each time, NaN for the first
            ``n`` steps, past each trial's end, and where ``x_{t-n}`` was entirely missing. Same
            coordinates as the data; attrs ``n`` and ``dt``.
        """
        from .data import as_dataset, to_arrays

        from .data.container import check_model_step, sample_gaps

        if not (isinstance(data, xr.Dataset) and "sample_time" in data and self._continuous_time()):
            # per-sample times set each step of an ODE; a map takes one step per sample whatever the times
            check_model_step(data, self.dt, argname="data")
        ds = as_dataset(data)
        arrays = to_arrays(ds)
        n_trials, n_time, n_ch = arrays.x.shape
        if n_ch != self.obs_dim:
            raise ValueError(f"`data` has {n_ch} channels but the model observes obs_dim={self.obs_dim}.")
        check_channel_order(ds["channel"].values, self, argname="data")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n < n_time:
            raise ValueError(f"`n` must be an integer in [1, {n_time - 1}] (shorter than the data); got n={n!r}.")
        n = int(n)
        dtype, device = self._dtype_device()
        x = torch.as_tensor(arrays.x, dtype=dtype, device=device)
        u = arrays.u
        if u is not None:        # a shorter trial's NaN padding is no missing input: its predictions are blanked
            u = np.where(np.arange(n_time)[None, :, None] < arrays.length[:, None, None], u, 0.0)
        uu = self._inputs(u, n_trials, n_time, x, "data['u']")
        starts = x[:, : n_time - n]                                   # (trial, time - n, N)
        seen = torch.as_tensor(arrays.mask[:, : n_time - n].any(-1), device=device)
        z = self.encode(starts.reshape(-1, n_ch)).reshape(n_trials, n_time - n, self.latent_dim)
        z = torch.where(seen[..., None], z, torch.zeros_like(z))    # unseen start: a dummy state, blanked below
        gaps = None
        if arrays.time is not None and self._continuous_time():
            # irregular sampling: an ODE integrates over each actual gap (sample j to j + 1), as in
            # the fit; padding past a trial's end is blanked below
            gaps = sample_gaps(arrays.time, self.dt)
        for k in range(1, n + 1):
            u_k = None if uu is None else uu[:, k: n_time - n + k].reshape(-1, uu.shape[-1])
            dt_k = None if gaps is None else torch.as_tensor(gaps[:, k - 1: n_time - n + k - 1].reshape(-1, 1),
                                                             dtype=dtype, device=device)
            z = self.step(z.reshape(-1, self.latent_dim), u_k, dt_k).reshape(n_trials, n_time - n, self.latent_dim)
        pred = self.decode(z).double().cpu().numpy()
        pred[~seen.cpu().numpy()] = np.nan
        out = np.full((n_trials, n_time, n_ch), np.nan)
        out[:, n:] = pred
        out[np.arange(n_time)[None, :] >= arrays.length[:, None]] = np.nan
        return xr.Dataset({"x": (("trial", "time", "channel"), out)},
                          coords={"trial": ds["trial"].values, "time": ds["time"].values,
                                  "channel": ds["channel"].values},
                          attrs={"n": n, "dt": float(ds.attrs.get("dt", self.dt)), "dsident_version": __version__})

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike, *, metadata: dict[str, Any] | None = None) -> Path:
        """Write the model to the directory ``path`` (config JSON + tensors), atomically.

        The files are written into a temporary sibling directory that then replaces ``path``,
        so an interrupted save never leaves a half-written model. An existing ``path`` is
        replaced only when it is a previous dsident save (or empty).

        Parameters
        ----------
        path : str or PathLike
            Target directory.
        metadata : dict, optional
            JSON-able extra information stored in the config (the estimators keep their
            hyperparameters and fit history there).

        Returns
        -------
        Path of the written directory.
        """
        target = Path(path)
        if target.exists() and not (target.is_dir() and (not any(target.iterdir()) or _is_saved_model(target))):
            raise ValueError(f"`path` {str(target)!r} exists and is not a saved dsident model; refusing to "
                             "overwrite it. Choose a new path or remove it first.")
        state = {k: v.detach().cpu() for k, v in self.state_dict().items() if k.startswith(_STATE_PREFIXES)}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        payload = buffer.getvalue()
        config = {
            "format": _FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "dsident_version": __version__,
            **self.config(),
            "dtype": str(self.log_process_var.dtype).replace("torch.", ""),
            "tensors": {"file": _TENSOR_FILE, "sha256": hashlib.sha256(payload).hexdigest()},
            "metadata": metadata or {},
        }
        try:
            text = json.dumps(config, indent=2, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise TypeError(f"the model configuration is not JSON-serialisable ({err}); every component's "
                            "config() and the metadata must hold plain numbers, strings, lists and dicts.") from err
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
        backup = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir()
            _write_synced(tmp / _TENSOR_FILE, payload)
            _write_synced(tmp / _CONFIG_FILE, text.encode())
            if target.exists():
                target.rename(backup)
            tmp.rename(target)
        except BaseException:
            if backup.exists() and not target.exists():
                backup.rename(target)                 # put the previous save back
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(backup, ignore_errors=True)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike, *, map_location: str | torch.device | None = "cpu") -> "StateSpaceModel":
        """Read a model written by :meth:`save`.

        The tensor file is checked against the sha256 in the config before it is read, and it
        is read with ``torch.load(..., weights_only=True)``.

        ``map_location`` takes what a fit's ``device`` takes (``"cpu"``, ``"cuda"``, ``"cuda:i"``,
        ``"auto"``, a ``torch.device``) or None (the CPU, where :meth:`save` puts the tensors).

        Raises
        ------
        ValueError
            Not a dsident model, an unsupported format version, a tensor file whose hash does
            not match (tampered or corrupted), an unknown component class, or a ``map_location``
            that is not a CPU or an available CUDA device.
        """
        if map_location is not None:       # "cuda" on a machine without it: a clear error, not torch.load's
            from .inference.training import resolve_device

            map_location = resolve_device(map_location, argname="map_location")
        config, state = read_saved_model(path, map_location=map_location)
        dynamics = _build_component(config["dynamics"], DYNAMICS_REGISTRY, "dynamics")
        observation = _build_component(config["observation"], OBSERVATION_REGISTRY, "observation")
        model = cls(dynamics, observation, dt=config["dt"], channel_names=config.get("channel_names"))
        model = model.to(dtype=getattr(torch, config.get("dtype", "float32")))
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"the tensors in {str(path)!r} do not fit the saved configuration: {err}") from err
        if map_location is not None:
            model = model.to(map_location)
        return model


# --------------------------------------------------------------------------------------------
# file helpers
# --------------------------------------------------------------------------------------------
def _components_dtype_device(dynamics: nn.Module, observation: nn.Module) -> tuple[torch.dtype, torch.device]:
    """The one floating dtype and device of the components' parameters, for the model's own
    parameters; torch's defaults when they have none or disagree (a model built from parts in two
    precisions and then converted whole, ``StateSpaceModel(...).double()``, is common; a run before
    that is refused by :func:`_check_one_precision`)."""
    kinds = set(_parameter_kinds(dynamics, observation).values())
    return kinds.pop() if len(kinds) == 1 else (torch.get_default_dtype(), torch.device("cpu"))


def _parameter_kinds(dynamics: nn.Module, observation: nn.Module) -> dict[str, tuple[torch.dtype, torch.device]]:
    """(dtype, device) of the first floating parameter of the dynamics and of the observation."""
    found: dict[str, tuple[torch.dtype, torch.device]] = {}
    for name, part in (("dynamics", dynamics), ("observation", observation)):
        for p in part.parameters():
            if p.is_floating_point():
                found[name] = (p.dtype, p.device)
                break
    return found


def _check_one_precision(model: nn.Module) -> None:
    """Refuse to run a model whose parameters sit in two dtypes or on two devices (its parts built
    in two precisions and not converted whole), which would fail inside a matrix product in
    torch's words."""
    if len({(p.dtype, p.device) for p in model.parameters() if p.is_floating_point()}) > 1:
        kinds = {**_parameter_kinds(model.dynamics, model.observation),
                 "its own parameters": (model.log_process_var.dtype, model.log_process_var.device)}
        said = ", ".join(f"{name} in {str(dt).replace('torch.', '')} on {dev}" for name, (dt, dev) in kinds.items())
        raise ValueError(f"the model's parameters must be in one dtype on one device; got {said}. Convert the whole "
                         "model (`model.double()`, `model.to(device)`) or build its parts in one precision (e.g. "
                         "under torch.set_default_dtype).")


def check_channel_order(channels: Any, model: Any, *, argname: str) -> None:
    """Refuse data that hold the model's channels under their names but in another order: read by
    position, each would stand for another channel. Other names (a plain array's x0, x1, ...) pass."""
    names = getattr(model, "channel_names", None)
    given = [str(c) for c in channels]
    if names and given != list(names) and sorted(given) == sorted(names):
        raise ValueError(f"`{argname}` has the model's channels in another order ({given}; the model was fitted "
                         f"on {list(names)}): channels are read by position, so reorder them, e.g. "
                         f"`data.sel(channel={list(names)})`.")


def _write_synced(path: Path, payload: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())


def _is_saved_model(path: Path) -> bool:
    try:
        return json.loads((path / _CONFIG_FILE).read_text()).get("format") == _FORMAT_NAME
    except (OSError, ValueError, AttributeError):
        return False


def read_saved_config(path: str | os.PathLike) -> dict[str, Any]:
    """The validated ``config.json`` of a saved model (format and version checked).

    Raises
    ------
    ValueError
        If ``path`` is not a dsident model directory or its format version is not supported.
    """
    directory = Path(path)
    config_file = directory / _CONFIG_FILE
    if not config_file.is_file():
        raise ValueError(f"`path` {str(directory)!r} is not a saved dsident model: {_CONFIG_FILE} is missing.")
    try:
        config = json.loads(config_file.read_text())
    except ValueError as err:
        raise ValueError(f"{str(config_file)!r} is not valid JSON: {err}") from err
    if not isinstance(config, dict) or config.get("format") != _FORMAT_NAME:
        if _is_saved_model(directory / "model"):
            zscored = isinstance(config, dict) and bool(config.get("zscore"))
            raise ValueError(f"`path` {str(directory)!r} is a `dsident fit` output folder, not a saved model: load "
                             f"its model from {str(directory / 'model')!r}"
                             + (" (fitted in z-units: standardise data with the `zscore` constants of this "
                                "folder's config.json)" if zscored else "") + ".")
        raise ValueError(f"{str(config_file)!r} is not a dsident model configuration (format "
                         f"{config.get('format') if isinstance(config, dict) else None!r}, expected {_FORMAT_NAME!r}).")
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{str(directory)!r} was written in model file format version {version!r} (by dsident "
                         f"{config.get('dsident_version', '?')}); this dsident {__version__} reads format version "
                         f"{FORMAT_VERSION}.")
    # a hand-edited or damaged config would otherwise fail deep inside load with a bare KeyError
    expected = {"dynamics": "a {class, config} object", "observation": "a {class, config} object",
                "tensors": "a {file, sha256} object", "dt": "a number"}
    for key, what in expected.items():
        value = config.get(key)
        if key == "dt":
            bad = isinstance(value, bool) or not isinstance(value, (int, float))
        elif key == "tensors":
            bad = not (isinstance(value, dict) and all(isinstance(value.get(k), str) for k in ("file", "sha256")))
        else:
            bad = not (isinstance(value, dict) and isinstance(value.get("class"), str)
                       and isinstance(value.get("config", {}), dict))
        if bad:
            raise ValueError(f"{str(config_file)!r} is incomplete or damaged: `{key}` must be {what}; got "
                             f"{key}={value!r}. Save the model again (or restore config.json).")
    dtype = config.get("dtype", "float32")
    if not (isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype)
            and getattr(torch, dtype).is_floating_point):
        raise ValueError(f"{str(config_file)!r} is damaged: `dtype` must be the name of a torch floating-point "
                         f"type (e.g. 'float32'); got dtype={dtype!r}.")
    if not isinstance(config.get("metadata", {}), dict):
        raise ValueError(f"{str(config_file)!r} is damaged: `metadata` must be an object; "
                         f"got metadata={config.get('metadata')!r}.")
    return config


def read_saved_model(path: str | os.PathLike, *,
                     map_location: str | torch.device | None = "cpu") -> tuple[dict[str, Any], dict[str, Tensor]]:
    """(config, state_dict) of a saved model, after checking the tensor file's sha256."""
    config = read_saved_config(path)
    tensor_file = Path(path) / config["tensors"]["file"]
    if Path(str(config["tensors"]["file"])).name != config["tensors"]["file"]:
        raise ValueError(f"the tensor file name in the configuration must be a plain file name; "
                         f"got {config['tensors']['file']!r}.")
    try:
        payload = tensor_file.read_bytes()
    except OSError as err:
        raise ValueError(f"cannot read the tensor file of {str(path)!r}: {err}") from err
    digest = hashlib.sha256(payload).hexdigest()
    if digest != config["tensors"]["sha256"]:
        raise ValueError(f"the tensor file {str(tensor_file)!r} does not match the sha256 recorded in its configuration "
                         f"(expected {config['tensors']['sha256'][:12]}…, got {digest[:12]}…): it was modified or "
                         "corrupted after saving. Refusing to load it.")
    state = torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    return config, state


def _build_component(entry: dict[str, Any], registry: dict[str, type], kind: str) -> Any:
    """Rebuild a component from ``{"class": name, "config": kwargs}`` via its registry."""
    # importing the packages registers every built-in class (dsident.models defines the
    # LatentFeatureObservation of the ODE-RFWP and ORGaNICs fits)
    import dsident.dynamics  # noqa: F401
    import dsident.models  # noqa: F401
    import dsident.observations  # noqa: F401

    name = entry.get("class")
    if name not in registry:
        raise ValueError(f"the saved {kind} class {name!r} is unknown to this dsident; known classes: "
                         f"{sorted(registry)}. Import the module that defines it before loading.")
    try:
        return registry[name](**entry.get("config", {}))
    except (TypeError, ValueError) as err:
        raise ValueError(f"cannot rebuild the saved {kind} {name}({entry.get('config')}): {err}") from err
