"""Estimators of the continuous-time models: GatedNODE, LTC, RecurrentFWP and ORGaNICs.

Each builds a :class:`~dsident.StateSpaceModel` from the dynamics of the same name in
:mod:`dsident.dynamics` and an observation model, and fits it with an inference engine
(stochastic variational inference by default; ``method="bptt"`` for deterministic training).

Two of the models have latent units that observations should not read: the fast weights of
ODE-RFWP and the modulator neurons ``a`` of ORGaNICs. Their observation model is wrapped in
:class:`LatentFeatureObservation`, which feeds the likelihood only the *observed part* of the
latent (``dynamics.readout_slice``), optionally through the ORGaNICs firing-rate map
``y+ = floor(y)^2``.
"""
from __future__ import annotations

import copy
import math
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ..data import as_dataset
from ..dynamics.base import LatentDynamics
from ..dynamics.gnode import GatedNODE as GatedNODEDynamics
from ..dynamics.ltc import LTC as LTCDynamics
from ..dynamics.organics import ORGaNICs as ORGaNICsDynamics
from ..dynamics.rfwp import RecurrentFWP as RecurrentFWPDynamics
from .._checks import check_bool
from ..model import _positive_vector
from ..observations import ObservationModel, make_observation
from .base import LatentModelEstimator

__all__ = ["GatedNODE", "LTC", "RecurrentFWP", "ORGaNICs", "LatentFeatureObservation"]

_TRANSFERS = ("identity", "rate")


class LatentFeatureObservation(ObservationModel):
    """An observation model that reads only the first ``n_read`` latent units.

    Parameters
    ----------
    obs_dim : int
        N, number of observed channels.
    latent_dim : int
        M, size of the full latent state.
    n_read : int
        Number of leading latent units the likelihood sees (the dynamics' ``observed_latent_dim``).
    transfer : {"identity", "rate"}
        Features handed to the likelihood: ``z[..., :n_read]`` or the firing rates
        ``floor(z[..., :n_read])^2`` (ORGaNICs' ``y+``).
    observation : str
        Name of the inner likelihood (a key of :data:`dsident.observations.OBSERVATIONS`).
    observation_options : dict, optional
        Constructor arguments of the inner likelihood (e.g. ``{"readout": "linear"}``).
    fill_value : float
        Value given to the unread units by :meth:`invert` (0 for fast weights; a positive
        modulator potential for ORGaNICs).

    Attributes
    ----------
    inner : ObservationModel
        The likelihood, with ``latent_dim = n_read``.
    """

    def __init__(self, obs_dim: int, latent_dim: int, n_read: int, transfer: str = "identity",
                 observation: str = "gaussian", observation_options: dict[str, Any] | None = None,
                 fill_value: float = 0.0) -> None:
        super().__init__()
        if transfer not in _TRANSFERS:
            raise ValueError(f"`transfer` must be one of {list(_TRANSFERS)}; got {transfer!r}.")
        if not isinstance(n_read, int) or not 1 <= n_read <= latent_dim:
            raise ValueError(f"`n_read` must be an integer in [1, latent_dim={latent_dim}]; got {n_read!r}.")
        self.obs_dim, self.latent_dim, self.n_read = int(obs_dim), int(latent_dim), n_read
        self.transfer, self.observation = transfer, observation
        self.observation_options = None if observation_options is None else dict(observation_options)
        self.fill_value = float(fill_value)
        self.inner = make_observation(observation, obs_dim, n_read, **(self.observation_options or {}))

    def features(self, z: Tensor) -> Tensor:
        """What the likelihood reads: (..., M) -> (..., n_read)."""
        if z.shape[-1] != self.latent_dim:
            raise ValueError(f"`z` must have a last (latent) dimension of size {self.latent_dim}; got {tuple(z.shape)}.")
        part = z[..., :self.n_read]
        return torch.relu(part) ** 2 if self.transfer == "rate" else part

    def log_prob(self, x: Tensor, z: Tensor, mask: Tensor | None = None) -> Tensor:
        """log p(x | z) summed over observed channels: x (..., N), z (..., M) -> (...)."""
        return self.inner.log_prob(x, self.features(z), mask)

    def mean(self, z: Tensor) -> Tensor:
        """E[x | z]: (..., M) -> (..., N)."""
        return self.inner.mean(self.features(z))

    def sample(self, z: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """x ~ p(x | z): (..., M) -> (..., N)."""
        return self.inner.sample(self.features(z), generator=generator)

    def init_from_data(self, x: Any, mask: Any = None) -> "LatentFeatureObservation":
        """Initialise the inner likelihood's readout from data (e.g. PCA); returns self."""
        self.inner.init_from_data(x, mask)
        return self

    def invert(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """A latent state consistent with x: (..., N) -> (..., M); unread units get ``fill_value``."""
        feats = self.inner.invert(x, mask)
        if self.transfer == "rate":
            feats = torch.sqrt(torch.relu(feats))
        rest = torch.full((*feats.shape[:-1], self.latent_dim - self.n_read), self.fill_value,
                          dtype=feats.dtype, device=feats.device)
        return torch.cat([feats, rest], dim=-1)


class _ContinuousTimeEstimator(LatentModelEstimator):
    """Shared parts: the data's ``dt`` is known while the dynamics are built (for ``tau=None``)."""

    default_method: ClassVar[str] = "svi"
    #: how the observation model reads the latent: None (all units), "identity" or "rate"
    _feature_transfer: ClassVar[str | None] = None
    _fill_value: ClassVar[float] = 0.0

    def fit(self, data: Any, method: str | None = None, **engine_options: Any) -> "_ContinuousTimeEstimator":
        """Build the state-space model and fit it (see :meth:`LatentModelEstimator.fit`)."""
        ds = as_dataset(data)
        self._data_dt = float(ds.attrs["dt"])      # read by _build_dynamics; removed again below
        try:
            return super().fit(ds, method, **engine_options)
        finally:
            del self._data_dt

    def _time_constant(self, tau: Any) -> Any:
        # handed on as given, so that the dynamics refuse "0.1" or True (float() read them as 0.1 and 1.0)
        return float(self._data_dt) if tau is None else tau

    def _n_observed_units(self) -> int:
        return int(self.latent_dim)

    def _full_latent_dim(self) -> int:
        return int(self.latent_dim)

    def _build_observation(self, obs_dim: int) -> ObservationModel:
        if self._feature_transfer is None:
            return super()._build_observation(obs_dim)
        n_read, m = self._n_observed_units(), self._full_latent_dim()
        if isinstance(self.observation, ObservationModel):
            inner = copy.deepcopy(self.observation)
            make_observation(inner, obs_dim, n_read)           # checks the instance's dimensions
            name = type(inner).__name__.lower()
            options = {k: v for k, v in inner.config().items() if k not in ("obs_dim", "latent_dim")}
            wrapped = LatentFeatureObservation(obs_dim, m, n_read, self._feature_transfer, name, options,
                                               self._fill_value)
            wrapped.inner.load_state_dict(inner.state_dict())
            return wrapped
        options = dict(self.observation_options or {})
        options.setdefault("readout", self.readout)
        return LatentFeatureObservation(obs_dim, m, n_read, self._feature_transfer, self.observation, options,
                                        self._fill_value)


class GatedNODE(_ContinuousTimeEstimator):
    r"""Gated neural ODE (gnODE) as a generative state-space model.

    .. math::
        \tau \dot z = G(z, u) \odot (-z + F(z, u)), \qquad x_t \sim p(x_t \mid B z_t + b)

    (:class:`dsident.dynamics.GatedNODE`; Kim, Can & Krishnamurthy 2023, eqs. 1-4.)

    Parameters
    ----------
    latent_dim : int, default 16
        M, the phase-space dimension.
    hidden_dim : int, default 100
        Width of F's hidden layers.
    n_layers : int, default 2
        Weight layers of F (1 hidden layer).
    gate_layers : int, default 1
        Weight layers of the gate G.
    gate_hidden_dim : int, default 100
    output_nonlinearity : {"tanh", "identity"}, default "tanh"
    gated : bool, default True
        False gives the leaky nODE.
    tau : float or None, default None
        Time constant in the data's time unit; None uses the sampling step (``dt / tau = 1``, the
        paper's setting).
    init : {"critical", "glorot", "kaiming"}, default "critical"
    solver : str, default "euler"
        ODE solver (:data:`dsident.dynamics.solvers.SOLVERS`).
    n_substeps : int, default 1
    observation, readout, observation_options, process_noise, initial_var, seed
        As in :class:`dsident.models.PLRNN` (readout "linear" by default).
    """

    def __init__(self, latent_dim: int = 16, *, hidden_dim: int = 100, n_layers: int = 2, gate_layers: int = 1,
                 gate_hidden_dim: int = 100, output_nonlinearity: str = "tanh", gated: bool = True,
                 tau: float | None = None, init: str = "critical", solver: str = "euler", n_substeps: int = 1,
                 observation: Any = "gaussian", readout: str = "linear",
                 observation_options: dict[str, Any] | None = None, process_noise: float = 0.01,
                 initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.gate_layers = gate_layers
        self.gate_hidden_dim = gate_hidden_dim
        self.output_nonlinearity = output_nonlinearity
        self.gated = gated
        self.tau = tau
        self.init = init
        self.solver = solver
        self.n_substeps = n_substeps
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        return GatedNODEDynamics(int(self.latent_dim), input_dim, hidden_dim=self.hidden_dim, n_layers=self.n_layers,
                                 gate_hidden_dim=self.gate_hidden_dim, gate_layers=self.gate_layers,
                                 output_nonlinearity=self.output_nonlinearity, gated=self.gated,
                                 tau=self._time_constant(self.tau), init=self.init, method=self.solver,
                                 n_substeps=self.n_substeps, seed=self.seed)


class LTC(_ContinuousTimeEstimator):
    r"""Liquid time-constant network as a generative state-space model.

    .. math::
        \dot z = -[1/\tau + f(z, u)] \odot z + f(z, u) \odot A, \qquad x_t \sim p(x_t \mid B z_t + b)

    (:class:`dsident.dynamics.LTC`; Hasani et al. 2021, eqs. 1 and 4.)

    Parameters
    ----------
    latent_dim : int, default 16
        M, number of neurons.
    form : {"synaptic", "compact"}, default "synaptic"
        Per-synapse conductance form of the reference code, or the paper's eq. 1.
    solver : str, default "fused"
        The paper's fused semi-implicit step (bounded for any step size).
    n_substeps : int, default 6
        ODE unfolds per sample.
    time_constant : float, (float, float) or None, default None
        Initial time constant of every neuron, in the data's time unit, or a pair (fastest,
        slowest) spread geometrically over the neurons (None: the reference start, 0.5 synaptic
        / 1 compact, which is one sample at dt = 0.5 and 350 at dt = 1/700; see
        :class:`dsident.dynamics.LTC`).
    observation, readout, observation_options, process_noise, initial_var, seed
        As in :class:`dsident.models.PLRNN` (readout "linear" by default).
    """

    def __init__(self, latent_dim: int = 16, *, form: str = "synaptic", solver: str = "fused", n_substeps: int = 6,
                 time_constant: float | tuple[float, float] | None = None, observation: Any = "gaussian", readout: str = "linear",
                 observation_options: dict[str, Any] | None = None, process_noise: float = 0.01,
                 initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.form = form
        self.solver = solver
        self.n_substeps = n_substeps
        self.time_constant = time_constant
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        return LTCDynamics(int(self.latent_dim), input_dim, form=self.form, method=self.solver,
                           n_substeps=self.n_substeps, time_constant=self.time_constant, seed=self.seed)


class RecurrentFWP(_ContinuousTimeEstimator):
    r"""ODE-RFWP (continuous-time recurrent fast weight programmer) as a generative state-space model.

    The latent is ``[y, vec(W)]``: a vector state ``y`` of size ``latent_dim`` and ``n_heads``
    fast weight matrices following a continuous learning rule (:class:`dsident.dynamics.RecurrentFWP`).
    Observations read ``y`` only, and process noise acts on ``y`` only: the fast weights get the
    small variance ``fast_weight_noise`` (they are a near-deterministic memory of the state's history).

    Parameters
    ----------
    latent_dim : int, default 16
        D, size of the vector state (the observed part of the latent).
    n_heads : int, default 4
    head_dim : int or None
        Default ``latent_dim // n_heads``.
    rule : {"delta", "hebb", "oja"}, default "delta"
    hidden_dim : int, default 64
    tau : float or None, default None
        Time constant in the data's time unit; None uses the sampling step.
    tau_fast : float or None, default None
        Time constant of the fast weights in the data's time unit; None uses ``tau``.
    solver : str, default "rk4"
    n_substeps : int, default 1
    fast_weight_noise : float, default 1e-3
        Initial process-noise variance of the fast-weight units. Smaller values make the fast
        weights closer to deterministic, but the SVI objective then scales like
        ``1 / fast_weight_noise`` until the guide has learned their (near-deterministic) paths.
    observation, readout, observation_options, process_noise, initial_var, seed
        As in :class:`dsident.models.PLRNN`; ``process_noise`` is the variance on ``y``.
    """

    _feature_transfer: ClassVar[str | None] = "identity"

    def __init__(self, latent_dim: int = 16, *, n_heads: int = 4, head_dim: int | None = None, rule: str = "delta",
                 hidden_dim: int = 64, tau: float | None = None, tau_fast: float | None = None, solver: str = "rk4",
                 n_substeps: int = 1, fast_weight_noise: float = 1e-3, observation: Any = "gaussian", readout: str = "linear",
                 observation_options: dict[str, Any] | None = None, process_noise: float = 0.01,
                 initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.n_heads = n_heads
        self.head_dim = head_dim
        self.rule = rule
        self.hidden_dim = hidden_dim
        self.tau = tau
        self.tau_fast = tau_fast
        self.solver = solver
        self.n_substeps = n_substeps
        self.fast_weight_noise = fast_weight_noise
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    def _head_dim(self) -> int:
        self._check_heads()
        return int(self.head_dim) if self.head_dim is not None else max(1, int(self.latent_dim) // int(self.n_heads))

    def _check_heads(self) -> None:
        """``n_heads`` and ``head_dim`` size the fast-weight state, so they are checked before it is built."""
        def positive_int(value: Any) -> bool:
            return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1

        if not positive_int(self.n_heads):
            raise ValueError(f"`n_heads` must be an integer >= 1; got n_heads={self.n_heads!r}.")
        if self.head_dim is not None and not positive_int(self.head_dim):
            raise ValueError(f"`head_dim` must be an integer >= 1 or None (latent_dim // n_heads); "
                             f"got head_dim={self.head_dim!r}.")

    def _full_latent_dim(self) -> int:
        return int(self.latent_dim) + int(self.n_heads) * self._head_dim() ** 2

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        return RecurrentFWPDynamics(int(self.latent_dim), input_dim, n_heads=self.n_heads, head_dim=self.head_dim,
                                    rule=self.rule, hidden_dim=self.hidden_dim, tau=self._time_constant(self.tau),
                                    tau_fast=self.tau_fast, method=self.solver, n_substeps=self.n_substeps, seed=self.seed)

    def fit(self, data: Any, method: str | None = None, **engine_options: Any) -> "RecurrentFWP":
        """Fit (see :meth:`LatentModelEstimator.fit`) with process noise on the vector part only."""
        noise_ok = (not isinstance(self.fast_weight_noise, (bool, np.bool_))
                    and isinstance(self.fast_weight_noise, (int, float, np.integer, np.floating))
                    and math.isfinite(float(self.fast_weight_noise)) and self.fast_weight_noise > 0)
        if not noise_ok:     # True passed as a variance of 1; inf reached the process noise
            raise ValueError(f"`fast_weight_noise` must be a positive finite variance; got {self.fast_weight_noise!r}.")
        self._check_hyperparameters()   # latent_dim sizes the noise vector (-2 failed in numpy's broadcast)
        self._process_noise_for_model()
        return super().fit(data, method, **engine_options)

    def _process_noise_for_model(self) -> np.ndarray:
        """``process_noise`` on the vector part, ``fast_weight_noise`` on the fast weights."""
        # checked as the user gave it: a wrong shape failed in numpy's broadcast, and a bad value was
        # reported as the built (latent_dim + fast weights) vector
        user = _positive_vector("process_noise", self.process_noise, int(self.latent_dim))
        noise = np.full(self._full_latent_dim(), float(self.fast_weight_noise))
        noise[:int(self.latent_dim)] = user
        return noise


class ORGaNICs(_ContinuousTimeEstimator):
    r"""ORGaNICs circuit as a generative state-space model of neural recordings.

    The latent is ``[y, a]`` (principal and modulator membrane potentials,
    :class:`dsident.dynamics.ORGaNICs`); observations read the principal neurons' firing rates
    ``y+ = floor(y)^2`` (``rate_readout=True``) or their potentials ``y``.

    Parameters
    ----------
    latent_dim : int, default 16
        n, number of principal neurons (the latent state has ``2 n`` units).
    recurrence : {"free", "spectral", "identity"}, default "free"
        ``W_r`` unconstrained (as the paper trains its sequential models), rescaled to spectral
        norm 1, or the identity (provably stable, but then every constant input leads to a
        fixed point, so it cannot reproduce autonomous oscillations or chaos).
    rectified : bool, default False
    max_rate_y, max_rate_a : float or None
        Bounds of ``1 / tau_y`` and ``1 / tau_a`` per time unit; None gives ``0.5 / dt`` and
        ``0.1 / dt`` (modulators slower than principal cells, as the paper recommends).
    learn_tau : bool, default True
    rate_readout : bool, default True
    read_modulators : bool, default False
        Let the observations read the modulators ``a`` as well as the potentials ``y`` (the
        whole ``2 n`` state; needs ``rate_readout=False``). The modulators follow ``y**2``, so
        they are even under ``y -> -y`` where the potentials are odd: a channel that is even
        under a symmetry of the data (Lorenz-63's z under (x, y) -> (-x, -y)) can then be read
        from ``a`` instead of being built from the potentials' drive offsets.
    solver : str, default "euler"
        Forward Euler as in the paper's training (eq. 135).
    n_substeps : int, default 1
    norm_weight_scale : float, default 1.0
        Factor on the initial normalisation weights (see :class:`dsident.dynamics.ORGaNICs`);
        below 1 for principal potentials of order 1 or more (e.g. ``rate_readout=False`` with an
        identity readout of z-scored data).
    observation, readout, observation_options, process_noise, initial_var, seed
        As in :class:`dsident.models.PLRNN` (readout "linear" by default).
    """

    _fill_value: ClassVar[float] = 1.0

    def __init__(self, latent_dim: int = 16, *, recurrence: str = "free", rectified: bool = False,
                 max_rate_y: float | None = None, max_rate_a: float | None = None, learn_tau: bool = True,
                 rate_readout: bool = True, read_modulators: bool = False, solver: str = "euler",
                 n_substeps: int = 1, norm_weight_scale: float = 1.0, observation: Any = "gaussian",
                 readout: str = "linear",
                 observation_options: dict[str, Any] | None = None, process_noise: float = 0.01,
                 initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.recurrence = recurrence
        self.rectified = rectified
        self.max_rate_y = max_rate_y
        self.max_rate_a = max_rate_a
        self.learn_tau = learn_tau
        self.rate_readout = rate_readout
        self.read_modulators = read_modulators
        self.solver = solver
        self.n_substeps = n_substeps
        self.norm_weight_scale = norm_weight_scale
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    @property
    def _feature_transfer(self) -> str:  # type: ignore[override]
        # a bool, not any truthy value: rate_readout="no" turned the rate readout on
        return "rate" if check_bool("rate_readout", self.rate_readout) else "identity"

    def _full_latent_dim(self) -> int:
        return 2 * int(self.latent_dim)

    def _n_observed_units(self) -> int:
        if check_bool("read_modulators", self.read_modulators) and self.rate_readout:
            raise ValueError("`read_modulators=True` reads the modulator potentials `a` directly and needs "
                             "`rate_readout=False`; got rate_readout=True (the firing-rate map floor(.)**2 is "
                             "for the principal cells).")
        return 2 * int(self.latent_dim) if self.read_modulators else int(self.latent_dim)

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        dt = self._data_dt
        rate_y = 0.5 / dt if self.max_rate_y is None else self.max_rate_y     # checked by the dynamics
        rate_a = 0.1 / dt if self.max_rate_a is None else self.max_rate_a
        return ORGaNICsDynamics(int(self.latent_dim), input_dim, recurrence=self.recurrence, rectified=self.rectified,
                                max_rate_y=rate_y, max_rate_a=rate_a, learn_tau=self.learn_tau, method=self.solver,
                                n_substeps=self.n_substeps, norm_weight_scale=self.norm_weight_scale, seed=self.seed)
