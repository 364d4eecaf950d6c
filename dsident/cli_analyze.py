"""``dsident analyze MODEL_DIR``: what a fitted model's free-running dynamics do.

Maps its options onto :func:`dsident.analysis.analyze_dynamics` and
:func:`dsident.plotting.plot_flow_field`, and writes into ``MODEL_DIR/analysis`` (or ``--out``):

- ``analysis.nc``: Lyapunov exponents, fixed points and cycles with their eigenvalues, the verdict;
- ``analysis.md``: the same as a short report; with ``--start`` on a simulated benchmark set,
  also the model's fixed points beside the true system's;
- ``free_run.nc``: the analysed free run (``x``, ``z``);
- ``flow.png``: the flow on the two most variable latent units with the fixed points, cycles
  and the run; ``latents.png``: the run's latent units over time.
"""
from __future__ import annotations

import argparse
import time
from typing import Any


def cmd_analyze(args: argparse.Namespace) -> int:
    """``dsident analyze MODEL_DIR``: Lyapunov spectrum, fixed points, cycles, flow figure."""
    from . import plotting
    from .analysis import analyze_dynamics
    from .cli_main_job import _as_flags, _check_out, _fit_folder, _settings, _threads, fit_dt, load_fitted
    from .experiments.runner import _write_netcdf

    _threads(args)
    s = _settings(args, ["out", "steps", "transient", "max_period", "seed", "dims", "start", "dt", "progress",
                          "time_budget", "read"])
    est, cfg = load_fitted(args.model_dir)
    x0 = start_raw = None
    if s.get("start"):
        from .experiments.late_run import first_observation
        from .experiments.inputs import load_data, load_test, read_options_for

        read = s.get("read") or read_options_for(cfg, s["start"])
        dt = fit_dt(s.get("dt"), cfg, args.model_dir)
        start_raw = load_data(s["start"], split="test", length=None, dt=dt, read=read)
        start_data = load_test(s["start"], cfg, dt=dt,
                               channels=getattr(est, "channel_names_", None) or None, read=read)
        x0 = first_observation(start_data)
        if x0 is None:
            raise ValueError(f"--start {s['start']!r} has no fully observed sample to start from.")
    out = _check_out(s.get("out") or _fit_folder(args.model_dir) / "analysis")
    label = f"{cfg['model']} × {cfg['method']}"
    m = int(est.model_.latent_dim)
    dims = _checked_dims(s.get("dims"), m)        # checked before the work starts
    print(f"[dsident] analyze {args.model_dir} ({label}) → {out}", flush=True)
    t0 = time.perf_counter()
    given = {key: s[flag] for flag, key in (("steps", "n_steps"), ("transient", "transient"),
                                            ("max_period", "max_period"), ("seed", "seed"),
                                            ("time_budget", "time_budget")) if s.get(flag) is not None}
    flags = {"n_steps": "--steps", "transient": "--transient", "max_period": "--max-period", "seed": "--seed",
             "time_budget": "--time-budget"}
    try:
        report = analyze_dynamics(est, x0=x0, name=label, progress=s.get("progress", True) is not False,
                                  **given)                       # what is not given keeps the default
    except ValueError as err:        # name the flag the user typed, not the function's argument
        pairs = [pair for key, flag in flags.items() for pair in ((f"`{key}`", flag), (f"{key}=", f"{flag} "))]
        raise ValueError(_as_flags(str(err), pairs)) from err
    if cfg.get("time_unit"):
        report.info["time_unit"] = cfg["time_unit"]    # the data's, from the fit: "ms", "s"
    if cfg.get("zscore") and report.fixed_point_observations is not None:
        from .experiments.inputs import to_data_units

        # a z-scored fit's resting states, read in the recording's units (e.g. mV)
        report.fixed_point_observations = to_data_units(report.fixed_point_observations, cfg)
        report.info["observation_units"] = "the data's units"
    out.mkdir(parents=True, exist_ok=True)
    analysed = report.to_xarray()
    analysed.attrs["start"] = str(s["start"]) if start_raw is not None else "prior mean"
    _write_netcdf(analysed, out / "analysis.nc")
    _write_netcdf(report.trajectory, out / "free_run.nc")
    if dims is None:
        dims = report.flow_dims()
    if dims is not None:
        plotting.plot_flow_field(est, dims=dims, fixed_points=report.fixed_points, cycles=report.cycles or None,
                                 trajectory=report.trajectory if report.verdict != "diverged" else None,
                                 title=f"{label}: {report.verdict}", save=out / "flow.png")
    if report.verdict != "diverged":
        plotting.plot_latent_trajectories(report.trajectory, save=out / "latents.png")
    # where the run began, so an analysis from --start is told from one from the prior mean
    start = (f"the first fully observed sample of {s['start']}" if start_raw is not None
             else "the initial-state prior's mean (--start DATA: a sample of the data)")
    text = report.to_markdown().replace("\n- attractor of the free run:", f"\n- run started at {start}\n"
                                        "- attractor of the free run:", 1)
    if start_raw is not None:
        from .experiments.best_dynamics import fixed_point_comparison

        text += fixed_point_comparison(start_raw, report)[0]    # empty unless the data name their system
    text += f"\n(analysis took {time.perf_counter() - t0:.1f} s)\n"
    (out / "analysis.md").write_text(text)
    print(text, flush=True)
    return 0


def _checked_dims(given: Any, m: int) -> list[int] | None:
    """``--dims`` as two different latent units in [0, M); None when not given."""
    if given is None:
        return None
    dims = [int(d) for d in given]
    if len(dims) != 2 or len(set(dims)) != 2 or not all(0 <= d < m for d in dims):
        raise ValueError(f"--dims must name two different latent units in [0, {m - 1}]; got {given!r}.")
    return dims


def register(subparsers: Any) -> None:
    """Add ``analyze`` to the ``dsident`` parser."""
    from .cli_main_job import _add_common

    help_text = "Lyapunov spectrum, fixed points, cycles and flow field of a fitted model"
    p = subparsers.add_parser("analyze", help=help_text, description=help_text)
    p.add_argument("model_dir", help="folder written by `dsident fit`")
    p.add_argument("--steps", type=int, help="steps of the analysed free run (default 20000)")
    p.add_argument("--transient", type=int, help="steps run first and discarded (default 2000)")
    p.add_argument("--max-period", type=int, help="largest k of the PLRNN's k-cycles searched (default 4)")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="seconds for the PLRNN's fixed-point and cycle searches together (default: no limit; "
                        "a search cut short is marked in analysis.md). For wide models: M = 300 takes about "
                        "20 minutes without one")
    p.add_argument("--dims", type=int, nargs=2, metavar=("I", "J"),
                   help="latent units of the flow figure (default: the two most variable)")
    p.add_argument("--start", metavar="DATA",
                   help="start the run at the first sample of DATA (a shipped set's test split or a file) "
                        "instead of the model's initial-state mean")
    p.add_argument("--dt", type=float, help="sampling step of a plain array file given to --start")
    p.add_argument("--read", action="append", metavar="KEY=VALUE",
                   help="an option of --start's file reader (as fit's --read; default: the fit's own, for a file "
                        "of the same format)")
    p.add_argument("--seed", type=int, help="seed of the Newton starts and the cycle search (default 0)")
    p.add_argument("--out", help="output folder (default MODEL_DIR/analysis)")
    _add_common(p)
    p.set_defaults(func=cmd_analyze)
