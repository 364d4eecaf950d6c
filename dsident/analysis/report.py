"""One call that analyses a fitted model's free-running dynamics: what its attractor is.

:func:`analyze_dynamics` runs the model freely, estimates its Lyapunov spectrum along that run,
finds its fixed points (and, for the PLRNN, its k-cycles exactly), and says what the
attractor the run settled on looks like: a fixed point, an attracting cycle, a periodic or
quasi-periodic orbit, chaos, or a divergence. The result, a :class:`DynamicsReport`, turns
into a Dataset (NetCDF) and a Markdown summary; ``dsident analyze MODEL_DIR`` writes both plus
a flow-field figure.

Shape legend: ``M`` latent_dim, ``T`` time steps of the analysed run, ``n`` objects found.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from .._version import __version__
from ..dynamics.plrnn import PLRNN
from ..inference.training import check_int, check_number
from ._resolve import resolve_dynamics
from .fixed_points import FixedPoints, newton_fixed_points, plrnn_cycles
from ..metrics.evaluate import longest_observed_stretch
from .lyapunov import _n_exponents, kaplan_yorke_dimension, lyapunov_spectrum, spectrum_verdict, zero_tolerance

__all__ = ["DynamicsReport", "analyze_dynamics", "FreeRunRegime", "free_run_regime", "VERDICTS",
           "dominant_period", "fundamental_period"]

#: what :func:`analyze_dynamics` can say about the attractor of the free run
VERDICTS = ("fixed point", "attracting cycle", "periodic or quasi-periodic", "chaotic", "diverged")

#: relative size below which the last part of the run counts as standing still
_STILL_TOL = 1e-6

#: fixed points listed in the Markdown summary (all of them are in the Dataset)
_MAX_ROWS = 20
#: exponents printed in the Markdown summary before the rest are elided (all are in to_xarray)
_MAX_EXPONENTS = 10
#: latent coordinates of a fixed point printed in the Markdown summary (all are in to_xarray)
_MAX_LATENTS = 8
#: fixed points further than this many of the run's standard deviations outside its range are
#: counted as out of its reach in the report
FAR_FROM_RUN = 3.0


@dataclass
class DynamicsReport:
    """What :func:`analyze_dynamics` found.

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS`, decided from the run's last ``tail_steps`` and the largest
        Lyapunov exponent (see :func:`analyze_dynamics`, Notes).
    lyapunov : ndarray of shape (M,)
        Lyapunov exponents per unit of the data's time (natural log), largest first; NaN when
        the run became non-finite.
    dt : float
        Time per model step, in the data's time unit.
    kaplan_yorke : float
        Kaplan-Yorke (Lyapunov) dimension of the spectrum; NaN when it is NaN.
    cycle_period : int or None
        Steps per turn of an attracting cycle (verdict "attracting cycle"), else None.
    dominant_period : float
        ``1 / f`` of the strongest non-zero frequency of the run's most variable latent unit,
        in time units; NaN for a fixed point or a divergence.
    fixed_points : FixedPoints
        Every fixed point found (exact for a PLRNN, Newton's method from states of the run and
        random starts otherwise); their stability is that of the one-step map.
    cycles : list of FixedPoints
        k-cycles for ``k = 2 .. max_period`` (PLRNN only; empty otherwise).
    trajectory : xarray.Dataset
        The analysed free run: ``x(trial, time, channel)`` and ``z(trial, time, latent)``.
    continuous_abscissa : ndarray of shape (n,) or None
        For continuous-time models, ``max Re eig(df/dz)`` at each fixed point (1 / time units):
        negative = stable in continuous time.
    fixed_point_observations : ndarray of shape (n, N) or None
        The observation model's mean at each fixed point, in the data's channels (e.g. the
        membrane voltage of a resting state; rates for count models). ``dsident analyze``
        puts a z-scored fit's values back in the recording's units.
    channel_names : list of str or None
        Names of the N channels.
    info : dict
        Settings (``n_steps``, ``transient``, ``zero_tol``, ``seed``, ``model``) and counts.
    """

    verdict: str
    lyapunov: np.ndarray
    dt: float
    kaplan_yorke: float
    cycle_period: int | None
    dominant_period: float
    fixed_points: FixedPoints
    cycles: list[FixedPoints]
    trajectory: xr.Dataset
    continuous_abscissa: np.ndarray | None = None
    fixed_point_observations: np.ndarray | None = None
    channel_names: list[str] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def max_lyapunov(self) -> float:
        """The largest exponent per unit of time (NaN after a divergence)."""
        return float(self.lyapunov[0]) if self.lyapunov.size else float("nan")

    def __repr__(self) -> str:
        return self.to_markdown()

    def _observations(self) -> np.ndarray | None:
        """``fixed_point_observations`` when it still matches ``fixed_points`` (one row each), else None."""
        obs = self.fixed_point_observations
        return obs if obs is not None and len(obs) == len(self.fixed_points) else None

    def outside_run(self) -> np.ndarray:
        """How far each fixed point lies outside the states of the analysed free run, (n,) float:
        the Euclidean length of its excess over the run's range along the latent units, in units
        of the run's root-mean-square standard deviation over the units (one scale for all, so a
        unit the run barely moves does not inflate it); 0 inside the run's bounding box, NaN
        without a finite run or when the run stands still (no spread to measure by).

        A point far outside is one the free run does not reach: a gated model (the gnODE)
        has a "marginal" fixed point wherever its gates saturate and its flow stops, far from
        the data; a PLRNN's linear regions can hold virtual-looking but real points there too.
        """
        n = len(self.fixed_points)
        z = np.asarray(self.trajectory["z"].values[0], dtype=float)
        z = z[np.isfinite(z).all(axis=1)]
        if n == 0 or len(z) == 0:
            return np.full(n, np.nan)
        low, high = z.min(axis=0), z.max(axis=0)
        scale = float(np.sqrt(np.mean(z.var(axis=0))))
        if not scale > _STILL_TOL * (1.0 + float(np.abs(z).mean())):
            return np.full(n, np.nan)
        points = np.asarray(self.fixed_points.points[:, 0], dtype=float)        # (n, M)
        excess = np.maximum(np.maximum(points - high, low - points), 0.0)
        return np.linalg.norm(excess, axis=1) / scale

    def flow_dims(self) -> list[int] | None:
        """The two latent units the run varies most along (sorted), for a flow-field slice;
        None when M < 2 or the run is non-finite throughout."""
        z = np.asarray(self.trajectory["z"].values[0], dtype=float)
        if z.shape[1] < 2 or not np.isfinite(z).any():
            return None
        return sorted(int(d) for d in np.argsort(-np.nan_to_num(np.nanvar(z, axis=0)))[:2])

    def to_xarray(self) -> xr.Dataset:
        """The report as a Dataset: ``lyapunov_exponent(exponent)``; the fixed points as
        ``fixed_point_state(fixed_point, fixed_point_phase, latent)``, ``fixed_point_eigenvalue_real``
        / ``_imag``, ``fixed_point_stable``, ``fixed_point_kind``; each set of k-cycles the same way
        with the prefix ``cycle<k>``; the verdict and summary numbers in attrs. The free run is not
        included (save ``trajectory`` itself)."""
        ds = xr.Dataset({"lyapunov_exponent": (("exponent",), np.asarray(self.lyapunov, float))},
                        coords={"exponent": np.arange(self.lyapunov.size)})
        ds["lyapunov_exponent"].attrs["units"] = "1 / time unit of the data"
        parts = [("fixed_point", self.fixed_points)] + [(f"cycle{c.period}", c) for c in self.cycles]
        for prefix, found in parts:
            sub = found.to_xarray()
            sub = sub.rename({"cycle": prefix, "phase": f"{prefix}_phase", "eigen": f"{prefix}_eigen",
                              **{v: f"{prefix}_{'state' if v == 'point' else v}" for v in sub.data_vars}})
            sub = sub.drop_vars("latent")
            ds = ds.merge(sub, combine_attrs="drop")       # the report's own attrs are set below
        if len(self.fixed_points):
            ds["fixed_point_outside_run"] = (("fixed_point",), self.outside_run())
            ds["fixed_point_outside_run"].attrs["units"] = "standard deviations of the run beyond its range"
        if self.continuous_abscissa is not None:
            ds["fixed_point_continuous_abscissa"] = (("fixed_point",), np.asarray(self.continuous_abscissa, float))
        if self._observations() is not None:
            ds["fixed_point_observation"] = (("fixed_point", "channel"), np.asarray(self._observations(), float))
            if self.channel_names is not None:
                ds = ds.assign_coords(channel=list(self.channel_names))
            ds["fixed_point_observation"].attrs["units"] = self.info.get("observation_units", "the model's")
        ds.attrs = {"verdict": self.verdict, "dt": float(self.dt), "kaplan_yorke_dimension": float(self.kaplan_yorke),
                    "cycle_period": -1 if self.cycle_period is None else int(self.cycle_period),
                    "dominant_period": float(self.dominant_period),
                    **{k: v for k, v in self.info.items() if isinstance(v, (int, float, str))},
                    "package_version": __version__}
        return ds

    def to_markdown(self) -> str:
        """A short Markdown summary: verdict, spectrum, fixed points and cycles."""
        lam = self.lyapunov
        zero_tol = float(self.info.get("zero_tol", float("nan")))
        # the data's time unit where the caller knows it (info["time_unit"], e.g. "ms")
        unit = str(self.info.get("time_unit") or "time unit")
        units = unit if unit != "time unit" else "time units"
        lines = [f"# Dynamics of {self.info.get('model', 'the model')}", "",
                 f"- attractor of the free run: **{self.verdict}**"
                 + (f" (period {self.cycle_period} steps = {self.cycle_period * self.dt:.4g} {units})"
                    if self.cycle_period else ""),
                 f"- Lyapunov exponents (1 / {unit}): {_spectrum(lam)}",
                 f"- per step: {_spectrum(lam * self.dt)}; zero within ±{zero_tol:.2g}"
                 + _signs(lam * self.dt, zero_tol),
                 *_resolution_note(self.verdict, lam * self.dt, zero_tol, self.info.get("n_steps")),
                 f"- Kaplan-Yorke dimension: {self.kaplan_yorke:.3f}",
                 (f"- dominant period: {self.dominant_period:.4g} {units} ({self.dominant_period / self.dt:.1f} steps)"
                  if np.isfinite(self.dominant_period) else
                  "- dominant period: none (the run " + ("diverged)" if self.verdict == "diverged" else
                                                         "stands still)" if self.verdict == "fixed point" else
                                                         "has no non-zero frequency)")),
                 f"- run analysed: {self.info.get('n_steps')} steps after a transient of {self.info.get('transient')}",
                 "", f"## Fixed points ({len(self.fixed_points)}, method {self.fixed_points.method})"
                 + _cut_note(self.fixed_points), ""]
        if len(self.fixed_points):
            ct = self.continuous_abscissa is not None
            obs = self._observations()
            names = ", ".join(self.channel_names) if self.channel_names else "channels"
            outside = self.outside_run()
            # the points the run comes near first: a table cut at _MAX_ROWS keeps them
            order = np.argsort(np.nan_to_num(outside, nan=np.inf), kind="stable")
            far = int(np.sum(outside > FAR_FROM_RUN))
            if far:
                lines += [f"{far} of them lie more than {FAR_FROM_RUN:g} sd outside every state of the analysed run "
                          "(listed last): points the free run does not reach, e.g. where a gated model's gates "
                          "saturate and its flow stops.", ""]
            lines += ["| # | kind | max abs eigenvalue (map) |" + (" max Re eig df/dz |" if ct else "")
                      + " outside the run (sd) | z |"
                      + (f" observed ({names}; {self.info.get('observation_units', 'model units')}) |"
                         if obs is not None else ""),
                      "|---|---|---|" + ("---|" if ct else "") + "---|---|" + ("---|" if obs is not None else "")]
            shown, m = min(len(self.fixed_points), _MAX_ROWS), self.fixed_points.points.shape[-1]
            for i in (int(j) for j in order[:shown]):
                row = f"| {i} | {self.fixed_points.kind[i]} | {self.fixed_points.max_abs_eigenvalue[i]:.4g} |"
                if ct:
                    row += f" {self.continuous_abscissa[i]:.4g} |"
                row += f" {outside[i]:.3g} |" if np.isfinite(outside[i]) else " – |"
                row += f" {_numbers(self.fixed_points.points[i, 0][:_MAX_LATENTS], 3)}"
                if m > _MAX_LATENTS:                # a wide model's state: its readout says more
                    row = row[:-1] + f", … ({m - _MAX_LATENTS} more)]"
                row += " |"
                lines.append(row + (f" {_numbers(obs[i], 4)} |" if obs is not None else ""))
            if shown < len(self.fixed_points):
                # e.g. a continuum of fixed points (a marginal direction, like the ODE-RFWP's fast
                # weights) that Newton's method finds as many separate points
                lines.append(f"\n… and {len(self.fixed_points) - shown} more (all in `to_xarray()`)")
        else:
            singular = int(self.fixed_points.info.get("n_singular", 0))
            lines.append("none found" + (
                f"; {singular} of the regions searched have a singular I − J: a continuum of fixed points "
                "there (e.g. a manifold attractor) or none" if singular else ""))
        for found in self.cycles:
            lines += ["", f"## {found.period}-cycles: {len(found)}"
                      + (f" ({int(np.sum(found.stable))} stable)" if len(found) else "")
                      + _cut_note(found)]
        return "\n".join(lines) + "\n"


@dataclass
class FreeRunRegime:
    """What a model's free run settled on: the verdict and Lyapunov spectrum, without the
    fixed-point search of :func:`analyze_dynamics` (which builds on it).

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS` (rules in :func:`analyze_dynamics`, Notes).
    lyapunov : ndarray of shape (M,) or (n_exponents,)
        Exponents per unit of the data's time, largest first; NaN when the run became non-finite.
    dt : float
        Time per model step, in the data's time unit.
    cycle_period : int or None
        Steps per turn of an attracting cycle, else None.
    n_steps, transient : int
        Steps analysed, and steps run first and discarded.
    zero_tol : float
        Per-step tolerance under which an exponent counts as zero.
    trajectory : xarray.Dataset
        The analysed run (``x``, ``z`` over ``time``), transient dropped.
    latent : ndarray of shape (n_steps, M)
        Its latent states.
    model, dynamics : object
        The StateSpaceModel and its latent dynamics module.
    """

    verdict: str
    lyapunov: np.ndarray
    dt: float
    cycle_period: int | None
    n_steps: int
    transient: int
    zero_tol: float
    trajectory: xr.Dataset = field(repr=False)
    latent: np.ndarray = field(repr=False)
    model: Any = field(repr=False)
    dynamics: Any = field(repr=False)

    @property
    def max_lyapunov(self) -> float:
        """The largest exponent per unit of time (NaN after a divergence)."""
        return float(self.lyapunov[0]) if self.lyapunov.size else float("nan")


def free_run_regime(model: Any, *, n_steps: int = 20_000, transient: int = 2_000, z0: Any = None, x0: Any = None,
                    zero_tol: float | None = None, seed: int = 0, run: xr.Dataset | None = None,
                    n_exponents: int | None = None) -> FreeRunRegime:
    """Run a fitted model freely and say what the run settled on (no fixed-point search).

    The cheap half of :func:`analyze_dynamics` (same arguments, same verdict): one free run of
    ``transient + n_steps`` steps and its Lyapunov spectrum. The benchmark calls it for every
    point, so that a scored stretch that was only a long transient shows.

    ``run``, optional, is that free run when the caller already has it (the output of
    ``generate(transient + n_steps, z0=z0, x0=x0, seed=seed)`` of the same model): it is used
    instead of generating it again (teacher forcing's ``select_regime`` classifies the run it
    has just scored). Only its length is checked.

    ``n_exponents``, optional, computes only the leading exponents (default all M). The verdict
    reads the largest one alone, and the QR method's first column gives it whatever the number
    of columns, so ``n_exponents=1`` gives the same verdict and λ_max at a fraction of the cost
    for a wide model: O(M²) a step instead of O(M³). Measured (``benchmarks/bench_late_run.py``,
    quiet, 2 000 steps): M = 100 0.14 s against 34.6 s; the ECG's rPLRNN (M = 300, 20 000 steps,
    loaded machine) 13.5 s against more than 24 minutes. The benchmark's late free
    run and teacher forcing's ``select_regime`` use 1; :func:`analyze_dynamics` needs them all
    (the Kaplan-Yorke dimension). The full spectrum is returned sorted, and over a finite run a
    later column can average a little above the first when the leading exponents are nearly
    equal (0 and just below on a cycle), so there the two λ_max differ by that margin, far
    inside ``zero_tol`` (a random PLRNN on a cycle: 1.48e-4 against 1.61e-4 per step).

    Returns
    -------
    FreeRunRegime
    """
    n_steps = check_int("n_steps", n_steps, 100)
    transient = check_int("transient", transient, 0)
    seed = check_int("seed", seed, 0)
    if zero_tol is None:
        zero_tol = zero_tolerance(n_steps)
    elif not np.isfinite(zero_tol) or zero_tol <= 0:
        raise ValueError(f"`zero_tol` must be a positive number (per step); got {zero_tol!r}.")
    ssm = model.model_ if hasattr(model, "model_") else model
    if not hasattr(ssm, "generate") or not hasattr(ssm, "dynamics"):
        raise TypeError(f"`model` must be a fitted estimator or a StateSpaceModel; got {type(model).__name__}.")
    dyn, _ = resolve_dynamics(ssm)
    # resolved (and checked) before the run, so a diverged run's NaNs have the asked-for length too
    n_exponents = _n_exponents(n_exponents, int(dyn.latent_dim))
    dt = float(ssm.dt)
    if run is None:
        run = ssm.generate(transient + n_steps, z0=z0, x0=x0, seed=seed)
    elif "z" not in run or run.sizes.get("time") != transient + n_steps:
        raise ValueError(f"`run` must be a generated run with `z` over transient + n_steps = {transient + n_steps} "
                         f"time steps; got {dict(run.sizes) if 'z' in run else 'a run without z'}.")
    z_all = np.asarray(run["z"].values[0], dtype=float)
    run = run.isel(time=slice(transient, None))
    z = z_all[transient:]
    diverged = not np.isfinite(z_all).all() or bool(run.attrs.get("diverged", 0))
    if diverged:
        lam = np.full(n_exponents, np.nan)
    else:
        # the Jacobians along the run itself (not stepped again when its steps are the model's own);
        # the transient also lets the QR tangent vectors align before averaging starts
        lam = lyapunov_spectrum(ssm, z0=z_all[0], n_steps=n_steps, transient=transient, path=z_all,
                                n_exponents=n_exponents)
        # QR columns come out largest first only on average: two close exponents can swap
        lam = np.sort(lam)[::-1]
    verdict, cycle_period = _verdict(z, lam * dt, zero_tol, diverged)
    return FreeRunRegime(verdict=verdict, lyapunov=lam, dt=dt, cycle_period=cycle_period, n_steps=n_steps,
                         transient=transient, zero_tol=float(zero_tol), trajectory=run, latent=z, model=ssm,
                         dynamics=dyn)


def analyze_dynamics(model: Any, *, n_steps: int = 20_000, transient: int = 2_000, max_period: int = 4,
                     n_starts: int = 200, z0: Any = None, x0: Any = None, zero_tol: float | None = None,
                     seed: int = 0, name: str | None = None, progress: bool = False,
                     time_budget: float | None = None) -> DynamicsReport:
    """Analyse the free-running dynamics of a fitted model.

    Parameters
    ----------
    model : fitted estimator or StateSpaceModel
    n_steps : int
        Steps of the run that are analysed (Lyapunov average, verdict, spectrum).
    transient : int
        Steps run first and discarded, so that the state reaches its attractor.
    max_period : int
        Largest k whose k-cycles are searched (PLRNN only; 1 = fixed points only).
    n_starts : int
        Newton starts for the fixed points of a non-PLRNN model: half are states of the run,
        half are drawn around it.
    z0, x0 : array-like, optional
        Start state (latent ``(M,)``, or an observation ``(N,)`` that is encoded); default the
        model's initial-state mean, as in ``generate``.
    zero_tol : float, optional
        An exponent counts as zero when ``|λ dt| <= zero_tol`` (per step). Default
        ``20 / n_steps``: the finite-run error of a zero exponent of a flow is about
        ``log(largest / smallest speed on the orbit) / n_steps``.
    seed : int
        Seed of the random Newton starts and the cycle search.
    name : str, optional
        Shown in the Markdown title.
    progress : bool
        Show a tqdm bar over the stages: the run and its spectrum, the fixed points, each
        k-cycle search (minutes for a PLRNN with hundreds of units).
    time_budget : float, optional
        Seconds for a PLRNN's fixed-point and k-cycle searches together (None: no limit). The
        fixed points get half of it, and each k-cycle search an equal share of what is left when
        it starts, so time one search does not use passes to the next; a search cut short is
        marked in the report (see :func:`~dsident.analysis.plrnn_cycles`). The run and its
        spectrum are not limited.

    Returns
    -------
    DynamicsReport

    Notes
    -----
    The verdict, in order: "diverged" if the run is non-finite, or if ``λ1 > 0`` and it is still
    growing, each quarter of it at least twice as wide as the one before (:func:`growing`: an
    unstable linear map's finite run); "fixed point" if over its last
    ``max(100, n_steps // 10)`` steps no latent unit moves by more than 1e-6 of the state's
    size, or if ``λ1 < 0`` and the run is still shrinking towards a point (:func:`settling`);
    "diverged" too if ``|λ1| <= zero_tol`` and the run drifts one way without coming back
    (:func:`drifting`: ``z' = z + h``, whose exponents are all zero);
    otherwise, with ``λ1`` the largest exponent per step, "attracting cycle" if
    ``λ1 < -zero_tol`` (a discrete-time map settles on a cycle of ``cycle_period`` steps),
    "periodic or quasi-periodic" if ``|λ1| <= zero_tol`` (a limit cycle of a flow, or a torus),
    and "chaotic" if ``λ1 > zero_tol``. A stable cycle of a continuous-time model has ``λ1 = 0``
    and so reads "periodic or quasi-periodic".
    """
    from tqdm.auto import tqdm

    max_period = check_int("max_period", max_period, 1)
    n_starts = check_int("n_starts", n_starts, 1)
    time_budget = check_number("time_budget", time_budget, allow_none=True)
    with tqdm(total=2, desc="free run and Lyapunov spectrum", leave=False, disable=not progress) as bar:
        regime = free_run_regime(model, n_steps=n_steps, transient=transient, z0=z0, x0=x0, zero_tol=zero_tol,
                                 seed=seed)
        bar.update()
        ssm, dyn, z, run, lam = regime.model, regime.dynamics, regime.latent, regime.trajectory, regime.lyapunov
        fps, cyc = _fixed_points_and_cycles(ssm, dyn, z, max_period, n_starts, seed, bar, time_budget)
    verdict, cycle_period = regime.verdict, regime.cycle_period
    dt = regime.dt
    info = {"model": name or type(dyn).__name__, "n_steps": regime.n_steps, "transient": regime.transient,
            "zero_tol": regime.zero_tol, "seed": int(seed), "max_period": max_period,
            "latent_dim": int(dyn.latent_dim), **({} if time_budget is None else {"time_budget": float(time_budget)})}
    abscissa = None
    if hasattr(dyn, "vector_field") and len(fps):
        from .ct_tools import spectral_abscissa, vector_field_jacobian

        abscissa = spectral_abscissa(vector_field_jacobian(ssm, fps.points[:, 0]))
    return DynamicsReport(verdict=verdict, lyapunov=lam, dt=dt,
                          kaplan_yorke=kaplan_yorke_dimension(lam, zero_tol=regime.zero_tol / dt),
                          cycle_period=cycle_period,
                          dominant_period=float("nan") if verdict in ("fixed point", "diverged")
                          else dominant_period(z, dt),
                          fixed_points=fps, cycles=cyc, trajectory=run, continuous_abscissa=abscissa,
                          fixed_point_observations=_observed(ssm, fps.points[:, 0]),
                          channel_names=[str(c) for c in run["channel"].values], info=info)


# ---------------------------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------------------------

def _verdict(z: np.ndarray, lam_per_step: np.ndarray, zero_tol: float, diverged: bool) -> tuple[str, int | None]:
    """Classify the run's attractor; returns (verdict, steps per turn of an attracting cycle)."""
    if diverged or not np.isfinite(lam_per_step).all():
        return "diverged", None
    tail = z[-max(100, len(z) // 10):]
    size = 1.0 + float(np.abs(tail).max())
    if at_rest(z):
        return "fixed point", None
    lam1 = float(lam_per_step[0])
    if lam1 > 0 and growing(z):
        # still finite, but every quarter of the run at least twice as wide as the last: an
        # unbounded (e.g. linear) growth, whose λ1 > 0 is no chaos and, inside the zero
        # tolerance, no cycle either
        return "diverged", None
    if lam1 < 0 and settling(z):
        # still moving, but every quarter of the run smaller than the last: a slow approach to a
        # fixed point (a damped spiral), whose λ1 can sit inside the zero tolerance of a short run
        return "fixed point", None
    if abs(lam1) <= zero_tol and drifting(z):
        # a zero exponent and a run that keeps moving one way without coming back (z' = z + h):
        # no cycle or torus, an unbounded drift
        return "diverged", None
    if lam1 < -zero_tol:
        # a map on an attracting cycle repeats itself: the smallest shift that maps the tail onto itself
        for k in range(1, len(tail) // 2):
            if float(np.abs(tail[k:] - tail[:-k]).max()) <= 1e3 * _STILL_TOL * size:
                return "attracting cycle", k
        return "attracting cycle", None
    return spectrum_verdict(lam_per_step, zero_tol), None


def settling(series: np.ndarray, factor: float = 0.5) -> bool:
    """Whether a run (time, dim) shrinks towards a point: the extent (largest range over the
    dimensions) of each of its four quarters is smaller than the one before, and the last
    quarter's at most ``factor`` of the first's. A limit cycle, torus or chaotic attractor keeps
    its extent once the transient is over; a damped spiral loses it geometrically."""
    quarters = np.array_split(np.asarray(series, dtype=float), 4)
    if min(len(q) for q in quarters) < 2:
        return False
    extent = np.array([float(np.ptp(q, axis=0).max()) for q in quarters])
    return bool(np.all(np.diff(extent) < 0) and extent[-1] <= factor * extent[0])


def growing(series: np.ndarray, factor: float = 2.0) -> bool:
    """Whether a run (time, dim) grows without bound: the extent (largest range over the
    dimensions) of each of its four quarters is at least ``factor`` times the one before. The
    counterpart of :func:`settling`; an attractor, even a chaotic one, keeps its extent."""
    quarters = np.array_split(np.asarray(series, dtype=float), 4)
    if min(len(q) for q in quarters) < 2:
        return False
    extent = np.array([float(np.ptp(q, axis=0).max()) for q in quarters])
    return bool(np.all(extent[1:] >= factor * extent[:-1]) and extent[0] > 0)


def drifting(series: np.ndarray) -> bool:
    """Whether a run (time, dim) drifts away: along some dimension each of its four quarters lies
    wholly beyond the one before (their ranges do not overlap, all in one direction), so no part
    of the run comes back to where an earlier one was. A cycle, torus or chaotic attractor
    revisits its states within a quarter of a run that spans several of its turns; a drift such
    as ``z' = z + h`` never does, though its exponents are all zero. The drift must not slow
    down (the last quarter moves at least 0.8 times as far as the first), so a coordinate still
    settling geometrically onto an attractor is not one."""
    quarters = np.array_split(np.asarray(series, dtype=float), 4)
    if min(len(q) for q in quarters) < 2:
        return False
    low = np.array([q.min(axis=0) for q in quarters])
    high = np.array([q.max(axis=0) for q in quarters])
    rising = np.all(high[:-1] < low[1:], axis=0)
    falling = np.all(low[:-1] > high[1:], axis=0)
    # and not slowing down: a coordinate still settling geometrically onto an attractor (its
    # quarters' shifts shrinking) is an approach, not a drift
    shift = np.abs(np.diff(np.array([q.mean(axis=0) for q in quarters]), axis=0))
    steady = shift[-1] >= 0.8 * shift[0]
    return bool(np.any((rising | falling) & steady))


def at_rest(series: np.ndarray) -> bool:
    """Whether the last tenth (at least 100 steps) of a run (time, dim) stands still: its range
    in every dimension at most 1e-6 of its size. A run that settled on a fixed point does."""
    tail = np.asarray(series, dtype=float)[-max(100, len(series) // 10):]
    return float(np.ptp(tail, axis=0).max()) <= _STILL_TOL * (1.0 + float(np.abs(tail).max()))


def _observed(ssm: Any, points: np.ndarray) -> np.ndarray:
    """The observation model's mean at latent points, (n, M) -> (n, N)."""
    import torch

    param = next(ssm.parameters())
    if len(points) == 0:
        return np.zeros((0, int(ssm.observation.obs_dim)))
    with torch.no_grad():
        mean = ssm.decode(torch.as_tensor(np.asarray(points), dtype=param.dtype, device=param.device))
    return mean.detach().cpu().double().numpy()


def dominant_period(series: np.ndarray, dt: float) -> float:
    """Period of the strongest non-zero frequency of a series' most variable column.

    Used for a model's free run (its latent units) and for the data it is compared with (its
    channels), so the two periods are measured the same way.

    Parameters
    ----------
    series : ndarray of shape (time, dim)
        Non-finite rows are dropped first; only the longest finite stretch is used, so a gap
        never joins two pieces of a signal.
    dt : float
        Sampling step (time units).

    Returns
    -------
    float
        ``1 / f`` in time units; NaN when fewer than 4 finite rows remain or the series is flat.
    """
    spectrum = _column_spectrum(series, dt)
    if spectrum is None:
        return float("nan")
    freq, power = spectrum
    return float(1.0 / freq[1 + int(np.argmax(power[1:]))])


def fundamental_period(series: np.ndarray, dt: float, share: float = 0.5, min_cycles: float = 1.0,
                       prominence: float | None = None) -> float:
    """Period of the lowest spectral peak holding at least ``share`` of the strongest one.

    The strongest line of a spike train or a sharp-edged cycle can be its second harmonic (a
    free run with the data's 12-13 spikes had 8 % more power at twice their rate), so
    :func:`dominant_period` would call it twice as fast. The fundamental, the lowest line that
    is nearly as strong, is what two rhythms are compared by (``share = 0.5``). Same series
    handling as :func:`dominant_period` (the most variable column, its longest finite stretch).

    ``min_cycles``: only frequencies of at least that many cycles over the stretch count. A
    chaotic signal's slow wandering (Lorenz-63's x switching lobes: 3 cycles in 10 000 samples)
    can hold its strongest power, but it is no rhythm the stretch can measure; with
    ``min_cycles = 5`` the 33-time-unit "period" of the Lorenz-63 test split's first 10 000
    samples goes.

    ``prominence``: count only lines, local maxima of the periodogram (smoothed over one bin,
    or over the bins of one 10 000-sample stretch's bin for a longer series) at least that
    many times the median of the spectrum from 1/1.5 to 1.5 times their frequency. A broadband
    spectrum has none: Lorenz-63's x and y peak at most 7× their surroundings, its z (the
    0.76-time-unit oscillation) 39-56×, the ECG's beats 22-42× and the bursting neuron's bursts
    over 1 000×, so 10 tells a rhythm from chaos.

    With both, a sharp line below the chosen one, stronger than it and with the chosen one among
    its harmonics, means the rhythm's fundamental was missed (fewer than ``min_cycles`` cycles,
    or too few to stand out: a Van der Pol oscillator over 4 of its cycles read as its 7th
    harmonic, over 10.4 as its 3rd), so the result is NaN.

    Returns
    -------
    float
        ``1 / f`` in time units; NaN as for :func:`dominant_period`, when the stretch is
        shorter than ``min_cycles`` + 1 cycles of its sampling grid's lowest frequency, and
        with ``prominence`` when the spectrum has no line or a stronger slower one.
    """
    if not 0.0 < float(share) <= 1.0:
        raise ValueError(f"`share` must be in (0, 1]; got {share!r}.")
    if not float(min_cycles) >= 1.0:
        raise ValueError(f"`min_cycles` must be >= 1 (cycles over the stretch); got {min_cycles!r}.")
    spectrum = _column_spectrum(series, dt)
    if spectrum is None:
        return float("nan")
    freq, power = spectrum
    raw = power                  # the periodogram before any smoothing (a line's sharpness)
    # bin k of the stretch's spectrum is k cycles over it
    first = int(np.ceil(float(min_cycles)))
    if prominence is not None:
        from scipy.ndimage import gaussian_filter1d

        # one bin of a 10 000-sample stretch: a longer stretch's finer bins are averaged back to it,
        # or the periodogram's scatter (exponential, bin by bin) throws up a chance "line" 10×
        # its surroundings among tens of thousands of bins
        power = gaussian_filter1d(power, max(1.0, len(power) / 5000.0))
    p = power[first:]
    if p.size == 0 or p.max() <= 0:
        return float("nan")
    # local maxima (the ends count against their one neighbour)
    left = np.r_[True, p[1:] >= p[:-1]]
    right = np.r_[p[:-1] >= p[1:], True]
    peaks = left & right
    if prominence is not None:
        peaks &= _stands_out(power, first + np.flatnonzero(peaks), float(prominence))[first:]
        if not peaks.any():
            return float("nan")
    # the lowest of them at least `share` of the strongest
    strong = np.flatnonzero(peaks & (p >= float(share) * p[peaks].max()))
    chosen = first + int(strong[0])
    if prominence is not None and _slower_fundamental(raw, chosen, float(prominence)):
        # the rhythm is slower than the stretch measures, and the chosen line one of its
        # harmonics (a Van der Pol oscillator over 4 of its cycles read as its 7th)
        return float("nan")
    return float(1.0 / freq[chosen])


def _slower_fundamental(raw: np.ndarray, chosen: int, prominence: float) -> bool:
    """Whether the raw periodogram has, below the chosen bin, a sharp line at least as strong as
    the chosen bin's neighbourhood whose harmonic the chosen bin can be, with a lower harmonic of
    it at least half as strong as the chosen bin (none is asked of a 2nd or 3rd harmonic).

    Such a line is the rhythm's fundamental, missed because it has fewer cycles than a rhythm
    needs over the stretch or, a little above, because with so few cycles it spreads over two
    bins and does not stand ``prominence`` above its smoothed surroundings (a Van der Pol stretch
    of 10.4 cycles read as its 3rd harmonic). Sharp: ``prominence`` times the largest of the bins
    two and three away on either side (the bin next to it shares a line that falls between
    bins). A derivative's harmonics are strong (Van der Pol's dV/dt: the 3rd within 10× of the
    fundamental), so no more than "at least as strong" is asked of the line. A 1/f background
    (an EEG's) is strong at low bins, but its scatter does not make such a line, so its alpha
    line keeps its period (20 synthetic EEGs, alpha at 0.3-1 of the background's std: all
    kept). Lines of fewer than 4 cycles are not looked for: their shoulders would reach the DC
    bin and bin 1's trend."""
    top = raw[max(chosen - 1, 1):chosen + 2].max()
    k = np.arange(4, chosen)         # both shoulders (3 bins away) clear of the DC bin and bin 1's trend
    padded = np.concatenate([[0.0], raw, [0.0, 0.0, 0.0]])        # padded[i + 1] is raw[i]
    local = (raw[k] >= raw[k - 1]) & (raw[k] >= padded[k + 2])
    shoulders = np.max([padded[k - 1], padded[k - 2], padded[k + 3], padded[k + 4]], axis=0)
    for k in k[local & (raw[k] >= top) & (raw[k] >= prominence * shoulders)]:
        n = max(2, int(round(chosen / k)))
        if abs(chosen - n * k) > 0.5 * n + 1:
            continue
        # a harmonic series shows lower harmonics too (Van der Pol's 3rd and 5th beside its 7th);
        # two independent rhythms, a slow and a fast one, do not. None is asked of a 2nd or 3rd
        # harmonic: an odd-harmonic signal (Van der Pol's) has no 2nd beneath its 3rd
        if n <= 3 or any(raw[max(j * k - 1, 1):j * k + 2].max() >= 0.5 * top for j in range(2, n)):
            return True
    return False


def _stands_out(power: np.ndarray, candidates: np.ndarray, prominence: float) -> np.ndarray:
    """Mask over ``power``'s bins: True at the ``candidates`` whose power is at least
    ``prominence`` times the median of ``power`` from 1/1.5 to 1.5 times their bin.

    A long series' smoothed spectrum is read at about 5 000 bins for the wide bands (every
    ``len(power) // 5000``-th bin), so the cost stays near that of a 10 000-sample stretch
    (0.2 s) instead of growing with the square of the length (53 s at 400 000 samples)."""
    out = np.zeros(len(power), dtype=bool)
    step = max(1, len(power) // 5000)
    coarse = power[::step]
    for k in candidates:
        a, b = int(k / 1.5), min(len(power), int(np.ceil(k * 1.5)) + 1)
        band = power[a:b] if b - a <= 5000 or step == 1 else coarse[a // step: -(-b // step)]
        out[k] = band.size > 0 and power[k] >= prominence * float(np.median(band))
    return out


#: the fewest cycles over a stretch a rhythm needs to be measured by its period (:func:`rhythm_period`);
#: slower wandering (a chaotic signal's) is no rhythm the stretch measures, and a pure sine of
#: fewer cycles does not stand RHYTHM_PROMINENCE above its smoothed surroundings anyway
RHYTHM_MIN_CYCLES = 10

#: how far a spectral line must stand above its surroundings to be a rhythm (:func:`rhythm_period`)
RHYTHM_PROMINENCE = 10.0


def rhythm_period(series: np.ndarray, dt: float) -> float:
    """The period of a series' rhythm: :func:`fundamental_period` among spectral lines standing
    :data:`RHYTHM_PROMINENCE` times above their surroundings, of at least
    :data:`RHYTHM_MIN_CYCLES` cycles over the stretch; NaN when there is none (a flat, too short
    or broadband series: Lorenz-63's x and y, whose z has the 0.76-time-unit oscillation).

    What ``fit.md`` compares a free run's rhythm with the data's by
    (:func:`dsident.experiments.scoring.run_periods`), and ``dsident inspect``'s periods.
    """
    return fundamental_period(series, dt, min_cycles=RHYTHM_MIN_CYCLES, prominence=RHYTHM_PROMINENCE)


def _column_spectrum(series: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Frequencies and periodogram of the most variable column's longest finite stretch; None
    when fewer than 4 finite rows remain or the stretch is flat."""
    if isinstance(dt, bool) or not isinstance(dt, (int, float, np.integer, np.floating)) or not np.isfinite(dt) \
            or dt <= 0:
        raise ValueError(f"`dt` must be a positive sampling step (time units); got dt={dt!r}.")
    series = np.asarray(series, dtype=float)
    if series.ndim == 1:
        series = series[:, None]
    if series.ndim != 2:
        raise ValueError(f"`series` must be (time,) or (time, channel); got shape {series.shape}.")
    finite = np.isfinite(series).all(axis=1)
    if finite.sum() < 4:
        return None
    start, length = longest_observed_stretch(series)
    z = series[start:start + length]
    unit = z[:, int(np.argmax(z.var(axis=0)))]
    power = np.abs(np.fft.rfft(unit - unit.mean())) ** 2
    freq = np.fft.rfftfreq(len(unit), d=dt)
    if len(power) < 3 or not np.isfinite(power).all() or power[1:].max() <= 0:
        return None
    return freq, power


def _fixed_points_and_cycles(ssm: Any, dyn: Any, z: np.ndarray, max_period: int, n_starts: int,
                             seed: int, bar: Any, time_budget: float | None = None
                             ) -> tuple[FixedPoints, list[FixedPoints]]:
    """Exact fixed points and cycles for a PLRNN; Newton's method from the run's states otherwise.

    ``bar`` (a tqdm bar) advances by one a search; ``time_budget`` (seconds) is shared by the
    PLRNN's searches: half for the fixed points, then equal parts of what is left.
    """
    bar.set_description("fixed points")
    if isinstance(dyn, PLRNN):
        bar.total += max_period - 1
        found = []
        deadline = None if time_budget is None else time.perf_counter() + float(time_budget)
        for k in range(1, max_period + 1):
            if k > 1:
                bar.set_description(f"{k}-cycles")
            found.append(plrnn_cycles(ssm, k, seed=seed, time_budget=_share(deadline, k, max_period)))
            bar.update()
        return found[0], found[1:]
    rng = np.random.default_rng(seed)
    finite = z[np.isfinite(z).all(axis=1)]
    m = int(dyn.latent_dim)
    if len(finite):
        from_run = finite[rng.integers(0, len(finite), size=(n_starts + 1) // 2)]
        centre, spread = finite.mean(axis=0), finite.std(axis=0) + 1e-3
    else:
        from_run, centre, spread = np.zeros((0, m)), np.zeros(m), np.ones(m)
    around = centre + 2.0 * spread * rng.standard_normal((n_starts - len(from_run), m))
    fps = newton_fixed_points(ssm, starts=np.concatenate([from_run, around]), seed=seed)
    bar.update()
    return fps, []


def _share(deadline: float | None, k: int, max_period: int) -> float | None:
    """Seconds for the k-cycle search (k = 1: fixed points) out of what is left before ``deadline``.

    The fixed points, what a reader looks for first, get half when cycles follow; each k-cycle
    search an equal part of what is left when it starts.
    """
    if deadline is None:
        return None
    left = max(deadline - time.perf_counter(), 0.0)
    if k == 1:
        return left if max_period == 1 else left / 2
    return left / (max_period + 1 - k)


def _cut_note(found: FixedPoints) -> str:
    """Why a search may have missed objects: its candidate budget, or its time budget."""
    if found.info.get("timed_out"):
        return (f" (search stopped at its time budget after {found.info.get('n_candidates', 0)} regions: "
                "may be incomplete)")
    return " (search truncated: may be incomplete)" if found.info.get("truncated") else ""


def _spectrum(values: np.ndarray) -> str:
    """The exponents as a list, the first ``_MAX_EXPONENTS`` and the last of a longer spectrum."""
    values = np.asarray(values, float).ravel()
    if values.size <= _MAX_EXPONENTS + 1:
        return _numbers(values)
    head = _numbers(values[:_MAX_EXPONENTS])[:-1]
    return f"{head}, … ({values.size - _MAX_EXPONENTS - 1} more; all in `to_xarray()`), {values[-1]:.4g}]"


def _resolution_note(verdict: str, per_step: np.ndarray, zero_tol: float, n_steps: Any) -> list[str]:
    """A line when "periodic" rests on a clearly positive λ1 inside the zero tolerance: the run
    (``20 / n_steps`` per step) is too short to tell such an exponent from a cycle's zero one, and
    the run length that would (twice ``20 / λ1``) is named (with a ``zero_tol`` of the caller's,
    only the first part). Lorenz-63 at dt 0.01 (λ1 ≈ 0.009 per
    step) reads "periodic" from a 2 000-step run."""
    if verdict != "periodic or quasi-periodic" or per_step.size == 0 or not np.isfinite(per_step).all():
        return []
    lam1 = float(np.max(per_step))
    if not (0.25 * zero_tol < lam1 <= zero_tol) or not isinstance(n_steps, (int, np.integer)):
        return []
    if not math.isclose(zero_tol, zero_tolerance(int(n_steps)), rel_tol=1e-9):
        return [f"- note: λ1 = +{lam1:.2g} per step lies inside the given zero tolerance ±{zero_tol:.2g}"]
    needed = int(math.ceil(2 * 20.0 / lam1 / 1000.0)) * 1000
    return [f"- note: λ1 = +{lam1:.2g} per step lies inside the zero tolerance ±{zero_tol:.2g} of this "
            f"{int(n_steps)}-step run, which cannot tell an exponent this small from a cycle's zero one; "
            f"a run of {needed} steps or more can (`--steps {needed}`, `n_steps={needed}`)"]


def _signs(per_step: np.ndarray, zero_tol: float) -> str:
    """'; 1 positive, 1 zero, 1 negative' for a spectrum per step (empty if any exponent is NaN)."""
    if per_step.size == 0 or not np.all(np.isfinite(per_step)) or not np.isfinite(zero_tol):
        return ""
    positive = int(np.sum(per_step > zero_tol))
    zero = int(np.sum(np.abs(per_step) <= zero_tol))
    return f"; {positive} positive, {zero} zero, {per_step.size - positive - zero} negative"


def _numbers(values: np.ndarray, digits: int = 4) -> str:
    return "[" + ", ".join(f"{v:.{digits}g}" for v in np.asarray(values, float).ravel()) + "]"
