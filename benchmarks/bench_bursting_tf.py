"""Tune the bursting-neuron teacher-forcing cell: one setting, a few seeds, scores and burst shape.

Fits the clipped shallow PLRNN on the bursting neuron exactly as ``dsident benchmark`` does for
the cell ("bursting_neuron", "shplrnn", "teacher-forcing"): the configuration comes from
:func:`dsident.experiments.config.resolve_config` (``PAIR_DEFAULTS``) with the command line's
``--set`` overrides applied as the user's layer, the estimator is built and fitted by
:func:`dsident.experiments.runner.fit_point`, and the scores come from
:func:`dsident.experiments.scoring.evaluate_model` (i.e. :func:`dsident.metrics.evaluate` on the
first ``eval_length`` test samples). For every seed it prints

- D_stsp and D_H of the fit next to the floor (:func:`dsident.metrics.floor` at the evaluation
  length: mean [min, max] over pairs of stretches of the true system);
- the fit time (one torch thread) and the epoch the engine kept;
- a burst diagnostic of the evaluated free run (:func:`dsident.metrics.evaluate` with ``return_run=True``,
  the same run the scores compare) against the test stretch: the regime (``bursting``, ``tonic``,
  ``fixed point``, ``diverged``, ``other``; the classifier of
  ``benchmarks/bench_rplrnn_bursting.py``), spikes per burst (median and coefficient of variation
  across bursts) and the burst period in samples (median and coefficient of variation).

Spikes are voltage peaks (channel 0, z-units) found by ``bench_rplrnn_bursting.spike_times``; a
gap between spikes longer than 3× the median inter-spike interval separates two bursts (the
regime classifier's own rule).

Run (one process at a time on the shared cores)::

    OMP_NUM_THREADS=1 python benchmarks/bench_bursting_tf.py --seeds 0 1
    python benchmarks/bench_bursting_tf.py --seeds 0 --set fit_options.alpha=0.2 \
        --set model_params.hidden_dim=200 --label "alpha 0.2, H 200" --jsonl runs.jsonl

``--set KEY=VALUE``: ``KEY`` is a top-level run key (``train_length``) or ``model_params.NAME`` /
``fit_options.NAME``; ``VALUE`` is read as JSON when it parses (numbers, ``true``, ``null``) and
as a string otherwise (``fit_options.alpha=adaptive``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np
import torch

from dsident import metrics
from dsident.experiments.config import parse_overrides, resolve_config
from dsident.experiments.inputs import load_data
from dsident.experiments.runner import adapt_to_data, fit_point
from dsident.experiments.scoring import evaluate_model

# the spike and regime helpers of the Laplace-EM bursting benchmark (one implementation)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ecg_tf import compared_window  # noqa: E402
from bench_rplrnn_bursting import burst_groups, regime, spike_times  # noqa: E402

CELL = ("bursting_neuron", "shplrnn", "teacher-forcing")


def burst_stats(x: np.ndarray) -> dict[str, Any]:
    """Regime and burst shape of an orbit ``x`` (time, channel) in z-units (voltage = channel 0).

    Returns
    -------
    dict
        ``regime``; ``n_spikes``; ``n_bursts`` (complete bursts: both neighbouring gaps seen);
        ``spikes_per_burst`` / ``spb_cv`` (median and std/mean over the complete bursts);
        ``period`` / ``period_cv`` (burst start to burst start, in samples; median and std/mean).
        NaN where there are fewer than two complete bursts.
    """
    out: dict[str, Any] = {"regime": regime(x), "n_spikes": 0, "n_bursts": 0, "spikes_per_burst": np.nan,
                           "spb_cv": np.nan, "period": np.nan, "period_cv": np.nan}
    if out["regime"] == "diverged":
        return out
    out["n_spikes"] = int(spike_times(x[:, 0]).size)
    groups = burst_groups(x[:, 0])
    if not groups:
        return out
    starts = np.array([g[0] for g in groups[1:]], dtype=int)   # first spike of every burst after a gap
    counts = np.array([len(g) for g in groups[1:-1]], dtype=int)  # spikes of the bursts between two gaps
    out["n_bursts"] = int(counts.size)
    if counts.size >= 2:
        out["spikes_per_burst"] = float(np.median(counts))
        out["spb_cv"] = float(counts.std() / counts.mean())
        periods = np.diff(starts)
        out["period"] = float(np.median(periods))
        out["period_cv"] = float(periods.std() / periods.mean())
    return out


def fmt_burst(b: dict[str, Any]) -> str:
    return (f"{b['regime']:<11} spikes {b['n_spikes']:4d}, bursts {b['n_bursts']:3d}, "
            f"spikes/burst {b['spikes_per_burst']:5.1f} (cv {b['spb_cv']:.2f}), "
            f"period {b['period']:6.1f} (cv {b['period_cv']:.2f})")


def run_seed(cfg: dict[str, Any], seed: int, train, test) -> dict[str, Any]:
    """Fit and score one seed of ``cfg`` the way the benchmark runner does."""
    cfg = {**cfg, "seed": seed}
    used = adapt_to_data(cfg, train)
    est, fit_s, dropped = fit_point(used, train, progress=False)
    scores, _, gen = evaluate_model(est, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=seed, return_run=True)
    hist = est.history_
    return {"seed": seed, "D_stsp": scores["D_stsp"], "D_H": scores["D_H"], "PE": scores["PE"],
            "diverged": bool(scores["diverged"]), "fit_s": fit_s, "best_epoch": hist.get("best_epoch"),
            "final_alpha": (hist.get("alpha") or [np.nan])[-1], "dropped": dropped,
            # the training trace, for the JSON lines: the free-run score the engine selects on
            # (against the training series) and the mean pre-clipping gradient norm per epoch
            "eval_epoch": list(hist.get("eval_epoch") or []),
            "train_stsp": list(hist.get("state_space_divergence") or []),
            "grad_norm": list(hist.get("grad_norm") or []),
            "burst": burst_stats(compared_window(gen))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting of the cell (repeatable)")
    parser.add_argument("--label", default="", help="name of this setting in the output")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--jsonl", default=None, help="append one JSON line per seed to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    overrides = parse_overrides(args.sets)
    cfg = resolve_config(*CELL, overrides=overrides)
    train = load_data(CELL[0], split="train", length=cfg.get("train_length"))
    test = load_data(CELL[0], split="test", length=cfg.get("eval_length"))
    fl = metrics.floor(CELL[0], length=int(cfg["eval_length"]))
    fs, fh = fl["state_space_divergence"].values, fl["power_spectrum_distance"].values
    print(f"# {args.label or 'cell defaults'}: overrides {json.dumps(overrides)}")
    print(f"#   model_params {json.dumps(cfg['model_params'])}")
    print(f"#   fit_options {json.dumps(cfg['fit_options'])}, train_length {cfg.get('train_length')}")
    print(f"#   floor (T={cfg['eval_length']}): D_stsp {fs.mean():.3g} [{fs.min():.3g}, {fs.max():.3g}], "
          f"D_H {fh.mean():.2g} [{fh.min():.2g}, {fh.max():.2g}]")
    print(f"#   test data: {fmt_burst(burst_stats(np.asarray(test['x'].values[0], dtype=float)))}", flush=True)
    rows = []
    for seed in args.seeds:
        r = run_seed(cfg, seed, train, test)
        rows.append(r)
        print(f"seed {seed}: D_stsp {r['D_stsp']:.3g} ({r['D_stsp'] / fs.mean():.0f}x floor), D_H {r['D_H']:.3g}, "
              f"fit {r['fit_s']:.0f} s, best epoch {r['best_epoch']}, alpha {r['final_alpha']:.3g} | "
              f"free run: {fmt_burst(r['burst'])}", flush=True)
        if r["dropped"]:
            print(f"  (defaults the estimator/engine did not accept: {r['dropped']})")
        if args.jsonl:
            with open(args.jsonl, "a") as fhd:
                fhd.write(json.dumps({"label": args.label, "overrides": overrides, **r}, default=float) + "\n")
    if len(rows) > 1:
        d = np.array([r["D_stsp"] for r in rows])
        h = np.array([r["D_H"] for r in rows])
        print(f"median over seeds {args.seeds}: D_stsp {np.median(d):.3g} [{d.min():.3g}, {d.max():.3g}], "
              f"D_H {np.median(h):.3g} [{h.min():.3g}, {h.max():.3g}], bursting "
              f"{sum(r['burst']['regime'] == 'bursting' for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"total wall time {time.perf_counter() - start:.0f} s")
