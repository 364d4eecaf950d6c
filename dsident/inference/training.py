"""The one epoch/batch loop of the gradient engines (BPTT and teacher forcing).

:func:`train_loop` trains a :class:`~dsident.StateSpaceModel` in place. Per epoch it draws a
:class:`numpy.random.Generator` from ``(seed, epoch)``, asks a *sampler* for that epoch's
batches, and for every batch computes

    loss = loss_fn(model, batch) + model.dynamics.regularization() + Σ penalties(model),

takes one guarded gradient step (gradient-norm clipping; a non-finite loss or gradient is
never applied) and calls ``on_batch``. Every ``eval_every`` epochs an ``evaluate`` hook scores
the model; the state with the lowest score is the one the model holds at the end. What differs
between the engines lives in the hooks:

================  ====================================  =========================================
hook              BPTT (:mod:`.bptt`)                   teacher forcing (:mod:`.teacher_forcing`)
================  ====================================  =========================================
``sampler``       every window once, shuffled           random windows, a fixed number per epoch
``loss_fn``       free-running loss                     forced loss; returns the forced trajectory
``penalties``     none                                  latent L2, condition number of ``B``
``on_batch``      none                                  re-estimates α every k batches (logged)
``evaluate``      validation loss, every epoch          D_stsp of a free run, every ``eval_every``
``engine_state``  none                                  α (stored in checkpoints)
================  ====================================  =========================================

The loop also owns the optimizer (by name), the exponential learning-rate decay, the tqdm bar,
divergence handling (:class:`TrainingDivergedError` or a warning; the best state is kept) and
checkpoints that a later call resumes exactly: model, optimizer, best state, history, epoch
and batch counters, the seed and the hooks' ``engine_state``. All randomness of the loop comes
from generators seeded by ``(seed, epoch)``, so the epoch number and the seed are the whole
random state at an epoch boundary, where checkpoints are written.

Shape legend: ``B`` batch (windows), ``L`` window length (time), ``N`` obs_dim, ``K`` input_dim.
"""
from __future__ import annotations

import copy
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from .._version import __version__
from .windows import Batch

__all__ = ["train_loop", "FitCallback", "TrainingProgress", "Evaluation", "EngineState", "TrainingDivergedError",
           "LOSSES", "check_data_fits_model", "check_continuous_step", "check_int", "check_number", "resolve_device",
           "OPTIMIZERS", "make_optimizer", "lr_decay_factor", "set_learning_rate", "state_copy", "cpu_state",
           "save_checkpoint", "load_checkpoint", "restore_training_state", "gradient_step", "gradient_norm",
           "handle_divergence"]

#: loss names the gradient engines accept ("auto": MSE for Gaussian observations, else the NLL)
LOSSES = ("auto", "mse", "nll")

#: a user's progress callback, shared by every engine: ``callback(index, record, model)`` after
#: each epoch (gradient engines) or step (SVI), with that epoch's / step's numbers and the model
#: in its current state; returning True stops the fit there, keeping the best state
FitCallback = Callable[[int, dict[str, float], Any], "bool | None"]

#: version of the checkpoint layout written by :func:`train_loop`
_CHECKPOINT_VERSION = 2
#: per-epoch history lists every run records
_EPOCH_KEYS = ("epoch", "train_loss", "lr", "grad_norm", "regularization", "skipped_batches", "eval_epoch")
#: how much each ``lr_backoff`` lowers the learning rate
LR_BACKOFF_FACTOR = 0.5


def check_data_fits_model(model: Any, ds: xr.Dataset, *, check_dt: bool | str = True, name: str = "data") -> None:
    """ValueError when ``ds`` has other channel / input counts (or, with ``check_dt``, another
    sampling step) than the StateSpaceModel ``model`` was built for; ``name`` is the argument
    the messages name (e.g. ``"eval_data"``). ``check_dt="continuous"`` checks the step only for
    continuous-time dynamics on regularly sampled data (within ``STEP_RTOL``): a discrete map
    ignores ``dt``, and irregular ``sample_time`` sets every step itself."""
    n_channels = ds.sizes["channel"]
    if n_channels != model.observation.obs_dim:
        raise ValueError(f"`{name}` has {n_channels} channels but the model's observation model has "
                         f"obs_dim={model.observation.obs_dim}.")
    k_data = ds.sizes["input"] if "u" in ds else 0
    k_model = getattr(model.dynamics, "input_dim", 0)
    if k_data != k_model:
        raise ValueError(f"`{name}` has {k_data} input channels (u) but the dynamics take input_dim={k_model}.")
    data_dt = float(ds.attrs.get("dt", 1.0))
    if check_dt == "continuous":
        check_continuous_step(model, ds, name)
        return
    if check_dt and not np.isclose(data_dt, model.dt, rtol=1e-9, atol=0.0):
        raise ValueError(f"`{name}` is sampled at dt={data_dt!r} but the model steps with dt={model.dt!r}; build the "
                         f"model with the data's dt (StateSpaceModel(..., dt=...)) or resample the data.")


def check_continuous_step(model: Any, ds: xr.Dataset, name: str = "data") -> None:
    """ValueError when continuous-time dynamics would be fitted on regularly sampled data at another
    step (beyond ``STEP_RTOL``) than the model's ``dt``, the step its free runs and scores integrate
    at. A discrete map ignores ``dt``, and irregular ``sample_time`` sets every step itself."""
    from ..data.container import steps_agree

    data_dt = float(ds.attrs.get("dt", 1.0))
    if model._continuous_time() and "sample_time" not in ds and not steps_agree(data_dt, float(model.dt)):
        raise ValueError(f"`{name}` is sampled at dt={data_dt!r} but the model's continuous-time dynamics step "
                         f"with dt={float(model.dt)!r}: the fit would learn the dynamics at one step and generate "
                         f"at the other. Build the model with the data's dt (StateSpaceModel(..., dt=...)) or give "
                         f"the data its true step (as_dataset(x, dt=...)).")


def check_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int; ValueError naming ``name`` unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {name}={value!r}.")
    return int(value)


def check_number(name: str, value: Any, *, positive: bool = False, allow_none: bool = False) -> float | None:
    """``value`` as a float; ValueError naming ``name`` unless it is a finite number > 0
    (``positive``) or >= 0, or None when ``allow_none``."""
    if value is None and allow_none:
        return None
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) \
        and math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        kind = "a positive number" if positive else "a number >= 0"
        raise ValueError(f"`{name}` must be {kind}{' or None' if allow_none else ''}; got {name}={value!r}.")
    return float(value)


class TrainingDivergedError(RuntimeError):
    """Raised (with ``on_divergence="raise"``) when the training loss or a gradient is not finite."""


def resolve_device(device: str | torch.device, argname: str = "device") -> torch.device:
    """``"cpu"``, ``"cuda"`` / ``"cuda:i"`` (error without CUDA) or ``"auto"`` (CUDA when available);
    a ``torch.device`` of those kinds is checked the same way. Errors name ``argname``."""
    expected = "'cpu', 'cuda', 'cuda:<index>', 'auto' or a torch.device of those kinds"
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, str):
        try:
            dev = torch.device(device)
        except RuntimeError:           # torch's parser: "Expected one of cpu, cuda, ... device type"
            raise ValueError(f"`{argname}` must be {expected}; got {argname}={device!r}.") from None
    elif isinstance(device, torch.device):
        dev = device
    else:
        raise TypeError(f"`{argname}` must be {expected}; got {argname}={device!r}.")
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"`{argname}` must be {expected}; got {argname}={device!r}.")
    if not torch.cuda.is_available():
        raise ValueError(f"`{argname}={device!r}` was requested but CUDA is not available; use 'cpu' or 'auto'.")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"`{argname}={device!r}` was requested but this machine has {torch.cuda.device_count()} "
                         f"CUDA device(s) (indices 0 to {torch.cuda.device_count() - 1}).")
    return dev


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
    if payload.get("format_version") != _CHECKPOINT_VERSION:
        raise ValueError(f"`checkpoint` file {str(path)!r} has layout version {payload.get('format_version')!r}; "
                         f"this dsident reads version {_CHECKPOINT_VERSION}. Use a new checkpoint path or "
                         "resume=False.")
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
    norm = gradient_norm(params, dtype=None)
    if not torch.isfinite(norm):
        # In float32 the sum of squares overflows once entries pass about 1e19, so finite
        # gradients can read as an infinite norm: measure again in float64 (the common path
        # stays in the gradients' dtype, so fixed-seed fits keep their results)
        norm = gradient_norm(params)
        if not torch.isfinite(norm):
            return None, f"A gradient became non-finite (norm {float(norm)}) at epoch {epoch}."
    if grad_clip is not None:
        # torch.nn.utils.clip_grad_norm_'s coefficient, from the norm measured above
        coef = torch.clamp(grad_clip / (norm + 1e-6), max=1.0)
        for q in params:
            if q.grad is not None:
                q.grad.mul_(coef.to(q.grad))
    optimizer.step()
    return norm, None


def gradient_norm(params: list[Tensor], dtype: torch.dtype | None = torch.float64) -> Tensor:
    """Total 2-norm of the parameters' gradients, as a scalar Tensor on the first gradient's device.

    Parameters
    ----------
    params : list of Tensor
        Parameters; those without a gradient are skipped.
    dtype : torch.dtype or None, default float64
        Precision of the sum of squares. None keeps the gradients' own dtype, which is how
        ``torch.nn.utils.clip_grad_norm_`` measures. In float32 the sum of squares overflows
        once single entries exceed about 1e19, so finite gradients (a chaotic window early in
        training) read as an infinite norm; float64 measures them. NaN or infinite entries
        give a non-finite norm either way.
    """
    grads = [p.grad.detach() for p in params if p.grad is not None]
    if not grads:
        return torch.zeros((), dtype=dtype or torch.get_default_dtype())
    device = grads[0].device
    per_tensor = torch.stack([torch.linalg.vector_norm(g if dtype is None else g.to(dtype)).to(device)
                              for g in grads])
    return torch.linalg.vector_norm(per_tensor)


def handle_divergence(model: torch.nn.Module, message: str, *, best_state: dict[str, Tensor] | None,
                      history: dict[str, Any], on_divergence: str, original_device: torch.device, advice: str,
                      stacklevel: int) -> None:
    """Record a divergence in ``history``, restore ``best_state`` (when there is one) and warn or raise.

    Without a best state the model keeps its parameters: the refused update was never applied,
    so they are the last finite ones.

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
        kept = f"the best state seen so far (epoch {history['best_epoch']}) was restored in the model."
    else:
        kept = "no state had been scored yet, so the model keeps its last finite parameters."
    if on_divergence == "raise":
        model.to(original_device)
        raise TrainingDivergedError(f"{message} Training stopped; {kept}")
    warnings.warn(f"{message} Training stopped; {kept} {advice}", RuntimeWarning, stacklevel=stacklevel + 1)



# ---------------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------------
@dataclass
class TrainingProgress:
    """Where the loop stands; passed to the ``on_batch``, ``on_epoch`` and ``evaluate`` hooks.

    Attributes
    ----------
    epoch : int
        The current epoch (counted from 0 over resumed runs too).
    n_batches_done : int
        Gradient steps taken so far, resumed runs included.
    train_loss : float
        Mean data loss per window of the epoch just finished (NaN during an epoch).
    elapsed_s : float
        Training time so far in seconds, resumed runs included (set before ``evaluate``).
    """

    epoch: int = 0
    n_batches_done: int = 0
    train_loss: float = math.nan
    elapsed_s: float = 0.0


@dataclass
class Evaluation:
    """What an ``evaluate`` hook reports about the model at the end of an epoch.

    Attributes
    ----------
    score : float
        Lower is better; the model ends with the state of the lowest finite score.
    values : dict of str to float
        Appended to the history lists of the same names.
    diverged : str or None
        A message: training stops as diverged (e.g. a non-finite validation loss).
    shown : dict of str to float or str, optional
        What the progress bar shows (default: ``values``); a string is shown as it is (e.g.
        "off grid" where a number would mislead).
    """

    score: float
    values: dict[str, float] = field(default_factory=dict)
    diverged: str | None = None
    shown: dict[str, float | str] | None = None


class EngineState(Protocol):
    """State a hook keeps between batches (teacher forcing: α), saved in checkpoints."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def _record(history: dict[str, Any], values: Mapping[str, Any] | None) -> None:
    """Append every value to the history list of its name (plain Python numbers or strings, e.g. a
    free run's verdict; checkpoint-safe)."""
    for key, value in (values or {}).items():
        if isinstance(value, str):
            history.setdefault(key, []).append(value)
            continue
        number = int(value) if isinstance(value, (int, np.integer)) and not isinstance(value, bool) else float(value)
        history.setdefault(key, []).append(number)


def _evaluations_since_best(history: dict[str, Any]) -> int:
    """Scored epochs after the best one (0 while none is best): what ``rewind_after`` counts."""
    best = history["best_epoch"]
    return 0 if best < 0 else sum(e > best for e in history["eval_epoch"])


def _copy_rest(opt: torch.optim.Optimizer, engine_state: EngineState | None) -> tuple[dict[str, Any], Any]:
    """Copies of the optimizer's and the hooks' state: what training holds besides the weights."""
    return copy.deepcopy(opt.state_dict()), None if engine_state is None else copy.deepcopy(engine_state.state_dict())


def _load_rest(opt: torch.optim.Optimizer, engine_state: EngineState | None, rest: tuple[dict[str, Any], Any]) -> None:
    """Put back what :func:`_copy_rest` took (copied again, so that it can be put back twice)."""
    opt.load_state_dict(copy.deepcopy(rest[0]))
    if engine_state is not None and rest[1] is not None:
        engine_state.load_state_dict(copy.deepcopy(rest[1]))


@dataclass
class _EpochStart:
    """Where training stood at the start of an epoch: what ``lr_backoff`` goes back to."""

    model_state: dict[str, Tensor]
    rest: tuple[dict[str, Any], Any]    #: optimizer and hook state (:func:`_copy_rest`)
    history_lengths: dict[str, int]
    best: tuple[dict[str, Tensor] | None, float, int]
    n_batches_done: int
    since_best: int        #: scored epochs since the best (what `rewinds` count)

    @classmethod
    def take(cls, model: torch.nn.Module, opt: torch.optim.Optimizer, engine_state: EngineState | None,
             history: dict[str, Any], best_state: dict[str, Tensor] | None, best_key: str,
             n_batches_done: int, since_best: int) -> "_EpochStart":
        return cls(state_copy(model), _copy_rest(opt, engine_state),
                   {k: len(v) for k, v in history.items() if isinstance(v, list)},
                   (best_state, history[best_key], history["best_epoch"]), n_batches_done, since_best)

    def restore(self, model: torch.nn.Module, opt: torch.optim.Optimizer, engine_state: EngineState | None,
                history: dict[str, Any], best_key: str) -> tuple[dict[str, Tensor] | None, int]:
        """Put everything back; returns the best state and the batch count of then."""
        model.load_state_dict(self.model_state)
        _load_rest(opt, engine_state, self.rest)
        for key, value in history.items():
            if isinstance(value, list) and key not in ("lr_backoffs", "rewinds"):
                del value[self.history_lengths.get(key, 0):]
        best_state, history[best_key], history["best_epoch"] = self.best
        return best_state, self.n_batches_done


def train_loop(model: torch.nn.Module, *, loss_fn: Callable[[Any, Batch], Tensor | tuple[Tensor, Any]],
               sampler: Callable[[np.random.Generator], Iterable[Batch]], n_epochs: int, lr: float,
               lr_end: float | None = None, optimizer: str = "adam", grad_clip: float | None = None,
               seed: int | None = None, progress: bool = True, device: str | torch.device = "auto",
               checkpoint: str | os.PathLike | None = None, checkpoint_every: int = 1, resume: bool = True,
               on_divergence: str = "warn", skip_nonfinite: int = 0, lr_backoff: int = 0, rewinds: int = 0,
               rewind_after: int = 10, settings: Mapping[str, Any],
               penalties: Callable[[Any], Iterable[Tensor]] | None = None,
               on_batch: Callable[[Any, TrainingProgress, Batch, Any], Mapping[str, float] | None] | None = None,
               on_epoch: Callable[[Any, TrainingProgress], Mapping[str, float] | None] | None = None,
               evaluate: Callable[[Any, TrainingProgress], Evaluation] | None = None, eval_every: int = 1,
               score_name: str = "score", engine_state: EngineState | None = None,
               history_keys: Sequence[str] = (), callback: FitCallback | None = None,
               divergence_advice: str = "Try a smaller `lr` or a smaller `grad_clip`.") -> dict[str, Any]:
    """Train ``model`` in place by gradient steps on the batches of a sampler.

    Parameters
    ----------
    model : StateSpaceModel
        Its ``dynamics.regularization()`` is added to every training loss.
    loss_fn : callable ``(model, batch) -> loss`` or ``-> (loss, aux)``
        The data term of a :class:`~dsident.inference.windows.Batch` (scalar Tensor, averaged
        so that batches of different sizes are comparable); ``aux`` (e.g. the forced
        trajectory) is handed to ``on_batch``.
    sampler : callable ``(rng) -> iterable of Batch``
        The batches of one epoch (tensors on the training ``device``), drawn from ``rng``, a
        :class:`numpy.random.Generator` seeded by ``(seed, epoch)`` (see
        :mod:`dsident.inference.windows`).
    n_epochs : int
        Epochs to train, counted over resumed runs (a run resumed at epoch 3 of 10 trains 7).
    lr, lr_end : float
        Learning rate, decayed exponentially to ``lr_end`` at the last epoch when given.
    optimizer : {"adam", "radam"}
    grad_clip : float or None
        Maximum gradient 2-norm.
    seed : int or None
        Seeds the epoch generators (None behaves as 0).
    progress : bool
        Show a tqdm bar (training loss, ``on_epoch`` values, the last evaluation).
    device : "cpu", "cuda", "cuda:i" or "auto"
        The model is moved there for training and back at the end.
    checkpoint : path or None
        Written every ``checkpoint_every`` epochs and at the end; if it exists and ``resume``
        is true, training continues from it (written with another ``seed``: ValueError).
    on_divergence : {"warn", "raise"}
        A non-finite loss or gradient (never applied) stops training and restores the best
        state; then a ``RuntimeWarning`` or :class:`TrainingDivergedError`.
    skip_nonfinite : int, default 0
        Batches with a non-finite loss or gradient that may follow one another before that
        happens: each is skipped without an update (counted per epoch in
        ``history["skipped_batches"]``, and reported in a ``RuntimeWarning`` at the end), and
        training goes on with the next batch. One window that a still untrained model cannot
        follow then costs that window, not the fit. 0: the first one stops training.
    lr_backoff : int, default 0
        Times a fit may step back instead of stopping on such a batch (after ``skip_nonfinite``'s
        allowance): the model, optimizer, hook state, best state and history return to where
        they were at the start of the epoch *before* the failing one (a model that an epoch made
        unstable fails on its first batches of the next), the learning rate is multiplied by
        :data:`LR_BACKOFF_FACTOR` (0.5) for the rest of the fit, and training goes on from there
        on the same windows. Each step back is listed in ``history["lr_backoffs"]`` (the epoch
        that failed) and reported in a ``RuntimeWarning``; when none is left, the next failure
        stops training as above.
    rewinds : int, default 0
        Times a fit may go back to its best scored state when ``rewind_after`` scored epochs in a
        row have not beaten it: the model, optimizer and hook state return to where they were
        at the best evaluation, the learning rate is multiplied by :data:`LR_BACKOFF_FACTOR`
        for the rest of the fit, and training goes on from the current epoch (the schedule and
        the epochs' windows carry on from there; they are not replayed). For fits whose free runs can
        fall, mid-training, onto a wrong attractor they then never leave (a fixed point, tonic
        spiking) while the learning rate is still high. Each rewind is listed in
        ``history["rewinds"]`` (the epoch after which it happened). Needs ``evaluate``.
    rewind_after : int, default 10
        Scored epochs (evaluations, not epochs) without a new best before a rewind.
    settings : dict
        Recorded in the history; ``settings["engine"]`` names the engine (checkpoints of
        another engine are refused).
    penalties : callable ``(model) -> iterable of scalar Tensors``, optional
        Further terms added to the loss, in order, after the regularization.
    on_batch : callable ``(model, progress, batch, aux) -> dict or None``, optional
        Called after every applied update (``progress.n_batches_done`` counts it); returned
        values are appended to the history lists of their names.
    on_epoch : callable ``(model, progress) -> dict or None``, optional
        Called at the end of every epoch (``progress.train_loss`` set); values recorded likewise.
    evaluate : callable ``(model, progress) -> Evaluation``, optional
        Called in eval mode every ``eval_every`` epochs and after the last one (0: never).
        Without it no state is scored and the model keeps its last state.
    score_name : str
        The best score is recorded as ``history["best_" + score_name]``.
    engine_state : object with ``state_dict()`` / ``load_state_dict(state)``, optional
        State the hooks keep across batches, saved in checkpoints and restored on resume.
    history_keys : sequence of str
        History lists the hooks fill (present, maybe empty, in every history and checkpoint).
    callback : callable ``(epoch, record, model) -> bool or None``, optional
        The user's hook (:data:`FitCallback`), called at the end of every epoch, after the
        evaluation, with that epoch's numbers (``epoch``, ``train_loss``, ``lr``, ``grad_norm``,
        the hooks' values and, on a scored epoch, the evaluation's) and the model in its current
        state (in eval mode; copy what you keep). Returning True stops training after this
        epoch: the best state is kept and ``history["stopped_by_callback"]`` is that epoch.
    divergence_advice : str
        Ends the divergence warning.

    Returns
    -------
    dict
        Per epoch: ``epoch``, ``train_loss``, ``lr``, ``grad_norm`` (mean pre-clipping norm),
        ``regularization``; ``eval_epoch`` per evaluation; the hooks' lists; ``best_epoch``
        (-1: none), ``best_<score_name>``, ``diverged`` (and ``divergence``, the message),
        ``n_epochs_run``, ``n_batches_done``, ``wall_time_s`` (this call), ``settings``,
        ``package_version``, ``lr_backoffs``, ``rewinds``; ``resumed_from_epoch`` after a resume and
        ``stopped_by_callback`` when the callback stopped it.
    """
    if on_divergence not in ("warn", "raise"):
        raise ValueError(f"`on_divergence` must be 'warn' or 'raise'; got on_divergence={on_divergence!r}.")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {tuple(OPTIMIZERS)}; got optimizer={optimizer!r}.")
    n_epochs = check_int("n_epochs", n_epochs)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every)
    eval_every = check_int("eval_every", eval_every, minimum=0)
    skip_nonfinite = check_int("skip_nonfinite", skip_nonfinite, minimum=0)
    lr_backoff = check_int("lr_backoff", lr_backoff, minimum=0)
    rewinds = check_int("rewinds", rewinds, minimum=0)
    rewind_after = check_int("rewind_after", rewind_after)
    if rewinds and (evaluate is None or eval_every == 0):
        raise ValueError(f"`rewinds` ({rewinds}) go back to the best scored state, so they need scored epochs; "
                         f"got evaluate={'None' if evaluate is None else 'given'}, eval_every={eval_every}.")
    lr = check_number("lr", lr, positive=True)
    lr_end = check_number("lr_end", lr_end, positive=True, allow_none=True)
    grad_clip = check_number("grad_clip", grad_clip, positive=True, allow_none=True)
    engine = settings.get("engine")
    seed = None if seed is None else int(seed)       # a plain int in the checkpoint
    dev = resolve_device(device)
    original_device = next(model.parameters()).device
    model.to(dev)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(optimizer, params, lr)
    gamma = lr_decay_factor(lr, lr_end, n_epochs)
    best_key = f"best_{score_name}"
    history: dict[str, Any] = {key: [] for key in (*_EPOCH_KEYS, *history_keys, "lr_backoffs", "rewinds")}
    history.update({"best_epoch": -1, best_key: math.inf, "diverged": False, "settings": dict(settings),
                    "package_version": __version__})
    lr_scale = 1.0
    state = TrainingProgress()
    best_state: dict[str, Tensor] | None = None
    # the optimizer and hook state at the best evaluation, kept for `rewinds`
    best_rest: tuple[dict[str, Any], Any] | None = None
    start_epoch, elapsed_before, since_best_saved = 0, 0.0, None
    ckpt_path = None if checkpoint is None else Path(checkpoint)
    if ckpt_path is not None and resume and ckpt_path.exists():
        payload = load_checkpoint(ckpt_path, engine)
        if payload["seed"] != seed:
            model.to(original_device)
            raise ValueError(f"`checkpoint` file {str(ckpt_path)!r} was written with seed={payload['seed']!r}, "
                             f"not seed={seed!r}; an exact resume needs the same seed (or use resume=False).")
        restore_training_state(model, opt, payload, ckpt_path, original_device)
        if payload["best_state"]:
            best_state = {k: v.to(dev) for k, v in payload["best_state"].items()}
        history.update({key: list(values) for key, values in payload["history"].items() if isinstance(values, list)})
        if "skipped_batches" not in payload["history"]:    # a checkpoint written before skipping existed
            history["skipped_batches"] = [0] * len(history["epoch"])
        history.setdefault("lr_backoffs", [])
        history.setdefault("rewinds", [])
        best_rest = payload.get("best_rest")
        since_best_saved = payload.get("since_best")
        lr_scale = float(payload.get("lr_scale", 1.0))
        history["best_epoch"] = int(payload["history"]["best_epoch"])
        history[best_key] = float(payload["history"][best_key])
        if engine_state is not None:
            engine_state.load_state_dict(payload["engine_state"])
        start_epoch, state.n_batches_done = int(payload["next_epoch"]), int(payload["n_batches_done"])
        elapsed_before = float(payload["elapsed_s"])
        history["resumed_from_epoch"] = start_epoch

    def save(next_epoch: int) -> None:
        if ckpt_path is None:
            return
        lists = {key: value for key, value in history.items() if isinstance(value, list)}
        save_checkpoint(ckpt_path, {
            "format": "dsident-training-checkpoint", "format_version": _CHECKPOINT_VERSION, "engine": engine,
            "seed": seed, "next_epoch": next_epoch, "n_batches_done": state.n_batches_done, "lr_scale": lr_scale,
            "elapsed_s": time.perf_counter() - t0 + elapsed_before,
            "model_state": cpu_state(model.state_dict()), "optimizer_state": opt.state_dict(),
            "best_state": {} if best_state is None else cpu_state(best_state),
            # what a rewind restores besides the weights (None unless `rewinds` asked for it)
            "best_rest": best_rest, "since_best": since_best,
            "engine_state": None if engine_state is None else engine_state.state_dict(),
            "history": {**lists, "best_epoch": history["best_epoch"], best_key: history[best_key]},
            "settings": {k: (v if isinstance(v, (int, float, str, type(None))) else str(v))
                         for k, v in settings.items()},
        })

    def diverged(message: str) -> None:
        # stacklevel 4 (counted from here): the warning points at the code that called the engine
        handle_divergence(model, message, best_state=best_state, history=history, on_divergence=on_divergence,
                          original_device=original_device, advice=divergence_advice, stacklevel=4)

    from tqdm.auto import tqdm
    t0 = time.perf_counter()
    bar = tqdm(total=n_epochs, initial=start_epoch, disable=not progress, desc=engine or "train", dynamic_ncols=True)
    in_a_row = 0      # refused batches in a row (skip_nonfinite)
    # scored epochs since the best one, and the optimizer / hook state at the best (rewinds)
    # (a rewind restarts the count, so a resumed run takes it from the checkpoint when it is there)
    since_best = _evaluations_since_best(history) if since_best_saved is None else int(since_best_saved)
    # the states at the start of the last two epochs, for lr_backoff
    starts: dict[int, _EpochStart] = {}
    epoch = start_epoch
    while epoch < n_epochs:
        if lr_backoff > len(history["lr_backoffs"]):
            starts = {e: v for e, v in starts.items() if e == epoch - 1}
            starts[epoch] = _EpochStart.take(model, opt, engine_state, history, best_state, best_key,
                                             state.n_batches_done, since_best)
        state.epoch, state.train_loss = epoch, math.nan
        current_lr = lr * gamma ** epoch * lr_scale
        set_learning_rate(opt, current_lr)
        rng = np.random.default_rng([0 if seed is None else seed, epoch])
        model.train()
        total, count, norms, divergence, skipped = 0.0, 0, [], None, 0
        for batch in sampler(rng):
            out = loss_fn(model, batch)
            data_loss, aux = out if isinstance(out, tuple) else (out, None)
            loss = data_loss + model.dynamics.regularization()
            for term in (() if penalties is None else penalties(model)):
                loss = loss + term
            norm, divergence = gradient_step(loss, opt, params, grad_clip, epoch)
            if divergence is not None and in_a_row < skip_nonfinite:
                skipped, in_a_row, divergence = skipped + 1, in_a_row + 1, None
                continue
            if divergence is not None:
                break
            in_a_row = 0
            state.n_batches_done += 1
            total += float(data_loss.detach()) * batch.x.shape[0]
            count += batch.x.shape[0]
            norms.append(float(norm))
            if on_batch is not None:
                _record(history, on_batch(model, state, batch, aux))
        if divergence is not None and lr_backoff > len(history["lr_backoffs"]):
            back_to, best_before = min(starts), history["best_epoch"]
            best_state, state.n_batches_done = starts[back_to].restore(model, opt, engine_state, history, best_key)
            history["lr_backoffs"].append(epoch)
            since_best = starts[back_to].since_best
            if history["best_epoch"] != best_before:
                best_rest = None       # the optimizer state kept for a rewind belonged to a best now undone
            lr_scale *= LR_BACKOFF_FACTOR
            in_a_row, epoch = 0, back_to
            bar.n = back_to
            bar.refresh()
            continue
        if divergence is not None:
            diverged(divergence)
            break
        state.train_loss = total / count if count else math.nan
        model.eval()
        with torch.no_grad():
            reg_value = float(model.dynamics.regularization())
        _record(history, {"epoch": epoch, "train_loss": state.train_loss, "lr": current_lr,
                          "grad_norm": float(np.mean(norms)) if norms else math.nan, "regularization": reg_value,
                          "skipped_batches": skipped})
        epoch_values = {} if on_epoch is None else dict(on_epoch(model, state) or {})
        _record(history, epoch_values)
        shown = {"loss": state.train_loss, **epoch_values}
        record = {"epoch": epoch, "train_loss": state.train_loss, "lr": current_lr,
                  "grad_norm": history["grad_norm"][-1], **epoch_values}
        if evaluate is not None and eval_every > 0 and ((epoch + 1) % eval_every == 0 or epoch + 1 == n_epochs):
            state.elapsed_s = time.perf_counter() - t0 + elapsed_before
            result = evaluate(model, state)
            _record(history, {"eval_epoch": epoch, **result.values})
            shown.update(result.values if result.shown is None else result.shown)
            record.update(result.values)
            if result.diverged is not None:
                diverged(result.diverged)
                break
            if math.isfinite(result.score) and result.score < history[best_key]:
                history[best_key], history["best_epoch"] = float(result.score), epoch
                best_state = state_copy(model)
                since_best = 0
                if rewinds:
                    best_rest = _copy_rest(opt, engine_state)
            else:
                since_best += 1
            if since_best >= rewind_after and best_state is not None and rewinds > len(history["rewinds"]):
                model.load_state_dict(best_state)
                if best_rest is not None:     # None from an older checkpoint: the optimizer carries on
                    _load_rest(opt, engine_state, best_rest)
                history["rewinds"].append(epoch)
                lr_scale *= LR_BACKOFF_FACTOR
                since_best = 0
                shown["rewound"] = f"to epoch {history['best_epoch']}"
        bar.update(1)
        bar.set_postfix({k: v if isinstance(v, str) else f"{v:.4g}" for k, v in shown.items()})
        stop = callback is not None and callback(epoch, record, model) is True
        if (epoch + 1) % checkpoint_every == 0:
            save(epoch + 1)
        if stop:
            history["stopped_by_callback"] = epoch
            break
        epoch += 1
    bar.close()
    if not history["diverged"]:
        # the checkpoint keeps the *last* state (a resumed run continues from it); the model gets the best
        save(history["epoch"][-1] + 1 if history["epoch"] else start_epoch)
        if best_state is not None:
            model.load_state_dict(best_state)
    if history["lr_backoffs"]:
        warnings.warn(f"training met a non-finite loss or gradient at epoch(s) {history['lr_backoffs']} and went "
                      f"back one epoch each time with the learning rate times {LR_BACKOFF_FACTOR} (now "
                      f"{lr_scale:g} × the schedule; lr_backoff={lr_backoff}, history['lr_backoffs']).",
                      RuntimeWarning, stacklevel=3)
    n_skipped = int(sum(history["skipped_batches"]))
    if n_skipped:
        warnings.warn(f"{n_skipped} training batch(es) had a non-finite loss or gradient and were skipped without "
                      f"an update (skip_nonfinite={skip_nonfinite}; per epoch in history['skipped_batches']).",
                      RuntimeWarning, stacklevel=3)
    history["n_epochs_run"] = len(history["epoch"])
    history["n_batches_done"] = state.n_batches_done
    history["wall_time_s"] = time.perf_counter() - t0
    model.to(original_device)
    return history
