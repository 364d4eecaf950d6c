"""The estimator face shared by every model in :mod:`dsident.models` (scikit-learn habits).

An estimator stores hyperparameters in ``__init__`` (nothing else), and ``fit`` validates
the data, builds a :class:`~dsident.StateSpaceModel` (``model_``) from a latent dynamics and an
observation model, and hands it to an inference engine (``history_``). Everything after
fitting delegates to ``model_``.

A subclass defines ``__init__`` with explicit keyword hyperparameters — at least
``latent_dim``, ``observation``, ``readout``, ``observation_options``, ``process_noise``,
``initial_var`` and ``seed`` — a class attribute ``default_method`` and
:meth:`LatentModelEstimator._build_dynamics`.
"""
from __future__ import annotations

import copy
from abc import ABCMeta, abstractmethod
import math
import os
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import xarray as xr
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .._text import listed
from .._version import __version__
from ..data import as_dataset, to_arrays
from ..dynamics.base import LatentDynamics
from ..model import StateSpaceModel, read_saved_config
from ..observations import ObservationModel, make_observation
from ..observations.gaussian import reads_gaussian

#: a fit needs a trial of at least this many samples: fewer show no dynamics to learn from
MIN_FIT_SAMPLES = 10

def check_channels(x: np.ndarray, mask: np.ndarray, names: list[str], observation: ObservationModel) -> None:
    """Refuse training channels a likelihood cannot use, before any work is done.

    A channel with no observed sample carries nothing to fit. Under a Gaussian likelihood a
    constant channel (standard deviation 0 over its observed samples) would get a noise variance
    of 0, so its log-likelihood would be unbounded and swamp every other channel. For count
    likelihoods a constant channel is legitimate (a neuron silent in the training data) but its
    rate can only be learned to be constant, which the user should hear about.

    Parameters
    ----------
    x : ndarray of shape (trial, time, channel)
        Observations, NaN = missing.
    mask : bool ndarray of the same shape
        True = observed.
    names : list of str
        Channel names, for the messages.
    observation : ObservationModel
        The likelihood the model will be fitted with.

    Raises
    ------
    ValueError
        Naming the channels without observations, or the constant ones under a Gaussian likelihood.
    """
    observed = mask.reshape(-1, mask.shape[-1])
    values = np.where(observed, x.reshape(-1, x.shape[-1]), np.nan)
    empty = [names[i] for i in np.flatnonzero(observed.sum(0) == 0)]
    if empty:
        raise ValueError(f"`data`: channel(s) {listed(empty)} have no observed sample (all NaN), so there is nothing "
                         "to fit; drop them before fitting.")
    with np.errstate(invalid="ignore"):
        spread = np.nanmax(values, axis=0) - np.nanmin(values, axis=0)
    constant = [names[i] for i in np.flatnonzero(spread == 0)]
    if not constant:
        return
    if reads_gaussian(observation):
        raise ValueError(f"`data`: channel(s) {listed(constant)} are constant over all observed samples (std 0). A "
                         "Gaussian observation model would give them zero noise variance and an unbounded "
                         "likelihood; drop them (a constant carries no dynamics): `ds.drop_sel(channel=...)`, or "
                         "on the command line `--read channels=...` with the channels to keep.")
    warnings.warn(f"`data`: channel(s) {listed(constant)} are constant over all observed samples (e.g. a neuron that "
                  "never fires); the model can only learn a constant rate for them.", RuntimeWarning, stacklevel=3)


#: estimator class name -> class, filled by ``LatentModelEstimator.__init_subclass__`` (used by load)
ESTIMATOR_REGISTRY: dict[str, type["LatentModelEstimator"]] = {}


def _jsonable(value: Any) -> Any:
    """A JSON-safe copy of ``value`` (arrays -> lists, non-finite floats -> None, others -> repr)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return repr(value)


class LatentModelEstimator(BaseEstimator, metaclass=ABCMeta):
    """Base class of the latent-dynamics estimators (PLRNN, ShallowPLRNN, GatedNODE, ...).

    Attributes (after ``fit``)
    --------------------------
    model_ : StateSpaceModel
        The fitted generative model.
    history_ : dict
        What the engine reported (per-iteration losses or bounds and its settings).
    method_ : str
        The inference method used.
    n_features_in_ : int
        Number of observed channels.
    channel_names_ : list of str
        Channel names of the training data (used for generated data).
    """

    #: inference method used when ``fit`` gets none
    default_method: ClassVar[str] = "svi"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):          # private intermediate bases stay out
            ESTIMATOR_REGISTRY[cls.__name__] = cls

    # -- to be provided by subclasses ---------------------------------------------------------
    @abstractmethod
    def _build_dynamics(self, input_dim: int) -> LatentDynamics:
        """The (unfitted) latent dynamics for data with ``input_dim`` inputs."""

    # -- fitting ------------------------------------------------------------------------------
    def fit(self, data: Any, method: str | None = None, *, warm_start: bool = False, restarts: int = 0,
            restart_after: int | None = None, restart_above: float | None = None, best_of: int = 1,
            n_jobs: int = 1, polish: dict[str, Any] | None = None,
            **engine_options: Any) -> "LatentModelEstimator":
        """Build the state-space model and fit it with an inference engine.

        Parameters
        ----------
        data : anything :func:`dsident.data.as_dataset` accepts
            Training trials ``x(trial, time, channel)`` (NaN = missing) and optional inputs ``u``.
        method : str, optional
            Inference engine (a key of :data:`dsident.inference.ENGINES`); default
            :attr:`default_method`.
        warm_start : bool
            Start from the fitted ``model_`` instead of a fresh initialisation: more epochs, or
            another method on the same model (e.g. teacher forcing after SVI). The data must
            have the channels and inputs ``model_`` was fitted on. Laplace-EM then skips its
            LDS initialisation (``lds_init=False`` unless given).
        restarts : int, default 0
            Up to this many fresh starts for a fit that is stuck: when, ``restart_after`` epochs
            in, none of its scored free runs has moved on the data's grid (each diverged, stayed
            outside the data's range, or came to rest at a fixed point), the fit stops and the
            model is built and trained again from seed ``seed + k * 10 000`` (attempt k;
            :mod:`dsident.models.restarts`). The last attempt always runs to the end. Needs a
            method that scores free runs while it trains (teacher forcing with ``eval_every`` >
            0); not with ``warm_start`` or ``checkpoint``. ``history_["restarts"]`` lists the
            abandoned attempts (seed, epoch stopped, scored epochs) and ``history_["seed_used"]``
            the seed of the kept one.
        restart_after : int, optional
            Epochs a fit gets to show one moving free run before a restart; default half of its
            ``n_epochs``, and at most ``n_epochs`` (a larger value could never restart). Fits
            that end well can spend many epochs stuck first (the bursting neuron's ODE-RFWP,
            seed 5: every scored run at rest or off the grid through epoch 44 of 80, then the
            cell's best score), so a measured cell sets its own.
        restart_above : float, optional
            With ``restarts``: a scored free run whose D_stsp is not below this does not count
            as moved either, so a fit whose runs move but never come near the data (tonic spiking
            where the data burst: D_stsp ≈ 14-16 on the bursting neuron, against 1-5 for runs
            that burst) is restarted too. D_stsp's scale is the data's, so the value belongs to a
            dataset (the bursting cells use 10). Ignored when ``restarts`` is 0.
        best_of : int, default 1
            Train this many models, from seeds ``seed + k * 10 000`` (k = 0, 1, ...: the sequence
            restarts draw from), and keep the one whose kept epoch's free run scored the lowest
            D_stsp against the *training* data (``history_["best_state_space_divergence"]``); the
            test data play no part. Each candidate costs a full fit. The choice is only as good
            as that score, so give an ``eval_steps`` that covers much of the training data (the
            quick Lorenz-63 cell scores against all 20 000 samples; docs/teacher_forcing.md
            "Choosing among several fits"). Needs the methods and options ``restarts`` needs.
            With ``restarts``, a stuck candidate gives way to the next seed of the sequence, out
            of the same budget. With ``select_regime``, candidates whose kept run has the
            asked-for kind rank before those that fell back (``regime_fallback``), whatever their
            score. ``history_["best_of"]`` lists every candidate (seed, score, kept epoch, whether
            a scored run moved) and ``history_["seed_used"]`` the seed kept.
        n_jobs : int, default 1
            Worker processes that train ``best_of``'s candidates at once (-1: one per usable
            core; at most ``best_of``): about one fit's time instead of ``best_of`` fits' on a
            machine with the cores to spare. Each worker gets this process's torch threads
            divided among them, and with the same thread count the kept model is the one
            ``n_jobs=1`` keeps, to the bit. CPU only; not with ``restarts``; a ``callback``
            runs in the workers and must be picklable (:mod:`dsident.models.candidates`).
            ``history_["best_of_processes"]`` records the number used.
        polish : dict, optional
            Engine options for a second training stage from the kept state, e.g.
            ``{"batch_size": 128, "batches_per_epoch": 20, "lr": 1e-4, "lr_end": 1e-5,
            "n_epochs": 40, "eval_every": 2}`` (many more windows per update, smaller steps).
            They override the fit's for that stage; the stage's best state is kept only if its
            free run scores a lower D_stsp against the training data than the fit's kept state
            (:mod:`dsident.models.polish`; ``history_["polish"]`` records both scores). After
            ``best_of``'s choice, on the chosen model only. Needs the methods ``restarts``
            needs, and may not change how free runs are scored (``eval_steps``, ...). A
            ``checkpoint`` of the fit is the first stage's; the stage is not checkpointed.
        **engine_options
            Passed to the engine (e.g. ``n_iter``, ``device``, ``progress``).

        Returns
        -------
        self
        """
        from ..inference import check_engine_options, get_engine
        from .candidates import check_n_jobs
        from .polish import check_polish, polish_fit

        method = self.default_method if method is None else method
        engine = get_engine(method)                      # an unknown method fails before any work
        ds = as_dataset(data)
        arrays = to_arrays(ds)
        longest = int(np.max(arrays.length))
        if longest < MIN_FIT_SAMPLES:
            n_read = arrays.x.shape[-1]
            # a (channel, time) array is read as (time, channel): few samples of many channels
            hint = (f" It was read as {n_read} channels: if those are time steps, the array is (channel, time); "
                    f"pass its transpose (time, channel)." if n_read > longest else "")
            raise ValueError(f"`data` is too short to fit: its longest trial has {longest} sample(s), and a fit needs "
                             f"at least {MIN_FIT_SAMPLES} successive samples in one trial.{hint}")
        self._check_hyperparameters()
        n_channels = arrays.x.shape[-1]
        input_dim = 0 if arrays.u is None else arrays.u.shape[-1]
        channel_names = [str(c) for c in ds["channel"].values]
        restarts, restart_after, restart_above = self._check_restarts(engine, method, restarts, restart_after,
                                                                      restart_above, warm_start, engine_options)
        best_of = self._check_best_of(method, best_of, warm_start, engine_options)
        n_jobs = check_n_jobs(n_jobs, best_of, restarts, engine_options)
        polish = check_polish(method, polish, engine_options)
        check_engine_options(method, engine_options, reserved=("seed",),
                             also=("warm_start", "restarts", "restart_after", "restart_above", "best_of", "n_jobs",
                                   "polish"), owner=type(self).__name__)
        if warm_start:
            model = self._warm_model(channel_names, input_dim, float(ds.attrs["dt"]))
            check_channels(arrays.x, arrays.mask, channel_names, model.observation)
            if method == "laplace-em":
                engine_options.setdefault("lds_init", False)
            history = engine(model, ds, seed=self.seed, **engine_options)
        else:
            model, history = self._fit_fresh(engine, ds, arrays, channel_names, input_dim, restarts,
                                             restart_after, restart_above, engine_options, best_of,
                                             method=method, n_jobs=n_jobs)
        if polish:
            seed = history.get("seed_used", self.seed) if history else self.seed
            history = polish_fit(engine, model, history or {}, ds, seed=seed, engine_options=engine_options,
                                 polish=polish)
        self.model_ = model
        self._fitted_params = self._hyperparameter_key()
        self.history_ = history if history is not None else {}
        self.method_ = method
        self.n_features_in_ = n_channels
        self.channel_names_ = channel_names
        return self

    def _new_model(self, arrays: Any, channel_names: list[str], input_dim: int, dt: float) -> StateSpaceModel:
        """A freshly initialised state-space model for the data (seeded by ``self.seed``)."""
        # the seed fixes every random initialisation without touching the caller's global RNG
        with torch.random.fork_rng(devices=[]):
            if self.seed is not None:
                torch.manual_seed(int(self.seed))
            dynamics = self._build_dynamics(input_dim)
            observation = self._build_observation(arrays.x.shape[-1])
        check_channels(arrays.x, arrays.mask, channel_names, observation)
        observation.init_from_data(arrays.x, arrays.mask)
        return StateSpaceModel(dynamics, observation, process_noise=self._process_noise_for_model(),
                               initial_var=self.initial_var, dt=dt, channel_names=channel_names)

    def _process_noise_for_model(self) -> Any:
        """The initial process-noise variance handed to the StateSpaceModel (ODE-RFWP: per unit)."""
        return self.process_noise

    def _hyperparameter_key(self) -> dict[str, Any]:
        """The hyperparameters that built ``model_`` (all but ``seed``), comparable with ``==``."""
        out = {}
        for name, value in self.get_params(deep=False).items():
            if name == "seed":               # a warm start may draw its windows from another seed
                continue
            if isinstance(value, ObservationModel):
                value = {"instance": type(value).__name__, **value.config()}
            out[name] = _jsonable(value)
        return out

    @staticmethod
    def _check_restarts(engine: Any, method: str, restarts: Any, restart_after: Any, restart_above: Any,
                        warm_start: bool, engine_options: dict[str, Any]) -> tuple[int, int, float | None]:
        """Validate ``restarts`` / ``restart_after`` / ``restart_above`` against the method and options;
        all three resolved (``restart_above`` is checked even without restarts, and then None)."""
        import inspect

        from ..inference.training import check_int
        from .restarts import check_scored_refit

        for name, value, low in (("restarts", restarts, 0), ("restart_after", restart_after, 1)):
            if (value is not None or name == "restarts") and (
                    isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
                raise ValueError(f"`{name}` must be an integer >= {low}; got {name}={value!r}.")
        if restart_above is not None and (
                isinstance(restart_above, bool) or not isinstance(restart_above, (int, float, np.integer, np.floating))
                or not math.isfinite(float(restart_above)) or float(restart_above) <= 0):
            raise ValueError(f"`restart_above` must be a finite D_stsp > 0 (e.g. 10 on the bursting neuron) or "
                             f"None; got restart_above={restart_above!r}.")
        if restarts == 0:
            return 0, 0, None
        check_scored_refit(method, "restarts", restarts, warm_start, engine_options)
        # the engine's own default when n_epochs is not given; checked here, before it is used
        n_epochs = check_int("n_epochs", engine_options.get("n_epochs",
                                                            inspect.signature(engine).parameters["n_epochs"].default))
        if restart_after is None:          # half the fit
            restart_after = max(1, n_epochs // 2)
        elif restart_after > n_epochs:
            raise ValueError(f"`restart_after` ({restart_after}) is more epochs than the fit has "
                             f"(n_epochs={n_epochs}), so no attempt could ever be restarted; give "
                             f"restart_after <= n_epochs.")
        return int(restarts), int(restart_after), None if restart_above is None else float(restart_above)

    @staticmethod
    def _check_best_of(method: str, best_of: Any, warm_start: bool, engine_options: dict[str, Any]) -> int:
        """Validate ``best_of`` against the method and options (what ``restarts`` needs, for the
        same reason: both decide on the scored free runs)."""
        from .restarts import check_scored_refit

        if isinstance(best_of, bool) or not isinstance(best_of, (int, np.integer)) or best_of < 1:
            raise ValueError(f"`best_of` must be an integer >= 1 (the number of models to train and choose "
                             f"from); got best_of={best_of!r}.")
        if best_of == 1:
            return 1
        check_scored_refit(method, "best_of", best_of, warm_start, engine_options)
        return int(best_of)

    def _fit_fresh(self, engine: Any, ds: xr.Dataset, arrays: Any, channel_names: list[str],
                   input_dim: int, restarts: int, restart_after: int, restart_above: float | None,
                   engine_options: dict[str, Any], best_of: int = 1, *, method: str = "",
                   n_jobs: int = 1) -> tuple[StateSpaceModel, dict[str, Any]]:
        """Build and fit ``best_of`` fresh models and keep the one with the lowest training score;
        with ``restarts``, a fit that is stuck (:class:`~dsident.models.restarts.StuckWatch`) gives
        way to the next seed, ``restarts`` times in all. With ``n_jobs`` > 1 (no restarts) the
        candidates train at once in worker processes (:mod:`dsident.models.candidates`)."""
        from .candidates import train_side_by_side
        from .restarts import StuckWatch, any_free_run_moved, candidate_rank, restart_seed

        user_seed, abandoned, candidates = self.seed, [], []
        attempt, kept = 0, None

        def consider(seed: int | None, model: StateSpaceModel, history: dict[str, Any]) -> None:
            nonlocal kept
            rank = candidate_rank(history)
            candidates.append({"seed": seed, "best_state_space_divergence": rank[1],
                               "best_epoch": history.get("best_epoch"),
                               "moved": any_free_run_moved(history, restart_above)})
            if "regime_fallback" in history:            # select_regime: the right kind ranks first
                candidates[-1]["regime_fallback"] = rank[0]
            if kept is None or rank < kept[0]:         # ties keep the earlier seed
                kept = (rank, model, history, seed)

        if n_jobs > 1:
            seeds = [restart_seed(user_seed, k) for k in range(best_of)]
            for seed, (model, history) in zip(seeds, train_side_by_side(self, method, ds, seeds, engine_options,
                                                                        n_jobs)):
                consider(seed, model, history)
        try:
            for _ in range(best_of if n_jobs == 1 else 0):
                while True:
                    # the builders read `seed`; each attempt gets its own for this fit only
                    self.seed = restart_seed(user_seed, attempt)
                    attempt += 1
                    model = self._new_model(arrays, channel_names, input_dim, float(ds.attrs["dt"]))
                    options = dict(engine_options)
                    watch = None
                    if len(abandoned) < restarts:
                        watch = StuckWatch(restart_after, engine_options.get("callback"), restart_above)
                        options["callback"] = watch
                    history = engine(model, ds, seed=self.seed, **options)
                    if watch is None or watch.stuck_at is None:
                        break
                    abandoned.append({"seed": self.seed, "stopped_at_epoch": watch.stuck_at,
                                      "scored_epochs": watch.n_scored})
                    below = "" if restart_above is None else f", or scored D_stsp >= restart_above={restart_above:g}"
                    warnings.warn(f"seed {self.seed}: no scored free run of the first {watch.stuck_at + 1} epochs "
                                  f"moved on the data's grid (each diverged, left the data's range or came to "
                                  f"rest{below}); starting again from seed {restart_seed(user_seed, attempt)} "
                                  f"(restart {len(abandoned)} of {restarts}).", RuntimeWarning, stacklevel=3)
                consider(self.seed, model, history)
        finally:
            self.seed = user_seed
        _, model, history, seed_used = kept
        if restarts or best_of > 1:
            history["seed_used"] = seed_used
        if best_of > 1:
            history["best_of"] = candidates
            history["best_of_processes"] = n_jobs
        if restarts:
            history["restarts"] = abandoned
            if restart_above is not None:
                history["restart_above"] = restart_above
            if best_of == 1 and len(abandoned) == restarts and not candidates[0]["moved"]:
                tried = [a["seed"] for a in abandoned] + [seed_used]
                warnings.warn(f"all {len(tried)} attempts (seeds {tried}) were stuck: no scored free run moved on the "
                              f"data's grid; the last one is kept. The model or the method's settings, not the seed, "
                              f"need to change.", RuntimeWarning, stacklevel=3)
        if best_of > 1 and not any(c["moved"] for c in candidates):
            warnings.warn(f"none of the {best_of} candidates (seeds {[c['seed'] for c in candidates]}) has a scored "
                          f"free run that moved on the data's grid; seed {seed_used} is kept. The model or the "
                          f"method's settings, not the seed, need to change.", RuntimeWarning, stacklevel=3)
        return model, history

    def _warm_model(self, channel_names: list[str], input_dim: int, dt: float) -> StateSpaceModel:
        """The fitted ``model_``, checked against the new data, to continue from."""
        model = getattr(self, "model_", None)
        if model is None:
            raise ValueError(f"warm_start=True needs a fitted {type(self).__name__} (call fit once without it, "
                             f"or load a saved one); this one has no model_.")
        fitted_names = list(getattr(self, "channel_names_", channel_names))
        if len(channel_names) != int(model.observation.obs_dim) or channel_names != fitted_names:
            raise ValueError(f"warm_start=True: `data` has channels {listed(channel_names)}, but the model was fitted "
                             f"on {listed(fitted_names)}; give data with the same channels, or fit afresh.")
        if input_dim != int(model.dynamics.input_dim):
            raise ValueError(f"warm_start=True: `data` has {input_dim} input(s), but the model was fitted with "
                             f"{int(model.dynamics.input_dim)}; give data with the same inputs, or fit afresh.")
        if not math.isclose(dt, float(model.dt), rel_tol=1e-9):
            raise ValueError(f"warm_start=True: `data` has dt={dt!r}, but the model was fitted at dt={float(model.dt)!r}; "
                             f"resample the data, or fit afresh.")
        built = getattr(self, "_fitted_params", None)
        if built is not None:
            # set_params between fits: model_ cannot take the new values up, so the estimator would
            # report (and save) hyperparameters its model does not have
            now = self._hyperparameter_key()
            changed = [name for name in now if now[name] != built.get(name)]
            if changed:
                was = ", ".join(f"{name}={built.get(name)!r}" for name in changed)
                new = ", ".join(f"{name}={now[name]!r}" for name in changed)
                raise ValueError(f"warm_start=True continues model_, which was built with {was}; the estimator now "
                                 f"has {new}, which a fitted model cannot take up. Set them back, or fit afresh "
                                 f"(warm_start=False).")
        return model

    def _check_hyperparameters(self) -> None:
        """Validate the shared hyperparameters (the components check their own)."""
        latent_dim = self.latent_dim
        if isinstance(latent_dim, bool) or not isinstance(latent_dim, (int, np.integer)) or latent_dim < 1:
            raise ValueError(f"`latent_dim` must be an integer >= 1; got latent_dim={latent_dim!r}.")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer))):
            raise TypeError(f"`seed` must be an int or None; got seed={self.seed!r}.")
        if self.seed is not None and self.seed < 0:
            # numpy's seeding refused it later with only "expected non-negative integer"
            raise ValueError(f"`seed` must be a non-negative integer or None; got seed={self.seed!r}.")
        if self.observation_options is not None and not isinstance(self.observation_options, dict):
            raise TypeError(f"`observation_options` must be a dict or None; got {self.observation_options!r}.")

    def _build_observation(self, obs_dim: int) -> ObservationModel:
        """The observation model from the ``observation`` name (or a copy of the instance)."""
        if isinstance(self.observation, ObservationModel):
            # a copy, so that fitting never changes the estimator's hyperparameters; in the precision
            # the dynamics are built in (an instance made before torch.set_default_dtype(float64))
            inner = copy.deepcopy(self.observation).to(torch.get_default_dtype())
            return make_observation(inner, obs_dim, int(self.latent_dim))
        options = dict(self.observation_options or {})
        options.setdefault("readout", self.readout)
        return make_observation(self.observation, obs_dim, int(self.latent_dim), **options)

    # -- using the fitted model -----------------------------------------------------------------
    def _fitted(self, action: str) -> StateSpaceModel:
        check_is_fitted(self, "model_", msg=f"This {type(self).__name__} instance is not fitted yet; call fit(data) "
                                            f"before {action}().")
        return self.model_

    def generate(self, n_steps: int, *, n_trials: int = 1, z0: Any = None, x0: Any = None, u: Any = None,
                 noise: bool = False, observation_noise: bool = False, seed: int | None = None,
                 dt: float | None = None) -> xr.Dataset:
        """Run the fitted model freely (see :meth:`dsident.StateSpaceModel.generate`).

        Returns
        -------
        xarray.Dataset
            ``x(trial, time, channel)`` with the training data's channel names, ``z(trial, time, latent)``.
        """
        return self._fitted("generate").generate(n_steps, n_trials=n_trials, z0=z0, x0=x0, u=u, noise=noise,
                                                 observation_noise=observation_noise, seed=seed, dt=dt)

    def smooth(self, data: Any) -> xr.Dataset:
        """Posterior means and variances of the latent paths (needs a smoothing engine's fit)."""
        return self._fitted("smooth").smooth(data)

    def predict(self, data: Any, n: int = 1) -> xr.Dataset:
        """n-step-ahead predictions of the observations (see :meth:`dsident.StateSpaceModel.predict`)."""
        return self._fitted("predict").predict(data, n)

    def score(self, data: Any, **options: Any) -> xr.Dataset:
        """Evaluation metrics on held-out data (:func:`dsident.metrics.evaluate`: D_stsp, D_H, PE(n))."""
        self._fitted("score")
        from ..metrics import evaluate

        return evaluate(self, data, **options)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Save the fitted model, the hyperparameters and the fit history to the directory ``path``.

        See :meth:`dsident.StateSpaceModel.save` (atomic write, sha256-checked tensors).
        """
        model = self._fitted("save")
        params = self.get_params(deep=False)
        if isinstance(params.get("observation"), ObservationModel):
            params["observation"] = {"instance": type(params["observation"]).__name__}
        metadata = {"estimator": {"class": type(self).__name__, "params": _jsonable(params),
                                  "method": self.method_, "history": _jsonable(self.history_)}}
        return model.save(path, metadata=metadata)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LatentModelEstimator":
        """Read an estimator written by :meth:`save` (fitted, ready to generate and score; a
        Laplace-EM fit gets its smoother back, so ``smooth`` works as before the save).

        Raises
        ------
        ValueError
            When ``path`` holds no estimator (a bare StateSpaceModel save), or an estimator of
            another class than the one ``load`` is called on.
        """
        import dsident.models  # noqa: F401  (registers the built-in estimators)

        config = read_saved_config(path)
        entry = config.get("metadata", {}).get("estimator")
        if not entry:
            raise ValueError(f"{str(path)!r} holds a StateSpaceModel without estimator information; read it with "
                             "dsident.StateSpaceModel.load().")
        name = entry.get("class")
        target = ESTIMATOR_REGISTRY.get(name)
        if target is None:
            raise ValueError(f"the saved estimator class {name!r} is unknown; known: {sorted(ESTIMATOR_REGISTRY)}.")
        if cls is not LatentModelEstimator and not issubclass(target, cls):
            raise ValueError(f"{str(path)!r} holds a {name} estimator, not a {cls.__name__}; "
                             f"use {name}.load() or LatentModelEstimator.load().")
        model = StateSpaceModel.load(path)
        params = dict(entry.get("params", {}))
        if isinstance(params.get("observation"), dict):          # an instance was passed at fit time
            fitted = model.observation
            inner = getattr(fitted, "inner", None)
            if isinstance(inner, ObservationModel) and type(fitted).__name__ != params["observation"].get("instance"):
                # ODE-RFWP / ORGaNICs wrap the user's likelihood in a LatentFeatureObservation over the
                # full state: the hyperparameter is the likelihood itself, sized to the read units
                fitted = inner
            params["observation"] = copy.deepcopy(fitted)
        unknown = sorted(set(params) - set(target._get_param_names()))
        if unknown:
            # a save by another dsident version: a bare TypeError from __init__ would not say so
            raise ValueError(f"{str(path)!r} holds a {name} with hyperparameter(s) {unknown} that this dsident "
                             f"{__version__}'s {name} does not take (saved by dsident "
                             f"{config.get('dsident_version', '?')}); load it with that version.")
        estimator = target(**params)
        estimator.model_ = model
        estimator._fitted_params = estimator._hyperparameter_key()
        estimator.history_ = entry.get("history", {})
        estimator.method_ = entry.get("method")
        estimator.n_features_in_ = model.obs_dim
        estimator.channel_names_ = list(model.channel_names or [])
        if estimator.method_ == "laplace-em":
            from ..inference.laplace_em.em import restore_smoother

            restore_smoother(model, estimator.history_)      # its smoother needs only the parameters
        return estimator
