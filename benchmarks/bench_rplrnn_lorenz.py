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
(not the defaults: the table says so). The table is in ``docs/plrnn.md``.
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


def run_seed(seed: int, cfg: dict[str, Any], eval_length: int) -> dict[str, float]:
    """Fit one seed and score it on the first ``eval_length`` test samples."""
    train = load_data(CELL[0], split="train", length=cfg.get("train_length"))
    test = load_data(CELL[0], split="test", length=eval_length)
    est = dsident.models.PLRNN(**cfg["model_params"], seed=seed)
    start = time.perf_counter()
    est.fit(train, method=CELL[2], progress=False, **cfg["fit_options"])
    fit_s = time.perf_counter() - start
    scores = metrics.evaluate(est, test)
    return {"seed": seed, "d_stsp": float(scores.state_space_divergence), "d_h": float(scores.power_spectrum_distance),
            "diverged": int(scores.diverged), "fit_s": fit_s, "best_epoch": int(est.history_["best_epoch"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds (0, 1, ...)")
    parser.add_argument("--epochs", type=int, default=None, help="override n_epochs (not the defaults)")
    parser.add_argument("--eval-length", type=int, default=10_000, help="test samples scored (T)")
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
    print(f"{'seed':>4} {'D_stsp':>8} {'D_H':>7} {'diverged':>8} {'fit_s':>6} {'best_epoch':>10}")
    rows = []
    for seed in range(args.seeds):
        row = run_seed(seed, cfg, args.eval_length)
        rows.append(row)
        print(f"{row['seed']:>4} {row['d_stsp']:>8.3f} {row['d_h']:>7.3f} {row['diverged']:>8d} "
              f"{row['fit_s']:>6.0f} {row['best_epoch']:>10d}", flush=True)
    for key, label in (("d_stsp", "D_stsp"), ("d_h", "D_H"), ("fit_s", "fit s")):
        values = np.array([r[key] for r in rows])
        print(f"{label:>7}: median {np.median(values):.3f}  range [{values.min():.3f}, {values.max():.3f}]")
    ratio = np.median([r["d_stsp"] for r in rows]) / fa["state_space_divergence_mean"]
    print(f"median D_stsp / floor = {ratio:.2f}; diverged runs: {sum(r['diverged'] for r in rows)} of {len(rows)}")


if __name__ == "__main__":
    main()
