"""The ECG benchmark cell ("ecg", "shplrnn", "teacher-forcing"): one setting, some seeds, beat rate.

Fits the clipped shallow PLRNN by teacher forcing through the code path of ``dsident benchmark``
(:func:`dsident.experiments.config.resolve_config` for the cell, i.e. ``PAIR_DEFAULTS``, with the
``--set`` overrides applied as the user's settings; then the runner's
:func:`~dsident.experiments.runner.adapt_to_data` and :func:`~dsident.experiments.runner.fit_point`,
and :func:`~dsident.experiments.scoring.evaluate_model` on the first ``eval_length`` test
samples), and prints per seed

- D_stsp and D_H (:func:`dsident.metrics.evaluate`, as the benchmark scores them), next to the
  floor at that length (:func:`dsident.metrics.floor`: mean over pairs of stretches);
- the fit time and the epoch the engine kept (chosen on the *training* series);
- the **beat rate**: R peaks per 10 000 samples in the scored free run
  (:func:`~dsident.metrics.evaluate` with ``return_run=True``, the run the metrics compare) and in
  the test data, counted on channel 0 with :func:`scipy.signal.find_peaks` (prominence at least
  half the test data's range on that channel, peaks at least 150 samples = 0.21 s apart). The
  ECG's beats are ≈ 700 samples apart; a free run with the right beat shape but the wrong rate
  is far from the data in D_stsp and D_H, and this number says which error it is;
- the free run's percentiles 1 / 50 / 99 on channel 0 next to the test data's (the beat's
  amplitude: R peaks sit above the 99th), and the training curve: D_stsp / D_H of every
  scored epoch's free run against the training series (how the kept epoch was chosen).

Results and what they mean: ``docs/teacher_forcing.md``, "ECG: the beat rate (issue #9)".

Run (one torch thread; about 4 minutes a fit)::

    python benchmarks/bench_ecg_tf.py                                   # the cell as it stands, seed 0
    python benchmarks/bench_ecg_tf.py --seeds 0 1 2 --set fit_options.alpha=0.05 \\
        --set fit_options.seq_len=700 --set model_params.hidden_dim=300

``--set KEY=VALUE`` takes a run-configuration key (``train_length``) or a dotted one
(``fit_options.alpha``, ``model_params.hidden_dim``); VALUE is read as JSON (numbers, true,
null, lists) and otherwise kept as a string (``fit_options.alpha=adaptive``). ``--out FILE``
appends one JSON line per seed.
"""
from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import torch
from scipy.signal import find_peaks

from dsident import metrics
from dsident.experiments.config import parse_overrides, resolve_config
from dsident.experiments.runner import adapt_to_data, fit_point, point_data
from dsident.experiments.scoring import evaluate_model

#: the benchmark cell this script measures
CELL = ("ecg", "shplrnn", "teacher-forcing")
#: R-peak detection on channel 0: minimum prominence as a fraction of the test data's range there
PEAK_PROMINENCE = 0.5
#: and the minimum distance between two R peaks, in samples (0.21 s at 700 Hz; beats are ≈ 700 apart)
PEAK_DISTANCE = 150


def beats_per_10k(x: np.ndarray, reference: np.ndarray) -> float:
    """R peaks per 10 000 samples in ``x`` (time,) on the scale of ``reference`` (time,).

    The prominence threshold is a fraction of the *reference's* range, so a free run whose
    beats are too small counts fewer of them (which is also an error); NaN samples of ``x``
    (a diverged run) give NaN.
    """
    if not np.all(np.isfinite(x)):
        return float("nan")
    prominence = PEAK_PROMINENCE * float(np.ptp(reference))
    peaks, _ = find_peaks(x, prominence=prominence, distance=PEAK_DISTANCE)
    return 1e4 * peaks.size / x.size


def compared_window(run: Any, trial: int = 0) -> np.ndarray:
    """The compared window ``(time, channel)`` of one trial of ``evaluate(..., return_run=True)``'s
    run, which is NaN outside ``[start_index, length)`` (NaN inside still means a divergence)."""
    start = int(json.loads(run.attrs["start_index"])[trial])
    return np.asarray(run["x"].values[trial, start:int(run["length"].values[trial])], dtype=float)


def run_seed(seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """Fit and score one seed of the cell with ``overrides`` applied; the numbers of one row."""
    cfg = resolve_config(*CELL, overrides={**overrides, "seed": seed})
    train, test, cfg = point_data(cfg)      # with the cell's slow channels, as the benchmark runs it
    used = adapt_to_data(cfg, train)
    est, fit_s, dropped = fit_point(used, train)
    scores, _, free = evaluate_model(est, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=seed, return_run=True)
    x_test = np.asarray(test["x"].values[0, :, 0], dtype=float)
    x_free = compared_window(free)[:, 0]
    hist = est.history_
    alphas = hist.get("alpha") or [float("nan")]
    return {"seed": seed, "D_stsp": scores["D_stsp"], "D_H": scores["D_H"], "PE": scores["PE"],
            "diverged": int(scores["diverged"]) if np.isfinite(scores["diverged"]) else -1,
            "beats_free": beats_per_10k(x_free, x_test), "beats_test": beats_per_10k(x_test, x_test),
            "fit_s": fit_s, "best_epoch": hist.get("best_epoch"), "final_alpha": float(alphas[-1]),
            # the shape of the beats: percentiles 1, 50, 99 of channel 0 (R peaks sit above the 99th)
            "percentiles_free": np.round(np.percentile(x_free, [1, 50, 99]), 3).tolist() if np.all(np.isfinite(x_free)) else None,
            "percentiles_test": np.round(np.percentile(x_test, [1, 50, 99]), 3).tolist(),
            # the training curve: D_stsp / D_H of the free runs scored against the training series
            "eval_epoch": hist.get("eval_epoch"), "eval_stsp": hist.get("state_space_divergence"),
            "eval_dh": hist.get("power_spectrum_distance"),
            "n_batches": hist.get("n_batches_done"), "dropped": dropped,
            "model_params": used["model_params"], "fit_options": used["fit_options"],
            "train_length": used.get("train_length")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds to fit (default: 0)")
    parser.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                        help="override one setting of the cell (repeatable), e.g. fit_options.alpha=0.05")
    parser.add_argument("--label", default="", help="a name for this setting, printed and stored")
    parser.add_argument("--out", default=None, help="append one JSON line per seed to this file")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        overrides = parse_overrides(args.overrides)
    except ValueError as err:
        parser.error(str(err))

    cfg = resolve_config(*CELL, overrides=overrides)
    eval_length = int(cfg["eval_length"])
    floor = metrics.floor(CELL[0], length=eval_length).attrs
    print(f"# {CELL} {args.label}: overrides {overrides or 'none (the cell as it stands)'}")
    print(f"#   model_params {cfg['model_params']}, train_length {cfg.get('train_length')}")
    print(f"#   fit_options {cfg['fit_options']}")
    print(f"#   floor at T = {eval_length}: D_stsp {floor['state_space_divergence_mean']:.3f}, "
          f"D_H {floor['power_spectrum_distance_mean']:.4f}")
    print(f"{'seed':>4} {'D_stsp':>7} {'D_H':>6} {'beats/10k':>9} {'(test)':>6} {'diverged':>8} "
          f"{'fit_s':>6} {'best_ep':>7} {'alpha':>6}")
    rows = []
    for seed in args.seeds:
        row = run_seed(seed, overrides)
        row["label"] = args.label
        rows.append(row)
        print(f"{seed:>4} {row['D_stsp']:>7.3f} {row['D_H']:>6.3f} {row['beats_free']:>9.1f} {row['beats_test']:>6.1f} "
              f"{row['diverged']:>8d} {row['fit_s']:>6.0f} {str(row['best_epoch']):>7} {row['final_alpha']:>6.3f}",
              flush=True)
        print(f"     channel 0 percentiles 1/50/99: free run {row['percentiles_free']}, test {row['percentiles_test']}")
        print("     training curve (epoch: D_stsp / D_H on the train series): " + ", ".join(
            f"{e}: {s:.2f}/{h:.3f}" for e, s, h in zip(row["eval_epoch"] or [], row["eval_stsp"] or [], row["eval_dh"] or [])),
            flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row, default=str) + "\n")
    if len(rows) > 1:
        for key in ("D_stsp", "D_H", "beats_free", "fit_s"):
            v = np.array([r[key] for r in rows], dtype=float)
            print(f"{key:>10}: median {np.nanmedian(v):.3f} [{np.nanmin(v):.3f}, {np.nanmax(v):.3f}]")
    ratio = np.nanmedian([r["D_stsp"] for r in rows]) / floor["state_space_divergence_mean"]
    print(f"median D_stsp / floor = {ratio:.1f}")


if __name__ == "__main__":
    main()
