"""The rPLRNN (``dsident.models.PLRNN``) reconstructing Lorenz-63 by teacher forcing.

Fits the PLRNN with exactly the settings ``dsident benchmark --models rplrnn --methods
teacher-forcing --datasets lorenz63`` resolves (``PAIR_DEFAULTS[("lorenz63", "rplrnn",
"teacher-forcing")]`` in :mod:`dsident.experiments.config`), one fit per seed on one torch
thread, and prints per seed D_stsp, D_H, whether the free run diverged and the fit time, then
the median and range over seeds next to the floor of the benchmark at the evaluation length
(the true system against itself, :func:`dsident.metrics.floor`, mean and [min, max] over
pairs of stretches). Each fit keeps the epoch whose free run matched the *training* series
best (the engine's default), so the test split is touched only by the final
:func:`dsident.metrics.evaluate` on its first ``--eval-length`` samples.

Run: ``python benchmarks/bench_rplrnn_lorenz.py`` (seeds 0-2, about 5 minutes a fit on one
core, so about 15 minutes), ``--seeds 1`` for one fit, ``--epochs 10`` for a cheap smoke run
(not the defaults: the table says so). ``--then-epochs 100 --then-lr 1e-3`` goes on from each
fitted model for that many more epochs (``fit(..., warm_start=True)``) and prints the scores
before and after with the free run's verdict (``analyze_dynamics``, 22 000 steps from the first
test sample): a 10 000-step score cannot tell a long chaotic transient from an attractor. The
table is in ``docs/plrnn.md``.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch

import dsident
from dsident import metrics
from dsident.experiments import load_data
from dsident.experiments.config import resolve_config

#: the benchmark cell this script measures
CELL = ("lorenz63", "rplrnn", "teacher-forcing")


def cell_settings(epochs: int | None = None) -> dict[str, Any]:
    """The run configuration ``dsident benchmark`` resolves for the cell (``epochs`` overrides)."""
    cfg = resolve_config(*CELL)
    if epochs is not None:
        cfg["fit_options"]["n_epochs"] = int(epochs)
    return cfg


def run_seed(seed: int, cfg: dict[str, Any], eval_length: int, then_epochs: int = 0,
             then_lr: float = 1e-3) -> dict[str, Any]:
    """Fit one seed and score it on the first ``eval_length`` test samples; with ``then_epochs``,
    go on from the fitted model (warm start) and score again."""
    train = load_data(CELL[0], split="train", length=cfg.get("train_length"))
    test = load_data(CELL[0], split="test", length=eval_length)
    est = dsident.models.PLRNN(**cfg["model_params"], seed=seed)
    start = time.perf_counter()
    est.fit(train, method=CELL[2], progress=False, **cfg["fit_options"])
    fit_s = time.perf_counter() - start
    row = {"seed": seed, **_scores(est, test), "fit_s": fit_s, "best_epoch": int(est.history_["best_epoch"])}
    if then_epochs:
        start = time.perf_counter()
        est.fit(train, method=CELL[2], warm_start=True, progress=False,
                **{**cfg["fit_options"], "n_epochs": int(then_epochs), "lr": float(then_lr)})
        row["then"] = {**_scores(est, test), "fit_s": time.perf_counter() - start,
                       "best_epoch": int(est.history_["best_epoch"])}
    return row


def _scores(est: Any, test: Any) -> dict[str, Any]:
    scores = metrics.evaluate(est, test)
    report = dsident.analysis.analyze_dynamics(est, n_steps=20_000, transient=2_000, max_period=2,
                                               x0=test["x"].values[0, 0])
    return {"d_stsp": float(scores.state_space_divergence), "d_h": float(scores.power_spectrum_distance),
            "diverged": int(scores.diverged), "verdict": report.verdict, "lambda1": report.max_lyapunov}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--epochs", type=int, default=None, help="override n_epochs (not the defaults)")
    parser.add_argument("--eval-length", type=int, default=10_000, help="test samples scored (T)")
    parser.add_argument("--then-epochs", type=int, default=0, help="go on from each fit for this many epochs")
    parser.add_argument("--then-lr", type=float, default=1e-3, help="Adam's starting rate when going on")
    args = parser.parse_args()
    torch.set_num_threads(1)

    cfg = cell_settings(args.epochs)
    print(f"cell {CELL}: model_params {cfg['model_params']}")
    print(f"fit_options {cfg['fit_options']}, train_length {cfg.get('train_length')}"
          + ("" if args.epochs is None else "   (n_epochs overridden: NOT the defaults)"))
    floor = metrics.floor(CELL[0], length=args.eval_length)
    fa = floor.attrs
    print(f"floor at T = {args.eval_length}: D_stsp {fa['state_space_divergence_mean']:.3f}, "
          f"D_H {fa['power_spectrum_distance_mean']:.3f}")
    print(f"{'seed':>4} {'D_stsp':>8} {'D_H':>7} {'diverged':>8} {'fit_s':>6} {'best_epoch':>10}  verdict (λ1)")
    rows = []
    for seed in range(args.seeds):
        row = run_seed(seed, cfg, args.eval_length, args.then_epochs, args.then_lr)
        rows.append(row)
        for label, r in (("", row), ("then", row.get("then"))):
            if r is not None:
                print(f"{label or row['seed']:>4} {r['d_stsp']:>8.3f} {r['d_h']:>7.3f} {r['diverged']:>8d} "
                      f"{r['fit_s']:>6.0f} {r['best_epoch']:>10d}  {r['verdict']} ({r['lambda1']:.3f})", flush=True)
    for key, label in (("d_stsp", "D_stsp"), ("d_h", "D_H"), ("fit_s", "fit s")):
        values = np.array([r[key] for r in rows])
        print(f"{label:>7}: median {np.median(values):.3f}  range [{values.min():.3f}, {values.max():.3f}]")
    ratio = np.median([r["d_stsp"] for r in rows]) / fa["state_space_divergence_mean"]
    print(f"median D_stsp / floor = {ratio:.2f}; diverged runs: {sum(r['diverged'] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
