"""Which epoch should teacher forcing keep? Selection rules compared post hoc on the same fits.

The teacher-forcing engine scores a free run every ``eval_every`` epochs against the *training*
series and keeps the state with the lowest D_stsp. This script fits a benchmark cell of the
clipped shallow PLRNN ("bursting_neuron" or "ecg", ``PAIR_DEFAULTS``; the runner's
``resolve_config`` / ``adapt_to_data`` / ``fit_point``) once per seed while copying the model
state at the end of **every** epoch (the engine's ``callback`` option, which copies the
parameters and changes nothing else: the kept epoch and the scores reproduce the
cell's table exactly; the engine's own scoring is pinned to every 5 epochs and runs of 10 000
steps, the settings the rules start from). Then, for every saved state and for parameter
averages of the last states, it computes

- D_stsp and D_H of a free run against the training series, with the engine's own scorer
  (:class:`dsident.inference.teacher_forcing._FreeRunScorer`, same length, burn-in and seed:
  what the engine selects on; for the scored epochs these are the history's values);
- D_stsp and D_H on the first ``eval_length`` test samples through
  :func:`dsident.experiments.scoring.evaluate_model` (what ``dsident benchmark`` reports);
- with ``--long-steps N`` (default 40 000) the same training-side scores of a free run of N
  steps (after a burn-in of N/4) against the first N training samples: the engine's scorer
  with ``eval_steps=N``, a less noisy estimate of the same quantity;
- a rhythm diagnostic of the evaluated free run: the bursting neuron's regime and burst
  period cv (``bench_bursting_tf.burst_stats``), or the ECG's R peaks per 10 000 samples
  (``bench_ecg_tf.beats_per_10k``; test stretch: 15).

Rules (all of them decided on the training-side scores only; the test side is only read to
report the outcome of each rule):

- ``D_stsp`` every 5 epochs (the engine today) or every epoch, from the engine's run of
  ``eval_steps`` (10 000) or from the long run (``eval_steps=N``);
- ``D_stsp + w·D_H`` for w in 1, 3, 10, 30;
- ``min D_H among D_stsp ≤ (1 + r)·best`` for r in 0.1, 0.25, 0.5;
- the parameter average of the last k scored states (k = 2, 4, 8) as one more candidate, or
  always kept; the average of the last k epochs (5, 10, 20), always kept;
- the last epoch, and two oracles that peek at the test score (upper bounds of selection).

Run (one process at a time; about 5 min a seed for the bursting neuron, 8 for the ECG)::

    OMP_NUM_THREADS=1 python benchmarks/bench_tf_selection.py --cell bursting_neuron --seeds 0 1 2 3 4 \\
        --out /tmp/sel.jsonl
    python benchmarks/bench_tf_selection.py --summary /tmp/sel.jsonl --cell bursting_neuron

Results: ``docs/teacher_forcing.md``, "Which epoch to keep (issue #9)".
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from typing import Any, Callable

import numpy as np
import torch

from _timing import one_training_run

from dsident.experiments.config import resolve_config
from dsident.experiments.runner import adapt_to_data, fit_point, point_data
from dsident.experiments.scoring import evaluate_model
from dsident.inference import teacher_forcing
from dsident.inference.training import state_copy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_bursting_tf import burst_stats  # noqa: E402
from bench_ecg_tf import beats_per_10k  # noqa: E402

CELLS = ("bursting_neuron", "ecg")
#: the scoring interval and free-run length the rules start from (the cells' settings before issue #9)
EVAL_EVERY = 5
BASE_EVAL_STEPS = 10_000


def epoch_recorder(store: dict[int, dict[str, torch.Tensor]]) -> Any:
    """The engine's ``callback``: copies every epoch's end state (on the CPU) into ``store``."""
    def callback(epoch: int, record: dict[str, float], model: Any) -> None:
        store[epoch] = {k: v.cpu() for k, v in state_copy(model).items()}
    return callback


def average_states(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the floating-point entries of ``states`` (others from the last)."""
    last = states[-1]
    return {k: torch.stack([s[k] for s in states]).mean(0) if v.is_floating_point() else v.clone()
            for k, v in last.items()}


def collect(cell: str, seed: int, out: str, long_steps: int, epochs: int | None = None) -> None:
    """Fit one seed of ``cell``, score every epoch's state and the averages, append JSON lines to ``out``."""
    key = (cell, "shplrnn", "teacher-forcing")
    # the engine's scoring is pinned to every 5 epochs and runs of 10 000 steps (the rules'
    # baseline, whatever the cell now sets): scoring never changes training, so the fit is the cell's
    cfg = resolve_config(*key, overrides={"seed": seed, "fit_options": {"eval_every": EVAL_EVERY,
                                                                         "eval_steps": BASE_EVAL_STEPS,
                                                                         **({"n_epochs": epochs} if epochs else {})}})
    train, test, cfg = point_data(cfg)      # with the cell's slow channels, if any
    states: dict[int, dict[str, torch.Tensor]] = {}
    # the epochs of one training run (the bursting cell's best_of and polish would add others)
    cfg["fit_options"] = {**one_training_run(cfg["fit_options"]), "callback": epoch_recorder(states)}
    est, fit_s, _ = fit_point(adapt_to_data(cfg, train), train, progress=False)
    hist = est.history_
    steps = int(hist["settings"]["eval_steps"])
    scorer = teacher_forcing._FreeRunScorer(train, steps, burn_in=steps // 4, seed=seed)
    long_scorer = teacher_forcing._FreeRunScorer(train, long_steps, burn_in=long_steps // 4, seed=seed) \
        if long_steps else None
    scored = dict(zip(hist["eval_epoch"], zip(hist["state_space_divergence"], hist["power_spectrum_distance"])))
    eval_epochs, last = list(hist["eval_epoch"]), max(states)
    candidates = [("epoch", e, states[e]) for e in sorted(states)]
    candidates += [(f"avg_scored_{k}", last, average_states([states[e] for e in eval_epochs[-k:]])) for k in (2, 4, 8)]
    candidates += [(f"avg_epochs_{k}", last, average_states([states[e] for e in range(last - k + 1, last + 1)]))
                   for k in (5, 10, 20)]
    x_test = np.asarray(test["x"].values[0], dtype=float)
    model = est.model_
    for kind, epoch, state in candidates:
        model.load_state_dict(state)
        if kind == "epoch" and epoch in scored:
            train_stsp, train_dh = scored[epoch]
        else:
            train_stsp, train_dh = scorer.score(model, seed=seed)
        long_stsp, long_dh = long_scorer.score(model, seed=seed) if long_scorer else (math.nan, math.nan)
        scores, _, run = evaluate_model(est, test, pe_steps=int(cfg.get("pe_steps", 20)), seed=seed,
                                        return_run=True)
        x_free = np.asarray(run["x"].values[0], dtype=float)
        row = {"cell": cell, "seed": seed, "kind": kind, "epoch": epoch, "train_stsp": train_stsp,
               "train_dh": train_dh, "train_stsp_long": long_stsp, "train_dh_long": long_dh,
               "test_stsp": scores["D_stsp"], "test_dh": scores["D_H"],
               "fit_s": fit_s, "engine_best_epoch": hist["best_epoch"]}
        if cell == "bursting_neuron":
            stats = burst_stats(x_free)
            row.update({"regime": stats["regime"], "period_cv": stats["period_cv"]})
        else:
            row.update({"beats": beats_per_10k(x_free[:, 0], x_test[:, 0]),
                        "beats_test": beats_per_10k(x_test[:, 0], x_test[:, 0])})
        with open(out, "a") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
    print(f"{cell} seed {seed}: fit {fit_s:.0f} s, engine kept epoch {hist['best_epoch']}, "
          f"{len(candidates)} candidates scored", flush=True)


# ---------------------------------------------------------------------------------------------
# the rules
# ---------------------------------------------------------------------------------------------
def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(value)


def combined(row: dict[str, Any], weight: float, suffix: str = "") -> float:
    """D_stsp + weight·D_H on the training side (inf when a needed score is missing); ``suffix``
    "_long" reads the scores of the long run."""
    stsp, dh = row.get("train_stsp" + suffix), row.get("train_dh" + suffix)
    if not _finite(stsp):
        return math.inf
    if weight == 0:
        return stsp
    return stsp + weight * dh if _finite(dh) else math.inf


def lowest(rows: list[dict[str, Any]], weight: float, suffix: str = "") -> dict[str, Any]:
    """The row of lowest combined score (the last row when none is finite, as the engine keeps the last state)."""
    best = min(rows, key=lambda r: combined(r, weight, suffix))
    return best if math.isfinite(combined(best, weight, suffix)) else rows[-1]


def within_tolerance(rows: list[dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """Lowest D_H among the rows whose D_stsp is at most (1 + tolerance) times the lowest."""
    finite = [r for r in rows if _finite(r["train_stsp"])]
    if not finite:
        return rows[-1]
    bound = (1 + tolerance) * min(r["train_stsp"] for r in finite)
    near = [r for r in finite if r["train_stsp"] <= bound and _finite(r["train_dh"])]
    return min(near, key=lambda r: r["train_dh"]) if near else lowest(finite, 0)


def rules() -> dict[str, Callable[[list[dict[str, Any]]], dict[str, Any]]]:
    """Selection rules: name -> function of one seed's rows returning the kept row."""
    def epochs(rows: list[dict[str, Any]], every: int) -> list[dict[str, Any]]:
        return [r for r in rows if r["kind"] == "epoch" and (r["epoch"] + 1) % every == 0]

    def test_oracle(key: str, every: int) -> Callable:
        return lambda rows: min(epochs(rows, every), key=lambda r: r[key] if _finite(r[key]) else math.inf)

    out: dict[str, Callable] = {}
    for every in (EVAL_EVERY, 1):
        for w in (0, 1, 3, 10, 30):
            name = f"every {every}: D_stsp" + (f" + {w}·D_H" if w else " (engine)" if every == EVAL_EVERY else "")
            out[name] = lambda rows, w=w, every=every: lowest(epochs(rows, every), w)
        for w in (0, 10):
            out[f"every {every}: long run, D_stsp" + (f" + {w}·D_H" if w else "")] = \
                lambda rows, w=w, every=every: lowest(epochs(rows, every), w, "_long")
        for tol in (0.1, 0.25, 0.5):
            out[f"every {every}: min D_H, D_stsp ≤ {1 + tol:.2f}·best"] = \
                lambda rows, tol=tol, every=every: within_tolerance(epochs(rows, every), tol)
    def kind(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["kind"] == name]

    for k in (2, 4, 8):
        for w in (0, 10):
            out[f"every {EVAL_EVERY} + avg of last {k} scored, D_stsp" + (f" + {w}·D_H" if w else "")] = \
                lambda rows, k=k, w=w: lowest(epochs(rows, EVAL_EVERY) + kind(rows, f"avg_scored_{k}"), w)
        out[f"always avg of last {k} scored"] = lambda rows, k=k: kind(rows, f"avg_scored_{k}")[0]
    for k in (5, 10, 20):
        out[f"always avg of last {k} epochs"] = lambda rows, k=k: kind(rows, f"avg_epochs_{k}")[0]
    out["last epoch"] = lambda rows: epochs(rows, 1)[-1]
    out[f"oracle: test D_stsp, every {EVAL_EVERY}"] = test_oracle("test_stsp", EVAL_EVERY)
    out["oracle: test D_stsp, every 1"] = test_oracle("test_stsp", 1)
    out["oracle: test D_H, every 1"] = test_oracle("test_dh", 1)
    return out


def summary(path: str, cell: str) -> None:
    """Print, per rule, test D_stsp / D_H median [min, max] over seeds, the rhythm count and the picks."""
    by_seed: dict[int, list[dict[str, Any]]] = defaultdict(list)
    with open(path) as fh:
        for line in fh:
            row = json.loads(line)
            if row["cell"] == cell:
                by_seed[row["seed"]].append(row)
    seeds = sorted(by_seed)

    def right_rhythm(r: dict[str, Any]) -> bool:
        if cell == "bursting_neuron":
            return r["regime"] == "bursting"
        return _finite(r["beats"]) and abs(r["beats"] - r["beats_test"]) <= 2

    what = "bursting" if cell == "bursting_neuron" else "beats within ±2 of the test's"
    print(f"{cell}, seeds {seeds}; per seed: kept epoch (* = an average): test D_stsp / D_H / "
          f"{'period cv' if cell == 'bursting_neuron' else 'beats per 10 000'}; last column: {what}")
    extra = "period_cv" if cell == "bursting_neuron" else "beats"
    for name, rule in rules().items():
        picks = [rule(by_seed[s]) for s in seeds]
        d = np.array([p["test_stsp"] for p in picks], dtype=float)
        h = np.array([p["test_dh"] for p in picks], dtype=float)
        per = "; ".join(f"{p['epoch']}{'' if p['kind'] == 'epoch' else '*'}: {p['test_stsp']:.2f}/{p['test_dh']:.3f}/"
                        f"{float(p[extra]) if p[extra] is not None else math.nan:.2f}" for p in picks)
        print(f"| {name} | {np.nanmedian(d):.2f} [{np.nanmin(d):.2f}, {np.nanmax(d):.2f}] | "
              f"{np.nanmedian(h):.3f} [{np.nanmin(h):.3f}, {np.nanmax(h):.3f}] | "
              f"{sum(right_rhythm(p) for p in picks)}/{len(picks)} | {per} |")
    epoch_rows = [r for r in by_seed[seeds[0]] if r["kind"] == "epoch"] if seeds else []
    pairs = np.array([[r["train_stsp"], r["test_stsp"], r["train_dh"], r["test_dh"]]
                      for s in seeds for r in by_seed[s] if r["kind"] == "epoch"
                      and all(_finite(r[k]) for k in ("train_stsp", "test_stsp", "train_dh", "test_dh"))])
    if len(pairs) > 2:
        r_stsp = np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1]
        r_dh = np.corrcoef(pairs[:, 2], pairs[:, 3])[0, 1]
        print(f"train vs test over {len(pairs)} epoch states ({len(epoch_rows)} per seed): correlation "
              f"D_stsp {r_stsp:.3f}, D_H {r_dh:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", choices=CELLS, default="bursting_neuron")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", default="tf_selection.jsonl", help="JSON lines, one per scored candidate")
    parser.add_argument("--long-steps", type=int, default=40_000,
                        help="length of the long training-side score (0: none)")
    parser.add_argument("--summary", default=None, metavar="FILE", help="only summarise FILE (no fitting)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="override the cell's n_epochs, at least 20 (a smoke run; NOT the cell)")
    args = parser.parse_args()
    if args.epochs is not None and args.epochs < 20:
        parser.error("--epochs must be at least 20 (the averages of the last 20 epochs are candidates)")
    if args.summary:
        summary(args.summary, args.cell)
        return
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    for seed in args.seeds:
        collect(args.cell, seed, args.out, args.long_steps, args.epochs)
    summary(args.out, args.cell)
    print(f"total wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
