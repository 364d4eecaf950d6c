"""Speed of the SVI engine on Lorenz-63 windows (issue: variational inference, item 7).

For every dynamics estimator that imports (PLRNN, ShallowPLRNN, GatedNODE, LTC, RecurrentFWP,
ORGaNICs; default hyperparameters, Gaussian observation, Markov guide), prints the wall time of
one SVI step (a batch of ``--batch-size`` windows of ``--window`` steps: guide, model, backward,
optimizer) and of one epoch (as many steps as cover the training recording once). Each figure
is the median over ``--steps`` timed steps after ``--warmup`` untimed ones.

With a GPU (``--device auto`` on a machine with CUDA, or ``--device cuda``) it also times every
dynamics at ``--gpu-batch-size`` (default 512) on the CPU and on the GPU and prints the ratio
CPU time / GPU time (the speed-up; the issue's target is >= 5 at batch 512).

Run: ``python benchmarks/bench_svi.py`` (``--device cpu --batch-size 64`` for the CPU table
only; ``--threads N`` sets torch's CPU threads, default: torch's own choice).
"""
from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import torch

import dsident
from dsident import datasets
from dsident.inference.svi import fit_svi

DYNAMICS = ("PLRNN", "ShallowPLRNN", "GatedNODE", "LTC", "RecurrentFWP", "ORGaNICs")


def build(name: str, data: Any) -> Any:
    """A StateSpaceModel of the named estimator with default hyperparameters, built by a 1-step fit."""
    est = getattr(dsident.models, name)(seed=0)
    est.fit(data, method="svi", n_steps=1, window=20, batch_size=2, progress=False, device="cpu",
            eval_every=1, patience=None)
    return est.model_


def time_steps(model: Any, data: Any, *, device: str, batch_size: int, window: int, warmup: int,
               steps: int) -> float:
    """Median wall time (s) of one SVI step; the per-step callback reads the loss, which synchronises CUDA."""
    stamps: list[float] = []
    fit_svi(model, data, seed=0, progress=False, device=device, window=window, batch_size=batch_size,
            n_steps=warmup + steps + 2, eval_every=10 ** 9, patience=None, kl_anneal=0,
            callback=lambda step, record, model: stamps.append(time.perf_counter()))
    # a stamp after every step, so interval i = time of step i + 1 (step 0 has none): drop the
    # warm-up steps and the last one (it runs the final evaluation)
    intervals = [b - a for a, b in zip(stamps[:-1], stamps[1:])][warmup:warmup + steps]
    assert len(intervals) == steps
    return statistics.median(intervals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--batch-size", type=int, default=64, help="windows per step for the CPU table")
    parser.add_argument("--gpu-batch-size", type=int, default=512, help="windows per step for the GPU/CPU ratio")
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dynamics", nargs="*", default=list(DYNAMICS))
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    use_gpu = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch finds no CUDA device")

    data = datasets.load("lorenz63", split="train")
    n_samples = int(data["length"].sum())
    print(f"data: lorenz63 train, {data.sizes['trial']} trial(s), {n_samples} samples, {data.sizes['channel']} channels;"
          f" window {args.window}; torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
          + (f"; GPU {torch.cuda.get_device_name()}" if use_gpu else "; no GPU used"))

    models: dict[str, Any] = {}
    for name in args.dynamics:
        try:
            models[name] = build(name, data)
        except (ImportError, AttributeError, ValueError) as err:   # a dynamics not in this build
            print(f"{name:>13}: skipped ({type(err).__name__}: {err})")

    def epoch_steps(batch_size: int) -> int:
        return math.ceil(n_samples / (batch_size * args.window))

    print(f"\nCPU, batch {args.batch_size} (epoch = {epoch_steps(args.batch_size)} steps)")
    print(f"{'dynamics':>13} {'latent':>6} {'s/step':>8} {'s/epoch':>8} {'windows/s':>10}")
    for name, model in models.items():
        t = time_steps(model, data, device="cpu", batch_size=args.batch_size, window=args.window,
                       warmup=args.warmup, steps=args.steps)
        print(f"{name:>13} {model.latent_dim:>6} {t:8.3f} {t * epoch_steps(args.batch_size):8.2f} "
              f"{args.batch_size / t:10.1f}")

    if not use_gpu:
        return
    b = args.gpu_batch_size
    print(f"\nGPU vs CPU, batch {b} (epoch = {epoch_steps(b)} steps); ratio = CPU time / GPU time (target >= 5)")
    print(f"{'dynamics':>13} {'cpu s/step':>10} {'gpu s/step':>10} {'gpu s/epoch':>11} {'ratio':>6}")
    for name, model in models.items():
        t_cpu = time_steps(model, data, device="cpu", batch_size=b, window=args.window, warmup=args.warmup,
                           steps=args.steps)
        t_gpu = time_steps(model, data, device="cuda", batch_size=b, window=args.window, warmup=args.warmup,
                           steps=args.steps)
        print(f"{name:>13} {t_cpu:10.3f} {t_gpu:10.4f} {t_gpu * epoch_steps(b):11.2f} {t_cpu / t_gpu:6.1f}")


if __name__ == "__main__":
    main()
