"""Training the candidates of ``fit(..., best_of=k)`` side by side, one per worker process.

``best_of`` trains k models from the seeds ``seed + j × 10 000`` and keeps the one whose free
run scores best against the training data (:mod:`dsident.models.restarts`). The candidates do
not depend on one another, so on a machine with idle cores they can train at once:
``fit(..., best_of=3, n_jobs=3)`` costs about one fit's time instead of three. The quick
Lorenz-63 cell, which keeps the best of three, is the main user (``dsident benchmark --quick``
on two cores: ``benchmarks/bench_best_of_jobs.py``).

Each candidate runs in a fresh worker process (joblib's loky pool: started clean, not forked
from a process whose torch thread pool is already running, and reused by later fits). It
trains with the number of torch threads the caller has, divided among the workers, and sends
its progress back through a queue so that the caller's one progress bar shows every
candidate's epochs. With the same number of torch threads (one, as the benchmark runs) a
candidate trained in a worker is the one trained in the calling process, to the last bit; the
tests check that against ``n_jobs=1``.

A ``callback`` in the engine options runs in the worker, on the worker's copy of the model, so
it must be picklable (a module-level function or an instance of a module-level class); its
side effects stay in the worker.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import pickle
import queue as queue_module
from collections.abc import Sequence
from typing import Any

from .._threads import usable_cores

__all__ = ["check_n_jobs", "train_side_by_side", "usable_cores"]

#: seconds between looks at the workers' progress queue
_POLL_S = 0.2


def check_n_jobs(n_jobs: Any, best_of: int, restarts: int, engine_options: dict[str, Any]) -> int:
    """Validate ``n_jobs`` (worker processes for ``best_of``'s candidates) against the fit.

    Returns the number of processes to use: 1 when there is nothing to share out (``best_of``
    is 1), else ``min(n_jobs, best_of)``.

    Raises
    ------
    ValueError
        ``n_jobs`` not a positive integer (or -1: one per usable core); ``restarts`` with more
        than one process (a restart takes the next seed of the one sequence, so its candidates'
        seeds depend on each other's fate); a ``device`` other than the CPU (``"auto"`` is
        refused only where it picks CUDA); a ``callback``
        that cannot be pickled.
    """
    if isinstance(n_jobs, numbers.Integral) and not isinstance(n_jobs, bool) and n_jobs == -1:
        n_jobs = usable_cores()
    # an integer of any kind (a numpy int read from a grid, as best_of takes), never a bool
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs < 1:
        raise ValueError(f"`n_jobs` must be a positive integer (worker processes for best_of's candidates) or -1 "
                         f"(one per usable core); got n_jobs={n_jobs!r}.")
    n = min(int(n_jobs), int(best_of))
    if n == 1:
        return 1
    if restarts:
        raise ValueError(f"`n_jobs`={n_jobs} trains best_of's candidates at once, but with restarts={restarts} each "
                         "stuck candidate takes the next seed of one shared sequence, so they must run one after "
                         "another: pass n_jobs=1, or restarts=0.")
    device = engine_options.get("device", "cpu")
    if isinstance(device, str) and device == "auto":      # "auto" is the CPU on a machine without CUDA
        import torch

        on_cpu = not torch.cuda.is_available()
    else:
        on_cpu = str(device).split(":")[0] == "cpu"        # "cpu", "cpu:0", torch.device("cpu")
    if not on_cpu:
        raise ValueError(f"`n_jobs`={n_jobs} trains the candidates in CPU worker processes; with device={device!r} "
                         "train them one after another on it (n_jobs=1).")
    callback = engine_options.get("callback")
    if callback is not None:
        try:
            pickle.dumps(callback)
        except Exception as exc:        # lambdas, closures, open files: anything pickle refuses
            raise ValueError(f"`n_jobs`={n_jobs} runs the `callback` in the worker processes, so it must be "
                             f"picklable (a module-level function or class instance); pickling it failed: "
                             f"{exc}. Pass n_jobs=1 to keep it in this process.") from None
    return n


def train_side_by_side(estimator: Any, method: str, ds: Any, seeds: Sequence[int | None],
                       engine_options: dict[str, Any], n_jobs: int) -> list[tuple[Any, dict[str, Any]]]:
    """Train one model per seed in ``n_jobs`` worker processes; returns (model, history) per
    seed, in the order of ``seeds``.

    Parameters
    ----------
    estimator : LatentModelEstimator
        Its hyperparameters build each candidate (a pickled copy per worker; its ``seed`` is
        replaced by the candidate's).
    method : str
        The inference engine's name.
    ds : xarray.Dataset
        The training data, as ``fit`` resolved it.
    seeds : sequence of int or None
        One candidate per seed.
    engine_options : dict
        The engine's options; ``progress`` is shown here, over every candidate's epochs.
    n_jobs : int
        Worker processes (at most one per candidate).
    """
    import torch
    from joblib.externals.loky import get_reusable_executor
    from joblib.externals.loky.backend.context import get_context
    from tqdm.auto import tqdm

    options = dict(engine_options)
    progress = bool(options.pop("progress", False))
    n_epochs = _n_epochs(method, options)
    threads = max(1, torch.get_num_threads() // n_jobs)
    executor = get_reusable_executor(max_workers=n_jobs)
    # the progress queue's server starts as the workers do (not forked; no re-run of a script)
    with (get_context("loky").Manager() if progress else contextlib.nullcontext()) as manager:
        relay = manager.Queue() if progress else None
        futures = [executor.submit(_train_candidate, estimator, method, ds, seed, options, threads, relay, k)
                   for k, seed in enumerate(seeds)]
        with tqdm(total=len(seeds) * n_epochs, desc=f"{method}: best of {len(seeds)} ({n_jobs} processes)",
                  disable=not progress, unit="epoch") as bar:
            best: dict[int, float] = {}
            while not all(f.done() for f in futures):
                _drain(relay, bar, best)
            _drain(relay, bar, best, wait=False)
            results = [f.result() for f in futures]    # a worker's error is raised here, as in one process
            bar.update(max(0, bar.total - bar.n))      # fits that stopped early: the bar still ends full
    return results


def _train_candidate(estimator: Any, method: str, ds: Any, seed: int | None, options: dict[str, Any],
                     threads: int, relay: Any, k: int) -> tuple[Any, dict[str, Any]]:
    """In a worker: build the candidate from ``seed`` and train it (what the calling process
    would do for that candidate)."""
    import torch

    from .._threads import set_blas_threads
    from ..data import to_arrays
    from ..inference import get_engine

    torch.set_num_threads(threads)
    set_blas_threads(threads)
    arrays = to_arrays(ds)
    estimator.seed = seed
    model = estimator._new_model(arrays, [str(c) for c in ds["channel"].values],
                                 0 if arrays.u is None else arrays.u.shape[-1], float(ds.attrs["dt"]))
    options = dict(options, progress=False)
    if relay is not None:
        options["callback"] = _Relay(relay, k, options.get("callback"))
    history = get_engine(method)(model, ds, seed=seed, **options)
    return model, history


class _Relay:
    """A fit callback that reports each epoch to the calling process, then calls the user's."""

    def __init__(self, relay: Any, k: int, callback: Any = None) -> None:
        self.relay, self.k, self.callback = relay, k, callback

    def __call__(self, epoch: int, record: dict[str, Any], model: Any) -> bool | None:
        d = record.get("state_space_divergence")
        self.relay.put((self.k, None if d is None else float(d)))
        return None if self.callback is None else self.callback(epoch, record, model)


def _drain(relay: Any, bar: Any, best: dict[int, float], wait: bool = True) -> None:
    """Move the workers' epoch reports onto the bar (each candidate's best scored D_stsp as postfix)."""
    import time

    if relay is None:
        if wait:
            time.sleep(_POLL_S)
        return
    items = []
    try:
        items.append(relay.get(timeout=_POLL_S) if wait else relay.get_nowait())
        while True:
            items.append(relay.get_nowait())
    except queue_module.Empty:
        pass
    for k, d in items:
        if d is not None and math.isfinite(d):
            best[k] = min(best.get(k, math.inf), d)
    if items:
        bar.update(len(items))
        if best:
            bar.set_postfix({"best D_stsp": " / ".join(f"{best[k]:.3g}" for k in sorted(best))})


def _n_epochs(method: str, options: dict[str, Any]) -> int:
    """The epochs each candidate trains (its option, else the engine's default): the bar's unit."""
    import inspect

    from ..inference import get_engine
    from ..inference.training import check_int

    if "n_epochs" in options:                # checked before any worker starts: the engine's message
        return check_int("n_epochs", options["n_epochs"])
    default = inspect.signature(get_engine(method)).parameters.get("n_epochs")
    return int(default.default) if default is not None and isinstance(default.default, int) else 1
