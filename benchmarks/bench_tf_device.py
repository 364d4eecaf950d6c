"""Teacher forcing on a CPU thread against a GPU, for the benchmark cells' shapes.

For each cell below it builds the model of ``dsident benchmark``'s configuration for that
(dataset, model) with teacher forcing (:func:`dsident.experiments.config.resolve_config`), then
runs the engine for ``--epochs`` + 1 epochs of ``--batches`` updates each (no scoring) on every
device and prints the median time of one update (window sampling, loss, backward, clipping and
Adam) over the epochs after the first, and the ratio CPU time / GPU time. The CPU runs with one
torch thread, as the benchmark cells do.

Run: ``python benchmarks/bench_tf_device.py`` (``--device cpu`` for the CPU column alone;
``--batch-size 256`` for larger batches than the cells' 16). ``--compare-batch 128`` times, on
the CPU in one run, each cell's own batch against batches of 128 (the polish stage's,
docs/teacher_forcing.md "Polishing a fit") and prints the cost per window of each and their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from _timing import one_training_run

from dsident.experiments.config import resolve_config
from dsident.experiments.runner import adapt_to_data, build_estimator, point_data

CELLS = (("lorenz63", "shplrnn"), ("lorenz63", "rplrnn"), ("lorenz63", "gnode"), ("lorenz63", "ltc"),
         ("bursting_neuron", "shplrnn"), ("bursting_neuron", "gnode"), ("bursting_neuron", "ltc"),
         ("ecg", "shplrnn"), ("ecg", "gnode"), ("ecg", "rplrnn"))


def time_update(dataset: str, model: str, device: str, epochs: int, batches: int, batch_size: int | None) -> float:
    """Median seconds per teacher-forcing update of the cell on ``device`` (``batch_size`` windows
    an update; None: the cell's own, see :func:`cell_batch_size`)."""
    fit_options = {"n_epochs": epochs + 1, "batches_per_epoch": batches, "eval_every": 0, "device": device,
                   "progress": False}
    if batch_size is not None:
        fit_options["batch_size"] = batch_size
    cfg = resolve_config(dataset, model, "teacher-forcing", overrides={"fit_options": fit_options, "seed": 0})
    cfg["fit_options"] = one_training_run(cfg["fit_options"])     # the updates of one run are timed
    train = point_data({**cfg, "train_length": min(cfg["train_length"], 20_000)})[0]
    est, options, _ = build_estimator(adapt_to_data(cfg, train))
    stamps: list[float] = [time.perf_counter()]

    def stamp(epoch: int, record: dict, model: object) -> None:
        if device == "cuda":
            torch.cuda.synchronize()
        stamps.append(time.perf_counter())

    est.fit(train, method="teacher-forcing", callback=stamp, **options)
    epoch_times = [b - a for a, b in zip(stamps[1:-1], stamps[2:])]          # the first epoch warms up
    return statistics.median(epoch_times) / batches


def cell_batch_size(dataset: str, model: str) -> int:
    """Windows per update of the cell (its setting, else the engine's default)."""
    import inspect

    from dsident.inference.teacher_forcing import fit_teacher_forcing

    cfg = resolve_config(dataset, model, "teacher-forcing")
    default = inspect.signature(fit_teacher_forcing).parameters["batch_size"].default
    return int(cfg["fit_options"].get("batch_size", default))


def compare_batches(big: int, epochs: int, batches: int) -> None:
    """Per cell, on one CPU thread: ms per window at the cell's batch and at ``big``, and the ratio."""
    print(f"one teacher-forcing update per window, median over {epochs} epochs of {batches}; CPU: 1 thread")
    print(f"{'cell':<26} | {'batch':>5} | {'ms/window':>9} | {'batch':>5} | {'ms/window':>9} | ratio")
    for dataset, model in CELLS:
        own = cell_batch_size(dataset, model)
        small = time_update(dataset, model, "cpu", epochs, batches, None) / own
        large = time_update(dataset, model, "cpu", epochs, batches, big) / big
        print(f"{dataset + ' ' + model:<26} | {own:>5} | {1e3 * small:9.2f} | {big:>5} | {1e3 * large:9.2f} | "
              f"{small / large:5.1f}×", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu"])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=None, help="windows per update (default: the cell's)")
    parser.add_argument("--compare-batch", type=int, default=None, metavar="N",
                        help="on the CPU only: the cost per window at the cell's batch and at N windows")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.compare_batch:
        compare_batches(args.compare_batch, args.epochs, args.batches)
        return
    devices = ["cpu"] + (["cuda"] if args.device == "auto" and torch.cuda.is_available() else [])
    print(f"one teacher-forcing update, median over {args.epochs} epochs of {args.batches}; CPU: 1 thread"
          + (f"; GPU: {torch.cuda.get_device_name()}" if "cuda" in devices else "; no GPU"))
    print(f"{'cell':<26} | " + " | ".join(f"{d + ' ms':>9}" for d in devices) + (" | cpu / gpu" if len(devices) > 1 else ""))
    for dataset, model in CELLS:
        times = [time_update(dataset, model, d, args.epochs, args.batches, args.batch_size) for d in devices]
        line = f"{dataset + ' ' + model:<26} | " + " | ".join(f"{1e3 * t:9.1f}" for t in times)
        if len(times) > 1:
            line += f" | {times[0] / times[1]:8.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
