"""Benchmark dynamical systems: right-hand sides, Jacobians and :func:`simulate`.

``get_system(name, **params)`` returns a :class:`System` for one of

========================  ===  ========================================================  =====
name                      dim  equations                                                 time
========================  ===  ========================================================  =====
``"lorenz63"``            3    Lorenz (1963), σ = 10, ρ = 28, β = 8/3                     a.u.
``"rossler"``             3    Rössler (1976), a = b = 0.2, c = 5.7                       a.u.
``"lorenz96"``            N    Lorenz (1996), N = 10, F = 8                               a.u.
``"bursting_neuron"``     3    Durstewitz (2009) NMDA bursting neuron (V, n, h)           ms
``"ecgsyn"``              3    McSharry et al. (2003) synthetic ECG (x, y, z)              s
========================  ===  ========================================================  =====

Every system has an analytic Jacobian except ECGSYN, whose Jacobian is a central finite
difference (its right-hand side depends on time through the RR process and wraps an angle).
:func:`simulate` integrates with :func:`scipy.integrate.solve_ivp` and samples at ``dt``; each
system names its own default solver and tolerances (``System.solver``), chosen for accuracy of
the shipped benchmark data rather than speed:

- Lorenz-63, Rössler, Lorenz-96: DOP853, rtol = atol = 1e-10.
- Bursting neuron: LSODA, rtol = atol = 1e-9 (stiff: τ_n = 1 ms against τ_h = 200 ms).
- ECGSYN: DOP853, rtol = atol = 1e-8, max step 0.01 s (the QRS Gaussians are ~0.1 rad wide).
"""
from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["System", "SYSTEMS", "get_system", "simulate"]


@dataclass(frozen=True)
class System:
    """An autonomous (or, for ECGSYN, time-dependent) ODE ``dx/dt = rhs(t, x)``.

    Attributes
    ----------
    name : str
        Registry name (see :data:`SYSTEMS`).
    dim : int
        State dimension.
    params : dict
        Parameter values used by ``rhs`` and ``jacobian``.
    rhs : callable ``(t, x) -> dx/dt``
        ``x`` of shape (dim,), returns an ndarray of shape (dim,).
    jacobian : callable ``(x, t=0.0) -> J``
        ``J[i, j] = ∂(dx_i/dt)/∂x_j``, shape (dim, dim).
    default_x0 : ndarray of shape (dim,)
        Initial state used when :func:`simulate` gets no ``x0``.
    channel_names : tuple of str
        Names of the state variables.
    state_scale : ndarray of shape (dim,)
        Typical spread of each variable on the attractor; a ``seed`` perturbs ``default_x0``
        by 1 % of it.
    time_unit : str
        Unit of ``t`` and of ``dt`` in :func:`simulate`.
    solver : dict
        Default ``method``, ``rtol``, ``atol`` (and possibly ``max_step``) for :func:`simulate`.
    equations : str
        The equations in plain text (for dataset cards).
    """

    name: str
    dim: int
    params: dict
    rhs: Callable[[float, np.ndarray], np.ndarray]
    jacobian: Callable[..., np.ndarray]
    default_x0: np.ndarray
    channel_names: tuple
    state_scale: np.ndarray
    time_unit: str = "a.u."
    solver: dict = field(default_factory=lambda: {"method": "DOP853", "rtol": 1e-10, "atol": 1e-10})
    equations: str = ""


# ----------------------------------------------------------------------------- Lorenz-63


def _lorenz63(sigma: float = 10.0, rho: float = 28.0, beta: float = 8.0 / 3.0) -> System:
    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        a, b, c = x
        return np.array([sigma * (b - a), a * (rho - c) - b, a * b - beta * c])

    def jacobian(x: np.ndarray, t: float = 0.0) -> np.ndarray:
        a, b, c = x
        return np.array([[-sigma, sigma, 0.0], [rho - c, -1.0, -a], [b, a, -beta]])

    return System("lorenz63", 3, {"sigma": sigma, "rho": rho, "beta": beta}, rhs, jacobian,
                  np.array([1.0, 1.0, 1.0]), ("x", "y", "z"), np.array([7.9, 9.0, 8.6]),
                  equations="dx/dt = σ(y − x);  dy/dt = x(ρ − z) − y;  dz/dt = x y − β z")


# ----------------------------------------------------------------------------- Rössler


def _rossler(a: float = 0.2, b: float = 0.2, c: float = 5.7) -> System:
    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        p, q, r = x
        return np.array([-q - r, p + a * q, b + r * (p - c)])

    def jacobian(x: np.ndarray, t: float = 0.0) -> np.ndarray:
        p, q, r = x
        return np.array([[0.0, -1.0, -1.0], [1.0, a, 0.0], [r, 0.0, p - c]])

    return System("rossler", 3, {"a": a, "b": b, "c": c}, rhs, jacobian, np.array([1.0, 1.0, 0.0]),
                  ("x", "y", "z"), np.array([5.0, 4.7, 3.0]),
                  equations="dx/dt = −y − z;  dy/dt = x + a y;  dz/dt = b + z(x − c)")


# ----------------------------------------------------------------------------- Lorenz-96


def _lorenz96(n: int = 10, forcing: float = 8.0) -> System:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 4:
        raise ValueError(f"`n` (number of Lorenz-96 variables) must be an integer >= 4; got n={n!r}.")
    n = int(n)
    idx = np.arange(n)
    ip1, im1, im2 = (idx + 1) % n, (idx - 1) % n, (idx - 2) % n

    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        return (x[ip1] - x[im2]) * x[im1] - x + forcing

    def jacobian(x: np.ndarray, t: float = 0.0) -> np.ndarray:
        jac = -np.eye(n)
        jac[idx, im1] += x[ip1] - x[im2]
        jac[idx, ip1] += x[im1]
        jac[idx, im2] -= x[im1]
        return jac

    x0 = np.full(n, float(forcing))
    x0[0] += 0.01                       # the uniform state x_i = F is a fixed point
    return System("lorenz96", n, {"n": n, "forcing": forcing}, rhs, jacobian, x0,
                  tuple(f"x{i}" for i in range(n)), np.full(n, 3.6),
                  equations="dx_i/dt = (x_{i+1} − x_{i−2}) x_{i−1} − x_i + F  (indices mod N)")


# ----------------------------------------------------------------------------- bursting neuron


def _bursting_neuron(I: float = 0.0, C_m: float = 6.0, g_L: float = 8.0, E_L: float = -80.0,  # noqa: E741
                     g_Na: float = 20.0, E_Na: float = 60.0, V_hNa: float = -20.0, k_Na: float = 15.0,
                     g_K: float = 10.0, E_K: float = -90.0, V_hK: float = -25.0, k_K: float = 5.0,
                     tau_n: float = 1.0, g_M: float = 25.0, V_hM: float = -15.0, k_M: float = 5.0,
                     tau_h: float = 200.0, g_NMDA: float = 10.2, E_NMDA: float = 0.0) -> System:
    """Durstewitz (2009) as in Schmidt et al. (ICLR 2021), Suppl. eq. 55–59. Units mV, ms, mS, μF."""
    params = {k: float(v) for k, v in locals().items()}

    def sigmoid(v: float, v_half: float, k: float) -> float:
        return 1.0 / (1.0 + math.exp((v_half - v) / k))

    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        v, n, h = x
        m_inf = sigmoid(v, V_hNa, k_Na)
        block = 1.0 / (1.0 + 0.33 * math.exp(-0.0625 * v))      # NMDA Mg2+ block σ(V)
        i_ion = (g_L * (v - E_L) + g_Na * m_inf * (v - E_Na) + g_K * n * (v - E_K)
                 + g_M * h * (v - E_K) + g_NMDA * block * (v - E_NMDA))
        return np.array([(I - i_ion) / C_m,
                         (sigmoid(v, V_hK, k_K) - n) / tau_n,
                         (sigmoid(v, V_hM, k_M) - h) / tau_h])

    def jacobian(x: np.ndarray, t: float = 0.0) -> np.ndarray:
        v, n, h = x
        m_inf, n_inf, h_inf = sigmoid(v, V_hNa, k_Na), sigmoid(v, V_hK, k_K), sigmoid(v, V_hM, k_M)
        block = 1.0 / (1.0 + 0.33 * math.exp(-0.0625 * v))
        # d/dV of a Boltzmann 1/(1+exp((V_h−V)/k)) is s(1−s)/k; of σ(V) it is 0.0625 σ(1−σ).
        d_m, d_n, d_h = m_inf * (1 - m_inf) / k_Na, n_inf * (1 - n_inf) / k_K, h_inf * (1 - h_inf) / k_M
        d_block = 0.0625 * block * (1.0 - block)
        d_iion_dv = (g_L + g_Na * (d_m * (v - E_Na) + m_inf) + g_K * n + g_M * h
                     + g_NMDA * (d_block * (v - E_NMDA) + block))
        return np.array([[-d_iion_dv / C_m, -g_K * (v - E_K) / C_m, -g_M * (v - E_K) / C_m],
                         [d_n / tau_n, -1.0 / tau_n, 0.0],
                         [d_h / tau_h, 0.0, -1.0 / tau_h]])

    return System(
        "bursting_neuron", 3, params, rhs, jacobian, np.array([-24.4694, 0.0386, 0.0231]), ("V", "n", "h"),
        np.array([17.3, 0.2, 0.0062]), time_unit="ms",
        solver={"method": "LSODA", "rtol": 1e-9, "atol": 1e-9},
        equations=("C_m dV/dt = I − g_L(V−E_L) − g_Na m∞(V)(V−E_Na) − g_K n(V−E_K) − g_M h(V−E_K) "
                   "− g_NMDA σ(V)(V−E_NMDA);  dn/dt = (n∞(V) − n)/τ_n;  dh/dt = (h∞(V) − h)/τ_h;  "
                   "x∞(V) = 1/(1 + exp((V_hx − V)/k_x));  σ(V) = 1/(1 + 0.33 exp(−0.0625 V))"))


# ----------------------------------------------------------------------------- ECGSYN


_ECG_WAVES = ("P", "Q", "R", "S", "T")


def rr_process(duration: float, *, hr_mean: float = 60.0, hr_std: float = 1.0, lf_hf_ratio: float = 0.5,
               f_lf: float = 0.1, f_hf: float = 0.25, c_lf: float = 0.01, c_hf: float = 0.01,
               sampling_rate: float = 4.0, seed: int | np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """RR-interval tachogram with a bimodal (Mayer wave + respiratory) spectrum.

    The spectrum is a sum of two Gaussians centred at ``f_lf`` and ``f_hf`` (widths ``c_lf``,
    ``c_hf``; power ratio ``lf_hf_ratio``), given random phases, inverse-Fourier transformed and
    scaled to mean ``60/hr_mean`` s and standard deviation ``60 hr_std / hr_mean²`` s (McSharry
    et al. 2003, Sec. II).

    Parameters
    ----------
    duration : float
        Length in seconds.
    sampling_rate : float, default 4
        Sampling rate of the returned tachogram (Hz).
    seed : int or numpy.random.Generator, optional
        Source of the random phases.

    Returns
    -------
    t : ndarray of shape (time,)
        Times (s).
    rr : ndarray of shape (time,)
        RR interval (s) at those times.
    """
    rng = np.random.default_rng(seed)
    n = int(2 ** math.ceil(math.log2(max(duration * sampling_rate, 16))))
    freq = np.fft.rfftfreq(n, d=1.0 / sampling_rate)
    power = (lf_hf_ratio / (1 + lf_hf_ratio) * np.exp(-0.5 * ((freq - f_lf) / c_lf) ** 2) / c_lf
             + 1 / (1 + lf_hf_ratio) * np.exp(-0.5 * ((freq - f_hf) / c_hf) ** 2) / c_hf)
    phases = rng.uniform(0.0, 2 * np.pi, size=freq.size)
    series = np.fft.irfft(np.sqrt(power) * np.exp(1j * phases), n=n)
    series = (series - series.mean()) / series.std()
    rr = 60.0 / hr_mean + series * 60.0 * hr_std / hr_mean ** 2
    return np.arange(n) / sampling_rate, rr


def _ecgsyn(duration: float = 600.0, hr_mean: float = 60.0, hr_std: float = 1.0, lf_hf_ratio: float = 0.5,
            f_resp: float = 0.25, resp_amplitude: float = 0.005,
            theta_deg: tuple = (-70.0, -15.0, 0.0, 15.0, 100.0), a: tuple = (1.2, -5.0, 30.0, -7.5, 0.75),
            b: tuple = (0.25, 0.1, 0.1, 0.1, 0.4), seed: int = 0) -> System:
    """McSharry et al. (2003) ECGSYN, written from the paper's equations (time in seconds)."""
    theta = np.deg2rad(np.asarray(theta_deg, dtype=float))
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not theta.shape == a_arr.shape == b_arr.shape == (5,):
        raise ValueError(f"`theta_deg`, `a`, `b` must each have 5 entries (waves {_ECG_WAVES}); "
                         f"got {len(theta)}, {len(a_arr)}, {len(b_arr)}.")
    rr_t, rr = rr_process(duration, hr_mean=hr_mean, hr_std=hr_std, lf_hf_ratio=lf_hf_ratio, seed=seed)
    period = rr_t[-1] + (rr_t[1] - rr_t[0])
    params = {"duration": duration, "hr_mean": hr_mean, "hr_std": hr_std, "lf_hf_ratio": lf_hf_ratio,
              "f_resp": f_resp, "resp_amplitude": resp_amplitude, "theta_deg": list(theta_deg), "a": list(a),
              "b": list(b), "seed": seed}

    def rhs(t: float, x: np.ndarray) -> np.ndarray:
        px, py, pz = x
        alpha = 1.0 - math.hypot(px, py)
        omega = 2.0 * math.pi / np.interp(t % period, rr_t, rr)   # RR process repeats after `period`
        dtheta = np.mod(math.atan2(py, px) - theta + math.pi, 2 * math.pi) - math.pi
        z0 = resp_amplitude * math.sin(2.0 * math.pi * f_resp * t)
        dz = -float(np.sum(a_arr * dtheta * np.exp(-0.5 * (dtheta / b_arr) ** 2))) - (pz - z0)
        return np.array([alpha * px - omega * py, alpha * py + omega * px, dz])

    def jacobian(x: np.ndarray, t: float = 0.0) -> np.ndarray:
        return finite_difference_jacobian(lambda y: rhs(t, y), x)

    return System("ecgsyn", 3, params, rhs, jacobian, np.array([1.0, 0.0, 0.04]), ("x", "y", "z"),
                  np.array([0.7, 0.7, 0.01]), time_unit="s",
                  solver={"method": "DOP853", "rtol": 1e-8, "atol": 1e-8, "max_step": 0.01},
                  equations=("α = 1 − √(x²+y²), ω = 2π/RR(t), Δθ_i = wrap(atan2(y,x) − θ_i);  dx/dt = αx − ωy;  "
                             "dy/dt = αy + ωx;  dz/dt = −Σ_i a_i Δθ_i exp(−Δθ_i²/(2b_i²)) − (z − A sin(2π f_resp t))"))


def finite_difference_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, *,
                               rel_step: float = 1e-6) -> np.ndarray:
    """Central-difference Jacobian ``J[i, j] ≈ ∂f_i/∂x_j`` of ``f`` at ``x`` (shape (dim, dim))."""
    x = np.asarray(x, dtype=float)
    jac = np.empty((x.size, x.size))
    for j in range(x.size):
        h = rel_step * max(1.0, abs(x[j]))
        e = np.zeros_like(x)
        e[j] = h
        jac[:, j] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h)
    return jac


# ----------------------------------------------------------------------------- registry

#: name -> factory; each factory's keyword arguments are the system's parameters.
SYSTEMS: dict[str, Callable[..., System]] = {
    "lorenz63": _lorenz63,
    "rossler": _rossler,
    "lorenz96": _lorenz96,
    "bursting_neuron": _bursting_neuron,
    "ecgsyn": _ecgsyn,
}


def get_system(name: str, **params: Any) -> System:
    """Build a benchmark system by name.

    Parameters
    ----------
    name : str
        One of :data:`SYSTEMS`: ``"lorenz63"``, ``"rossler"``, ``"lorenz96"``,
        ``"bursting_neuron"``, ``"ecgsyn"``.
    **params
        Parameter overrides, e.g. ``get_system("lorenz63", rho=24.0)``,
        ``get_system("bursting_neuron", g_NMDA=10.0)``, ``get_system("lorenz96", n=20)``,
        ``get_system("ecgsyn", seed=1, duration=300.0)``.

    Returns
    -------
    System
    """
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}; choose one of {sorted(SYSTEMS)}.")
    factory = SYSTEMS[name]
    valid = list(inspect.signature(factory).parameters)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise TypeError(f"system {name!r} has no parameter(s) {unknown}; valid parameters are {valid}.")
    return factory(**params)


def simulate(system: System | str, n_steps: int, dt: float, *, x0: Any = None, transient: float = 0.0,
             method: str | None = None, rtol: float | None = None, atol: float | None = None,
             seed: int | np.random.Generator | None = None, t0: float = 0.0) -> np.ndarray:
    """Integrate a system and sample it every ``dt``.

    Parameters
    ----------
    system : System or str
        A :class:`System` or a registry name (default parameters).
    n_steps : int
        Number of samples returned.
    dt : float
        Sampling step, in ``system.time_unit``.
    x0 : array-like of shape (dim,), optional
        Initial state at time ``t0``. Default ``system.default_x0`` (perturbed when ``seed``
        is given).
    transient : float, default 0
        Time (in ``system.time_unit``) integrated and discarded before the first sample.
    method, rtol, atol : optional
        :func:`scipy.integrate.solve_ivp` settings; default ``system.solver``.
    seed : int or numpy.random.Generator, optional
        With no ``x0``: draw the initial state as ``default_x0 + 0.01 · state_scale · N(0, 1)``.
    t0 : float, default 0
        Start time (matters for time-dependent systems such as ECGSYN).

    Returns
    -------
    ndarray of shape (time, dim)
        Samples at ``t0 + transient + k · dt``, k = 0 … n_steps − 1.

    Raises
    ------
    RuntimeError
        When the solver fails or the trajectory becomes non-finite (divergence).
    """
    if isinstance(system, str):
        system = get_system(system)
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Integral) or n_steps < 1:
        raise ValueError(f"`n_steps` must be a positive integer; got n_steps={n_steps!r}.")
    if not isinstance(dt, numbers.Real) or not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"`dt` must be a positive finite number (unit: {system.time_unit}); got dt={dt!r}.")
    if not isinstance(transient, numbers.Real) or not np.isfinite(transient) or transient < 0:
        raise ValueError(f"`transient` must be a finite number >= 0; got transient={transient!r}.")
    if x0 is None:
        x0 = np.array(system.default_x0, dtype=float)
        if seed is not None:
            x0 = x0 + 0.01 * system.state_scale * np.random.default_rng(seed).standard_normal(system.dim)
    x0 = np.asarray(x0, dtype=float).ravel()
    if x0.shape != (system.dim,) or not np.isfinite(x0).all():
        raise ValueError(f"`x0` must be {system.dim} finite numbers for system {system.name!r}; got {x0.tolist()}.")
    options = dict(system.solver)
    if method is not None:
        options["method"] = method
    if rtol is not None:
        options["rtol"] = rtol
    if atol is not None:
        options["atol"] = atol
    t_eval = t0 + transient + np.arange(n_steps) * float(dt)
    with np.errstate(over="raise", invalid="raise"):
        try:
            sol = solve_ivp(system.rhs, (t0, float(t_eval[-1])), x0, t_eval=t_eval, **options)
        except (FloatingPointError, OverflowError) as err:
            raise RuntimeError(f"simulation of {system.name!r} diverged (overflow in the right-hand side: {err}); "
                               "check x0 and the parameters.") from None
    if sol.status != 0 or sol.y.shape[1] != n_steps:
        raise RuntimeError(f"simulation of {system.name!r} failed: {sol.message} (method {options['method']}, "
                           f"rtol {options['rtol']}, atol {options['atol']}).")
    out = sol.y.T
    if not np.isfinite(out).all():
        raise RuntimeError(f"simulation of {system.name!r} diverged: non-finite states after "
                           f"t = {t_eval[np.argmax(~np.isfinite(out).all(axis=1))]}.")
    return out
