"""Gated neural ODE (gnODE; Kim, Can & Krishnamurthy, ICML 2023) and its special cases.

Legend: ``B`` batch, ``M`` latent_dim (the paper's N), ``K`` input_dim (the paper's D),
``H`` hidden width, ``L`` number of weight layers of an MLP.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .base import LatentDynamics
from .solvers import ODEStepMixin, check_method

__all__ = ["GatedNODE", "FlowMLP"]

_ACTIVATIONS = ("identity", "relu", "tanh", "sigmoid")
_INITS = ("critical", "glorot", "kaiming")


def _act(name: str, x: Tensor) -> Tensor:
    if name == "relu":
        return torch.relu(x)
    if name == "tanh":
        return torch.tanh(x)
    if name == "sigmoid":
        return torch.sigmoid(x)
    return x


def _act_grad(name: str, x: Tensor, y: Tensor) -> Tensor:
    """Derivative of the activation at pre-activation ``x`` with output ``y`` (element-wise)."""
    if name == "relu":
        return (x > 0).to(x.dtype)
    if name == "tanh":
        return 1.0 - y * y
    if name == "sigmoid":
        return y * (1.0 - y)
    return torch.ones_like(x)


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}; got {value!r}.")


def _check_flag(name: str, value: Any) -> bool:
    """A True/False switch: a bool (or numpy bool), else ValueError. ``bool("false")`` is True,
    so a string from a config file or the command line would otherwise turn the switch on."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"`{name}` must be True or False; got {name}={value!r}.")
    return bool(value)


def _check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int; numpy integers (a grid from ``np.arange``) are integers too."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


def _check_positive_number(name: str, value: Any, unit: str) -> float:
    """``value`` as a float: a real number (numpy's included), finite and > 0. A bool or a string
    (``"0.1"`` from a config read as text) is refused rather than read as a number."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value)) or float(value) <= 0):
        raise ValueError(f"`{name}` must be a positive number ({unit}); got {value!r}.")
    return float(value)


class FlowMLP(nn.Module):
    """The paper's eqs. 2-4: an MLP ``R^M x R^K -> R^M`` whose first layer takes state and input.

    ``s1 = act(W0 z + U u + b0)``, ``s_{l+1} = act(W_l s_l + b_l)``, output ``out_act(W_{L-1} s + b)``.
    With ``n_layers = 1`` the single layer uses ``out_act`` (eqs. 2 and 4 coincide).
    """

    def __init__(self, latent_dim: int, input_dim: int, hidden_dim: int, n_layers: int,
                 hidden_act: str, out_act: str) -> None:
        super().__init__()
        widths = [latent_dim] + [hidden_dim] * (n_layers - 1) + [latent_dim]
        self.layers = nn.ModuleList(nn.Linear(widths[i], widths[i + 1]) for i in range(n_layers))
        self.input_layer = nn.Linear(input_dim, widths[1], bias=False) if input_dim > 0 else None
        self.hidden_act, self.out_act = hidden_act, out_act

    def forward(self, z: Tensor, u: Tensor | None, with_jacobian: bool = False) -> tuple[Tensor, Tensor | None]:
        """Output (B, M) and, if asked, its Jacobian with respect to ``z`` (B, M, M)."""
        h = z
        jac = None
        n = len(self.layers)
        for i, layer in enumerate(self.layers):
            pre = layer(h)
            if i == 0 and self.input_layer is not None and u is not None:
                pre = pre + self.input_layer(u)
            name = self.out_act if i == n - 1 else self.hidden_act
            h = _act(name, pre)
            if with_jacobian:
                lin = layer.weight if jac is None else layer.weight @ jac          # (H, M) or (B, H, M)
                jac = _act_grad(name, pre, h)[:, :, None] * lin
        return h, jac

    def init_weights(self, scheme: str, generator: torch.Generator, input_scale: float = 1.0) -> None:
        """Draw the weights: ``critical`` (paper eq. 56, Kaiming scaling), ``glorot`` or ``kaiming`` normal.

        Biases ~ N(0, 1e-6) as in the paper's appendices G and H.1.
        """
        n = len(self.layers)
        if scheme == "critical":
            # rho(J_F) = 1 at the zero fixed point (eqs. 41, 56): sigma_w*^(2L) * C_phi'^(L-1) = 1 with
            # C_phi' = 1/2 for ReLU hidden layers and phi'(0)^2 = 1 for tanh/identity hidden layers
            gain = math.sqrt(2.0 ** (1.0 - 1.0 / n)) if self.hidden_act == "relu" else 1.0
        for layer in self.layers:
            fan_out, fan_in = layer.weight.shape
            if scheme == "critical":
                std = gain / math.sqrt(fan_in)
            elif scheme == "glorot":
                std = math.sqrt(2.0 / (fan_in + fan_out))
            else:
                std = math.sqrt(2.0 / fan_in)
            with torch.no_grad():
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) * std)
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=generator) * 1e-3)
        if self.input_layer is not None:
            fan_in = self.input_layer.weight.shape[1]
            with torch.no_grad():
                self.input_layer.weight.copy_(torch.randn(self.input_layer.weight.shape, generator=generator)
                                              * input_scale / math.sqrt(fan_in))


class GatedNODE(ODEStepMixin, LatentDynamics):
    r"""Gated neural ODE, the nODE without gate, and the minimal GRU (mGRU) as special cases.

    Parameters
    ----------
    latent_dim : int
        M, the phase-space dimension (the paper's N).
    input_dim : int
        K, size of the external input; it enters the first layer of F and G.
    hidden_dim : int
        Width H of the hidden layers of F (the paper uses 100-1000).
    n_layers : int
        Number of weight layers L_h of F (``L = 4, H = 100`` is the flip-flop setting; 1 gives
        ``F = phi_h(W z + U u + b)``, the Elman/mGRU flow).
    gate_hidden_dim : int
        Width of the hidden layers of G (used when ``gate_layers > 1``).
    gate_layers : int
        Number of weight layers L_z of G (1 by default, as in the paper's Sections 6.1-6.4).
    output_nonlinearity : {"identity", "tanh"}
        phi_h, the output nonlinearity of F. The paper uses tanh with the critical initialisation.
    hidden_nonlinearity : {"relu", "tanh"}
        phi_a, the hidden nonlinearity of both MLPs (ReLU in the paper).
    gated : bool
        False gives the leaky nODE ``tau dz/dt = -z + F(z, u)``.
    tau : float
        Fixed time constant, in the unit of the data's time coordinate (not trained, as in the paper).
    init : {"critical", "glorot", "kaiming"}
        Weight initialisation of F; ``critical`` is the paper's eq. 56 (spectral radius of the
        flow Jacobian 1 at the origin). G always uses Glorot normal.
    method : str
        Solver (:data:`dsident.dynamics.solvers.SOLVERS`); forward Euler as in the paper.
    n_substeps : int
        Solver sub-steps per sampling interval.
    seed : int or None
        Seed of the weight initialisation.

    Notes
    -----
    .. math::

        \tau \dot z = G(z, u) \odot \big(-z + F(z, u)\big),\qquad
        G = \sigma(\mathrm{MLP}_z),\; F = \phi_h(\mathrm{MLP}_h)

    (Kim et al. 2023, eqs. 1-4). With Euler and ``alpha = dt / tau`` one step is
    ``z' = (1 - alpha G) z + alpha G F``; ``alpha = 1`` is the paper's flip-flop setting. Because
    ``G`` lies in (0, 1) the field has the split ``-a z + b`` with ``a = G / tau``, so the
    LTC-style ``"fused"`` solver applies as well.

    The Jacobians of the vector field and of the step are analytic.

    References
    ----------
    Kim, Can & Krishnamurthy (2023), seed ``000_gnode.md`` sections 1.2-1.4 and 2.4.
    """

    def __init__(self, latent_dim: int, input_dim: int = 0, *, hidden_dim: int = 100, n_layers: int = 2,
                 gate_hidden_dim: int = 100, gate_layers: int = 1, output_nonlinearity: str = "tanh",
                 hidden_nonlinearity: str = "relu", gated: bool = True, tau: float = 1.0,
                 init: str = "critical", method: str = "euler", n_substeps: int = 1,
                 seed: int | None = None) -> None:
        super().__init__()
        latent_dim = _check_positive_int("latent_dim", latent_dim)
        input_dim = _check_positive_int("input_dim", input_dim, 0)
        hidden_dim = _check_positive_int("hidden_dim", hidden_dim)
        n_layers = _check_positive_int("n_layers", n_layers)
        gate_hidden_dim = _check_positive_int("gate_hidden_dim", gate_hidden_dim)
        gate_layers = _check_positive_int("gate_layers", gate_layers)
        n_substeps = _check_positive_int("n_substeps", n_substeps)
        _check_choice("output_nonlinearity", output_nonlinearity, ("identity", "tanh"))
        _check_choice("hidden_nonlinearity", hidden_nonlinearity, ("relu", "tanh"))
        _check_choice("init", init, _INITS)
        check_method(method)
        gated = _check_flag("gated", gated)
        tau = _check_positive_number("tau", tau, "time units")
        self.latent_dim, self.input_dim = latent_dim, input_dim
        self.hidden_dim, self.n_layers = hidden_dim, n_layers
        self.gate_hidden_dim, self.gate_layers = gate_hidden_dim, gate_layers
        self.output_nonlinearity, self.hidden_nonlinearity = output_nonlinearity, hidden_nonlinearity
        self.gated, self.tau, self.init = bool(gated), float(tau), init
        self.method, self.n_substeps, self.seed = method, n_substeps, seed

        gen = torch.Generator().manual_seed(0 if seed is None else int(seed))
        self.flow = FlowMLP(latent_dim, input_dim, hidden_dim, n_layers, hidden_nonlinearity, output_nonlinearity)
        self.flow.init_weights(init, gen)
        if self.gated:
            self.gate = FlowMLP(latent_dim, input_dim, gate_hidden_dim, gate_layers, hidden_nonlinearity, "sigmoid")
            self.gate.init_weights("glorot", gen)
        else:
            self.gate = None

    @classmethod
    def mgru(cls, latent_dim: int, input_dim: int = 0, **kwargs: Any) -> "GatedNODE":
        """The minimal GRU: ``tau dz/dt = sigma(W_z z + U_z u + b_z) (-z + tanh(W_h z + U_h u + b_h))``."""
        params = {"n_layers": 1, "gate_layers": 1, "output_nonlinearity": "tanh", "init": "glorot"}
        params.update(kwargs)
        return cls(latent_dim, input_dim, **params)

    def decay_and_drive(self, z: Tensor, u: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The split ``dz/dt = -a z + b``: ``a = G / tau`` (or ``1 / tau``), ``b = a * F``; each (B, M)."""
        uu = self._inputs(z, u)
        flow, _ = self.flow(z, uu)
        if self.gate is None:
            a = torch.full_like(z, 1.0 / self.tau)
        else:
            a = self.gate(z, uu)[0] / self.tau
        return a, a * flow

    def vector_field(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """dz/dt = G(z, u) * (-z + F(z, u)) / tau; (B, M) -> (B, M)."""
        a, b = self.decay_and_drive(z, u)
        return b - a * z

    def decay_and_drive_jacobian(self, z: Tensor, u: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``a, b`` (B, M) and their Jacobians ``da/dz, db/dz`` (B, M, M), analytic."""
        uu = self._inputs(z, u)
        flow, jf = self.flow(z, uu, with_jacobian=True)
        if self.gate is None:
            a = torch.full_like(z, 1.0 / self.tau)
            da = torch.zeros_like(jf)
        else:
            g, jg = self.gate(z, uu, with_jacobian=True)
            a, da = g / self.tau, jg / self.tau
        b = a * flow
        db = flow[:, :, None] * da + a[:, :, None] * jf
        return a, b, da, db

    def vector_field_jacobian(self, z: Tensor, u: Tensor | None = None) -> Tensor:
        """d(dz/dt)/dz = diag(-z + F) dG/tau + diag(G/tau)(-I + dF), shape (B, M, M)."""
        a, _, da, db = self.decay_and_drive_jacobian(z, u)
        eye = torch.eye(z.shape[1], dtype=z.dtype, device=z.device)
        return db - z[:, :, None] * da - a[:, :, None] * eye
