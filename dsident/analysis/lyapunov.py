"""Lyapunov exponents of models, of benchmark systems, and of recorded data.

Two routes:

- :func:`lyapunov_spectrum` propagates an orthonormal set of tangent vectors with the
  Jacobians of the one-step map along a trajectory and re-orthonormalises them by QR
  (Benettin et al. 1980; Shimada & Nagashima 1979). The exponents are the time averages of
  ``log |diag R|``. It accepts a fitted estimator, a :class:`dsident.StateSpaceModel`, a
  continuous benchmark :class:`~dsident.data.systems.System` (its flow over ``dt`` is the
  classical RK4 map, whose exact Jacobian is propagated alongside), or a plain step function.
- :func:`max_lyapunov_rosenstein` estimates the maximal exponent of a measured series from the
  mean logarithmic divergence of initially nearest neighbours (Rosenstein, Collins & De Luca
  1993), for comparing a model's spectrum with the data it was fitted to.

Shape legend: ``M`` state dimension, ``k`` number of exponents, ``T`` time steps.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np
from scipy.linalg.lapack import dgeqrf as _geqrf, dorgqr as _orgqr
from scipy.spatial import cKDTree

from .._threads import one_blas_thread

__all__ = ["lyapunov_spectrum", "kaplan_yorke_dimension", "system_lyapunov_spectrum", "spectrum_verdict",
           "max_lyapunov_rosenstein", "RosensteinResult"]

StepFn = Callable[[np.ndarray], np.ndarray]
#: time steps whose R diagonals are logged together in the Benettin loop
_LOG_BLOCK = 1024
#: the most memory one batch of a model's Jacobians may take (bytes)
_JACOBIAN_BATCH_BYTES = 64 * 2**20


# ---------------------------------------------------------------------------------------------
# QR (Benettin) method
# ---------------------------------------------------------------------------------------------
def lyapunov_spectrum(system: Any, z0: Any = None, n_steps: int = 10_000, dt: float | None = None,
                      jacobian_fn: Callable[[np.ndarray], np.ndarray] | None = None, *,
                      n_exponents: int | None = None, transient: int = 1_000,
                      u: Any = None, batch_size: int = 4_096, path: Any = None) -> np.ndarray:
    """Lyapunov spectrum from Jacobians along a trajectory (QR method).

    Parameters
    ----------
    system : estimator, StateSpaceModel, System, or callable
        What to analyse:

        ============================  ===========================================================
        fitted estimator              its ``model_`` is used
        ``StateSpaceModel``           the deterministic transition ``model.step``; Jacobians from
                                      ``model.dynamics.jacobian`` (analytic or autograd)
        ``System`` (``rhs``,          the flow over ``dt`` taken as one classical RK4 step; the
        ``jacobian``, ``dim``)        exact Jacobian of that RK4 map is propagated with it
        callable ``z -> z_next``      a one-step map on ndarrays of shape (M,); Jacobian from
                                      ``jacobian_fn`` or central finite differences
        ============================  ===========================================================
    z0 : array-like of shape (M,), optional
        Initial state. Defaults: ``system.default_x0`` for a System, the initial-state prior
        mean ``initial_mean`` for a model. Required for a callable.
    n_steps : int
        Steps averaged over (after ``transient``).
    dt : float, optional
        Time per step, in the unit of the data's time coordinate; exponents are returned per
        unit of time (``log``-growth per step divided by ``dt``). Required for a System (it is
        also the RK4 step); defaults to 1 (per step) for a callable. A model always steps with
        its own ``model.dt``, which is also the default here; pass ``dt=1`` to get exponents
        per step.
    jacobian_fn : callable ``z -> (M, M)``, optional
        Jacobian of a callable step (ignored for models and systems, which carry their own).
    n_exponents : int, optional
        Number of leading exponents (default all ``M``).
    transient : int
        Steps run first, without averaging, so that the state reaches the attractor and the
        tangent vectors align with the Lyapunov directions.
    u : array-like of shape (transient + n_steps, K), optional
        External input of a model (held at zero when omitted); refused for a System or a
        callable, which take none.
    batch_size : int
        Jacobians of a model are evaluated in batches of at most this many time points (and at
        most 64 MiB of doubles), each consumed before the next is made, so memory does not grow
        with ``n_steps``.
    path : array-like of shape (transient + n_steps, M), optional
        A model's own latent trajectory from ``z0`` when the caller already has it (e.g. the
        ``z`` of ``model.generate(transient + n_steps, z0=z0)``, which runs without noise by
        default), so that it is not stepped again. Used only for a model without inputs, and
        only if 16 of its steps, spread over it, agree with ``model.step``; otherwise (a run
        with process noise, another model) the trajectory is stepped as without it.

    Returns
    -------
    ndarray of shape (k,)
        Exponents per unit of time (natural logarithm), in the order of the QR columns, which
        is decreasing once the run is long enough (the first ``k`` columns span the ``k`` most
        expanding directions, so ``n_exponents=k`` gives the same leading values). NaN (with
        a ``RuntimeWarning``) when the trajectory becomes non-finite.

    Notes
    -----
    For Lorenz-63 (σ = 10, ρ = 28, β = 8/3) the spectrum is ≈ (0.905, 0, −14.57); its sum
    equals the constant trace of the Jacobian, −(σ + 1 + β) = −13.67.

    Examples
    --------
    >>> from dsident.data.systems import get_system            # doctest: +SKIP
    >>> lyapunov_spectrum(get_system("lorenz63"), n_steps=20_000, dt=0.01)  # doctest: +SKIP
    array([  0.887,   0.008, -14.56 ])    # true values 0.905, 0, -14.57
    """
    n_steps = _positive_int(n_steps, "n_steps")
    batch_size = _positive_int(batch_size, "batch_size")
    if isinstance(transient, bool) or not isinstance(transient, (int, np.integer)) or transient < 0:
        raise ValueError(f"`transient` must be a non-negative integer number of steps; got {transient!r}.")
    if hasattr(system, "model_"):
        system = system.model_
    # a tensor start, input or path (the model's initial_mean, a slice of generate's z) as an array
    z0, u, path = (v.detach().cpu().numpy() if hasattr(v, "detach") and hasattr(v, "cpu") else v
                   for v in (z0, u, path))
    if _is_state_space_model(system):
        dt = float(system.dt) if dt is None else _positive_float(dt, "dt")
        if z0 is not None:
            start = np.asarray(z0, dtype=float)
            if start.shape != (int(system.latent_dim),) or not np.isfinite(start).all():
                raise ValueError(f"`z0` must be a finite latent state of shape ({int(system.latent_dim)},) "
                                 f"(latent_dim); got shape {start.shape}"
                                 + (" with non-finite entries" if start.size and not np.isfinite(start).all()
                                    else "") + ".")
        jacobians, ok = _model_jacobians(system, z0, int(transient) + n_steps, u, batch_size, path)
        m = int(system.latent_dim)
        k = _n_exponents(n_exponents, m)
        if not ok:
            return _diverged(k)
        # a non-finite Jacobian makes its step's product non-finite, which _qr reports as diverged
        return _qr_average(jacobians, m, k, int(transient), n_steps, dt)
    given = [name for name, value in (("u", u), ("path", path)) if value is not None]
    if given:        # a System or a step function takes neither: they would be dropped without a word
        raise ValueError(f"{' and '.join(f'`{g}`' for g in given)} apply to a model (estimator or StateSpaceModel) "
                         f"only; got {type(system).__name__}, which steps from `z0` alone. Leave "
                         f"{'them' if len(given) > 1 else 'it'} out (a step function can close over its input).")
    if hasattr(system, "rhs") and hasattr(system, "jacobian"):
        if dt is None:
            raise ValueError("`dt` is required for a continuous System: the exponents are per unit of "
                             "time and the RK4 flow map is taken over one step of length dt.")
        dt = _positive_float(dt, "dt")
        dim = getattr(system, "dim", None)
        x = _start(system.default_x0 if z0 is None else z0, None if dim is None else int(dim), "the system's dim")
        k = _n_exponents(n_exponents, x.size)
        with one_blas_thread():
            return _qr_continuous(system, x, k, int(transient), n_steps, dt)
    if callable(system):
        if z0 is None:
            raise ValueError("`z0` is required when `system` is a step function.")
        dt = 1.0 if dt is None else _positive_float(dt, "dt")
        z = _start(z0, None, "")
        k = _n_exponents(n_exponents, z.size)
        jac = jacobian_fn if jacobian_fn is not None else (lambda zz: _finite_difference_jacobian(system, zz))
        return _qr_map(system, jac, z, k, int(transient), n_steps, dt)
    raise TypeError("`system` must be a fitted estimator, a StateSpaceModel, a System with `rhs` and "
                    f"`jacobian`, or a step function; got {type(system).__name__}.")


def zero_tolerance(n_steps: int) -> float:
    """Per step, how close to zero an exponent averaged over ``n_steps`` steps counts as zero.

    ``20 / n_steps``: the finite-run error of a flow's zero exponent is about
    ``log(largest / smallest speed on the orbit) / n_steps``. The one rule behind every verdict
    (:func:`dsident.analysis.free_run_regime`, the benchmark's true-system row).
    """
    return 20.0 / n_steps


def spectrum_verdict(exponents: Any, zero_tol: float) -> str:
    """What a flow's Lyapunov spectrum says about its attractor.

    Parameters
    ----------
    exponents : array_like of shape (k,)
        Lyapunov exponents of a continuous-time system (any order), in the unit of ``zero_tol``
        (per time unit, or per sampling step for both).
    zero_tol : float
        An exponent counts as zero when ``|λ| <= zero_tol``. A spectrum averaged over ``n``
        steps resolves zero to about ``1 / n`` per step; :func:`zero_tolerance` gives the
        tolerance the free-run verdicts use.

    Returns
    -------
    str
        "chaotic" if ``λ1 > zero_tol``; "periodic or quasi-periodic" if ``|λ1| <= zero_tol`` (a
        flow on a limit cycle or torus has a zero exponent along the motion); "fixed point" if
        ``λ1 < -zero_tol`` (every direction contracts). A discrete-time map's negative ``λ1`` can
        also mean an attracting cycle, which needs the trajectory to tell
        (:func:`dsident.analysis.analyze_dynamics`).

    Raises
    ------
    ValueError
        For an empty or non-finite spectrum, or a ``zero_tol`` that is not positive.
    """
    lam = np.asarray(exponents, dtype=float).ravel()
    if lam.size == 0 or not np.isfinite(lam).all():
        raise ValueError(f"`exponents` must be a non-empty array of finite numbers; got {np.asarray(exponents)!r}.")
    if not np.isfinite(zero_tol) or zero_tol <= 0:
        raise ValueError(f"`zero_tol` must be a positive number; got {zero_tol!r}.")
    lam1 = float(lam.max())
    if lam1 > zero_tol:
        return "chaotic"
    return "periodic or quasi-periodic" if lam1 >= -zero_tol else "fixed point"


def kaplan_yorke_dimension(exponents: Any, zero_tol: float | None = None) -> float:
    """Kaplan-Yorke (Lyapunov) dimension of a Lyapunov spectrum.

    ``D = j + (λ_1 + ... + λ_j) / |λ_{j+1}|`` with the exponents sorted in decreasing order and
    ``j`` the largest count whose partial sum is still >= 0 (``D = 0`` when ``λ_1 < 0``; the
    full dimension ``M`` when all partial sums are >= 0). The exponents' time unit cancels.

    Parameters
    ----------
    exponents : array-like of shape (M,)
    zero_tol : float, optional
        Exponents with ``|λ| <= zero_tol`` (the unit of ``exponents``) count as exactly zero. A
        limit cycle's zero exponent, estimated from a finite run, comes out a little negative
        (−0.006 per time unit) and would give ``D = 0`` instead of 1; with the tolerance of
        :func:`spectrum_verdict` the dimension agrees with the verdict.

    Returns
    -------
    float
        NaN when any exponent is NaN (a diverged run).

    Examples
    --------
    >>> round(kaplan_yorke_dimension([0.905, 0.0, -14.57]), 4)   # Lorenz-63
    2.0621
    """
    lam = np.asarray(exponents, dtype=float)
    if np.squeeze(lam).ndim > 1:
        # ravel() pooled the spectra of several models (rows) into one and returned its dimension
        raise ValueError(f"`exponents` must be one spectrum, shape (M,); got shape {lam.shape}. For several "
                         "spectra call it once per row.")
    lam = np.sort(lam.ravel())[::-1]
    if lam.size == 0:
        raise ValueError("`exponents` must hold at least one exponent; got an empty array.")
    if not np.isfinite(lam).all():
        return float("nan")
    if zero_tol is not None:
        if not np.isfinite(zero_tol) or zero_tol < 0:
            raise ValueError(f"`zero_tol` must be a non-negative number; got {zero_tol!r}.")
        lam = np.where(np.abs(lam) <= zero_tol, 0.0, lam)
    partial = np.cumsum(lam)
    if partial[0] < 0:
        return 0.0
    j = int(np.flatnonzero(partial >= 0)[-1]) + 1       # count of leading exponents with a sum >= 0
    if j == lam.size:
        return float(lam.size)
    return float(j + partial[j - 1] / abs(lam[j]))


def system_lyapunov_spectrum(data: Any, *, duration: float | None = None, substeps: int = 2,
                             transient: float | None = None) -> np.ndarray:
    """Lyapunov spectrum of the true system behind a simulated benchmark set.

    Reads the set's provenance (system name, parameters, sampling step ``dt``) and runs
    :func:`lyapunov_spectrum` on that system, so that a reconstruction's exponents can be put
    beside the truth. The exponents are per unit of the data's time; z-scoring the channels
    does not change them.

    Parameters
    ----------
    data : str or xarray.Dataset
        A shipped set's name (``"lorenz63"``, ``"bursting_neuron"``) or a dataset whose
        ``attrs["provenance"]`` names a system of :mod:`dsident.data.systems`.
    duration : float, optional
        Time (in the data's unit) averaged over; default ``20 000 dt``.
    substeps : int
        RK4 steps per sampling step. The one-step RK4 map at the data's own step can be
        wrong for stiff systems: at ``dt = 0.5 ms`` it makes the bursting neuron's limit
        cycle look chaotic (λ_1 ≈ +0.04 / ms, against ≈ 0 at 0.25 ms and 0.1 ms).
    transient : float, optional
        Time run first; default a tenth of ``duration``.

    Returns
    -------
    ndarray of shape (dim,)
        Sorted largest first.

    Raises
    ------
    ValueError
        When the data name no deterministic system (a recording, or the ECG, whose generator
        is stochastic).
    """
    from ._resolve import resolve_benchmark_system

    system, prov, dt = resolve_benchmark_system(data)
    substeps = _positive_int(substeps, "substeps")
    duration = 20_000 * dt if duration is None else _positive_float(duration, "duration")
    transient = 0.1 * duration if transient is None else float(transient)
    if not np.isfinite(transient) or transient < 0:
        raise ValueError(f"`transient` must be a non-negative time; got {transient!r}.")
    step = dt / substeps
    lam = lyapunov_spectrum(system, z0=prov.get("x0"), n_steps=max(1, int(round(duration / step))), dt=step,
                            transient=int(round(transient / step)))
    return np.sort(lam)[::-1]


def _qr_average(jacobians: Any, m: int, k: int, transient: int, n_steps: int, dt: float) -> np.ndarray:
    """Average log|diag R| over a stream of one-step Jacobians (M, M)."""
    q = _initial_frame(m, k)
    total = np.zeros(k)
    # the diagonals are logged a block at a time (a zero on the diagonal gives -inf: diverged below)
    block, filled = np.ones((_LOG_BLOCK, k)), 0
    # one small QR per step: BLAS threads only wait for each other (dsident._threads)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), one_blas_thread():
        for i, jac in enumerate(jacobians):
            q, diag_r = _qr(jac @ q)
            if diag_r is None:
                return _diverged(k)
            if i >= transient:
                block[filled] = diag_r
                filled += 1
                if filled == _LOG_BLOCK:
                    total += np.log(np.abs(block)).sum(0)
                    filled = 0
        total += np.log(np.abs(block[:filled])).sum(0)
    if not np.all(np.isfinite(total)):
        return _diverged(k)
    return total / (n_steps * dt)


def _qr(a: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Thin QR of ``a`` (M, k): Q (M, k) and the diagonal of R (k,), None when ``a`` is not finite.

    The LAPACK routines that ``numpy.linalg.qr`` calls (Householder ``geqrf``, then ``orgqr``),
    called directly: for the M ≤ 16 of these models numpy's wrapper costs several times the
    factorisation itself, and the Benettin loop calls it once per time step
    (``benchmarks/bench_lyapunov.py``).
    """
    # one scalar test for every entry (a NaN or inf makes the sum non-finite); the factors
    # alone would not show it: a reflection that is skipped leaves a NaN above R's diagonal
    if not math.isfinite(a.sum()):
        return a, None
    factor, tau, _, _ = _geqrf(a)
    q, _, _ = _orgqr(factor, tau)
    return q, np.diagonal(factor)


def _initial_frame(m: int, k: int) -> np.ndarray:
    """A fixed generic orthonormal frame (M, k) to start the tangent vectors from.

    The identity is not generic: for a map whose coordinates never mix (e.g. a diagonal one),
    its columns stay on the axes forever, so the first column's exponent is that of the first
    axis, not the largest. A random frame, drawn with a fixed seed so results repeat, has a
    component along every direction and its columns order themselves by growth rate.
    """
    # the first k columns of one M × M frame, so that n_exponents=k repeats the leading k of the full run
    return np.linalg.qr(np.random.default_rng(20_210_101).standard_normal((m, m)))[0][:, :k]


def _qr_map(step: StepFn, jacobian_fn: Callable[[np.ndarray], np.ndarray], z: np.ndarray, k: int,
            transient: int, n_steps: int, dt: float) -> np.ndarray:
    def stream():
        zz = z
        for _ in range(transient + n_steps):
            with np.errstate(over="ignore", invalid="ignore"):
                jac = np.asarray(jacobian_fn(zz), dtype=float)
                zz = np.asarray(step(zz), dtype=float).ravel()
            if jac.shape != (z.size, z.size) or zz.shape != z.shape:
                raise ValueError(f"the step function must map a state of shape {z.shape} (that of `z0`) to one of "
                                 f"that shape and its Jacobian (`jacobian_fn`) be ({z.size}, {z.size}); got "
                                 f"{zz.shape} and {jac.shape}.")
            if not np.all(np.isfinite(zz)):
                yield np.full((z.size, z.size), np.nan)
                return
            yield jac
    return _qr_average(stream(), z.size, k, transient, n_steps, dt)


def _qr_continuous(system: Any, x: np.ndarray, k: int, transient: int, n_steps: int, dt: float,
                   t0: float = 0.0) -> np.ndarray:
    """Propagate state and tangent vectors with the same RK4 stages (= exact RK4-map Jacobian)."""
    m = x.size
    rhs, jac = system.rhs, _time_aware(system.jacobian)
    q = _initial_frame(m, k)
    total = np.zeros(k)
    h, h2 = dt, 0.5 * dt
    t = float(t0)
    for i in range(transient + n_steps):
        k1 = np.asarray(rhs(t, x), dtype=float)
        q1 = jac(x, t) @ q
        x2 = x + h2 * k1
        k2 = np.asarray(rhs(t + h2, x2), dtype=float)
        q2 = jac(x2, t + h2) @ (q + h2 * q1)
        x3 = x + h2 * k2
        k3 = np.asarray(rhs(t + h2, x3), dtype=float)
        q3 = jac(x3, t + h2) @ (q + h2 * q2)
        x4 = x + h * k3
        k4 = np.asarray(rhs(t + h, x4), dtype=float)
        q4 = jac(x4, t + h) @ (q + h * q3)
        x = x + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        q, diag_r = _qr(q + (h / 6.0) * (q1 + 2.0 * q2 + 2.0 * q3 + q4))
        t += h
        if diag_r is None or not np.all(np.isfinite(x)):
            return _diverged(k)
        if i >= transient:
            total += np.log(np.abs(diag_r))
    return total / (n_steps * dt)


def _time_aware(jacobian: Callable[..., np.ndarray]) -> Callable[[np.ndarray, float], np.ndarray]:
    """Call ``jacobian(x, t)`` when it takes a time argument (non-autonomous systems), else ``jacobian(x)``."""
    import inspect

    try:
        n_params = len(inspect.signature(jacobian).parameters)
    except (TypeError, ValueError):
        n_params = 1
    if n_params >= 2:
        return lambda x, t: np.asarray(jacobian(x, t), dtype=float)
    return lambda x, t: np.asarray(jacobian(x), dtype=float)


def _model_jacobians(model: Any, z0: Any, n_total: int, u: Any, batch_size: int,
                     given_path: Any = None) -> tuple[Iterator[np.ndarray], bool]:
    """Run the deterministic model n_total steps (or take ``given_path`` when it is that run);
    return its one-step Jacobians (M, M) along the path, in order, and whether the path stayed
    finite. The Jacobians are produced a batch at a time as they are consumed: all of them at
    once would hold T·M² doubles (16 GB for a 22 000-step run of an M = 300 PLRNN)."""
    import torch

    p = next(model.parameters())
    dtype, device = p.dtype, p.device
    m = int(model.latent_dim)
    if z0 is None:
        z = model.initial_mean.detach().reshape(1, m).clone()
    else:
        z = torch.as_tensor(np.asarray(z0, dtype=float), dtype=dtype, device=device).reshape(1, m)
    uu = None
    if u is not None:
        uu = torch.as_tensor(np.asarray(u, dtype=float), dtype=dtype, device=device)
        if uu.ndim != 2 or uu.shape[0] < n_total:
            raise ValueError(f"`u` must have shape (transient + n_steps, K) = ({n_total}, K); got {tuple(uu.shape)}.")
        if not bool(torch.isfinite(uu[:n_total]).all()):       # it would read as a diverged run
            raise ValueError("`u` must be finite over the transient + n_steps steps used; it holds NaN or inf.")
    path = None if given_path is None or uu is not None else _usable_path(model, given_path, z, n_total)
    with torch.no_grad():
        if path is None:
            path = torch.empty(n_total, m, dtype=dtype, device=device)
            for t in range(n_total):
                path[t] = z[0]
                z = model.step(z, None if uu is None else uu[t:t + 1])
        else:
            z = model.step(path[-1:])
    if not bool(torch.isfinite(path).all()) or not bool(torch.isfinite(z).all()):
        return iter(()), False
    # a batch is at most _JACOBIAN_BATCH_BYTES of doubles, whatever batch_size asks for
    batch = max(1, min(batch_size, _JACOBIAN_BATCH_BYTES // (8 * m * m)))
    return _jacobian_batches(model, path, uu, batch), True


def _jacobian_batches(model: Any, path: Any, uu: Any, batch: int) -> Iterator[np.ndarray]:
    """The model's Jacobians (M, M) at each state of ``path`` (T, M), evaluated ``batch`` at a time."""
    for start in range(0, int(path.shape[0]), batch):
        stop = start + batch
        ub = None if uu is None else uu[start:stop]
        yield from model.dynamics.jacobian(path[start:stop], ub, model.dt).detach().cpu().double().numpy()


def _usable_path(model: Any, path: Any, z: Any, n_total: int) -> Any:
    """``path`` as a Tensor when it is the model's deterministic run of n_total steps from ``z``, else None."""
    import torch

    p = next(model.parameters())
    arr = np.asarray(path, dtype=float)
    if n_total < 2 or arr.shape != (n_total, int(model.latent_dim)) or not np.isfinite(arr).all():
        return None
    tensor = torch.as_tensor(arr, dtype=p.dtype, device=p.device)
    # 16 steps spread over the run (the first and the last among them) must be the model's own
    checked = torch.as_tensor(np.unique(np.linspace(0, n_total - 2, 16).astype(int)), device=p.device)
    with torch.no_grad():
        stepped = model.step(tensor[checked])
    scale = 1.0 + float(tensor.abs().max())
    tol = 1e-4 if p.dtype == torch.float32 else 1e-9
    if not torch.allclose(tensor[0], z[0], rtol=0.0, atol=tol * scale) \
            or not torch.allclose(stepped, tensor[checked + 1], rtol=0.0, atol=tol * scale):
        return None
    return tensor


def _finite_difference_jacobian(step: StepFn, z: np.ndarray) -> np.ndarray:
    """Central differences with a step scaled to each coordinate (second-order accurate)."""
    m = z.size
    jac = np.empty((m, m))
    for j in range(m):
        h = 1e-6 * max(1.0, abs(z[j]))
        e = np.zeros(m)
        e[j] = h
        jac[:, j] = (np.asarray(step(z + e), dtype=float).ravel() - np.asarray(step(z - e), dtype=float).ravel()) / (2 * h)
    return jac


def _start(z0: Any, dim: int | None, what: str) -> np.ndarray:
    """``z0`` as a finite 1-D state (of ``dim`` entries when given); ValueError naming it otherwise
    (a NaN start was reported as a diverged trajectory, a short one as a failed unpacking)."""
    z = np.asarray(z0, dtype=float).ravel()
    if (dim is not None and z.size != dim) or z.size == 0 or not np.isfinite(z).all():
        expected = f"({dim},) ({what})" if dim is not None else "(M,)"
        raise ValueError(f"`z0` must be a finite state of shape {expected}; got {np.asarray(z0, dtype=float)!r}.")
    return z


def _diverged(k: int) -> np.ndarray:
    warnings.warn("the trajectory became non-finite (diverged); returning NaN exponents. Start from a state "
                  "on the attractor or shorten `n_steps`.", RuntimeWarning, stacklevel=3)
    return np.full(k, np.nan)


def _is_state_space_model(obj: Any) -> bool:
    return hasattr(obj, "dynamics") and hasattr(obj, "step") and hasattr(obj, "latent_dim") \
        and hasattr(getattr(obj, "dynamics"), "jacobian")


def _n_exponents(n_exponents: int | None, m: int) -> int:
    if n_exponents is None:
        return m
    if isinstance(n_exponents, bool) or not isinstance(n_exponents, (int, np.integer)) or not 1 <= n_exponents <= m:
        raise ValueError(f"`n_exponents` must be an integer in [1, {m}] (the state dimension); got {n_exponents!r}.")
    return int(n_exponents)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return int(value)


def _positive_float(value: Any, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a positive number; got {value!r}.") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"`{name}` must be a positive finite number; got {value!r}.")
    return v


# ---------------------------------------------------------------------------------------------
# Rosenstein method for data
# ---------------------------------------------------------------------------------------------
class RosensteinResult(NamedTuple):
    """Outcome of :func:`max_lyapunov_rosenstein` with ``return_curve=True``."""

    exponent: float          #: slope of the fitted line, per unit of time
    time: np.ndarray         #: (horizon + 1,) time since the neighbours were paired
    log_divergence: np.ndarray  #: (horizon + 1,) mean log distance of the neighbour pairs
    fit_range: tuple[int, int]  #: steps [start, stop) used for the line fit
    min_separation: int      #: Theiler window used, in steps


def max_lyapunov_rosenstein(x: Any, dt: float = 1.0, *, embedding_dim: int | None = None, delay: int = 1,
                            min_separation: int | None = None, horizon: int | None = None,
                            fit_range: tuple[int, int] | None = None, max_points: int | None = 5_000,
                            seed: int | np.random.Generator | None = 0,
                            return_curve: bool = False) -> float | RosensteinResult:
    """Maximal Lyapunov exponent of a measured series (Rosenstein et al. 1993).

    Every reference point is paired with its nearest neighbour in state space among points more
    than ``min_separation`` steps away in time; the mean ``log`` distance of the pairs as both
    evolve, ``<ln d(k)>``, grows like ``λ·k·dt`` until it saturates at the attractor size. λ is
    the least-squares slope over ``fit_range``.

    Parameters
    ----------
    x : array-like of shape (time,) or (time, channel), or a Dataset with one trial
        The series. Channels are taken as state coordinates; a single channel can be
        delay-embedded with ``embedding_dim`` and ``delay``. Rows with a NaN are never used as
        reference points or neighbours.
    dt : float
        Sampling step, in the unit of the time coordinate (the exponent is per unit of time).
    embedding_dim, delay : int, optional
        Delay embedding ``(x_t, x_{t+delay}, …)`` applied to the channels (default none).
    min_separation : int, optional
        Theiler window in steps. Default: the mean period, 1 / (spectrum-weighted mean
        frequency), as Rosenstein et al. suggest.
    horizon : int, optional
        Steps the pairs are followed (default ``3 * min_separation``, at least 20).
    fit_range : (int, int), optional
        Steps ``[start, stop)`` of the line fit. Default ``(min_separation // 2,
        2 * min_separation)`` (clipped to the horizon): it skips the first half period, in which
        the pairs rotate into the unstable direction and grow faster or slower than λ, and stops
        before the curve saturates. Check the curve (``return_curve=True``): the fit is only
        meaningful where it is straight.
    max_points : int or None
        Number of reference points, drawn at random (seeded) to bound the cost; None uses all.
    seed : int or numpy Generator
    return_curve : bool
        Return a :class:`RosensteinResult` (exponent, curve, fit range) instead of a float.

    Returns
    -------
    float or RosensteinResult

    Notes
    -----
    On a 10 000-sample Lorenz-63 trajectory at dt = 0.01 the default settings give 0.85–0.90
    (true value 0.905): the method is biased low by a few per cent, and its accuracy depends
    on the series length, the noise and the fit range (tests accept 10 %).
    """
    dt = _positive_float(dt, "dt")
    if hasattr(x, "data_vars") and "x" in x:
        xv = np.asarray(x["x"].values, dtype=float)
        if xv.shape[0] != 1:
            raise ValueError(f"`x` must hold a single trial; got {xv.shape[0]} trials. Select one with ds.isel(trial=i).")
        xv = xv[0]
    else:
        if hasattr(x, "detach"):          # a torch tensor: its `values` is a method, not the data
            x = x.detach().cpu().numpy()
        elif hasattr(x, "dims") and hasattr(x, "values"):
            x = x.values
        try:
            xv = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"`x` must be a numeric array of shape (time,) or (time, channel), or a Dataset with "
                            f"one trial; got {type(x).__name__}.") from None
    if xv.ndim == 1:
        xv = xv[:, None]
    if xv.ndim != 2:
        raise ValueError(f"`x` must have shape (time,) or (time, channel); got shape {xv.shape}.")
    if embedding_dim is not None:
        embedding_dim = _positive_int(embedding_dim, "embedding_dim")
        delay = _positive_int(delay, "delay")
        n = xv.shape[0] - (embedding_dim - 1) * delay
        if n < 2:
            raise ValueError(f"series of length {xv.shape[0]} too short for embedding_dim={embedding_dim}, delay={delay}.")
        xv = np.concatenate([xv[i * delay:i * delay + n] for i in range(embedding_dim)], axis=1)
    n_time = xv.shape[0]
    if min_separation is None:
        min_separation = _mean_period(xv)
    min_separation = int(min_separation)
    if min_separation < 0:
        raise ValueError(f"`min_separation` must be >= 0 steps; got {min_separation}.")
    horizon = max(20, 3 * min_separation) if horizon is None else _positive_int(horizon, "horizon")
    if fit_range is None:
        stop = min(horizon + 1, max(2 * min_separation, 3))
        fit_range = (min(min_separation // 2, stop - 2), stop)
    start, stop = (int(v) for v in fit_range)
    if not 0 <= start < stop - 1 < horizon + 1:
        raise ValueError(f"`fit_range` must satisfy 0 <= start < stop - 1 <= horizon={horizon}; got {fit_range!r}.")
    if max_points is not None:
        max_points = _positive_int(max_points, "max_points")
    n_ref = n_time - horizon
    if n_ref <= 2 * min_separation + 2:
        raise ValueError(f"series of length {n_time} too short for horizon={horizon} and min_separation={min_separation}.")
    finite = np.all(np.isfinite(xv), axis=1)
    if finite.any() and np.all(np.ptp(xv[finite], axis=0) == 0):
        # every pair sits at distance 0, has no log-distance, and the fit returned NaN
        raise ValueError("`x` is constant over its finite samples: no pair of neighbours can separate, so there is "
                         "no exponent to fit (a run at rest has no divergence to measure).")
    candidates = np.flatnonzero(finite[:n_ref])
    tree = cKDTree(xv[candidates])
    rng = np.random.default_rng(seed)
    refs = candidates if max_points is None or candidates.size <= max_points else \
        np.sort(rng.choice(candidates, size=int(max_points), replace=False))
    k = min(candidates.size, 2 * min_separation + 2)
    _, idx = tree.query(xv[refs], k=k)
    idx = candidates[np.atleast_2d(idx).reshape(refs.size, -1)]
    far = np.abs(idx - refs[:, None]) > min_separation
    has = far.any(axis=1)
    refs, partner = refs[has], idx[has, np.argmax(far[has], axis=1)]
    steps = np.arange(horizon + 1)
    log_div = np.empty(horizon + 1)
    for s in steps:
        d = np.linalg.norm(xv[refs + s] - xv[partner + s], axis=1)
        d = d[np.isfinite(d) & (d > 0)]
        log_div[s] = np.mean(np.log(d)) if d.size else np.nan
    slope = np.polyfit(steps[start:stop] * dt, log_div[start:stop], 1)[0]
    if return_curve:
        return RosensteinResult(float(slope), steps * dt, log_div, (start, stop), min_separation)
    return float(slope)


def _mean_period(x: np.ndarray) -> int:
    """Mean period in steps: 1 / power-weighted mean frequency, averaged over channels."""
    xf = np.where(np.isfinite(x), x, np.nan)
    xf = xf[np.all(np.isfinite(xf), axis=1)]
    xf = xf - xf.mean(axis=0)
    power = np.abs(np.fft.rfft(xf, axis=0)) ** 2
    freq = np.fft.rfftfreq(xf.shape[0])
    mean_freq = np.sum(freq[:, None] * power, axis=0) / np.maximum(np.sum(power, axis=0), 1e-300)
    mean_freq = float(np.mean(mean_freq[mean_freq > 0])) if np.any(mean_freq > 0) else 0.0
    return int(round(1.0 / mean_freq)) if mean_freq > 0 else 1
