"""``fit_svi``: stochastic variational inference for any :class:`~dsident.StateSpaceModel`.

The engine maximises the evidence lower bound

.. math::

    \\mathcal{L}(\\theta, \\phi) = \\mathbb{E}_{q_\\phi(z | x)}\\big[\\log p_\\theta(x | z)\\big]
        - \\beta\\,\\mathrm{KL}\\big(q_\\phi(z | x) \\,\\|\\, p_\\theta(z)\\big)

jointly over the model's parameters θ (dynamics, observation, process noise, initial-state
prior) and the guide's φ, with reparameterized single-sample gradients (pyro's ``Trace_ELBO``)
on random windows of the recordings. β ramps from ``kl_start`` to 1 over ``kl_anneal`` steps
(KL annealing through ``poutine.scale``). The loss minimised is the negative ELBO per valid
time step plus ``dynamics.regularization()``, so learning rates do not depend on the window
or batch size.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyro
import torch
import xarray as xr
from pyro.infer import Trace_ELBO
from tqdm.auto import tqdm

from ..._version import __version__
from ...data.container import STEP_RTOL, as_dataset, steps_agree
from ...data.preprocessing import split_in_time
from ...model import StateSpaceModel
from ..training import FitCallback, check_continuous_step, resolve_device
from . import checkpoint as ckpt
from .guides import GUIDES, Guide, make_guide
from .pyro_model import Batch, svi_model
from .smoother import SVISmoother, check_n_samples, moments_minimum
from .windows import TrialData, prepare_trials, random_windows, tiling_windows

#: learning-rate schedules: factor of the initial rate as a function of (step, n_steps, final/initial).
LR_SCHEDULES: dict[str, Callable[[int, int, float], float]] = {
    "constant": lambda step, n, f: 1.0,
    "exponential": lambda step, n, f: f ** min(step / max(n, 1), 1.0),
    "cosine": lambda step, n, f: f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * min(step / max(n, 1), 1.0))),
}
#: consecutive non-finite losses after which a fit is declared diverged.
MAX_BAD_STEPS = 5
#: validation windows used at most per evaluation (evenly spaced over the tiling).
MAX_VALIDATION_WINDOWS = 256
#: settings that must agree between a checkpoint and the fit that resumes from it.
_RESUME_KEYS = ("guide", "guide_config", "window", "batch_size", "n_particles", "learn_model", "seed")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {name}={value!r}.")
    return int(value)


def _check_float(name: str, value: Any, low: float, high: float = math.inf, *, open_low: bool = True) -> float:
    ok = isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)
    ok = ok and math.isfinite(float(value)) and (float(value) > low if open_low else float(value) >= low)
    if not ok or float(value) > high:
        bracket = "(" if open_low else "["
        raise ValueError(f"`{name}` must be a number in {bracket}{low}, {high}]; got {name}={value!r}.")
    return float(value)


def _kl_scale(step: int, kl_anneal: int, kl_start: float) -> float:
    """β at ``step``: linear from ``kl_start`` to 1 over ``kl_anneal`` steps (1 when 0)."""
    if kl_anneal <= 0:
        return 1.0
    return kl_start + (1.0 - kl_start) * min(step / kl_anneal, 1.0)


def _elbo_sum(model: StateSpaceModel, guide: Guide, batch: Batch, kl_scale: float,
              generator: torch.Generator) -> torch.Tensor:
    """ELBO of a batch, summed over its windows (one reparameterized sample per window).

    A NaN anywhere (parameters blown up by a too large step, a vector field that overflows)
    gives a NaN ELBO, which the training loop skips and reports as a divergence. Pyro's
    distribution checks are off here: they would raise on the NaN parameters of a site
    (``Expected parameter log_factor ... to satisfy the constraint Real()``) before the loop
    could see it. The data were checked at the door, so the checks have nothing else to find.
    """
    with warnings.catch_warnings(), pyro.validation_enabled(False):
        # a non-finite ELBO is detected and reported by the training loop, once, in our words
        warnings.filterwarnings("ignore", message="Encountered NaN", category=UserWarning)
        loss = Trace_ELBO(max_plate_nesting=1).differentiable_loss(
            lambda: svi_model(model, batch, kl_scale),
            lambda: guide.pyro_guide(batch, kl_scale, generator),
        )
    return -loss


def _repeat(batch: Batch, n: int) -> Batch:
    """The batch stacked ``n`` times (independent particles of the same windows)."""
    if n == 1:
        return batch
    rep = lambda t: None if t is None else t.repeat(n, *([1] * (t.dim() - 1)))  # noqa: E731
    dt = batch.dt if not isinstance(batch.dt, torch.Tensor) else rep(batch.dt)
    return Batch(x=rep(batch.x), mask=rep(batch.mask), time_mask=rep(batch.time_mask), u=rep(batch.u), dt=dt)


def _evaluate(model: StateSpaceModel, guide: Guide, data: TrialData, windows: tuple[np.ndarray, np.ndarray],
              window: int, seed: int, chunk: int) -> float:
    """Validation ELBO per valid time step on fixed windows with fixed noise (β = 1)."""
    device = data.x.device
    gen = torch.Generator(device=device).manual_seed(seed)
    total, steps = 0.0, 0.0
    trials, starts = windows
    with torch.no_grad():
        for lo in range(0, len(trials), chunk):
            batch = data.batch(trials[lo:lo + chunk], starts[lo:lo + chunk], window)
            total += float(_elbo_sum(model, guide, batch, 1.0, gen))
            steps += float(batch.n_time_steps)
    return total / max(steps, 1.0)


def _encoder_standardisation(data: TrialData) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and standard deviation of the observed entries (for the encoder input)."""
    w = data.mask.to(data.x.dtype)
    n = w.sum((0, 1)).clamp(min=1.0)
    mean = (data.x * w).sum((0, 1)) / n
    var = (((data.x - mean) * w) ** 2).sum((0, 1)) / n
    return mean, var.sqrt().clamp(min=1e-6)


def _check_validation_matches(train: xr.Dataset, val: xr.Dataset) -> None:
    """ValueError when a validation Dataset has other channels or, both sampled regularly, another
    step than the training data: its ELBO would be the prior integrated at the wrong step."""
    names, val_names = [str(c) for c in train["channel"].values], [str(c) for c in val["channel"].values]
    if val_names != names:
        raise ValueError(f"`validation` has the channels {val_names} but the training data {names}; give the "
                         "validation recordings the same channels in the same order.")
    if "sample_time" in train or "sample_time" in val:
        return          # per-sample times set every step; the nominal dt is only a median
    dt, val_dt = float(train.attrs["dt"]), float(val.attrs["dt"])
    if not steps_agree(val_dt, dt):
        raise ValueError(f"`validation` is sampled at dt={val_dt!r} but the training data at dt={dt!r} (they must "
                         f"agree within {STEP_RTOL:.0%}); build both with the same dt, in the same unit "
                         "(as_dataset(x_val, dt=...)).")


def fit_svi(
    model: StateSpaceModel,
    data: xr.Dataset,
    *,
    seed: int | None = None,
    progress: bool = True,
    device: str = "auto",
    guide: str = "markov",
    window: int = 200,
    batch_size: int = 32,
    n_steps: int = 2000,
    lr: float = 3e-3,
    lr_schedule: str = "exponential",
    lr_final: float | None = None,
    kl_anneal: int | None = None,
    kl_start: float = 0.1,
    clip_norm: float | None = 10.0,
    n_particles: int = 1,
    validation: xr.Dataset | float | None = None,
    eval_every: int = 50,
    patience: int | None = 10,
    checkpoint: str | Path | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    learn_model: bool = True,
    hidden_dim: int = 64,
    combiner_dim: int = 64,
    smoother_samples: int = 64,
    callback: FitCallback | None = None,
    n_threads: int | None = None,
) -> dict[str, Any]:
    """Fit a state-space model by stochastic variational inference (pyro).

    Updates ``model`` in place, keeps the state with the best validation ELBO, and attaches
    ``model.smoother_`` (an :class:`~dsident.inference.svi.smoother.SVISmoother`) whose call on a
    dataset returns the posterior means ``z(trial, time, latent)`` and variances ``z_var``.

    Parameters
    ----------
    model : StateSpaceModel
        Any dynamics × observation model; ``dynamics.step`` must accept batches (B, M).
    data : xarray.Dataset
        ``x(trial, time, channel)`` (NaN = missing, masked), optional ``u(trial, time, input)``,
        ``length(trial)``; ``attrs['dt']`` in the unit of the time coordinate, or per-sample
        times ``sample_time(trial, time)`` for irregular sampling (each transition then gets its
        own step). Anything :func:`dsident.data.as_dataset` accepts also works.
    seed : int, optional
        Seeds the guide's initial weights, the window draws and the sampling noise; the fit is
        deterministic on a given device. None draws one (recorded in the history).
    progress : bool
        Show a tqdm bar with the training and validation ELBO.
    device : {"auto", "cpu", "cuda"}
        Where to fit; ``"auto"`` takes the GPU when torch sees one. The model is moved back to
        the device it came from afterwards.
    guide : {"markov", "mean-field"}
        Structured Markov guide (bidirectional GRU + combiner) or mean-field Gaussian guide.
    window : int
        Length of the training windows, in time steps (cut to the longest trial).
    batch_size : int
        Windows per step.
    n_steps : int
        Optimisation steps (total, counting those before a resume).
    lr : float
        Initial Adam learning rate.
    lr_schedule : {"exponential", "cosine", "constant"}
        Decay of the learning rate from ``lr`` to ``lr_final`` over ``n_steps``.
    lr_final : float, optional
        Final learning rate; default ``lr / 10``.
    kl_anneal : int, optional
        Steps over which the KL weight β rises linearly from ``kl_start`` to 1; default
        ``n_steps // 10`` (a resumed fit: its checkpoint's, whatever ``n_steps`` says now);
        0 disables annealing.
    kl_start : float
        β at step 0, in (0, 1].
    clip_norm : float or None
        Gradients are clipped to this global norm (None: no clipping).
    n_particles : int
        Independent samples of every window per step (averaged).
    validation : xarray.Dataset, float or None
        Data for the validation ELBO: a dataset, a fraction of every trial held out at its end,
        or None (the training data's fixed tiling; then early stopping guards against noise and
        divergence, not over-fitting).
    eval_every : int
        Steps between validation evaluations (best-state selection and early stopping).
    patience : int or None
        Stop after this many evaluations without improvement (None: never stop early).
    checkpoint : path, optional
        Directory for ``last.pt`` and ``best.pt``; written atomically.
    checkpoint_every : int, optional
        Steps between ``last.pt`` writes; default ``eval_every``. ``last.pt`` is also written at
        the end of the fit.
    resume : bool
        Continue from ``checkpoint/last.pt`` (step, model, guide, optimizer, schedule, random
        states, history and best state) when it exists.
    learn_model : bool
        False trains the guide only (amortized inference for a fixed model).
    hidden_dim, combiner_dim : int
        Encoder GRU units per direction; width of the Markov guide's combiner.
    smoother_samples : int
        Paths per trial the attached smoother draws to estimate marginal moments (at least 2
        with the Markov guide: one path has no variance).
    callback : callable, optional
        ``callback(step, record, model)`` after every step, with the record of that step (a
        dict of numbers) and the model being trained (its current, not its best, state). Return
        True to stop the fit there (the best state is kept, ``stop_reason`` is ``"callback"``);
        an exception it raises also stops the fit (checkpoints already written stay valid).
    n_threads : int, optional
        CPU threads torch may use during the fit (restored afterwards); None leaves torch's
        setting alone. On a shared or busy machine ``1`` is often many times faster: the
        engine's operations are small and intra-op threads then mostly wait for each other.

    Returns
    -------
    dict
        The history: per step ``step``, ``loss``, ``elbo`` (β-weighted ELBO per valid time step,
        nats), ``kl_scale``, ``lr``, ``grad_norm``; per evaluation ``val_step``, ``val_elbo``
        (nats per time step, β = 1); ``best_step``, ``best_val_elbo``, ``stop_reason``,
        ``n_steps_run``, ``resumed_from``, ``elapsed_s`` and ``settings`` (every option, the seed,
        the device and the package version).

    Raises
    ------
    ValueError
        For an unknown guide, schedule or device, inconsistent data, a bad option value, or a
        checkpoint that does not belong to this fit.

    Warns
    -----
    RuntimeWarning
        When the loss stays non-finite for several steps (the fit stops and keeps its best state).
    """
    if n_threads is None:
        return _fit(**locals())
    n_threads = _check_int("n_threads", n_threads, 1)
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        return _fit(**locals())
    finally:
        torch.set_num_threads(previous)


def _fit(model: StateSpaceModel, data: xr.Dataset, *, seed: int | None, progress: bool, device: str, guide: str,
         window: int, batch_size: int, n_steps: int, lr: float, lr_schedule: str, lr_final: float | None,
         kl_anneal: int | None, kl_start: float, clip_norm: float | None, n_particles: int,
         validation: xr.Dataset | float | None, eval_every: int, patience: int | None,
         checkpoint: str | Path | None, checkpoint_every: int | None, resume: bool, learn_model: bool,
         hidden_dim: int, combiner_dim: int, smoother_samples: int,
         callback: FitCallback | None, **_: Any) -> dict[str, Any]:
    """The body of :func:`fit_svi` (same arguments)."""
    # -- options, checked at the door ------------------------------------------------------
    if guide not in GUIDES:
        raise ValueError(f"`guide` must be one of {sorted(GUIDES)}; got guide={guide!r}.")
    if lr_schedule not in LR_SCHEDULES:
        raise ValueError(f"`lr_schedule` must be one of {sorted(LR_SCHEDULES)}; got lr_schedule={lr_schedule!r}.")
    window = _check_int("window", window, 2)
    batch_size = _check_int("batch_size", batch_size, 1)
    n_steps = _check_int("n_steps", n_steps, 1)
    n_particles = _check_int("n_particles", n_particles, 1)
    eval_every = _check_int("eval_every", eval_every, 1)
    hidden_dim = _check_int("hidden_dim", hidden_dim, 1)
    combiner_dim = _check_int("combiner_dim", combiner_dim, 1)
    smoother_samples = check_n_samples("smoother_samples", smoother_samples, moments_minimum(guide))
    lr = _check_float("lr", lr, 0.0)
    lr_final = lr / 10.0 if lr_final is None else _check_float("lr_final", lr_final, 0.0)
    kl_start = _check_float("kl_start", kl_start, 0.0, 1.0)
    kl_anneal = None if kl_anneal is None else _check_int("kl_anneal", kl_anneal, 0)    # default: in _train
    if clip_norm is not None:
        clip_norm = _check_float("clip_norm", clip_norm, 0.0)
    if patience is not None:
        patience = _check_int("patience", patience, 1)
    checkpoint_every = eval_every if checkpoint_every is None else _check_int("checkpoint_every", checkpoint_every, 1)
    if resume and checkpoint is None:
        raise ValueError("`resume=True` needs `checkpoint`, the directory of the fit to resume.")
    if not isinstance(model, StateSpaceModel):
        raise TypeError(f"`model` must be a dsident StateSpaceModel; got {type(model).__name__}.")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    seed = _check_int("seed", seed, 0)
    dev = resolve_device(device)

    # -- data ---------------------------------------------------------------------------------
    ds = as_dataset(data)
    if isinstance(validation, (float, int)) and not isinstance(validation, bool):
        fraction = _check_float("validation", validation, 0.0, 1.0)
        ds, val_ds = split_in_time(ds, fraction, argname="validation")
    elif validation is None or isinstance(validation, xr.Dataset):
        val_ds = validation
    else:
        raise TypeError(f"`validation` must be an xarray Dataset, a fraction in (0, 1) or None; "
                        f"got {type(validation).__name__}.")
    if val_ds is not None:
        val_ds = as_dataset(val_ds)
        _check_validation_matches(ds, val_ds)
    check_continuous_step(model, ds)
    first = next(model.parameters())
    home, dtype = first.device, first.dtype
    train = prepare_trials(ds, model, device=dev, dtype=dtype)
    val = train if val_ds is None else prepare_trials(val_ds, model, device=dev, dtype=dtype)
    window = min(window, int(train.length.max()))

    # -- guide, optimiser, schedules, random streams ---------------------------------------------
    seeds = np.random.SeedSequence(seed).generate_state(4)
    x_mean, x_scale = _encoder_standardisation(train)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seeds[0]))
        q = make_guide(guide, latent_dim=model.latent_dim, obs_dim=model.observation.obs_dim,
                       input_dim=int(getattr(model.dynamics, "input_dim", 0) or 0), hidden_dim=hidden_dim,
                       combiner_dim=combiner_dim, x_mean=x_mean.cpu(), x_scale=x_scale.cpu())
    q.start_scales_at(model.process_var.detach().sqrt().cpu(), (0.5 * model.log_initial_var.detach()).exp().cpu())
    q.to(device=dev, dtype=dtype)
    model.to(dev)
    try:
        return _train(model, q, train, val, dev=dev, dtype=dtype, seed=seed, progress=progress,
                      guide=guide, window=window, batch_size=batch_size, n_steps=n_steps, lr=lr,
                      lr_schedule=lr_schedule, lr_final=lr_final, kl_anneal=kl_anneal, kl_start=kl_start,
                      clip_norm=clip_norm, n_particles=n_particles, validation=validation, eval_every=eval_every,
                      patience=patience, checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                      learn_model=learn_model, smoother_samples=smoother_samples, callback=callback)
    finally:
        model.to(home)         # whatever happened, the model goes back where it came from
        q.to(home)


def _train(model: StateSpaceModel, q: Guide, train: TrialData, val: TrialData, *,
           dev: torch.device, dtype: torch.dtype, seed: int, progress: bool, guide: str, window: int,
           batch_size: int, n_steps: int, lr: float, lr_schedule: str, lr_final: float, kl_anneal: int | None,
           kl_start: float, clip_norm: float | None, n_particles: int, validation: Any, eval_every: int,
           patience: int | None, checkpoint: Any, checkpoint_every: int, resume: bool, learn_model: bool,
           smoother_samples: int, callback: FitCallback | None) -> dict[str, Any]:
    """The optimisation loop of :func:`fit_svi`, on the fitting device (arguments already checked)."""
    # the default ramp is a tenth of the fit; a resumed fit keeps its checkpoint's ramp (below),
    # or a larger n_steps would lower β again in the middle of the fit
    kl_default = kl_anneal is None
    kl_anneal = n_steps // 10 if kl_anneal is None else kl_anneal
    seeds = np.random.SeedSequence(seed).generate_state(4)
    val_windows = tiling_windows(val, window, MAX_VALIDATION_WINDOWS)
    params = [p for p in q.parameters() if p.requires_grad]
    if learn_model:
        params += [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=lr)
    ratio = lr_final / lr
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: LR_SCHEDULES[lr_schedule](s, n_steps, ratio))
    window_gen = torch.Generator().manual_seed(int(seeds[1]))
    noise_gen = torch.Generator(device=dev).manual_seed(int(seeds[2]))
    val_seed = int(seeds[3])

    settings = {
        "engine": "svi", "guide": guide, "guide_config": q.config(), "window": window,
        "batch_size": batch_size, "n_steps": n_steps, "lr": lr, "lr_schedule": lr_schedule,
        "lr_final": lr_final, "kl_anneal": kl_anneal, "kl_start": kl_start, "clip_norm": clip_norm,
        "n_particles": n_particles, "validation": ("none" if validation is None else
                                                   "dataset" if isinstance(validation, xr.Dataset) else validation),
        "eval_every": eval_every, "patience": patience, "learn_model": learn_model, "seed": seed,
        "device": str(dev), "dtype": str(dtype).replace("torch.", ""), "dsident_version": __version__,
    }
    history: dict[str, Any] = {
        "step": [], "loss": [], "elbo": [], "kl_scale": [], "lr": [], "grad_norm": [],
        "val_step": [], "val_elbo": [],
    }
    best: dict[str, Any] = {"val_elbo": -math.inf, "step": None, "model": None, "guide": None}
    start, bad_evals, resumed_from = 0, 0, None

    ckdir = None if checkpoint is None else ckpt.checkpoint_dir(checkpoint)
    if resume and ckdir is not None and (ckdir / ckpt.LAST).exists():
        state = ckpt.load(ckdir / ckpt.LAST)
        for key in _RESUME_KEYS:
            if state["settings"].get(key) != settings[key]:
                raise ValueError(f"cannot resume from {str(ckdir / ckpt.LAST)!r}: its {key}="
                                 f"{state['settings'].get(key)!r} differs from this fit's {key}={settings[key]!r}.")
        model.load_state_dict(state["model"])
        q.load_state_dict(state["guide"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        # the checkpoint's learning rates would override this call's `lr`, `lr_final` and schedule
        # (recorded in settings but never used): go on with this call's, from the saved step
        scheduler.base_lrs = [lr] * len(optimizer.param_groups)
        for group in optimizer.param_groups:
            group["initial_lr"] = lr
            group["lr"] = lr * LR_SCHEDULES[lr_schedule](int(state["step"]), n_steps, ratio)
        if kl_default:
            kl_anneal = settings["kl_anneal"] = int(state["settings"].get("kl_anneal", kl_anneal))
        window_gen.set_state(state["window_rng"])
        noise_gen.set_state(state["noise_rng"])
        history = state["history"]
        best = state["best"]
        bad_evals = int(state["bad_evals"])
        start = resumed_from = int(state["step"])
    elif resume:
        warnings.warn(f"`resume=True` but {str(ckdir / ckpt.LAST)!r} does not exist; starting a new fit.",
                      RuntimeWarning, stacklevel=3)

    def snapshot(step: int) -> dict[str, Any]:
        return ckpt.to_cpu({
            "step": step, "settings": settings, "model": model.state_dict(), "guide": q.state_dict(),
            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "window_rng": window_gen.get_state(), "noise_rng": noise_gen.get_state(),
            "history": history, "best": best, "bad_evals": bad_evals,
        })

    # the state to return to should the fit diverge before its first evaluation: the start
    start_state = (ckpt.to_cpu(model.state_dict()), ckpt.to_cpu(q.state_dict())) if best["model"] is None else None

    # -- the loop ------------------------------------------------------------------------------
    t0 = time.perf_counter()
    stop_reason = "n_steps"
    n_bad = 0
    step = start
    bar = tqdm(total=n_steps, initial=start, disable=not progress, desc="svi", dynamic_ncols=True)
    try:
        while step < n_steps:
            beta = _kl_scale(step, kl_anneal, kl_start)
            trials, starts = random_windows(train, window, batch_size, window_gen)
            batch = _repeat(train.batch(trials, starts, window), n_particles)
            optimizer.zero_grad(set_to_none=True)
            elbo = _elbo_sum(model, q, batch, beta, noise_gen) / batch.n_time_steps
            loss = -elbo + (model.dynamics.regularization() if learn_model else 0.0)
            record = {"step": step, "loss": float(loss.detach()), "elbo": float(elbo.detach()), "kl_scale": beta,
                      "lr": float(optimizer.param_groups[0]["lr"]), "grad_norm": math.nan}
            if not math.isfinite(record["loss"]):
                n_bad += 1
                if n_bad >= MAX_BAD_STEPS:
                    stop_reason = "diverged"
                    if best["model"] is None:       # no evaluation yet: the only sound state is the start
                        model.load_state_dict(start_state[0])
                        q.load_state_dict(start_state[1])
                        kept = (f"no validation had run yet, so the model is back at its state at step {start} "
                                "(unfitted, `best_step` is None)")
                    else:
                        kept = f"the model keeps its best state (step {best['step']})"
                    warnings.warn(
                        f"SVI diverged: the loss was non-finite for {n_bad} consecutive steps (last at step {step}). "
                        f"The fit stops; {kept}. Try a smaller `lr`, a smaller `clip_norm`, "
                        "a smaller initial process noise, or a shorter `window`.", RuntimeWarning, stacklevel=3)
                    break
            else:
                n_bad = 0
                loss.backward()
                if clip_norm is not None:
                    record["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(params, clip_norm))
                optimizer.step()
                scheduler.step()
            for key in ("step", "loss", "elbo", "kl_scale", "lr", "grad_norm"):
                history[key].append(record[key])
            step += 1

            if step % eval_every == 0 or step == n_steps:
                val_elbo = _evaluate(model, q, val, val_windows, window, val_seed, max(batch_size, 64))
                history["val_step"].append(step)
                history["val_elbo"].append(val_elbo)
                if val_elbo > best["val_elbo"]:
                    best = {"val_elbo": val_elbo, "step": step, "model": ckpt.to_cpu(model.state_dict()),
                            "guide": ckpt.to_cpu(q.state_dict())}
                    bad_evals = 0
                    if ckdir is not None:
                        ckpt.save_atomic(snapshot(step), ckdir / ckpt.BEST)
                else:
                    bad_evals += 1
                bar.set_postfix(elbo=f"{record['elbo']:.4g}", val=f"{val_elbo:.4g}")
            elif progress and step % 10 == 0:
                bar.set_postfix(elbo=f"{record['elbo']:.4g}")
            if ckdir is not None and (step % checkpoint_every == 0 or step == n_steps):
                ckpt.save_atomic(snapshot(step), ckdir / ckpt.LAST)
            bar.update(1)
            if callback is not None and callback(step - 1, record, model) is True:
                stop_reason = "callback"
                if ckdir is not None:
                    ckpt.save_atomic(snapshot(step), ckdir / ckpt.LAST)
                break
            if patience is not None and bad_evals >= patience:
                stop_reason = "early_stopping"
                if ckdir is not None:
                    ckpt.save_atomic(snapshot(step), ckdir / ckpt.LAST)
                break
    finally:
        bar.close()
        if best["model"] is not None:
            model.load_state_dict(best["model"])
            q.load_state_dict(best["guide"])
    if (best["model"] is None and start_state is not None and stop_reason in ("n_steps", "early_stopping")
            and history["val_elbo"]):
        # every validation ELBO was non-finite (a fit shorter than MAX_BAD_STEPS that blew up, or
        # one whose model gives NaN on held-out windows): the last state was kept without a word
        model.load_state_dict(start_state[0])
        q.load_state_dict(start_state[1])
        stop_reason = "diverged"
        warnings.warn(f"SVI diverged: no validation ELBO was finite ({len(history['val_elbo'])} evaluation(s), the "
                      f"last at step {history['val_step'][-1]}), so the model is back at its state at step {start} "
                      "(unfitted, `best_step` is None). Try a smaller `lr`, a smaller `clip_norm`, a smaller "
                      "initial process noise, or a shorter `window`.", RuntimeWarning, stacklevel=3)

    model.smoother_ = SVISmoother(model, q, n_samples=smoother_samples, seed=0)
    history.update({
        "engine": "svi", "best_step": best["step"], "best_val_elbo": best["val_elbo"],
        "stop_reason": stop_reason, "n_steps_run": step - start, "resumed_from": resumed_from,
        "elapsed_s": time.perf_counter() - t0, "settings": copy.deepcopy(settings),
    })
    return history
