"""What one teacher-forcing evaluation costs: the plain score, ``select_regime`` and ``eval_starts``.

Every ``eval_every`` epochs the engine scores a free run against the training series
(:class:`dsident.inference.teacher_forcing._FreeRunScorer`). This script times, on Lorenz-63's
training series and the model of a benchmark cell (untrained: the cost does not depend on the
weights), the pieces of one evaluation:

- ``score``: one free run of ``eval_steps / 4 + eval_steps`` steps, D_stsp and D_H;
- ``verdict`` (``select_regime``): the run's Lyapunov spectrum, with the scored run handed over
  (the engine's route) and, for comparison, generated a second time (the route before it was
  handed over);
- a whole evaluation with ``eval_starts`` = 1 and 3, with and without ``select_regime``.

Run (one torch thread, as the benchmark fits)::

    OMP_NUM_THREADS=1 python benchmarks/bench_tf_scoring.py [--steps 10000] [--repeats 3]

Results: ``docs/teacher_forcing.md``, "Scoring from several starts".
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

from dsident import datasets
from dsident.dynamics import GatedNODE, ShallowPLRNN
from dsident.inference.teacher_forcing import _FreeRunScorer
from dsident.inference.training import TrainingProgress
from dsident.model import StateSpaceModel
from dsident.observations import Gaussian

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import best_of  # noqa: E402


def models(dt: float) -> dict[str, StateSpaceModel]:
    """The Lorenz-63 cells' model forms (``PAIR_DEFAULTS``), untrained."""
    return {
        "shallow PLRNN (M 3, H 100, clipped)": StateSpaceModel(
            ShallowPLRNN(3, 100, clip=True, seed=0), Gaussian(3, 3, readout="identity"), dt=dt),
        "gnODE (M 3, τ 10 samples)": StateSpaceModel(
            GatedNODE(3, tau=10 * dt, output_nonlinearity="identity", seed=0), Gaussian(3, 3, readout="identity"),
            dt=dt),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000, help="eval_steps (default 10 000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = datasets.load("lorenz63", split="train")
    steps = args.steps
    print(f"Lorenz-63 training series, eval_steps {steps} (+ {steps // 4} burn-in), best of {args.repeats}, "
          f"{args.threads} torch thread(s)\n")
    print("| model | score | verdict, run handed over | verdict, run generated again | saving | "
          "evaluation: 1 start | 1 start + regime | 3 starts | 3 starts + regime |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, model in models(float(train.attrs["dt"])).items():
        model.eval()
        one = _FreeRunScorer(train, steps, burn_in=steps // 4)
        run = one.free_run(model, 0)
        t_score = best_of(lambda: one.score(model, 0), args.repeats)[0]
        t_given = best_of(lambda: one.verdict(model, 0, run=run), args.repeats)[0]
        t_again = best_of(lambda: one.verdict(model, 0), args.repeats)[0]
        evals = []
        for starts in (1, 3):
            for regime in (None, "chaotic"):
                scorer = _FreeRunScorer(train, steps, burn_in=steps // 4, regime=regime, n_starts=starts)
                evals.append(best_of(lambda: scorer(model, TrainingProgress()), args.repeats)[0])
        print(f"| {name} | {t_score:.2f} s | {t_given:.2f} s | {t_again:.2f} s | {t_again / t_given:.2f}× | "
              + " | ".join(f"{t:.2f} s" for t in evals) + " |")
    print("\nA regime verdict is only computed for a finite score; an untrained model that leaves the "
          "data's range shows the score's cost only in the regime columns.")


if __name__ == "__main__":
    main()
