"""Backpropagation through time: deterministic, free-running training of any latent dynamics.

Each training window starts from one latent state and the dynamics then run freely (no
process noise, no forcing) for the whole window; the loss compares the observation model's
prediction with the data at every observed sample:

.. math::

    z_1 = z_\\text{init}(x_1), \\qquad z_t = f(z_{t-1}, u_t), \\qquad
    \\mathcal L = \\frac{1}{|\\Omega|} \\sum_{(t, n) \\in \\Omega} \\big(\\bar x_{t,n}(z_t) - x_{t,n}\\big)^2
                  + R(\\theta),

with ``Omega`` the observed (trial, time, channel) entries, ``x̄`` the observation mean and
``R`` the dynamics' ``regularization()`` (e.g. the manifold-attractor penalty, seed 004
eq. 3). For non-Gaussian observation models the squared error is replaced by the negative
log-likelihood per observed entry. This is the SGD setting of the rPLRNN paper's machine-
learning benchmarks (seed 004, section 2a: Adam, lr 1e-3, gradient clipping, best epoch).
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

from ..data.container import as_dataset
from ..observations.gaussian import Gaussian
from .fused_rollout import can_fuse, fused_free_run
from .training import (LOSSES, Evaluation, FitCallback, TrainingProgress, check_data_fits_model, check_int,
                       resolve_device, train_loop)
from .windows import Batch, ShuffledWindows, Windows, make_windows, split_windows, to_batch

__all__ = ["fit_bptt", "free_run", "make_bptt_loss"]

_INITIAL_STATES = ("auto", "invert", "learned")


def free_run(model: Any, batch: Batch, initial_state: str, fused: bool = True) -> Tensor:
    """Latent trajectories of a batch run freely from their initial states.

    Parameters
    ----------
    model : StateSpaceModel
    batch : Batch
        ``x`` (B, L, N), ``mask`` (B, L, N), ``u`` (B, L, K) or None.
    initial_state : {"invert", "learned"}
        "invert": ``model.encode`` of the first sample of each window (the observation model's
        pseudo-inverse; missing channels are handled by its mask). "learned": the model's
        ``initial_mean`` for every window (trained with the rest).
    fused : bool, default True
        Run a (shallow) PLRNN without inputs as one autograd node
        (:func:`~dsident.inference.fused_rollout.fused_free_run`); False: step by step.

    Returns
    -------
    Tensor of shape (B, L, M)
    """
    n_batch, n_time, _ = batch.x.shape
    if initial_state == "invert":
        z = model.encode(batch.x[:, 0], batch.mask[:, 0])
    else:
        z = model.initial_mean.expand(n_batch, -1)
    if fused and can_fuse(model, None, batch.u):
        return fused_free_run(model, z, n_time)
    states = [z]
    for t in range(1, n_time):
        z = model.step(z, None if batch.u is None else batch.u[:, t], model.dt)
        states.append(z)
    return torch.stack(states, dim=1)


def make_bptt_loss(loss: str, initial_state: str, fused: bool = True) -> Callable[[Any, Batch], Tensor]:
    """The data term of BPTT as the ``loss_fn(model, batch)`` of :func:`~dsident.inference.training.train_loop`.

    Parameters
    ----------
    loss : {"mse", "nll"}
        Masked mean squared error of the observation mean, or negative log-likelihood per
        observed entry.
    initial_state : {"invert", "learned"}
    """
    def loss_fn(model: Any, batch: Batch) -> Tensor:
        z = free_run(model, batch, initial_state, fused)
        n_observed = batch.mask.sum().clamp_min(1)
        if loss == "mse":
            residual = (model.decode(z) - batch.x) * batch.mask
            return residual.square().sum() / n_observed
        return -model.observation.log_prob(batch.x, z, batch.mask).sum() / n_observed

    return loss_fn


def fit_bptt(model: Any, data: Any, *, seed: int | None = None, progress: bool = True, n_epochs: int = 100,
             seq_len: int | None = 200, batch_size: int = 16, lr: float = 1e-3, lr_end: float | None = None,
             grad_clip: float | None = 10.0, val_fraction: float = 0.1, initial_state: str = "auto",
             loss: str = "auto", device: str = "cpu", checkpoint: str | os.PathLike | None = None,
             checkpoint_every: int = 1, resume: bool = True, on_divergence: str = "warn", skip_nonfinite: int = 0,
             lr_backoff: int = 0, rewinds: int = 0, rewind_after: int = 10, fused: bool = True,
             callback: FitCallback | None = None) -> dict[str, Any]:
    """Fit a StateSpaceModel by deterministic backpropagation through time (engine ``"bptt"``).

    Parameters
    ----------
    model : StateSpaceModel
        Updated in place; at the end it holds the state with the lowest validation loss.
    data : xarray.Dataset or anything :func:`dsident.data.as_dataset` accepts
        ``x(trial, time, channel)`` with NaN for missing samples, optional ``u(trial, time, input)``.
    seed : int, optional
        Seeds the validation split and the order of the windows in each epoch.
    progress : bool
        Show a tqdm bar.
    n_epochs : int, default 100
    seq_len : int or None, default 200
        Window length in time steps; None uses whole trials.
    batch_size : int, default 16
    lr : float, default 1e-3
        Adam learning rate; ``lr_end`` (optional) decays it exponentially over the epochs.
    grad_clip : float or None, default 10
        Gradient-norm clipping (10 in the rPLRNN paper; its code used 3).
    val_fraction : float in [0, 1), default 0.1
        Share of windows held out to choose the best epoch (0: choose on the training loss).
    initial_state : {"auto", "invert", "learned"}
        How each window's first latent state is obtained: ``"invert"`` encodes the first sample
        with the observation model; ``"learned"`` uses the model's trained ``initial_mean`` (as
        for the addition problem, whose first samples are missing); ``"auto"`` picks "invert"
        unless some window's first sample is entirely missing.
    loss : {"auto", "mse", "nll"}
        "auto" is the masked MSE for a Gaussian observation model, the negative log-likelihood
        otherwise.
    device : {"cpu", "auto", "cuda"}, default "cpu"
        Where to train ("auto": the GPU when torch sees one). The CPU is the default because
        these windows are sequential chains of small operations: on an H100 every benchmark
        cell's update (batch 16) took 1.5–2.7× as long as on one CPU thread
        (``benchmarks/bench_tf_device.py``); a GPU starts to pay off at batches of a few hundred.
    fused : bool, default True
        Run the windows of a shallow PLRNN or a PLRNN as one autograd node (:mod:`dsident.inference.fused_rollout`;
        1.8–3× faster updates on a CPU, the same gradients to round-off). False steps the model and
        lets autograd record every step: the route of every fit recorded before the fused rollout
        existed, to repeat one of them to the last digit.
    checkpoint : path, optional
        Training checkpoint (model, optimizer, best state, history, counters, seed), written
        every ``checkpoint_every`` epochs; an existing one is resumed when ``resume`` is true,
        and the resumed run ends where an uninterrupted one would have.
    on_divergence : {"warn", "raise"}
        A non-finite loss or gradient stops training (the update is not applied), restores the
        state of the best epoch so far (none yet: the model keeps its last finite parameters)
        and warns (``RuntimeWarning``) or raises
        :class:`~dsident.inference.training.TrainingDivergedError`.
    skip_nonfinite : int, default 0
        Up to this many such batches in a row are skipped instead (no update; counted in
        ``history["skipped_batches"]`` and reported in a warning).
    lr_backoff : int, default 0
        Up to this many times, such a batch sends training back to the start of the epoch before
        with half the learning rate instead of stopping it (``history["lr_backoffs"]``; see
        :func:`~dsident.inference.training.train_loop`).
    rewinds, rewind_after : int, default 0 and 10
        Up to ``rewinds`` times, when ``rewind_after`` epochs in a row have not lowered the best
        validation loss, training goes back to the best state and goes on with half the learning
        rate (``history["rewinds"]``; see :func:`~dsident.inference.training.train_loop`).
    callback : callable ``(epoch, record, model) -> bool or None``, optional
        Called after every epoch with its numbers (``train_loss``, ``val_loss``, ...) and the
        model in its current state; returning True stops training there, keeping the best state
        (:data:`~dsident.inference.training.FitCallback`).

    Returns
    -------
    dict
        Per epoch: ``epoch``, ``train_loss``, ``val_loss`` (NaN without validation windows),
        ``regularization``, ``lr``, ``grad_norm``; then ``best_epoch``, ``best_loss``,
        ``diverged``, ``n_epochs_run``, ``n_batches_done``, ``wall_time_s`` and ``settings``
        (the keys of :func:`~dsident.inference.training.train_loop`).

    Examples
    --------
    >>> from dsident import StateSpaceModel
    >>> from dsident.dynamics import PLRNN
    >>> from dsident.observations import Gaussian
    >>> from dsident.data.tasks import addition_problem
    >>> model = StateSpaceModel(PLRNN(8, input_dim=2, seed=0), Gaussian(1, 8))
    >>> history = fit_bptt(model, addition_problem(64, 30, seed=0), n_epochs=2, seed=0, progress=False)
    >>> len(history["train_loss"])
    2
    """
    ds = as_dataset(data)
    check_data_fits_model(model, ds)
    if "sample_time" in ds and model._continuous_time():
        # the windows step at the model's dt: the sampling times would be ignored without a word
        raise ValueError("`data` has irregular sampling times (sample_time), which BPTT does not use: every step of "
                         "its windows integrates over the model's dt. Fit continuous-time dynamics on irregular "
                         "samples with method='teacher-forcing' or 'svi', which step over each actual gap.")
    if initial_state not in _INITIAL_STATES:
        raise ValueError(f"`initial_state` must be one of {_INITIAL_STATES}; got initial_state={initial_state!r}.")
    if loss not in LOSSES:
        raise ValueError(f"`loss` must be one of {LOSSES}; got loss={loss!r}.")
    windows: Windows = make_windows(ds, seq_len)
    if initial_state == "auto":
        first_missing = ~windows.mask[:, 0].any(axis=1)
        initial_state = "learned" if first_missing.any() else "invert"
    elif initial_state == "invert" and (~windows.mask[:, 0].any(axis=1)).any():
        raise ValueError("`initial_state='invert'` needs an observed first sample in every window; some windows "
                         "start with all channels missing. Use initial_state='learned' or 'auto'.")
    if loss == "auto":
        loss = "mse" if isinstance(model.observation, Gaussian) else "nll"
    batch_size = check_int("batch_size", batch_size)
    dev = resolve_device(device)
    dtype = next(model.parameters()).dtype
    rng = np.random.default_rng(seed)
    train, val = split_windows(windows, val_fraction, rng)
    settings = {"engine": "bptt", "seed": seed, "n_epochs": n_epochs, "seq_len": seq_len, "batch_size": batch_size,
                "lr": lr, "lr_end": lr_end, "grad_clip": grad_clip, "val_fraction": val_fraction,
                "initial_state": initial_state, "loss": loss, "device": str(dev), "skip_nonfinite": skip_nonfinite,
                "lr_backoff": lr_backoff, "rewinds": rewinds, "rewind_after": rewind_after, "fused": bool(fused),
                "n_train_windows": len(train), "n_val_windows": 0 if val is None else len(val)}
    loss_fn = make_bptt_loss(loss, initial_state, bool(fused))
    history = train_loop(model, loss_fn=loss_fn, sampler=ShuffledWindows(train, batch_size, dtype, dev),
                         n_epochs=n_epochs, lr=lr, lr_end=lr_end, optimizer="adam", grad_clip=grad_clip, seed=seed,
                         progress=progress, device=dev, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                         resume=resume, on_divergence=on_divergence, skip_nonfinite=skip_nonfinite,
                         lr_backoff=lr_backoff, rewinds=rewinds, rewind_after=rewind_after,
                         settings=settings,
                         evaluate=_validation(val, loss_fn, batch_size, dtype, dev), eval_every=1, score_name="loss",
                         history_keys=("val_loss",), callback=callback,
                         divergence_advice="Try a smaller `lr`, a smaller `grad_clip` or shorter `seq_len`.")
    return history


def _validation(val: Windows | None, loss_fn: Callable[[Any, Batch], Tensor], batch_size: int, dtype: torch.dtype,
                device: torch.device) -> Callable[[Any, TrainingProgress], Evaluation]:
    """The ``evaluate`` hook of BPTT: the mean loss per validation window (the training loss
    of the epoch without validation windows); a non-finite one stops training as diverged."""
    batches = [] if val is None else [to_batch(val.subset(np.arange(i, min(i + batch_size, len(val)))), dtype, device)
                                      for i in range(0, len(val), batch_size)]

    def evaluate(model: Any, progress: TrainingProgress) -> Evaluation:
        if batches:
            with torch.no_grad():
                score = sum(float(loss_fn(model, b)) * b.x.shape[0] for b in batches) / len(val)
        else:
            score = progress.train_loss
        diverged = None if math.isfinite(score) else f"The validation loss became {score} at epoch {progress.epoch}."
        return Evaluation(score=score, values={"val_loss": score if batches else math.nan}, diverged=diverged)

    return evaluate
