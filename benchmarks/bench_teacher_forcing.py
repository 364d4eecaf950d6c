"""Teacher-forcing training (GTF) on the shipped benchmarks (issue #7).

Prints, for lorenz63, bursting_neuron and ecg:

1. **D_stsp / D_H reached with the defaults**: the clipped shallow PLRNN fitted by teacher
   forcing with exactly the settings ``dsident benchmark --models shplrnn`` uses for that
   dataset (:func:`dsident.experiments.config.resolve_config`, i.e. ``PAIR_DEFAULTS``), one
   row per seed, then the median, the MAD (median absolute deviation, not rescaled) and the
   range over seeds, next to the floor of the benchmark at the evaluation length (the true
   system against itself, :func:`dsident.metrics.floor`: mean and [min, max] over pairs of
   stretches). Each fit keeps the epoch whose free run matched the *training* series best
   (the engine's default), so the test split is touched only by the final
   :func:`dsident.metrics.evaluate` on its first ``--eval-length`` samples.
2. optionally (``--time-table``) the **time to reconstruct Lorenz-63**: wall-clock training
   time until the free run from the first test point reaches D_stsp <= 2 x floor (target
   <= 15 min on 2 CPU cores), scoring the test split every 3 epochs (this measures speed, not
   generalization).

Run: ``python benchmarks/bench_teacher_forcing.py`` (5 seeds, 3 datasets, one torch thread),
``python benchmarks/bench_teacher_forcing.py --seeds 1 --datasets ecg`` for one cell, or
``--epochs 20`` for a cheap smoke run (not the defaults: the table says so).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch

from dsident import datasets, metrics
from dsident.experiments.config import resolve_config
from dsident.experiments.runner import adapt_to_data, fit_point, point_data
from dsident.experiments.scoring import evaluate_model
from dsident.models import ShallowPLRNN

DATASETS = ("lorenz63", "bursting_neuron", "ecg")
#: the time-to-target run: Lorenz-63 with its defaults, scored on the test split every few epochs
TIME_TARGET_S = 15 * 60


def cell_settings(name: str, epochs: int | None = None) -> dict[str, Any]:
    """The run configuration ``dsident benchmark`` resolves for (name, shplrnn, teacher-forcing)."""
    cfg = resolve_config(name, "shplrnn", "teacher-forcing")
    if epochs is not None:
        cfg["fit_options"]["n_epochs"] = int(epochs)
    return cfg


def load_split(name: str, split: str, length: int | None):
    data = datasets.load(name, split=split)
    return data if length is None else data.isel(time=slice(0, int(length)))


def fit(name: str, seed: int, cfg: dict[str, Any], **extra: Any) -> tuple[ShallowPLRNN, float]:
    """Fit the estimator of ``cfg`` on the train split (first ``train_length`` samples)."""
    train = load_split(name, "train", cfg.get("train_length"))
    params = dict(cfg["model_params"])
    params["latent_dim"] = max(int(params.get("latent_dim", 0)), int(train.sizes["channel"]))  # identity readout
    est = ShallowPLRNN(**params, seed=seed)
    t0 = time.perf_counter()
    est.fit(train, method="teacher-forcing", progress=False, **{**cfg["fit_options"], **extra})
    return est, time.perf_counter() - t0


def reconstruct(name: str, seed: int, cfg: dict[str, Any], eval_length: int) -> dict[str, Any]:
    """Fit with the defaults (best epoch chosen on the train split), evaluate on the test split.

    Through the benchmark runner's own steps (``point_data`` / ``fit_point`` / ``evaluate_model``),
    so a cell's data settings apply too: the ECG cell's slow (breathing) channels, added to both
    splits and left unscored."""
    train, test, used = point_data({**cfg, "seed": seed, "eval_length": int(eval_length)})
    est, fit_s, _ = fit_point(adapt_to_data(used, train), train, progress=False)
    scores, _ = evaluate_model(est, test, pe_steps=int(used.get("pe_steps", 20)), seed=seed)
    return {"dataset": name, "seed": seed, "D_stsp": float(scores["D_stsp"]),
            "D_H": float(scores["D_H"]), "PE": float(scores["PE"]),
            "diverged": bool(scores["diverged"]), "fit_s": fit_s, "best_epoch": est.history_.get("best_epoch"),
            "final_alpha": est.history_["alpha"][-1] if est.history_.get("alpha") else float("nan")}


def time_to_target(seed: int, cfg: dict[str, Any], eval_length: int, floor_stsp: float) -> dict[str, Any]:
    """Train on Lorenz-63 with its defaults, scoring the test split; first time D_stsp <= 2 x floor."""
    test = load_split("lorenz63", "test", eval_length)
    est, fit_s = fit("lorenz63", seed, cfg, eval_every=3, eval_data=test, eval_steps=eval_length)
    history = est.history_

    def first_time(target: float) -> float:
        hit = [t for t, d in zip(history["eval_time_s"], history["state_space_divergence"]) if d <= target]
        return hit[0] if hit else float("nan")

    return {"seed": seed, "time_s": first_time(2.0 * floor_stsp), "time3_s": first_time(3.0 * floor_stsp),
            "best_stsp": history["best_state_space_divergence"], "fit_s": fit_s, "target": 2.0 * floor_stsp}


def summary(values: list[float]) -> str:
    """``median ± MAD [min, max]`` of the finite values (MAD not rescaled), or ``n/a``."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "n/a"
    med = np.median(v)
    if v.size == 1:
        return f"{med:.3g}"
    return f"{med:.3g} ± {np.median(np.abs(v - med)):.2g} [{v.min():.3g}, {v.max():.3g}]"


def floor_of(name: str, eval_length: int) -> dict[str, float]:
    fl = metrics.floor(name, length=eval_length)
    s, h = fl["state_space_divergence"].values, fl["power_spectrum_distance"].values
    return {"stsp": float(np.mean(s)), "stsp_min": float(np.min(s)), "stsp_max": float(np.max(s)),
            "dh": float(np.mean(h)), "dh_min": float(np.min(h)), "dh_max": float(np.max(h))}


def settings_line(cfg: dict[str, Any]) -> str:
    mp, fo = cfg["model_params"], cfg["fit_options"]
    return (f"M={mp.get('latent_dim')}, H={mp.get('hidden_dim')}, clip={mp.get('clip', False)}, "
            f"train_length={cfg.get('train_length')}, " + ", ".join(f"{k}={v}" for k, v in fo.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds 0..n-1 (default 5)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--eval-length", type=int, default=10_000, help="test samples compared (T)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="override n_epochs (a smoke run; the table is then NOT the defaults)")
    parser.add_argument("--time-table", action="store_true", help="also run the Lorenz-63 time-to-target table")
    parser.add_argument("--json", default=None, help="also write the per-seed results to this JSON file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = list(range(args.seeds))
    cfgs = {name: cell_settings(name, args.epochs) for name in args.datasets}
    floors = {name: floor_of(name, args.eval_length) for name in args.datasets}
    print(f"# teacher forcing (GTF) benchmark: clipped shallow PLRNN, seeds {seeds}, T={args.eval_length}, "
          f"threads={args.threads}, torch {torch.__version__}"
          + (f", n_epochs overridden to {args.epochs} (NOT the defaults)" if args.epochs else ""))
    for name in args.datasets:
        print(f"#   {name}: {settings_line(cfgs[name])}")

    if args.time_table and "lorenz63" in args.datasets:
        print("\n## Time to D_stsp <= 2 x floor on Lorenz-63 (target <= 15 min on 2 cores)\n")
        print("| seed | target D_stsp (2x floor) | time to 2x floor (s) | time to 3x floor (s) | best D_stsp | "
              "training time (s) |")
        print("|---|---|---|---|---|---|")
        times = []
        for seed in seeds:
            r = time_to_target(seed, cfgs["lorenz63"], args.eval_length, floors["lorenz63"]["stsp"])
            times.append(r["time_s"])
            print(f"| {seed} | {r['target']:.3g} | {r['time_s']:.0f} | {r['time3_s']:.0f} | {r['best_stsp']:.3g} | "
                  f"{r['fit_s']:.0f} |", flush=True)
        finite = np.isfinite(times)
        print(f"\nmedian time to target: {np.nanmedian(times) if finite.any() else float('nan'):.0f} s "
              f"({'meets' if finite.all() and np.median(times) <= TIME_TARGET_S else 'misses'} the 15 min target; "
              "unreached seeds count as misses)")

    print("\n## D_stsp / D_H reached with the defaults (per seed; summary = median ± MAD [min, max])\n")
    print("| dataset | seed | D_stsp | D_stsp floor | D_H | D_H floor | PE(20) | diverged | best epoch | fit time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    results: list[dict[str, Any]] = []
    for name in args.datasets:
        fl = floors[name]
        floor_s = f"{fl['stsp']:.3g} [{fl['stsp_min']:.3g}, {fl['stsp_max']:.3g}]"
        floor_h = f"{fl['dh']:.2g} [{fl['dh_min']:.2g}, {fl['dh_max']:.2g}]"
        runs = []
        for seed in seeds:
            r = reconstruct(name, seed, cfgs[name], args.eval_length)
            runs.append(r)
            print(f"| {name} | {seed} | {r['D_stsp']:.3g} | {floor_s} | {r['D_H']:.3g} | {floor_h} | {r['PE']:.2g} | "
                  f"{'yes' if r['diverged'] else 'no'} | {r['best_epoch']} | {r['fit_s']:.0f} |", flush=True)
        n_div = sum(r["diverged"] for r in runs)
        print(f"| **{name}** | **all {len(runs)}** | **{summary([r['D_stsp'] for r in runs])}** | {floor_s} | "
              f"**{summary([r['D_H'] for r in runs])}** | {floor_h} | {summary([r['PE'] for r in runs])} | "
              f"{n_div}/{len(runs)} | | {summary([r['fit_s'] for r in runs])} |", flush=True)
        results.extend(runs)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"floors": floors, "settings": {k: cfgs[k] for k in cfgs}, "runs": results}, fh,
                          indent=1, default=str)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\ntotal wall time {time.perf_counter() - start:.0f} s")
