"""Wall time of a best-of-3 fit: its candidates one after another vs side by side (``n_jobs``).

The quick Lorenz-63 teacher-forcing cell (``dsident benchmark --quick``) keeps the best of
three fits. Until session 44 they trained one after another in one process, one torch thread,
while the other core of a 2-core machine idled. ``fit(..., best_of=3, n_jobs=2)`` trains them in
two worker processes (:mod:`dsident.models.candidates`). This script fits the quick cell's
settings both ways, prints the two wall times and their ratio, and checks that both ways keep
the same model (same candidates, same scores, the same parameters to the bit).

Run: ``python benchmarks/bench_best_of_jobs.py`` (``--epochs N`` shortens each candidate; the
cell trains 150 epochs; ``--jobs`` sets the worker processes, default all usable cores up to 3).
The first side-by-side call also starts the workers (each imports torch); that start-up is in
the figure, as it is in a fresh ``dsident benchmark --quick``.
"""
from __future__ import annotations

import argparse
import time
import warnings

import torch

from dsident.experiments.config import resolve_config
from dsident.experiments.inputs import load_data
from dsident.experiments.runner import build_estimator
from dsident.models.candidates import usable_cores


def fit_once(n_jobs: int, epochs: int | None) -> tuple[float, object]:
    """Fit the quick teacher-forcing cell with ``n_jobs`` processes; (seconds, estimator)."""
    cfg = resolve_config("lorenz63", "shplrnn", "teacher-forcing", preset="quick")
    if epochs is not None:
        cfg["fit_options"] = {**cfg["fit_options"], "n_epochs": epochs}
    train = load_data("lorenz63", split="train", length=cfg["train_length"])
    est, options, _ = build_estimator(cfg)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(train, method=cfg["method"], **{**options, "n_jobs": n_jobs, "progress": False})
    return time.perf_counter() - t0, est


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None, help="epochs per candidate (default: the cell's)")
    parser.add_argument("--jobs", type=int, default=min(3, usable_cores()))
    args = parser.parse_args()
    torch.set_num_threads(1)
    t_seq, seq = fit_once(1, args.epochs)
    t_par, par = fit_once(args.jobs, args.epochs)
    same = (seq.history_["best_of"] == par.history_["best_of"]
            and all(torch.equal(a, b) for a, b in zip(seq.model_.state_dict().values(),
                                                       par.model_.state_dict().values())))
    print(f"quick teacher-forcing cell, best of 3, epochs {args.epochs or 'as the cell'}, "
          f"{usable_cores()} usable cores, one torch thread a process")
    print(f"  one after another:            {t_seq:7.1f} s")
    print(f"  side by side ({args.jobs} processes):  {t_par:7.1f} s   (speed-up {t_seq / t_par:.2f}×)")
    print(f"  same candidates and kept model: {same}")


if __name__ == "__main__":
    main()
