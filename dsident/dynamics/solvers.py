"""ODE solvers for the continuous-time latent dynamics (gnODE, LTC, ODE-RFWP, ORGaNICs).

One entry point, :func:`integrate`, and one table of names, :data:`SOLVERS` (after
torchdiffeq's ``odeint``). The models themselves call :func:`solver_step`, which advances a
batch of states over one sampling interval with the input held constant (piecewise-constant
input per bin, as in all four seed papers), and :func:`solver_step_jacobian`, which chains the
analytic Jacobian of the vector field through the same solver stages.

Methods
-------
``"euler"``
    Explicit (forward) Euler, order 1. The gnODE and ORGaNICs papers train with it.
``"rk4"``
    Classical fourth-order Runge-Kutta, order 4 (the neural-ODE baseline of the LTC paper).
``"fused"`` (alias ``"semi-implicit"``)
    The LTC paper's fused semi-implicit Euler step (Hasani et al., eq. 4): for a vector field
    of the form ``dz/dt = -a(z) * z + b(z)`` with ``a >= 0`` the linear occurrence of ``z`` is
    taken at the new time, ``z' = (z + h b(z)) / (1 + h a(z))``. The update is a convex
    combination, so it is bounded for *any* step size. Needs the split ``(a, b)``: the vector
    field (or the object it is bound to) must provide ``decay_and_drive(z, u)``.
``"dopri5"``
    Adaptive Dormand-Prince 5(4) with error control, for evaluation and accuracy checks.

Time steps may differ per trial: ``dt`` is a float or a tensor of shape ``(batch, 1)``.
Sub-steps ("unfolds" in the LTC paper) split each interval into ``n_substeps`` equal parts.

Shape legend: ``B`` batch (trials), ``M`` state size, ``K`` input size, ``T`` time points.
"""
from __future__ import annotations

import math
import numbers
import warnings
from typing import Any, Callable, Mapping

import torch
from torch import Tensor

from .base import check_state

#: A vector field of the models: ``f(z (B, M), u (B, K) | None) -> dz/dt (B, M)``.
StepField = Callable[[Tensor, "Tensor | None"], Tensor]
#: A vector field for :func:`integrate`: ``f(t, z (B, M)) -> dz/dt (B, M)``; ``t`` is a float or (B, 1).
TimeField = Callable[[Any, Tensor], Tensor]

__all__ = ["check_run_step", "SOLVERS", "integrate", "solver_step", "solver_step_jacobian", "SplitVectorField",
           "ODEStepMixin", "check_method", "check_dt"]

#: method name -> properties (convergence order, adaptive step?); an unknown name gets an error listing these keys.
SOLVERS: dict[str, dict[str, Any]] = {
    "euler": {"order": 1, "adaptive": False},
    "rk4": {"order": 4, "adaptive": False},
    "fused": {"order": 1, "adaptive": False},
    "semi-implicit": {"order": 1, "adaptive": False},
    "dopri5": {"order": 5, "adaptive": True},
}


def check_method(method: str) -> str:
    """Return the canonical solver name for ``method``; ValueError listing :data:`SOLVERS` otherwise."""
    if not isinstance(method, str) or method not in SOLVERS:
        raise ValueError(f"Unknown solver method {method!r}; expected one of {sorted(SOLVERS)}.")
    return "fused" if method == "semi-implicit" else method


def check_dt(dt: float | Tensor | None, z: Tensor) -> float | Tensor:
    """Validate a step size: a positive float, or a positive tensor of shape (B, 1) (or (B,)).

    ``None`` means 1.0 (one time unit per sample).
    """
    if dt is None:
        return 1.0
    if isinstance(dt, Tensor):
        if dt.dim() == 0:
            dt = float(dt)
        else:
            if dt.dim() == 1:
                dt = dt[:, None]
            if dt.shape != (z.shape[0], 1):
                raise ValueError(f"`dt` tensor must have shape (batch, 1) = ({z.shape[0]}, 1); "
                                 f"got shape {tuple(dt.shape)}.")
            return dt.to(dtype=z.dtype, device=z.device)
    if not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be a positive finite number or a (batch, 1) tensor; got dt={dt!r}.")
    return float(dt)


def _split_of(vector_field: Callable) -> Callable | None:
    """The ``decay_and_drive`` split that the fused step needs, if the vector field offers one."""
    split = getattr(vector_field, "decay_and_drive", None)
    if split is None:
        split = getattr(getattr(vector_field, "__self__", None), "decay_and_drive", None)
    return split


# -- one step of each fixed-step method (f: (z, u) -> dz/dt; h float or (B, 1)) ------------------
def _euler(f: StepField, z: Tensor, u: Tensor | None, h: float | Tensor) -> Tensor:
    return z + h * f(z, u)


def _rk4(f: StepField, z: Tensor, u: Tensor | None, h: float | Tensor) -> Tensor:
    k1 = f(z, u)
    k2 = f(z + 0.5 * h * k1, u)
    k3 = f(z + 0.5 * h * k2, u)
    k4 = f(z + h * k3, u)
    return z + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def _fused(split: Callable, z: Tensor, u: Tensor | None, h: float | Tensor) -> Tensor:
    # dz/dt = -a z + b  ->  z' = z + h(-a z' + b)  ->  z' = (z + h b) / (1 + h a)
    a, b = split(z, u)
    return (z + h * b) / (1.0 + h * a)


def solver_step(vector_field: StepField, z: Tensor, u: Tensor | None, dt: float | Tensor | None,
                method: str = "rk4", *, n_substeps: int = 1, rtol: float = 1e-6, atol: float = 1e-8) -> Tensor:
    """Advance ``z`` over one interval ``dt`` with the input ``u`` held constant.

    Parameters
    ----------
    vector_field : callable ``f(z, u) -> dz/dt``
        ``z`` of shape (B, M), ``u`` of shape (B, K) or None. For ``method="fused"`` it must be
        a bound method of an object with ``decay_and_drive(z, u) -> (a, b)`` (or carry that
        attribute itself), giving ``dz/dt = -a * z + b`` with ``a >= 0``.
    z : Tensor of shape (B, M)
    u : Tensor of shape (B, K) or None
    dt : float, Tensor of shape (B, 1), or None
        Interval length in the unit of the data's time coordinate; ``None`` means 1.
    method : str
        A key of :data:`SOLVERS`.
    n_substeps : int
        Equal sub-steps per interval (the LTC paper's "ODE unfolds"; 6 there).
    rtol, atol : float
        Tolerances of the adaptive ``"dopri5"`` path.

    Returns
    -------
    Tensor of shape (B, M)
    """
    method = check_method(method)
    h = check_dt(dt, z)
    if not isinstance(n_substeps, int) or n_substeps < 1:
        raise ValueError(f"`n_substeps` must be a positive integer; got {n_substeps!r}.")
    if method == "dopri5":
        # rescale time to s in [0, 1]: dz/ds = dt * f(z, u); per-trial dt needs no special care
        return _dopri5_interval(lambda s, zz: h * vector_field(zz, u), z, rtol=rtol, atol=atol)
    hs = h / n_substeps
    if method == "fused":
        split = _split_of(vector_field)
        if split is None:
            raise ValueError("method='fused' needs a vector field with a `decay_and_drive(z, u)` split "
                             "(dz/dt = -a z + b); use 'euler', 'rk4' or 'dopri5' for this model.")
        for _ in range(n_substeps):
            z = _fused(split, z, u, hs)
        return z
    one = _euler if method == "euler" else _rk4
    for _ in range(n_substeps):
        z = one(vector_field, z, u, hs)
    return z


def solver_step_jacobian(vector_field: StepField, vf_jacobian: Callable, z: Tensor, u: Tensor | None,
                         dt: float | Tensor | None, method: str = "rk4", *, n_substeps: int = 1,
                         split_jacobian: Callable | None = None) -> Tensor:
    """d solver_step(z) / d z, shape (B, M, M), from the analytic Jacobian of the vector field.

    The chain rule runs through the solver stages exactly (forward-mode), so the result equals
    autograd through :func:`solver_step` for ``"euler"``, ``"rk4"`` and ``"fused"``.

    Parameters
    ----------
    vf_jacobian : callable ``J(z, u) -> (B, M, M)``
        Jacobian of ``vector_field`` with respect to ``z``.
    split_jacobian : callable ``(z, u) -> (a, b, da/dz, db/dz)``, needed for ``"fused"``
        The split and its Jacobians, shapes (B, M), (B, M), (B, M, M), (B, M, M).
    """
    method = check_method(method)
    if method == "dopri5":
        raise ValueError("solver_step_jacobian has no analytic path for the adaptive 'dopri5' method; "
                         "use autograd (LatentDynamics.jacobian) instead.")
    h = check_dt(dt, z)
    if isinstance(n_substeps, bool) or not isinstance(n_substeps, int) or n_substeps < 1:
        raise ValueError(f"`n_substeps` must be a positive integer; got {n_substeps!r}.")
    hs = h / n_substeps
    hs3 = hs[:, :, None] if isinstance(hs, Tensor) else hs
    eye = torch.eye(z.shape[1], dtype=z.dtype, device=z.device).expand(z.shape[0], -1, -1)
    total = eye
    for _ in range(n_substeps):
        if method == "euler":
            step_jac = eye + hs3 * vf_jacobian(z, u)
            z = _euler(vector_field, z, u, hs)
        elif method == "rk4":
            k1 = vector_field(z, u)
            d1 = vf_jacobian(z, u)
            z2 = z + 0.5 * hs * k1
            d2 = vf_jacobian(z2, u) @ (eye + 0.5 * hs3 * d1)
            k2 = vector_field(z2, u)
            z3 = z + 0.5 * hs * k2
            d3 = vf_jacobian(z3, u) @ (eye + 0.5 * hs3 * d2)
            k3 = vector_field(z3, u)
            z4 = z + hs * k3
            d4 = vf_jacobian(z4, u) @ (eye + hs3 * d3)
            k4 = vector_field(z4, u)
            step_jac = eye + (hs3 / 6.0) * (d1 + 2.0 * d2 + 2.0 * d3 + d4)
            z = z + (hs / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        else:
            if split_jacobian is None:
                raise ValueError("method='fused' needs `split_jacobian` for an analytic step Jacobian.")
            a, b, da, db = split_jacobian(z, u)
            denom = 1.0 + hs * a                                   # (B, M)
            z_new = (z + hs * b) / denom
            # row i: (e_i + h db_i - z'_i h da_i) / denom_i
            step_jac = (eye + hs3 * db - z_new[:, :, None] * hs3 * da) / denom[:, :, None]
            z = z_new
        total = step_jac @ total
    return total


# -- adaptive Dormand-Prince 5(4) ----------------------------------------------------------------
_DP_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)


def _dopri5_interval(f: TimeField, z: Tensor, *, rtol: float, atol: float, max_steps: int = 10_000,
                     first_step: float | None = None) -> Tensor:
    """Integrate ``dz/ds = f(s, z)`` from s = 0 to s = 1 with step-size control; returns z(1).

    The error norm is the root mean square over all batch entries of
    ``err / (atol + rtol * max(|z|, |z_new|))`` (Hairer, Norsett & Wanner, II.4); a step is
    accepted when it is <= 1. Step sizes are plain floats, so gradients flow through the stages.
    """
    s, h = 0.0, (first_step or 0.1)
    n_steps = 0
    while s < 1.0 - 1e-12:
        h = min(h, 1.0 - s)
        ks = []
        for i in range(7):
            zi = z
            for aij, kj in zip(_DP_A[i], ks):
                if aij != 0.0:
                    zi = zi + (h * aij) * kj
            ks.append(f(s + _DP_C[i] * h, zi))
        z5 = z + h * sum(b * k for b, k in zip(_DP_B5, ks) if b != 0.0)
        z4 = z + h * sum(b * k for b, k in zip(_DP_B4, ks) if b != 0.0)
        with torch.no_grad():
            scale = atol + rtol * torch.maximum(z.abs(), z5.abs())
            err = float(((z5 - z4) / scale).pow(2).mean().sqrt())
        if not math.isfinite(err):
            raise FloatingPointError(f"dopri5: the state became non-finite at s={s:.4g} (step {h:.3g}); "
                                     "the dynamics diverge or the step is too large.")
        if err <= 1.0:
            s, z = s + h, z5
        factor = 10.0 if err == 0.0 else min(10.0, max(0.2, 0.9 * err ** (-1 / 5)))
        h = h * factor
        n_steps += 1
        if n_steps > max_steps:
            raise RuntimeError(f"dopri5 took more than max_steps={max_steps} steps (reached s={s:.4g} of 1); "
                               "loosen rtol/atol or raise max_steps.")
    return z


# -- the one entry point ---------------------------------------------------------------------------
def integrate(vector_field: TimeField, z0: Tensor, t: Any, method: str = "rk4",
              options: Mapping[str, Any] | None = None) -> Tensor:
    """Solve ``dz/dt = vector_field(t, z)`` from ``z0`` and return the states at the times ``t``.

    Parameters
    ----------
    vector_field : callable ``f(t, z) -> dz/dt``
        ``z`` of shape (B, M); ``t`` is passed as a float for shared times or as a Tensor of
        shape (B, 1) when every trial has its own time grid. For ``method="fused"`` the callable
        must also offer ``decay_and_drive(t, z) -> (a, b)`` (``dz/dt = -a z + b``, ``a >= 0``).
    z0 : Tensor of shape (B, M)
        State at ``t[0]`` (``t[:, 0]`` for per-trial times).
    t : sequence or Tensor of shape (T,) or (B, T)
        Increasing output times, in the unit of the data's time coordinate; shape (B, T) gives
        each trial its own (possibly irregular) grid.
    method : str
        A key of :data:`SOLVERS`: ``"euler"``, ``"rk4"``, ``"fused"``/``"semi-implicit"``, ``"dopri5"``.
    options : dict, optional
        Fixed-step methods: ``step_size`` (the largest allowed sub-step; each interval is split
        into ``ceil(interval / step_size)`` equal sub-steps) or ``n_substeps`` (fixed number of
        sub-steps per interval, default 1), not both. ``"dopri5"``: ``rtol`` (1e-6), ``atol``
        (1e-8), ``max_steps`` (10000, per interval). An option the method does not use is refused.

    Returns
    -------
    Tensor of shape (B, T, M)
        The solution at every output time, ``out[:, 0] = z0``.

    Raises
    ------
    ValueError
        Unknown method or option, an option the method does not use, a non-positive step size or
        sub-step count, non-increasing ``t``, or a ``t`` whose shape does not fit ``z0``.
    """
    method = check_method(method)
    options = dict(options or {})
    _check_options(method, options)
    if z0.dim() != 2:
        raise ValueError(f"`z0` must have shape (batch, state); got shape {tuple(z0.shape)}.")
    tt = torch.as_tensor(t, dtype=z0.dtype, device=z0.device)
    per_trial = tt.dim() == 2
    if tt.dim() not in (1, 2) or (per_trial and tt.shape[0] != z0.shape[0]) or tt.shape[-1] < 1:
        raise ValueError(f"`t` must have shape (T,) or (batch, T) with batch={z0.shape[0]}; got {tuple(tt.shape)}.")
    steps = tt.diff(dim=-1)
    if steps.numel() and not bool((steps > 0).all()):
        raise ValueError("`t` must be strictly increasing along time.")
    out = [z0]
    z = z0
    for k in range(tt.shape[-1] - 1):
        t0 = tt[:, k:k + 1] if per_trial else float(tt[k])
        interval = steps[:, k:k + 1] if per_trial else float(steps[k])
        z = _integrate_interval(vector_field, z, t0, interval, method, options)
        out.append(z)
    return torch.stack(out, dim=1)


#: the options of :func:`integrate` for the fixed-step methods and for the adaptive one
_FIXED_OPTIONS, _ADAPTIVE_OPTIONS = ("step_size", "n_substeps"), ("rtol", "atol", "max_steps")


def _check_options(method: str, options: dict[str, Any]) -> None:
    """ValueError for an unknown option, one the method does not use (it would be dropped), or a bad value."""
    known = set(_FIXED_OPTIONS + _ADAPTIVE_OPTIONS)
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"Unknown solver option(s) {sorted(unknown)}; expected a subset of {sorted(known)}.")
    usable = _ADAPTIVE_OPTIONS if method == "dopri5" else _FIXED_OPTIONS
    unused = sorted(set(options) - set(usable))
    if unused:
        raise ValueError(f"solver option(s) {unused} do not apply to method={method!r}, which takes "
                         f"{list(usable)}; they would be ignored.")
    if "step_size" in options and "n_substeps" in options:
        raise ValueError(f"give `step_size` or `n_substeps`, not both; got step_size={options['step_size']!r}, "
                         f"n_substeps={options['n_substeps']!r}.")
    for name in ("step_size", "rtol", "atol"):
        value = options.get(name, 1.0)
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
        if not ok or value < 0 or (name == "step_size" and value == 0):
            kind = "positive" if name == "step_size" else "non-negative"
            raise ValueError(f"solver option `{name}` must be a {kind} finite number; got {name}={value!r}.")
    for name in ("n_substeps", "max_steps"):
        value = options.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"solver option `{name}` must be a positive integer; got {name}={value!r}.")
    if options.get("rtol", 1.0) == 0 and options.get("atol", 1.0) == 0:
        raise ValueError("solver options `rtol` and `atol` are both 0, which no step can meet; give one > 0.")


def _integrate_interval(f: TimeField, z: Tensor, t0: Any, interval: Any, method: str,
                        options: dict[str, Any]) -> Tensor:
    if method == "dopri5":
        return _dopri5_interval(lambda s, zz: interval * f(t0 + s * interval, zz), z,
                                rtol=float(options.get("rtol", 1e-6)), atol=float(options.get("atol", 1e-8)),
                                max_steps=int(options.get("max_steps", 10_000)))
    largest = float(interval.max()) if isinstance(interval, Tensor) else interval
    if "step_size" in options:
        n_sub = max(1, math.ceil(largest / float(options["step_size"]) - 1e-9))
    else:
        n_sub = int(options.get("n_substeps", 1))
    h = interval / n_sub
    split = _split_of(f) if method == "fused" else None
    if method == "fused" and split is None:
        raise ValueError("method='fused' needs a vector field with `decay_and_drive(t, z)`.")
    t = t0
    for _ in range(n_sub):
        # the fixed-step kernels take f(z, u); pass the time through the `u` slot
        if method == "euler":
            z = _euler(lambda zz, tt: f(tt, zz), z, t, h)
        elif method == "rk4":
            k1 = f(t, z)
            k2 = f(t + 0.5 * h, z + 0.5 * h * k1)
            k3 = f(t + 0.5 * h, z + 0.5 * h * k2)
            k4 = f(t + h, z + h * k3)
            z = z + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        else:
            z = _fused(lambda zz, tt: split(tt, zz), z, t, h)
        t = t + h
    return z


class SplitVectorField:
    """Wrap ``decay_and_drive(t, z) -> (a, b)`` as a vector field ``f(t, z) = -a z + b``.

    Lets any split (for example an LTC written in closed form) run through :func:`integrate`
    with every method, including ``"fused"``.
    """

    def __init__(self, decay_and_drive: Callable[[Any, Tensor], tuple[Tensor, Tensor]]) -> None:
        self.decay_and_drive = decay_and_drive

    def __call__(self, t: Any, z: Tensor) -> Tensor:
        a, b = self.decay_and_drive(t, z)
        return -a * z + b


class ODEStepMixin:
    """``step`` and ``jacobian`` of a :class:`~dsident.dynamics.base.LatentDynamics` from its vector field.

    A continuous-time model mixes this in before ``LatentDynamics`` and provides
    ``vector_field(z, u)``, optionally ``vector_field_jacobian(z, u)`` (analytic; otherwise the
    base class's autograd Jacobian is used) and, for the fused solver,
    ``decay_and_drive(z, u)`` and ``decay_and_drive_jacobian(z, u)``. It reads the attributes
    ``method`` and ``n_substeps``.
    """

    method: str
    n_substeps: int
    latent_dim: int

    def step(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """Transition mean: integrate the vector field over one sampling interval ``dt``.

        Parameters
        ----------
        z : Tensor of shape (B, M)
        u : Tensor of shape (B, K) or None
            Input held constant over the interval.
        dt : float, Tensor of shape (B, 1), or None (= 1.0)

        Returns
        -------
        Tensor of shape (B, M)
        """
        check_state(z, self.latent_dim, u)
        return solver_step(self.vector_field, z, u, dt, self.method, n_substeps=self.n_substeps)

    def jacobian(self, z: Tensor, u: Tensor | None = None, dt: float | Tensor | None = None) -> Tensor:
        """d step / d z, shape (B, M, M): analytic through the solver stages where available."""
        check_state(z, self.latent_dim, u)
        vfj = getattr(self, "vector_field_jacobian", None)
        method = check_method(self.method)
        if vfj is None or method == "dopri5":
            return super().jacobian(z, u, dt)  # type: ignore[misc]
        return solver_step_jacobian(self.vector_field, vfj, z, u, dt, method, n_substeps=self.n_substeps,
                                    split_jacobian=getattr(self, "decay_and_drive_jacobian", None))

    def simulate(self, z0: Tensor, n_steps: int, u: Tensor | None = None,
                 dt: float | Tensor | None = None) -> Tensor:
        """Deterministic rollout: (B, M) -> (B, n_steps, M), ``out[:, 0] = z0``; warns on divergence."""
        zs = [z0]
        z = z0
        for k in range(1, n_steps):
            z = self.step(z, None if u is None else u[:, k], dt)
            zs.append(z)
        out = torch.stack(zs, dim=1)
        if not bool(torch.isfinite(out).all()):
            warnings.warn(f"{type(self).__name__}.simulate: the state became non-finite; the rollout diverged.",
                          RuntimeWarning, stacklevel=2)
        return out


def check_run_step(dynamics: Any, dt: Any, own_dt: float | None) -> None:
    """Refuse a ``dt`` to run ``dynamics`` at that is not a positive finite number, or that a
    discrete-time map would drop unused: a map takes one step per sample whatever ``dt`` says, so
    only its fit's own step ``own_dt`` (within :data:`dsident.data.container.STEP_RTOL`) is
    accepted, and none when that is unknown (bare dynamics). Continuous-time dynamics
    (:class:`ODEStepMixin`) integrate at any step. Behind ``generate``, ``prediction_error`` and
    ``newton_fixed_points``."""
    from ..data.container import steps_agree

    number = (int, float, numbers.Real)
    if isinstance(dt, bool) or not isinstance(dt, number) or not math.isfinite(float(dt)) or float(dt) <= 0:
        # a string such as "0.1" would otherwise pass float() and hide a config read as text
        raise ValueError(f"`dt` must be a positive finite number (the sampling step); got dt={dt!r}.")
    if not isinstance(dynamics, ODEStepMixin) and (own_dt is None or not steps_agree(float(dt), float(own_dt))):
        raise ValueError(f"`dt`={float(dt)!r}: {type(dynamics).__name__} is a discrete-time map, one step per sample"
                         + ("" if own_dt is None else f" of its fit's step dt={float(own_dt)!r}")
                         + "; another dt would be dropped unused. Leave `dt` out (continuous-time models "
                         "integrate at any step).")
