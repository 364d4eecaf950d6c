"""Teacher-forcing training for dynamical-systems reconstruction (engines ``"teacher-forcing"``, ``"gtf"``).

Training windows of ``seq_len`` steps are drawn at random positions of the training trials.
Each window starts from the data-inferred state ``ẑ_1`` and is rolled forward by the model;
after every step the prediction ``z_t`` is pulled towards the data-inferred state ``ẑ_t``
(:mod:`dsident.inference.forcing_alpha`):

.. math::

    z_t = f(\\tilde z_{t-1}, u_t), \\qquad \\tilde z_t = z_t + \\alpha_t P_t (\\hat z_t - z_t), \\qquad
    \\mathcal L = \\frac{1}{|\\Omega|} \\sum_{(t, n) \\in \\Omega,\\, t \\ge 2}
                  \\big(\\bar x_{t,n}(z_t) - x_{t,n}\\big)^2 + R(\\theta),

with ``α_t = α`` at every step (generalized teacher forcing, ``mode="generalized"``) or
``α_t = 1`` every ``forcing_interval``-th step and 0 otherwise (sparse teacher forcing,
``mode="sparse"``). The loss compares the *unforced* predictions with the data, so the model
learns to predict, while the forcing keeps the trajectory near the data and the gradients
bounded. α = 1 every step gives one-step-ahead prediction; α = 0 gives free-running BPTT.

Training runs in the loop shared with BPTT (:func:`~dsident.inference.training.train_loop`:
Adam or RAdam, exponential learning-rate decay, gradient-norm clipping, checkpoints, the
progress bar); this module supplies its hooks: random windows
(:class:`~dsident.inference.windows.RandomWindows`), the forced loss, the GTF penalties, the α
schedule (re-estimated every ``alpha_update_every`` batches, saved in checkpoints) and the
evaluation: every ``eval_every`` epochs the model runs freely for ``eval_steps`` steps from a
data point, and the state-space divergence D_stsp and power-spectrum distance D_H of that run
(:mod:`dsident.metrics`) are recorded; the state with the lowest D_stsp is the one the model
holds at the end (the reconstruction criterion, not the training loss).

Shape legend: ``B`` batch (windows), ``L`` seq_len, ``N`` obs_dim, ``M`` latent_dim, ``K`` input_dim.

References
----------
F. Hess, Z. Monfared, M. Brenner, D. Durstewitz, "Generalized teacher forcing for learning
chaotic dynamics", ICML 2023 (GTF, the adaptive α, the clipped shallow PLRNN, the affine
observation model with its condition-number regularizer).
M. Mikhaeil, Z. Monfared, D. Durstewitz, "On the difficulty of learning chaotic dynamics with
RNNs", NeurIPS 2022 (sparse teacher forcing).
"""
from __future__ import annotations

import dataclasses
import math
import os
import warnings
from typing import Any

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from ..data.container import as_dataset, to_arrays
from ..data.slow_channels import scored_channels
from ..metrics import state_space_divergence
from ..metrics.evaluate import observed_spectrum_distance
from ..observations.gaussian import reads_gaussian
from .forcing_alpha import AlphaSchedule, TeacherSignal, estimate_alpha, make_teacher
from .fused_rollout import can_fuse, fused_forced_rollout
from .._checks import check_bool
from .training import (LOSSES, Evaluation, FitCallback, TrainingDivergedError, TrainingProgress,
                       check_data_fits_model, check_int, check_number, resolve_device, train_loop)
from .windows import Batch, ConsecutiveWindows, RandomWindows

__all__ = ["fit_teacher_forcing", "teacher_forcing_loss", "forced_rollout", "TrainingDivergedError"]

_MODES = ("generalized", "sparse")
#: a free run leaving mean ± this many standard deviations of the reference counts as diverged
_DIVERGENCE_STD = 1e3
#: history lists filled by the hooks of this engine (besides those of train_loop)
_HISTORY_KEYS = ("alpha", "state_space_divergence", "power_spectrum_distance", "eval_time_s", "alpha_update_batch",
                 "alpha_estimate", "jacobian_bound", "alpha_after_update", "free_run_regime",
                 "worst_state_space_divergence", "free_run_at_rest")
#: a scored free run whose every channel moves less than this fraction of the reference's standard
#: deviation (peak to peak) over its last quarter is at rest: a fixed point, or a cycle too small to see
AT_REST_FRACTION = 1e-2

#: ``select_regime`` values: the free-run verdicts (:data:`dsident.analysis.VERDICTS`) each accepts
SELECT_REGIMES: dict[str, tuple[str, ...]] = {
    "chaotic": ("chaotic",),
    # a flow's limit cycle reads "periodic or quasi-periodic" (λ1 = 0), a map's cycle "attracting cycle"
    "periodic": ("periodic or quasi-periodic", "attracting cycle"),
}

#: added to the score of a free run of the wrong kind, so that every run of the asked-for kind
#: ranks first (D_stsp of a bounded run stays far below it) and the wrong kind is kept only when
#: no evaluation gave the right one
_WRONG_REGIME_OFFSET = 1e6


# ---------------------------------------------------------------------------------------------
# the forced rollout and its loss
# ---------------------------------------------------------------------------------------------
def forced_rollout(model: Any, teacher: TeacherSignal, u: Tensor | None, dt: Tensor | None, *,
                   mode: str, alpha: float, forcing_interval: int, warmup: int = 0,
                   fused: bool = True) -> tuple[Tensor, Tensor]:
    """Roll a batch forward under teacher forcing.

    Parameters
    ----------
    model : StateSpaceModel
    teacher : TeacherSignal
        Data-inferred states ``z_hat`` (B, L, M) and the forcing projectors.
    u : Tensor of shape (B, L, K) or None
        ``u[:, t]`` drives the step into time ``t``.
    dt : Tensor of shape (B, L) or None
        Per-step sampling interval (irregular sampling); None uses the model's ``dt``.
    mode : {"generalized", "sparse"}
    alpha : float
        Forcing strength of generalized forcing (ignored by sparse forcing).
    forcing_interval : int
        τ of sparse forcing: full forcing at steps t = τ, 2τ, ... (t counted from 0 at the start).
    warmup : int
        Steps t = 1 … ``warmup`` are fully forced (α = 1) whatever the mode, so that units the
        data do not force (unread units, modulators) settle before the window is scored.
    fused : bool, default True
        Roll a shallow PLRNN or a PLRNN without inputs, forced through an identity readout or a
        linear one with every channel observed, as one autograd node
        (:mod:`dsident.inference.fused_rollout`: the same numbers to round-off, in a fraction of
        the time on a CPU);
        False, or any other model, steps ``model.step`` and lets autograd record every step.

    Returns
    -------
    predicted : Tensor of shape (B, L - 1, M)
        ``z_t = f(z̃_{t-1})`` for t = 1 … L-1, before forcing (what the loss compares).
    forced : Tensor of shape (B, L, M)
        ``z̃_t``, the states the next steps start from (``z̃_0 = ẑ_0``).
    """
    length = teacher.z_hat.shape[1]
    alphas = [1.0 if t <= warmup else alpha if mode == "generalized" else float(t % forcing_interval == 0)
              for t in range(length)]
    if fused and can_fuse(model, teacher, u):
        return fused_forced_rollout(model, teacher, torch.tensor(alphas, dtype=teacher.z_hat.dtype))
    z = teacher.z_hat[:, 0]
    predicted, forced = [], [z]
    for t in range(1, length):
        step_dt = None if dt is None else dt[:, t, None]
        z = model.step(z, None if u is None else u[:, t], step_dt)
        predicted.append(z)
        if alphas[t] > 0.0:
            z = teacher.force(z, t, alphas[t])
        forced.append(z)
    return torch.stack(predicted, dim=1), torch.stack(forced, dim=1)


def teacher_forcing_loss(model: Any, x: Tensor, mask: Tensor, u: Tensor | None = None, dt: Tensor | None = None,
                         *, mode: str = "generalized", alpha: float = 1.0, forcing_interval: int = 1,
                         loss: str = "mse", teacher: TeacherSignal | None = None,
                         warmup: int = 0, fused: bool = True, z0: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The data term of teacher-forcing training on a batch of windows.

    Parameters
    ----------
    model : StateSpaceModel
    x : Tensor of shape (B, L, N)
        Observations (values at masked entries are ignored).
    mask : bool Tensor of shape (B, L, N)
        True = observed.
    u, dt, mode, alpha, forcing_interval
        See :func:`forced_rollout`.
    loss : {"mse", "nll"}
        Masked mean squared error of the observation mean over the observed entries of steps
        1 … L-1, or the negative log-likelihood per observed entry.
    teacher : TeacherSignal, optional
        Precomputed teacher (default: :func:`~dsident.inference.forcing_alpha.make_teacher`).
    warmup : int
        Fully forced steps at the start of each window (see :func:`forced_rollout`); their
        predictions are not scored.
    fused : bool, default True
        See :func:`forced_rollout`.
    z0 : Tensor of shape (B, M), optional
        The state each window starts from, instead of the data-inferred ``ẑ_0`` (stateful
        training: the state the previous window of the same stream ended in, every unit
        included).

    Returns
    -------
    loss : scalar Tensor
    forced : Tensor of shape (B, L, M)
        The forced trajectory (for the α estimate).
    """
    if teacher is None:
        teacher = make_teacher(model.observation, x, mask)
    if z0 is not None:
        z_hat = teacher.z_hat.clone()
        z_hat[:, 0] = z0
        teacher = dataclasses.replace(teacher, z_hat=z_hat)
    predicted, forced = forced_rollout(model, teacher, u, dt, mode=mode, alpha=alpha,
                                       forcing_interval=forcing_interval, warmup=warmup, fused=fused)
    # the first `warmup` predictions start from states the data have not yet shaped: not scored
    predicted, target, observed = predicted[:, warmup:], x[:, 1 + warmup:], mask[:, 1 + warmup:]
    n_observed = observed.sum().clamp_min(1)
    if loss == "mse":
        residual = torch.where(observed, model.decode(predicted) - target, torch.zeros_like(target))
        return residual.square().sum() / n_observed, forced
    target = torch.where(observed, target, torch.full_like(target, float("nan")))
    return -model.observation.log_prob(target, predicted, observed).sum() / n_observed, forced


# ---------------------------------------------------------------------------------------------
# penalties of the GTF paper
# ---------------------------------------------------------------------------------------------
def latent_l2(dynamics: Any) -> Tensor:
    """Sum of squares of the dynamics' parameters; a parameter named ``a`` (the diagonal
    auto-regression of the PLRNN family) is pulled towards 1 instead of 0."""
    total = torch.zeros((), dtype=torch.float32)
    for name, param in dynamics.named_parameters():
        term = (1.0 - param).square().sum() if name == "a" else param.square().sum()
        total = total.to(term.dtype).to(term.device) + term
    return total


def condition_penalty(observation: Any) -> Tensor | None:
    """``(1 − σ_max/σ_min)²`` of learned loadings ``B`` (GTF's affine-readout regularizer), or None.

    It pulls the condition number of ``B`` towards 1 so that its pseudo-inverse, which makes
    the teacher signal, stays well posed.
    """
    loadings = getattr(observation, "B", None)
    if not isinstance(loadings, torch.nn.Parameter) or not loadings.requires_grad:
        return None
    sv = torch.linalg.svdvals(loadings)
    return (1.0 - sv[0] / (sv[-1] + 1e-8)).square()


# ---------------------------------------------------------------------------------------------
# evaluation: a free run scored by D_stsp and D_H
# ---------------------------------------------------------------------------------------------
class _FreeRunScorer:
    """D_stsp and D_H of free runs against a reference stretch of data (numpy, float64).

    Called as the ``evaluate`` hook of :func:`~dsident.inference.training.train_loop`, it scores
    by D_stsp. The free runs start at ``n_starts`` fully observed samples spread evenly over the
    longest trial (the first at its first fully observed sample; the trial with the most fully
    observed samples when the longest has fewer than ``n_starts``) and are seeded by ``seed``; each
    is compared with the same reference (the first ``eval_steps`` samples from the first start),
    and the score is their mean D_stsp. Channels ``ds`` marks auxiliary (the slow channels of
    :func:`dsident.data.add_slow_channels`) start the runs but are not scored, as in
    :func:`dsident.metrics.evaluate`, so the kept epoch is chosen by the number the test gives.
    """

    def __init__(self, ds: xr.Dataset, eval_steps: int, burn_in: int, seed: int = 0,
                 regime: str | None = None, n_starts: int = 1, name: str = "eval_data") -> None:
        self.seed = seed
        self.regime = regime
        arrays = to_arrays(ds)
        complete = arrays.mask.all(-1).sum(-1)                # fully observed samples per trial
        trial = int(np.argmax(arrays.length))
        if complete[trial] < n_starts:
            # the longest trial cannot start the runs (a channel missing throughout it, say): the
            # trial with the most fully observed samples does, rather than no scoring at all
            trial = int(np.argmax(complete))
        observed = arrays.mask[trial].all(-1).nonzero()[0]
        if observed.size == 0:
            raise ValueError(f"`{name}` has no fully observed sample (every channel at once) in any trial to start "
                             f"the scored free run from; give `eval_data` with one, or eval_every=0.")
        if observed.size < n_starts:
            raise ValueError(f"`eval_starts` asks for {n_starts} free-run starts, but `{name}` has at most "
                             f"{observed.size} fully observed samples in one trial to start from.")
        start = int(observed[0])
        stop = min(start + eval_steps, int(arrays.length[trial]))
        self.reference = arrays.x[trial, start:stop]
        # evenly spread over the observed samples, so that a coexisting attractor reached only from
        # another part of the data's attractor shows in the score
        self.starts = [int(observed[(i * observed.size) // n_starts]) for i in range(n_starts)]
        self.x0s = [arrays.x[trial, s] for s in self.starts]
        self.u = None if arrays.u is None else np.nan_to_num(arrays.u[trial, start:stop], nan=0.0)
        self.burn_in = 0 if self.u is not None else int(burn_in)
        if regime is not None and self.u is not None:
            raise ValueError(f"`select_regime` needs an autonomous model: a free run driven by the data's inputs "
                             f"has no attractor to classify; got select_regime={regime!r} with inputs.")
        if n_starts > 1 and self.u is not None:
            raise ValueError(f"`eval_starts` > 1 needs an autonomous model: a free run driven by the data's inputs "
                             f"is scored against the stretch its inputs come from; got eval_starts={n_starts} "
                             f"with inputs.")
        ref = self.reference[np.isfinite(self.reference).all(-1)]
        # a constant channel (max = min; its std may be a round-off 1e-17) gets a unit scale, as in
        # metrics.evaluate's divergence check, or any run off by 1e-14 would read as diverged
        self.mean = ref.mean(0)
        self.std = np.where(ref.max(0) > ref.min(0), ref.std(0), 1.0) if ref.size else np.ones(ref.shape[1])
        self.scored = scored_channels(ds)

    def free_run(self, model: Any, seed: int, x0: np.ndarray | None = None) -> xr.Dataset:
        """The scored free run from ``x0`` (N,) (default: the first start; (trial, N): one run per
        row): burn-in plus reference length."""
        from ..observations.base import draws_observations

        kwargs: dict[str, Any] = {"x0": self.x0s[0] if x0 is None else x0, "seed": seed}
        if draws_observations(model):
            # counts and classes are scored by draws, as metrics.evaluate scores them: a run of
            # expected counts sits between the integers the data take
            kwargs["observation_noise"] = True
        if self.u is not None:
            kwargs["u"] = self.u
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)       # divergence is reported through the score
            return model.generate(self.burn_in + self.reference.shape[0], **kwargs)

    def score(self, model: Any, seed: int, x0: np.ndarray | None = None,
              run: xr.Dataset | None = None) -> tuple[float, float]:
        """(D_stsp, D_H) of the free run from ``x0`` (default: the first start; ``run``: that run,
        already generated); (inf, nan) when it diverges, D_stsp NaN when none of its points falls
        on the reference's grid (e.g. a fixed point outside the attractor)."""
        if run is None:
            run = self.free_run(model, seed, x0)
        gen = np.asarray(run["x"].values[0, self.burn_in:], dtype=float)
        if int(run.attrs.get("diverged", 0)) or not np.all(np.isfinite(gen)) \
                or np.any(np.abs(gen - self.mean) > _DIVERGENCE_STD * self.std):
            return math.inf, math.nan
        reference, gen = self.reference[:, self.scored], gen[:, self.scored]
        d_stsp = float(state_space_divergence(reference, gen))
        n = min(len(reference), len(gen))
        with warnings.catch_warnings():
            # a reference with gaps is compared over its longest gap-free stretch, as evaluate does;
            # said once by evaluate, not at every scored epoch
            warnings.simplefilter("ignore", RuntimeWarning)
            per_channel, _ = observed_spectrum_distance(reference[None, :n], gen[None, :n], np.zeros(1, dtype=int),
                                                        np.full(1, n), sigma=20.0)
        return d_stsp, float(np.mean(per_channel))

    def at_rest(self, run: xr.Dataset) -> bool:
        """Whether a scored free run has come to rest (:data:`AT_REST_FRACTION`); a diverged run is not."""
        gen = np.asarray(run["x"].values[0, self.burn_in:], dtype=float)
        tail = gen[-max(2, gen.shape[0] // 4):]
        if not np.all(np.isfinite(tail)):
            return False
        return bool(np.all(np.ptp(tail, axis=0) < AT_REST_FRACTION * self.std))

    def verdict(self, model: Any, seed: int, x0: np.ndarray | None = None, run: xr.Dataset | None = None) -> str:
        """What the scored free run from ``x0`` (default: the first start) settles on
        (:func:`dsident.analysis.free_run_regime`: the same start, length and burn-in, and its
        Lyapunov spectrum); ``run``, that run already generated, is not generated again."""
        from ..analysis.report import free_run_regime

        n_steps = max(100, self.reference.shape[0])
        if run is not None and run.sizes["time"] != self.burn_in + n_steps:
            run = None                     # a reference under 100 samples: the verdict runs longer
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return free_run_regime(model, n_steps=n_steps, transient=self.burn_in, x0=self.x0s[0] if x0 is None else x0,
                                   seed=seed, run=run, n_exponents=1).verdict

    def free_runs(self, model: Any, seed: int) -> list[xr.Dataset]:
        """The scored free runs from every start, as :meth:`free_run` gives them one by one, but
        generated as one batch of trials (a step of several trials costs about one of a single
        trial); each run's ``diverged`` flag is its own."""
        if len(self.x0s) == 1 or self.u is not None:
            return [self.free_run(model, seed, x0) for x0 in self.x0s]
        batch = self.free_run(model, seed, np.stack(self.x0s))
        runs = []
        for i in range(len(self.x0s)):
            run = batch.isel(trial=[i]).assign_coords(trial=[0])
            finite = np.isfinite(run["z"].values[0]).all(-1)
            run.attrs = {**batch.attrs, "diverged": int(not finite.all()),
                         "diverged_at": -1 if finite.all() else int(np.argmin(finite))}
            runs.append(run)
        return runs

    def __call__(self, model: Any, progress: TrainingProgress) -> Evaluation:
        runs = self.free_runs(model, self.seed)
        scores = [self.score(model, self.seed, run=run) for run in runs]
        per_start = [d for d, _ in scores]
        # one diverged (inf) or off-grid (NaN) start makes the mean so: such a state is not kept
        d_stsp = float(np.mean(per_start))
        d_h = float(np.mean([h for _, h in scores]))
        values: dict[str, Any] = {"state_space_divergence": d_stsp, "power_spectrum_distance": d_h,
                                  "eval_time_s": progress.elapsed_s,
                                  # every start at rest: what `restarts` (LatentModelEstimator.fit) watches for
                                  "free_run_at_rest": all(self.at_rest(run) for run in runs)}
        shown: dict[str, Any] = {"D_stsp": free_run_label(d_stsp), "D_H": d_h}
        if len(self.x0s) > 1:
            values["worst_state_space_divergence"] = float(max(per_start, key=_badness))
            shown["worst"] = free_run_label(values["worst_state_space_divergence"])
        score = d_stsp
        if self.regime is not None:
            # a diverged or off-grid run is not kept whatever it settles on: no spectrum needed
            verdict = "not classified"
            if math.isfinite(d_stsp):
                # the kind every start settles on; starts that disagree name each kind they reached,
                # which no select_regime value accepts
                verdict = " + ".join(dict.fromkeys(self.verdict(model, self.seed, x0, run)
                                                   for x0, run in zip(self.x0s, runs)))
            values["free_run_regime"] = shown["regime"] = verdict
            if verdict not in SELECT_REGIMES[self.regime]:
                score = d_stsp + _WRONG_REGIME_OFFSET
        return Evaluation(score=score, values=values, shown=shown)


def _badness(d_stsp: float) -> float:
    """Order of free-run scores from best to worst: finite values, then off grid (NaN), then diverged."""
    if math.isnan(d_stsp):
        return 1e300
    return d_stsp


def _report_regime_selection(history: dict[str, Any], select_regime: str) -> None:
    """Undo the wrong-kind offset in ``best_state_space_divergence`` and say whether the kept
    state has the asked-for kind (``history["regime_fallback"]`` False) or none had it."""
    verdicts, scores = history["free_run_regime"], history["state_space_divergence"]
    matched = [v in SELECT_REGIMES[select_regime] and math.isfinite(d) for v, d in zip(verdicts, scores)]
    history["regime_fallback"] = not any(matched)
    if history["best_epoch"] >= 0:
        history["best_state_space_divergence"] = float(scores[history["eval_epoch"].index(history["best_epoch"])])
    if history["regime_fallback"] and history["eval_epoch"] and not history["diverged"]:
        seen = sorted(set(verdicts))
        warnings.warn(f"select_regime={select_regime!r}: no scored free run settled on that kind of attractor "
                      f"(verdicts seen: {', '.join(seen)}), so the lowest D_stsp is kept as without it.",
                      RuntimeWarning, stacklevel=3)


def free_run_label(d_stsp: float) -> float | str:
    """What the progress bar shows for a free run's D_stsp: the number, or why there is none.

    A NaN is not a divergence: the run stayed bounded but none of its points fell on the
    data's grid (typically a fixed point outside the attractor); it reads "off grid" so that
    the bar does not look like a failed fit. A diverged run (``inf``) reads "diverged".
    """
    if math.isnan(d_stsp):
        return "off grid"
    if math.isinf(d_stsp):
        return "diverged"
    return d_stsp


# ---------------------------------------------------------------------------------------------
# the hooks of train_loop: forcing strength, loss, penalties, α schedule
# ---------------------------------------------------------------------------------------------
class _Forcing:
    """The current α and the teacher-forcing hooks of :func:`~dsident.inference.training.train_loop`.

    α is the ``engine_state`` of the loop (saved in checkpoints); ``loss_fn`` forces with it,
    ``on_batch`` re-estimates it every ``schedule.update_every`` batches and logs the schedule.
    """

    def __init__(self, schedule: AlphaSchedule, *, mode: str, forcing_interval: int, loss: str, latent_reg: float,
                 obs_reg: float, warmup: int = 0, fused: bool = True, stateful: bool = False) -> None:
        self.schedule, self.mode, self.forcing_interval, self.loss = schedule, mode, forcing_interval, loss
        self.warmup = warmup
        self.stateful = stateful
        #: the forced state each stream's last window ended in (stateful training), no gradient
        self.carry: Tensor | None = None
        self.latent_reg, self.obs_reg = latent_reg, obs_reg
        self.fused = fused
        self.alpha = schedule.initial
        #: the epoch the current α is for (set at the end of each epoch)
        self.next_epoch = 0

    def state_dict(self) -> dict[str, float]:
        return {"alpha": self.alpha, "next_epoch": self.next_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.next_epoch = int(state.get("next_epoch", 0))
        if self.schedule.adaptive or "next_epoch" not in state:
            self.alpha = float(state["alpha"])
        else:
            # a constant or annealed α is this call's setting at that epoch (the same number when the
            # settings are those of the checkpoint): a resume with another `alpha` trains with it, as
            # it does with another `lr`, instead of the checkpoint's α under this call's settings
            self.alpha = self.schedule.at_epoch(self.next_epoch)

    def loss_fn(self, model: Any, batch: Batch) -> tuple[Tensor, Tensor]:
        """Forced loss of a batch and its forced trajectory (B, L, M) for the α estimate."""
        z0 = self.carry if self.stateful and batch.continues else None
        loss, forced = teacher_forcing_loss(model, batch.x, batch.mask, batch.u, batch.dt, mode=self.mode,
                                            alpha=self.alpha, forcing_interval=self.forcing_interval, loss=self.loss,
                                            warmup=self.warmup, fused=self.fused, z0=z0)
        if self.stateful:
            end = forced[:, -1].detach()
            # a window that blew up hands on nothing: its stream restarts from the data
            self.carry = end if bool(torch.isfinite(end).all()) else None
        return loss, forced

    def penalties(self, model: Any) -> list[Tensor]:
        """The GTF paper's latent L2 and condition-number terms (those with a positive weight)."""
        terms = []
        if self.latent_reg > 0:
            terms.append(self.latent_reg * latent_l2(model.dynamics))
        penalty = condition_penalty(model.observation) if self.obs_reg > 0 else None
        if penalty is not None:
            terms.append(self.obs_reg * penalty)
        return terms

    def on_batch(self, model: Any, progress: TrainingProgress, batch: Batch, forced: Tensor) -> dict[str, float] | None:
        """Every ``update_every`` batches (adaptive α): the new α and what it came from."""
        if not (self.schedule.adaptive and progress.n_batches_done % self.schedule.update_every == 0):
            return None
        # the Jacobians of the steps actually taken: from the forced states z̃_0 … z̃_{L-2}
        estimate, bound = estimate_alpha(model.dynamics, forced[:, :-1].detach(),
                                         None if batch.u is None else batch.u[:, 1:],
                                         model.dt if batch.dt is None else batch.dt[:, 1:], self.schedule.method)
        self.alpha = self.schedule.update(self.alpha, estimate)
        return {"alpha_update_batch": progress.n_batches_done, "alpha_estimate": estimate, "jacobian_bound": bound,
                "alpha_after_update": self.alpha}

    def on_epoch(self, model: Any, progress: TrainingProgress) -> dict[str, float]:
        used = self.alpha if self.mode == "generalized" else 1.0
        self.next_epoch = progress.epoch + 1
        if self.schedule.end is not None:
            # set here, at the end of an epoch, so that a checkpoint holds the α its next epoch uses
            self.alpha = self.schedule.at_epoch(progress.epoch + 1)
        return {"alpha": used}


# ---------------------------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------------------------
def fit_teacher_forcing(model: Any, data: Any, *, seed: int | None = None, progress: bool = True,
                        mode: str = "generalized", alpha: float | str = "adaptive", alpha_end: float | None = None,
                        alpha_initial: float = 1.0,
                        alpha_method: str = "product_bound", alpha_decay: float = 0.99, alpha_update_every: int = 5,
                        forcing_interval: int = 16, seq_len: int = 100, batch_size: int = 16,
                        batches_per_epoch: int = 50, n_epochs: int = 60, lr: float = 3e-3,
                        lr_end: float | None = 1e-4, optimizer: str = "adam", grad_clip: float | None = 10.0,
                        latent_reg: float = 0.0, warmup: int = 0,
                        obs_reg: float = 1e-6, teacher_noise: float = 0.0, loss: str = "auto",
                        eval_every: int = 5, eval_steps: int = 10_000, eval_data: Any = None,
                        eval_starts: int = 1, select_regime: str | None = None, fused: bool = True,
                        stateful: bool = False, device: str = "cpu",
                        checkpoint: str | os.PathLike | None = None,
                        checkpoint_every: int | None = None, resume: bool = True,
                        on_divergence: str = "warn", skip_nonfinite: int = 0,
                        lr_backoff: int = 0, rewinds: int = 0, rewind_after: int = 10,
                        callback: FitCallback | None = None) -> dict[str, Any]:
    """Fit a StateSpaceModel by sparse or generalized teacher forcing (engines ``"teacher-forcing"``, ``"gtf"``).

    Parameters
    ----------
    model : StateSpaceModel
        Any dynamics and observation model. Updated in place; at the end it holds the state
        whose free run had the lowest D_stsp (the last state when ``eval_every=0``).
    data : xarray.Dataset or anything :func:`dsident.data.as_dataset` accepts
        ``x(trial, time, channel)`` (NaN = missing: masked out of the loss and of the teacher),
        optional inputs ``u(trial, time, input)`` and irregular ``sample_time``.
    seed : int, optional
        Seeds the windows drawn in every epoch and the teacher noise (a resumed run draws the
        same windows it would have drawn).
    progress : bool
        Show a tqdm bar (loss, α, last D_stsp).
    mode : {"generalized", "sparse"}
        Generalized forcing ``z̃ = z + α P (ẑ − z)`` at every step, or sparse forcing (α = 1
        every ``forcing_interval`` steps, free running in between).
    alpha : float in [0, 1] or "adaptive"
        Generalized forcing strength (a number is refused with ``mode="sparse"``, which forces
        fully every ``forcing_interval`` steps). "adaptive" starts at ``alpha_initial`` and follows the
        Jacobian bound of :func:`~dsident.inference.forcing_alpha.estimate_alpha`, evaluated
        along the forced trajectory every ``alpha_update_every`` batches; it falls towards a
        lower estimate by ``alpha_decay`` per update and rises to a higher one at once.
    alpha_end : float in (0, 1], optional
        With a constant ``alpha``: anneal it geometrically over the epochs, as the learning
        rate, from ``alpha`` in the first epoch to ``alpha_end`` in the last (epoch e uses
        ``alpha · (alpha_end / alpha) ** (e / (n_epochs − 1))``). A weaker forcing late in
        training makes the model carry more of each window on its own (docs/teacher_forcing.md,
        "Annealing α"); the states of every epoch stay candidates for the kept one.
    alpha_method : {"product_bound", "batch_maximum"}
        See :func:`~dsident.inference.forcing_alpha.norm_bound`.
    forcing_interval : int, default 16
        τ of sparse forcing.
    seq_len : int, default 100
        Window length L in time steps (shortened to the longest trial if needed).
    batch_size : int, default 16
    batches_per_epoch : int, default 50
        Windows drawn per epoch = ``batch_size · batches_per_epoch``.
    n_epochs : int, default 60
    lr, lr_end : float, default 3e-3 and 1e-4
        Learning rate, decayed exponentially to ``lr_end`` at the last epoch (None: constant).
    optimizer : {"adam", "radam"}, default "adam"
        RAdam (the GTF code's choice) rectifies Adam's early steps, which acts as a warm-up
        over roughly the first thousand updates: right for the GTF paper's 250 000 updates,
        slow for the few thousand of a run of minutes, where Adam learns faster.
    grad_clip : float or None, default 10
        Maximum gradient 2-norm.
    latent_reg : float, default 0
        Weight of an L2 penalty on the dynamics' parameters (``a`` pulled towards 1), as in
        the GTF code's latent-model regularization.
    warmup : int, default 0
        Steps at the start of every window that are fully forced and not scored. Units the data
        do not force (modulators, unread directions) start each window at the teacher's fill
        values; the warm-up lets them settle to the data before the loss counts. Must be smaller
        than ``seq_len - 1``.
    obs_reg : float, default 1e-6
        Weight of the condition-number penalty ``(1 − σ_max/σ_min)²`` on learned loadings
        ``B`` (the GTF paper's affine observation model); no effect with fixed loadings.
    teacher_noise : float, default 0
        Standard deviation of Gaussian noise added to the training windows (a regularizer of
        the sparse-forcing papers), in units of the data.
    loss : {"auto", "mse", "nll"}
        "auto": masked MSE for Gaussian observations (also a Gaussian read through latent
        features, as the ODE-RFWP and ORGaNICs do), negative log-likelihood otherwise.
    eval_every : int, default 5
        Score a free run every this many epochs (and after the last); 0 never (the final
        state is kept).
    eval_steps : int, default 10000
        Length of the scored free run (after a burn-in of a quarter of it, none with inputs);
        it is compared with the first ``eval_steps`` samples of ``eval_data``.
    eval_data : Dataset, optional
        Reference data for the scoring (default: the training data; its longest trial, or the
        trial with the most fully observed samples when the longest has too few to start from).
    eval_starts : int, default 1
        Free runs scored per evaluation, started from this many fully observed samples spread
        evenly over that trial (the first at its first fully observed sample), each compared
        with the same reference; the evaluation's D_stsp and D_H are their means, and one
        diverged or off-grid run rules the state out. A model can have a second attractor (a
        stable fixed point beside the chaotic one) that a run from one start never reaches;
        more starts show it, at that many times the cost of the scoring. Not for data with
        inputs.
    select_regime : {"chaotic", "periodic"}, optional
        Keep the lowest-D_stsp state among the evaluations whose free run settles on this kind
        of attractor (:func:`dsident.analysis.free_run_regime` of the scored run: "chaotic"
        accepts the verdict "chaotic"; "periodic" accepts "periodic or quasi-periodic" and
        "attracting cycle"). D_stsp alone can prefer a cycle that traces a chaotic attractor's
        shape, or irregular bursts over regular ones. When no evaluation gives that kind, the
        lowest D_stsp is kept as without it, and ``history["regime_fallback"]`` is True. Each
        evaluation then also computes the run's Lyapunov spectrum (about twice the cost of the
        scoring itself; docs/teacher_forcing.md). Not for data with inputs. Default None: D_stsp
        alone.
    fused : bool, default True
        Roll a shallow PLRNN or a PLRNN without inputs as one autograd node where its forcing
        allows (:func:`forced_rollout`; :mod:`dsident.inference.fused_rollout`: 1.5–3.9× faster
        updates on a CPU, the same gradients to round-off). False steps the model and lets
        autograd record every step: the route of every fit recorded before the fused rollout
        existed, to repeat one of them to the last digit.
    stateful : bool, default False
        Walk ``batch_size`` streams through the data each epoch, one window after the other
        (:class:`~dsident.inference.windows.ConsecutiveWindows`), and start every window but
        a stream's first from the forced state the previous one ended in, instead of from the
        data (stateful truncated BPTT). Units the data do not force then carry what they hold
        across windows, so they can keep time scales longer than ``seq_len``; the gradient
        still spans one window. A stream covers ``batches_per_epoch · (seq_len − 1) + 1``
        samples, which must fit in one trial.
    device : {"cpu", "auto", "cuda"}, default "cpu"
        Where to train ("auto": the GPU when torch sees one). The CPU is the default because
        these windows are sequential chains of small operations: on an H100 every benchmark
        cell's update (batch 16) took 1.5–2.7× as long as on one CPU thread
        (``benchmarks/bench_tf_device.py``); a GPU starts to pay off at batches of a few hundred.
    checkpoint : path, optional
        Training checkpoint (model, optimizer, α, best state, history, batch counter, seed),
        written every ``checkpoint_every`` epochs (default ``eval_every``, or 10) and at the
        end; with ``resume`` an existing one is continued, and the run ends where an
        uninterrupted one would have (same seed required).
    resume : bool, default True
    on_divergence : {"warn", "raise"}
        A non-finite loss or gradient stops training (the update is not applied), restores the
        best scored state (none scored yet: the model keeps its last finite parameters), and
        warns (``RuntimeWarning``) or raises :class:`~dsident.inference.training.TrainingDivergedError`.
    skip_nonfinite : int, default 0
        Up to this many such batches in a row are skipped instead (no update; counted in
        ``history["skipped_batches"]`` and reported in a warning), so that one window a young
        model cannot follow with a weak forcing does not end the fit.
    lr_backoff : int, default 0
        Up to this many times, such a batch (after ``skip_nonfinite``'s allowance) sends training
        back to the start of the epoch before, with half the learning rate from then on, instead
        of stopping it: an epoch that made the model unstable under the forcing is trained again,
        more gently (``history["lr_backoffs"]``; see :func:`~dsident.inference.training.train_loop`).
    rewinds : int, default 0
        Up to this many times, when ``rewind_after`` scored epochs in a row have not beaten the
        best free run, training goes back to the best state (weights, optimizer, α) and goes on
        with half the learning rate (``history["rewinds"]``). For fits whose free runs fall onto
        a wrong attractor mid-training and stay there (docs/teacher_forcing.md "Rewinding").
    rewind_after : int, default 10
        Scored epochs (every ``eval_every``-th) without a new best before a rewind.
    callback : callable ``(epoch, record, model) -> bool or None``, optional
        Called after every epoch with its numbers (``train_loss``, ``alpha``, and on a scored
        epoch ``state_space_divergence`` / ``power_spectrum_distance``) and the model in its
        current state (copy what you keep: e.g. every epoch's parameters, to compare selection
        rules afterwards); returning True stops training there, keeping the best scored state
        (:data:`~dsident.inference.training.FitCallback`).

    Returns
    -------
    dict
        Per epoch: ``epoch``, ``train_loss``, ``alpha`` (the epoch's; the adaptive one at its end), ``lr``,
        ``grad_norm`` (mean pre-clipping norm), ``regularization``. Per evaluation: ``eval_epoch``,
        ``state_space_divergence``, ``power_spectrum_distance`` (inf and NaN for a diverged run;
        D_stsp NaN for a run that never enters the data's range), ``eval_time_s`` (training time
        so far, resumed runs included), ``free_run_at_rest`` (True when every start's run came to
        rest: each channel moves less than 1 % of the data's standard deviation over the run's
        last quarter), with ``eval_starts`` > 1 ``worst_state_space_divergence``
        (the worst start's), and with ``select_regime`` ``free_run_regime`` (the run's verdict;
        "not classified" for a diverged or off-grid run; with several starts that disagree,
        their verdicts joined by " + ", which counts as the wrong kind).
        The α schedule: ``alpha_update_batch``, ``alpha_estimate``, ``jacobian_bound``,
        ``alpha_after_update``. Then ``best_epoch``, ``best_state_space_divergence``,
        ``diverged``, ``n_epochs_run``, ``n_batches_done``, ``wall_time_s``, ``settings``,
        ``package_version`` (and ``resumed_from_epoch`` after a resume; ``regime_fallback`` with
        ``select_regime``).

    Notes
    -----
    The defaults follow the GTF code (batch 16, 50 batches per epoch, adaptive α from 1 with
    the product bound, re-estimated every 5 batches) with a budget of minutes instead of hours
    on a CPU: 60 epochs (3000 updates) of windows of 100 steps, Adam from 3e-3 to 1e-4. They
    reconstruct Lorenz-63 (see ``docs/teacher_forcing.md``). For chaotic benchmarks the recommended model is the clipped
    shallow PLRNN with an identity readout and ``latent_dim`` = number of channels
    (``dsident.models.ShallowPLRNN(latent_dim=N, hidden_dim=..., clip=True)``); see
    ``docs/teacher_forcing.md`` for measured settings.

    Examples
    --------
    >>> import numpy as np
    >>> from dsident import StateSpaceModel
    >>> from dsident.dynamics import ShallowPLRNN
    >>> from dsident.observations import Gaussian
    >>> t = np.arange(400) * 0.1
    >>> data = np.stack([np.sin(t), np.cos(t)], -1)
    >>> model = StateSpaceModel(ShallowPLRNN(2, 16, clip=True, seed=0), Gaussian(2, 2, readout="identity"))
    >>> history = fit_teacher_forcing(model, data, n_epochs=2, batches_per_epoch=5, seq_len=50, eval_every=0,
    ...                               seed=0, progress=False)
    >>> len(history["train_loss"])
    2
    """
    ds = as_dataset(data)
    check_data_fits_model(model, ds, check_dt="continuous")
    if mode not in _MODES:
        raise ValueError(f"`mode` must be one of {_MODES}; got mode={mode!r}.")
    if loss not in LOSSES:
        raise ValueError(f"`loss` must be one of {LOSSES}; got loss={loss!r}.")
    adaptive = isinstance(alpha, str)
    if adaptive and alpha != "adaptive":
        raise ValueError(f"`alpha` must be a number in [0, 1] or 'adaptive'; got alpha={alpha!r}.")
    if adaptive and (isinstance(alpha_initial, (bool, np.bool_))
                     or not isinstance(alpha_initial, (int, float, np.integer, np.floating))
                     or not 0.0 <= float(alpha_initial) <= 1.0):
        raise ValueError(f"`alpha_initial` (where the adaptive α starts) must be a number in [0, 1]; got "
                         f"alpha_initial={alpha_initial!r}.")
    if mode == "sparse" and not adaptive:
        raise ValueError(f"`alpha` sets the strength of generalized forcing; sparse forcing forces fully (α = 1) "
                         f"every `forcing_interval` steps and not at all in between, so it takes no alpha: got "
                         f"alpha={alpha!r} with mode='sparse' (leave alpha out, or use mode='generalized').")
    if alpha_end is not None and (adaptive or mode != "generalized"):
        raise ValueError(f"`alpha_end` anneals a constant `alpha` of generalized forcing; got alpha_end={alpha_end!r} "
                         f"with alpha={alpha!r}, mode={mode!r}.")
    schedule = AlphaSchedule(initial=alpha_initial if adaptive else alpha, adaptive=adaptive and mode == "generalized",
                             method=alpha_method, decay=alpha_decay, update_every=alpha_update_every, end=alpha_end,
                             n_epochs=check_int("n_epochs", n_epochs))
    # the options of this engine; train_loop checks its own (n_epochs, lr, optimizer, ...)
    forcing_interval = check_int("forcing_interval", forcing_interval)
    seq_len = check_int("seq_len", seq_len, minimum=2)
    batch_size = check_int("batch_size", batch_size)
    batches_per_epoch = check_int("batches_per_epoch", batches_per_epoch)
    eval_every = check_int("eval_every", eval_every, minimum=0)
    eval_steps = check_int("eval_steps", eval_steps, minimum=2)
    eval_starts = check_int("eval_starts", eval_starts)
    if select_regime is not None and select_regime not in SELECT_REGIMES:
        raise ValueError(f"`select_regime` must be one of {sorted(SELECT_REGIMES)} or None; got {select_regime!r}.")
    if select_regime is not None and eval_every == 0:
        raise ValueError("`select_regime` chooses among scored free runs, so it needs eval_every > 0; got "
                         "eval_every=0.")
    checkpoint_every = (eval_every or 10) if checkpoint_every is None else checkpoint_every
    forcing = _Forcing(schedule, mode=mode, forcing_interval=forcing_interval,
                       loss=("mse" if reads_gaussian(model.observation) else "nll") if loss == "auto" else loss,
                       latent_reg=check_number("latent_reg", latent_reg), obs_reg=check_number("obs_reg", obs_reg),
                       warmup=check_int("warmup", warmup, minimum=0), fused=bool(fused),
                       stateful=check_bool("stateful", stateful))
    if forcing.warmup >= seq_len - 1:
        raise ValueError(f"`warmup` must be smaller than seq_len - 1 = {seq_len - 1} (some steps must be scored); "
                         f"got warmup={warmup!r}.")
    teacher_noise = check_number("teacher_noise", teacher_noise)

    dev = resolve_device(device)
    sampler = (ConsecutiveWindows if forcing.stateful else RandomWindows)(
        ds, seq_len, batch_size, batches_per_epoch, next(model.parameters()).dtype, dev, noise_std=teacher_noise)
    evaluate = None
    if eval_every > 0:
        ref = ds if eval_data is None else as_dataset(eval_data)
        check_data_fits_model(model, ref, check_dt="continuous", name="eval_data")
        evaluate = _FreeRunScorer(ref, eval_steps, burn_in=eval_steps // 4, seed=0 if seed is None else int(seed),
                                  regime=select_regime, n_starts=eval_starts,
                                  name="data" if eval_data is None else "eval_data")
    settings = {"engine": "teacher-forcing", "seed": seed, "mode": mode, "alpha": alpha, "alpha_end": schedule.end,
                "alpha_initial": schedule.initial, "alpha_method": alpha_method, "alpha_decay": alpha_decay,
                "alpha_update_every": alpha_update_every, "forcing_interval": forcing_interval,
                "seq_len": sampler.seq_len, "batch_size": batch_size, "batches_per_epoch": batches_per_epoch,
                "n_epochs": n_epochs, "lr": lr, "lr_end": lr_end, "grad_clip": grad_clip,
                "latent_reg": forcing.latent_reg, "obs_reg": forcing.obs_reg, "teacher_noise": teacher_noise,
                "loss": forcing.loss, "warmup": forcing.warmup, "eval_every": eval_every, "eval_steps": eval_steps,
                "eval_data": "train" if eval_data is None else "given", "eval_starts": eval_starts,
                "select_regime": select_regime, "fused": bool(fused), "stateful": forcing.stateful,
                "skip_nonfinite": skip_nonfinite, "lr_backoff": lr_backoff, "rewinds": rewinds,
                "rewind_after": rewind_after, "device": str(dev), "optimizer": optimizer}
    history = train_loop(model, loss_fn=forcing.loss_fn, sampler=sampler, n_epochs=n_epochs, lr=lr, lr_end=lr_end,
                         optimizer=optimizer, grad_clip=grad_clip, seed=seed, progress=progress, device=dev,
                         checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume,
                         on_divergence=on_divergence, skip_nonfinite=skip_nonfinite, lr_backoff=lr_backoff,
                         rewinds=rewinds, rewind_after=rewind_after, settings=settings,
                         penalties=forcing.penalties,
                         on_batch=forcing.on_batch, on_epoch=forcing.on_epoch, evaluate=evaluate,
                         eval_every=eval_every, score_name="state_space_divergence", engine_state=forcing,
                         history_keys=_HISTORY_KEYS, callback=callback,
                         divergence_advice="Try a smaller `lr`, a smaller `grad_clip`, a larger `alpha` or a shorter "
                                           "`seq_len`.")
    if select_regime is not None:
        _report_regime_selection(history, select_regime)
    if not history["diverged"] and history["eval_epoch"] and history["best_epoch"] < 0:
        warnings.warn("no scored free run was usable (each diverged or left the range of the data), so the "
                      "model holds the last training state. Consider a clipped shallow PLRNN (clip=True), a "
                      "larger `alpha` or more epochs.", RuntimeWarning, stacklevel=2)
    return history
