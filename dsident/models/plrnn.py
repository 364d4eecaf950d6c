"""Estimators of the PLRNN family: the regularized PLRNN and the shallow PLRNN."""
from __future__ import annotations

from typing import Any, ClassVar

from ..dynamics import PLRNN as PLRNNDynamics
from ..dynamics import ShallowPLRNN as ShallowPLRNNDynamics
from ..dynamics.base import LatentDynamics
from .base import LatentModelEstimator


class PLRNN(LatentModelEstimator):
    r"""Regularized piecewise-linear RNN (rPLRNN) as a generative state-space model.

    .. math::
        z_t = A z_{t-1} + W \phi(z_{t-1}) + C s_t + h + \varepsilon_t, \quad
        \varepsilon_t \sim \mathcal N(0, \Sigma), \qquad x_t \sim p(x_t \mid B\, g(z_t) + b)

    with ``A`` diagonal, ``W`` off-diagonal, ``φ`` = ReLU and the manifold-attractor
    regularizer on the first ``reg_fraction · M`` units (:class:`dsident.dynamics.PLRNN`).

    Parameters
    ----------
    latent_dim : int, default 16
        M, number of latent units.
    reg_fraction : float in [0, 1], default 0.5
        Fraction of regularized ("memory") units, M_reg / M.
    reg_units : {"first", "last"}, default "first"
        Whether the first (the paper) or the last M_reg units are regularized. With
        ``readout="identity"`` (the first N units are the observations), "last" keeps the
        penalty off the observed units.
    tau : float >= 0, default 1.0
        Common weight of the three regularization sums (τ_A = τ_W = τ_h = τ unless set).
    tau_A, tau_W, tau_h : float or None
        Separate weights (None: use ``tau``).
    penalty : {"manifold", "none", "iplrnn", "l2p", "l2f", "orthogonal"}, default "manifold"
        The regularizer and matching initialization (the baselines of the paper's Table 1).
    reg_normalization : {"sum", "mean"}, default "sum"
        Eq. 3 as printed ("sum") or averaged per term as in the authors' SGD code ("mean").
    observation : str or ObservationModel, default "gaussian"
        A name from :data:`dsident.observations.OBSERVATIONS` or an instance.
    readout : {"relu", "linear", "identity"}, default "relu"
        Readout of a named observation model (``x = B relu(z) + b``: the paper's DSR setting).
    observation_options : dict, optional
        Further constructor arguments of a named observation model (e.g. ``{"link": "softplus",
        "bin_size": 0.01}`` for Poisson).
    process_noise : float, default 0.01
        Initial process-noise variance Σ (diagonal).
    initial_var : float, default 1.0
        Variance of the initial-state prior.
    seed : int or None
        Seed of every random initialization.

    Attributes
    ----------
    model_, history_, method_, n_features_in_, channel_names_
        See :class:`~dsident.models.base.LatentModelEstimator`.

    References
    ----------
    Schmidt, Koppe, Monfared, Beutelspacher, Durstewitz (2021), ICLR, eqs. 1–3.

    Examples
    --------
    >>> import dsident
    >>> m = dsident.models.PLRNN(latent_dim=16, reg_fraction=0.5)          # doctest: +SKIP
    >>> m.fit(train, method="laplace-em").generate(1000, seed=0)          # doctest: +SKIP
    """

    default_method: ClassVar[str] = "laplace-em"

    def __init__(self, latent_dim: int = 16, *, reg_fraction: float = 0.5, tau: float = 1.0,
                 tau_A: float | None = None, tau_W: float | None = None, tau_h: float | None = None,
                 penalty: str = "manifold", reg_normalization: str = "sum", reg_units: str = "first",
                 observation: Any = "gaussian",
                 readout: str = "relu", observation_options: dict[str, Any] | None = None,
                 process_noise: float = 0.01, initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.reg_fraction = reg_fraction
        self.tau = tau
        self.tau_A = tau_A
        self.tau_W = tau_W
        self.tau_h = tau_h
        self.penalty = penalty
        self.reg_normalization = reg_normalization
        self.reg_units = reg_units
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        return PLRNNDynamics(self.latent_dim, input_dim, reg_fraction=self.reg_fraction, tau=self.tau,
                             tau_A=self.tau_A, tau_W=self.tau_W, tau_h=self.tau_h, penalty=self.penalty,
                             reg_normalization=self.reg_normalization, reg_units=self.reg_units, seed=self.seed)


class ShallowPLRNN(LatentModelEstimator):
    r"""Shallow PLRNN (optionally clipped) as a generative state-space model.

    .. math::
        z_t = A z_{t-1} + W_1 \phi(W_2 z_{t-1} + h_2) + h_1 + C s_t, \qquad
        x_t \sim p(x_t \mid B\, g(z_t) + b)

    (:class:`dsident.dynamics.ShallowPLRNN`) with ``φ`` = ReLU; with ``clip=True`` the hidden
    layer is ``relu(W_2 z + h_2) − relu(W_2 z)``, bounded by ``|h_2|`` per unit, so that orbits
    stay bounded whenever ``‖A‖₂ < 1``. ``fit`` trains it by generalized teacher forcing
    (``method="teacher-forcing"``, :func:`~dsident.inference.teacher_forcing.fit_teacher_forcing`)
    unless another ``method`` is given (``"bptt"``, ``"svi"``, ...).

    For chaotic data the recommended model is ``clip=True`` with the identity readout and
    ``latent_dim`` = number of channels, trained by teacher forcing (measured settings in
    ``docs/teacher_forcing.md``). ``clip`` stays False by default, so that the plain shallow
    PLRNN, and results measured with it without naming ``clip`` (e.g. by BPTT), are unchanged.

    Parameters
    ----------
    latent_dim : int, default 16
        M, number of latent units (>= the number of channels for the identity readout).
    hidden_dim : int, default 50
        H, width of the hidden ReLU layer.
    clip : bool, default False
        Use the clipped (bounded) nonlinearity; pass True for teacher-forcing reconstructions
        of chaotic systems (the GTF paper's model).
    observation : str or ObservationModel, default "gaussian"
    readout : {"identity", "linear", "relu"}, default "identity"
    observation_options : dict, optional
    process_noise : float, default 0.01
    initial_var : float, default 1.0
    seed : int or None

    Attributes
    ----------
    model_, history_, method_, n_features_in_, channel_names_
        See :class:`~dsident.models.base.LatentModelEstimator`.

    References
    ----------
    Hess, Monfared, Brenner, Durstewitz (2023), "Generalized teacher forcing for learning
    chaotic dynamics", ICML (the clipped shallow PLRNN and GTF).

    Examples
    --------
    >>> import dsident
    >>> m = dsident.models.ShallowPLRNN(latent_dim=3, hidden_dim=100, clip=True)   # doctest: +SKIP
    >>> m.fit(train, n_epochs=150, seq_len=100).generate(1000, seed=0)           # doctest: +SKIP
    """

    default_method: ClassVar[str] = "teacher-forcing"

    def __init__(self, latent_dim: int = 16, *, hidden_dim: int = 50, clip: bool = False,
                 observation: Any = "gaussian", readout: str = "identity",
                 observation_options: dict[str, Any] | None = None, process_noise: float = 0.01,
                 initial_var: float = 1.0, seed: int | None = None) -> None:
        self.latent_dim = latent_dim
        self.hidden_dim = hidden_dim
        self.clip = clip
        self.observation = observation
        self.readout = readout
        self.observation_options = observation_options
        self.process_noise = process_noise
        self.initial_var = initial_var
        self.seed = seed

    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        return ShallowPLRNNDynamics(self.latent_dim, self.hidden_dim, input_dim, clip=self.clip, seed=self.seed)
