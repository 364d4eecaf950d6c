"""``dsident inspect DATA``: what a data file holds, as dsident reads it, before a fit.

Maps its options onto :func:`dsident.experiments.inputs.load_data` and
:func:`dsident.data.summary.describe`, and writes into ``--out`` (default
``dsident-results/inspect-<name>``):

- ``inspect.md``: trials, samples, channels, dt and its unit, each channel's statistics and
  period, and notes on what would hurt a fit or a score (printed too);
- ``time_series.png``: each channel over its first five periods of the slowest rhythm or burst
  cycle (at least 2 000 samples); ``spectra.png``: their smoothed power spectra (as D_H compares them).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any


def cmd_inspect(args: argparse.Namespace) -> int:
    """``dsident inspect DATA``: sizes, sampling, channel statistics and rhythms, notes, figures."""
    from . import plotting
    from .cli_main_job import _check_out, _settings
    from .data.summary import FEW_PERIODS, describe, describe_markdown
    from .experiments.inputs import load_data

    s = _settings(args, ["dt", "read", "eval_length", "out"])
    out = _check_out(s.get("out") or f"dsident-results/inspect-{Path(str(args.data)).stem}")
    data = load_data(args.data, split="train", dt=s.get("dt"), read=s.get("read"))
    summary = describe(data, eval_length=int(s.get("eval_length") or 10_000))
    text = describe_markdown(summary)
    out.mkdir(parents=True, exist_ok=True)
    (out / "inspect.md").write_text(text)
    # the slowest rhythm or burst cycle (a chaotic burster has no rhythm, but its bursts recur)
    periods = [r["period_samples"] for r in summary["per_channel"] if math.isfinite(r["period_samples"])]
    periods += [r["burst_period"] / summary["dt"] for r in summary["per_channel"]
                if math.isfinite(r["burst_period"])]
    shown = int(max(2_000, FEW_PERIODS * max(periods))) if periods else 2_000
    plotting.plot_time_series(data, n_steps=shown, title=summary["name"], save=out / "time_series.png")
    plotting.plot_power_spectra(data, title=f"{summary['name']}: power spectra (as D_H compares them)",
                                log_power=True, save=out / "spectra.png")
    print(text + f"\n(written to {out})", flush=True)
    return 0


def register(subparsers: Any) -> None:
    """Add ``inspect`` to the ``dsident`` parser."""
    from .cli_main_job import _add_common

    help_text = "what a data file holds as dsident reads it: sizes, dt and its unit, channels, rhythms, notes"
    p = subparsers.add_parser("inspect", help=help_text, description=help_text)
    p.add_argument("data", help="a data file (any format `dsident fit` reads) or a shipped set name (its training split)")
    p.add_argument("--dt", type=float, help="sampling step of a plain array file")
    p.add_argument("--read", action="append", metavar="KEY=VALUE",
                   help="an option of the file's reader, as for `dsident fit` (key=..., series=..., picks=...)")
    p.add_argument("--eval-length", type=int, help="the evaluation window the notes compare rhythms with "
                                                   "(default 10000 samples, as `dsident fit`)")
    p.add_argument("--out", help="output folder (default dsident-results/inspect-NAME)")
    _add_common(p)
    p.set_defaults(func=cmd_inspect)
