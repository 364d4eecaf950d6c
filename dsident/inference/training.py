"""The gradient-training loop shared by the BPTT and teacher-forcing engines.

A loop trains a :class:`~dsident.StateSpaceModel` on fixed-length *windows* cut from a
dataset. What is computed on a window is a pluggable loss function
``loss_fn(model, batch) -> scalar tensor`` (the data term); the loop adds
``model.dynamics.regularization()`` and takes care of the rest: Adam with gradient-norm
clipping and an optional exponential learning-rate decay, a validation split whose best state
is restored at the end, a tqdm bar, checkpoints that a later call resumes from, and the
detection of divergence (a non-finite loss or gradient stops training with a warning or an
error and keeps the best state).

The pieces of that loop are public helpers that the teacher-forcing engine
(:mod:`dsident.inference.teacher_forcing`, whose loop draws random windows, adapts its forcing
strength per batch and keeps the best state by a free-run score) uses as well: the optimizer by
name (:func:`make_optimizer`), the exponential learning-rate decay (:func:`lr_decay_factor`,
:func:`set_learning_rate`), one guarded update (:func:`gradient_step`), divergence handling
(:func:`handle_divergence`) and checkpoints (:func:`save_checkpoint`, :func:`load_checkpoint`,
:func:`restore_training_state`).

Shape legend: ``W`` windows, ``L`` window length (time), ``N`` obs_dim, ``K`` input_dim.
"""
from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from .._version import __version__
from ..data.container import to_arrays

__all__ = ["Windows", "make_windows", "split_windows", "train_loop", "resolve_device", "TrainingDivergedError",
           "OPTIMIZERS", "make_optimizer", "lr_decay_factor", "set_learning_rate", "state_copy", "cpu_state",
           "save_checkpoint", "load_checkpoint", "restore_training_state", "gradient_step", "handle_divergence",
           "LOSSES", "check_data_fits_model"]

#: loss names the gradient engines accept ("auto": MSE for Gaussian observations, else the NLL)
LOSSES = ("auto", "mse", "nll")


def check_data_fits_model(model: Any, ds: xr.Dataset, *, check_dt: bool = True) -> None:
    """ValueError when ``ds`` has other channel / input counts (or, with ``check_dt``, another
    sampling step) than the StateSpaceModel ``model`` was built for."""
    n_channels = ds.sizes["channel"]
    if n_channels != model.observation.obs_dim:
        raise ValueError(f"`data` has {n_channels} channels but the model's observation model has "
                         f"obs_dim={model.observation.obs_dim}.")
    k_data = ds.sizes["input"] if "u" in ds else 0
    k_model = getattr(model.dynamics, "input_dim", 0)
    if k_data != k_model:
        raise ValueError(f"`data` has {k_data} input channels (u) but the dynamics take input_dim={k_model}.")
    data_dt = float(ds.attrs.get("dt", 1.0))
    if check_dt and not np.isclose(data_dt, model.dt, rtol=1e-9, atol=0.0):
        raise ValueError(f"`data` is sampled at dt={data_dt!r} but the model steps with dt={model.dt!r}; build the "
                         "model with the data's dt (StateSpaceModel(..., dt=...)) or resample the data.")


class TrainingDivergedError(RuntimeError):
    """Raised (with ``on_divergence="raise"``) when the training loss or a gradient is not finite."""


@dataclass
class Windows:
    """Fixed-length training windows (numpy, float64).

    Attributes
    ----------
    x : ndarray of shape (W, L, N)
        Observations; NaN = missing (masked, never filled).
    mask : bool ndarray of shape (W, L, N)
        True = observed.
    u : ndarray of shape (W, L, K) or None
        Inputs; steps after the end of a trial hold 0 (they only drive masked steps).
    """

    x: np.ndarray
    mask: np.ndarray
    u: np.ndarray | None

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def subset(self, index: np.ndarray) -> "Windows":
        """The windows at ``index``."""
        return Windows(self.x[index], self.mask[index], None if self.u is None else self.u[index])


@dataclass
class Batch:
    """A batch of windows as tensors on the training device.

    Attributes
    ----------
    x : Tensor of shape (B, L, N)
        Observations with missing entries set to 0 *only* so that arithmetic stays finite;
        every loss must multiply by ``mask``.
    mask : bool Tensor of shape (B, L, N)
    u : Tensor of shape (B, L, K) or None
    """

    x: Tensor
    mask: Tensor
    u: Tensor | None


def make_windows(data: xr.Dataset, seq_len: int | None) -> Windows:
    """Cut every trial into consecutive, non-overlapping windows of ``seq_len`` steps.

    A trial shorter than ``seq_len`` (or every trial when ``seq_len`` is None) gives one window
    as long as the longest trial, padded with missing samples. A remainder shorter than
    ``seq_len`` at the end of a trial is kept when it has at least 2 steps (padded likewise).

    Parameters
    ----------
    data : xarray.Dataset
        The canonical container (``x(trial, time, channel)``, optional ``u``, ``length``).
    seq_len : int or None

    Returns
    -------
    Windows
    """
    arrays = to_arrays(data)
    n_trials, n_time, _ = arrays.x.shape
    if seq_len is None or seq_len >= n_time:
        length = n_time
    else:
        if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 2:
            raise ValueError(f"`seq_len` must be an integer >= 2 or None; got seq_len={seq_len!r}.")
        length = int(seq_len)
    xs, us = [], []
    for i in range(n_trials):
        n_valid = int(arrays.length[i])
        for start in range(0, n_valid - 1, length):
            stop = min(start + length, n_valid)
            if stop - start < 2:
                continue
            x = np.full((length, arrays.x.shape[2]), np.nan)
            x[: stop - start] = arrays.x[i, start:stop]
            xs.append(x)
            if arrays.u is not None:
                u = np.zeros((length, arrays.u.shape[2]))
                u[: stop - start] = np.nan_to_num(arrays.u[i, start:stop], nan=0.0)
                us.append(u)
    x = np.stack(xs)
    return Windows(x=x, mask=np.isfinite(x), u=np.stack(us) if us else None)


def split_windows(windows: Windows, val_fraction: float, rng: np.random.Generator) -> tuple[Windows, Windows | None]:
    """Random split into training and validation windows (at least one of each when possible)."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 <= val_fraction < 1:
        raise ValueError(f"`val_fraction` must be a number in [0, 1); got val_fraction={val_fraction!r}.")
    n = len(windows)
    n_val = int(round(val_fraction * n))
    if val_fraction > 0 and n >= 2:
        n_val = min(max(n_val, 1), n - 1)
    else:
        n_val = 0
    if n_val == 0:
        return windows, None
    order = rng.permutation(n)
    return windows.subset(np.sort(order[n_val:])), windows.subset(np.sort(order[:n_val]))


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"``, ``"cuda"`` / ``"cuda:i"`` (error without CUDA) or ``"auto"`` (CUDA when available)."""
    if isinstance(device, torch.device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"`device` must be 'cpu', 'cuda' or 'auto'; got device={device!r}.")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"`device={device!r}` was requested but CUDA is not available; use 'cpu' or 'auto'.")
        return torch.device(device)
    raise ValueError(f"`device` must be 'cpu', 'cuda' or 'auto'; got device={device!r}.")


def _to_batch(windows: Windows, dtype: torch.dtype, device: torch.device) -> Batch:
    x = torch.as_tensor(np.nan_to_num(windows.x, nan=0.0), dtype=dtype, device=device)
    mask = torch.as_tensor(windows.mask, device=device)
    u = None if windows.u is None else torch.as_tensor(windows.u, dtype=dtype, device=device)
    return Batch(x=x, mask=mask, u=u)


#: optimizers a training loop can be asked for by name
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {"adam": torch.optim.Adam, "radam": torch.optim.RAdam}


def make_optimizer(name: str, params: list[Tensor], lr: float) -> torch.optim.Optimizer:
    """The optimizer called ``name`` (``"adam"`` or ``"radam"``) over ``params`` at learning rate ``lr``."""
    if name not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {tuple(OPTIMIZERS)}; got optimizer={name!r}.")
    return OPTIMIZERS[name](params, lr=lr)


def lr_decay_factor(lr: float, lr_end: float | None, n_epochs: int) -> float:
    """Per-epoch factor γ of an exponential decay from ``lr`` (epoch 0) to ``lr_end`` (last epoch).

    1 without ``lr_end`` or with a single epoch (constant learning rate).
    """
    return 1.0 if lr_end is None or n_epochs < 2 else (lr_end / lr) ** (1.0 / (n_epochs - 1))


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group of ``optimizer``."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def state_copy(model: torch.nn.Module) -> dict[str, Tensor]:
    """A detached copy of ``model.state_dict()`` (on the model's device)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def cpu_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """``state`` with every tensor detached and moved to the CPU (for a checkpoint)."""
    return {k: v.detach().cpu() for k, v in state.items()}


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write a training checkpoint atomically (a crash never leaves a half-written file)."""
    # write to a temporary file and rename, so a crash never leaves a half-written checkpoint
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path, engine: str | None) -> dict[str, Any]:
    """Read a training checkpoint written by ``engine``; a foreign or corrupt file raises ``ValueError``."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a corrupt or foreign file must say what it is
        raise ValueError(f"`checkpoint` file {str(path)!r} could not be read as a dsident training checkpoint: "
                         f"{err}") from err
    if not isinstance(payload, dict) or payload.get("format") != "dsident-training-checkpoint":
        raise ValueError(f"`checkpoint` file {str(path)!r} is not a dsident training checkpoint.")
    if payload.get("engine") != engine:
        raise ValueError(f"`checkpoint` file {str(path)!r} was written by engine {payload.get('engine')!r}, "
                         f"not {engine!r}.")
    return payload


def restore_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, payload: dict[str, Any],
                           path: Path, original_device: torch.device) -> None:
    """Load the model and optimizer states of a checkpoint ``payload``; a mismatch raises ``ValueError``
    (after moving ``model`` back to ``original_device``)."""
    try:
        model.load_state_dict(payload["model_state"])
        optimizer.load_state_dict(payload["optimizer_state"])
    except (RuntimeError, ValueError, KeyError) as err:
        model.to(original_device)
        raise ValueError(f"`checkpoint` file {str(path)!r} does not fit this model (different sizes or "
                         f"components): {err}. Use a new checkpoint path or resume=False.") from err


def gradient_step(total: Tensor, optimizer: torch.optim.Optimizer, params: list[Tensor], grad_clip: float | None,
                  epoch: int) -> tuple[Tensor | None, str | None]:
    """One update from the loss ``total``: backward pass, gradient-norm clipping, optimizer step.

    Nothing is updated when the loss or the gradient norm is not finite.

    Returns
    -------
    norm : scalar Tensor or None
        Gradient 2-norm before clipping (None when the step was refused).
    divergence : str or None
        Why the step was refused (a message for :func:`handle_divergence`), else None.
    """
    if not torch.isfinite(total):
        return None, f"The training loss became {float(total.detach())} at epoch {epoch}."
    optimizer.zero_grad(set_to_none=True)
    total.backward()
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip is not None else math.inf)
    if not torch.isfinite(norm):
        return None, f"A gradient became non-finite (norm {float(norm)}) at epoch {epoch}."
    optimizer.step()
    return norm, None


def handle_divergence(model: torch.nn.Module, message: str, *, best_state: dict[str, Tensor] | None,
                      history: dict[str, Any], on_divergence: str, original_device: torch.device, advice: str,
                      stacklevel: int) -> None:
    """Record a divergence in ``history``, restore ``best_state`` (when there is one) and warn or raise.

    ``stacklevel`` counts as if :func:`warnings.warn` were called by the caller of this function;
    ``advice`` ends the warning (what to try next).

    Raises
    ------
    TrainingDivergedError
        With ``on_divergence="raise"`` (the model is moved back to ``original_device`` first).
    """
    history["diverged"] = True
    history["divergence"] = message
    if best_state is not None:
        model.load_state_dict(best_state)
    if on_divergence == "raise":
        model.to(original_device)
        raise TrainingDivergedError(message + " The best state seen so far was restored in the model.")
    warnings.warn(message + " Training stopped; the best state seen so far (epoch "
                  f"{history['best_epoch']}) was restored. " + advice, RuntimeWarning, stacklevel=stacklevel + 1)


def train_loop(model: torch.nn.Module, train: Windows, val: Windows | None,
               loss_fn: Callable[[torch.nn.Module, Batch], Tensor], *, n_epochs: int, batch_size: int,
               lr: float, lr_end: float | None, grad_clip: float | None, seed: int | None, progress: bool,
               device: str | torch.device, checkpoint: str | os.PathLike | None, checkpoint_every: int,
               resume: bool, on_divergence: str, settings: dict[str, Any],
               val_loss_fn: Callable[[torch.nn.Module, Batch], Tensor] | None = None) -> dict[str, Any]:
    """Train ``model`` in place on ``train`` windows with a pluggable data loss.

    Parameters
    ----------
    model : StateSpaceModel
        Its ``dynamics.regularization()`` is added to every training loss.
    train, val : Windows
        Training and (optional) validation windows. Without validation windows the best state
        is chosen on the training loss of each epoch.
    loss_fn : callable ``(model, Batch) -> scalar Tensor``
        The data term, averaged so that batches of different sizes are comparable.
    n_epochs, batch_size : int
        One epoch visits every training window once, in an order drawn from ``seed`` and the
        epoch number (so a resumed run sees the same order it would have seen).
    lr, lr_end : float
        Adam learning rate, decayed exponentially to ``lr_end`` at the last epoch when given.
    grad_clip : float or None
        Maximum gradient 2-norm.
    device : "cpu", "cuda" or "auto"
    checkpoint : path or None
        Written every ``checkpoint_every`` epochs and at the end; if it exists and ``resume``
        is true, training continues from it.
    on_divergence : {"warn", "raise"}
    settings : dict
        Recorded in the history (must include ``engine``).
    val_loss_fn : callable, optional
        Loss on validation windows (default ``loss_fn``).

    Returns
    -------
    dict
        ``epoch``, ``train_loss``, ``val_loss``, ``regularization``, ``lr`` (per epoch lists),
        ``best_epoch``, ``best_loss``, ``diverged``, ``n_epochs_run``, ``wall_time_s``,
        ``settings``, ``package_version``.
    """
    if on_divergence not in ("warn", "raise"):
        raise ValueError(f"`on_divergence` must be 'warn' or 'raise'; got on_divergence={on_divergence!r}.")
    for name, value in (("n_epochs", n_epochs), ("batch_size", batch_size), ("checkpoint_every", checkpoint_every)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer; got {name}={value!r}.")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"`lr` must be a positive number; got lr={lr!r}.")
    if lr_end is not None and not (isinstance(lr_end, (int, float)) and math.isfinite(lr_end) and lr_end > 0):
        raise ValueError(f"`lr_end` must be a positive number or None; got lr_end={lr_end!r}.")
    if grad_clip is not None and not (isinstance(grad_clip, (int, float)) and grad_clip > 0):
        raise ValueError(f"`grad_clip` must be a positive number or None; got grad_clip={grad_clip!r}.")
    val_loss_fn = loss_fn if val_loss_fn is None else val_loss_fn
    dev = resolve_device(device)
    original_device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    model.to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer("adam", params, lr)
    gamma = lr_decay_factor(lr, lr_end, n_epochs)
    history: dict[str, Any] = {"epoch": [], "train_loss": [], "val_loss": [], "regularization": [], "lr": [],
                               "best_epoch": -1, "best_loss": math.inf, "diverged": False,
                               "settings": dict(settings), "package_version": __version__}
    best_state = state_copy(model)
    start_epoch = 0
    ckpt_path = None if checkpoint is None else Path(checkpoint)
    if ckpt_path is not None and resume and ckpt_path.exists():
        payload = load_checkpoint(ckpt_path, settings.get("engine"))
        restore_training_state(model, optimizer, payload, ckpt_path, original_device)
        best_state = {k: v.to(dev) for k, v in payload["best_state"].items()}
        for key in ("epoch", "train_loss", "val_loss", "regularization", "lr"):
            history[key] = list(payload["history"][key])
        history["best_epoch"] = int(payload["history"]["best_epoch"])
        history["best_loss"] = float(payload["history"]["best_loss"])
        start_epoch = int(payload["next_epoch"])
        history["resumed_from_epoch"] = start_epoch
    val_batches = [] if val is None else [_to_batch(val.subset(np.arange(i, min(i + batch_size, len(val)))), dtype, dev)
                                          for i in range(0, len(val), batch_size)]

    def save(next_epoch: int) -> None:
        if ckpt_path is None:
            return
        save_checkpoint(ckpt_path, {
            "format": "dsident-training-checkpoint", "engine": settings.get("engine"), "next_epoch": next_epoch,
            "model_state": cpu_state(model.state_dict()),
            "optimizer_state": optimizer.state_dict(),
            "best_state": cpu_state(best_state),
            "history": {key: history[key] for key in ("epoch", "train_loss", "val_loss", "regularization", "lr",
                                                       "best_epoch", "best_loss")},
        })

    def diverged(message: str) -> None:
        # stacklevel 3 (counted from here): the warning points at the engine that called train_loop
        handle_divergence(model, message, best_state=best_state, history=history, on_divergence=on_divergence,
                          original_device=original_device,
                          advice="Try a smaller `lr`, a smaller `grad_clip` or shorter `seq_len`.", stacklevel=3)

    from tqdm.auto import tqdm
    t0 = time.perf_counter()
    n_train = len(train)
    bar = tqdm(total=n_epochs, initial=start_epoch, disable=not progress, desc=settings.get("engine", "train"),
               dynamic_ncols=True)
    stop = False
    for epoch in range(start_epoch, n_epochs):
        current_lr = lr * gamma ** epoch
        set_learning_rate(optimizer, current_lr)
        order = np.random.default_rng([0 if seed is None else int(seed), epoch]).permutation(n_train)
        model.train()
        total, count = 0.0, 0
        for i in range(0, n_train, batch_size):
            batch = _to_batch(train.subset(np.sort(order[i: i + batch_size])), dtype, dev)
            data_loss = loss_fn(model, batch)
            reg = model.dynamics.regularization()
            _, divergence = gradient_step(data_loss + reg, optimizer, params, grad_clip, epoch)
            if divergence is not None:
                diverged(divergence)
                stop = True
                break
            n_b = batch.x.shape[0]
            total += float(data_loss.detach()) * n_b
            count += n_b
        if stop:
            break
        train_loss = total / max(count, 1)
        model.eval()
        if val_batches:
            with torch.no_grad():
                vl = sum(float(val_loss_fn(model, b)) * b.x.shape[0] for b in val_batches) / len(val)
        else:
            vl = train_loss
        with torch.no_grad():
            reg_value = float(model.dynamics.regularization())
        history["epoch"].append(epoch)
        history["train_loss"].append(train_loss)
        history["val_loss"].append(vl if val_batches else math.nan)
        history["regularization"].append(reg_value)
        history["lr"].append(current_lr)
        if math.isfinite(vl) and vl < history["best_loss"]:
            history["best_loss"], history["best_epoch"] = vl, epoch
            best_state = state_copy(model)
        elif not math.isfinite(vl):
            diverged(f"The validation loss became {vl} at epoch {epoch}.")
            break
        bar.update(1)
        bar.set_postfix(train=f"{train_loss:.4g}", val=f"{vl:.4g}")
        if (epoch + 1) % checkpoint_every == 0:
            save(epoch + 1)
    bar.close()
    if not history["diverged"]:
        # the checkpoint keeps the *last* state (a resumed run continues from it); the model gets the best
        save(history["epoch"][-1] + 1 if history["epoch"] else start_epoch)
        model.load_state_dict(best_state)
    history["n_epochs_run"] = len(history["epoch"])
    history["wall_time_s"] = time.perf_counter() - t0
    model.to(original_device)
    return history
