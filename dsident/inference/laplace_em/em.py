"""The Laplace-EM training protocol of the rPLRNN (``fit_laplace_em``).

1. LDS initialisation (:mod:`.lds_init`).
2. PLRNN EM stages with the process noise annealed, Σ = anneal[k]·I (default 1, 0.1, 0.01,
   0.001), B free in the first stage and fixed afterwards; in each stage at most
   ``n_iter_per_stage`` EM iterations, stopping when the objective gains less than
   ``tol·|objective_0|``; the best-objective parameters of each stage start the next one, and
   the best of the last stage are written into the model. With ``select="bounded"`` (the
   default) "best" is the highest objective among the iterates whose free run stays within the
   data's range (:mod:`.selection`), and a stage with no such iterate ends the annealing.

The objective monitored is the Laplace approximation of log p(X) plus the log of the ridge
prior (the manifold-attractor penalty). The penalty weights come from
``model.dynamics.quadratic_penalty()`` (eq. 3 with the model's τ) multiplied by the number of
transitions, i.e. the EM maximises ``log p(X) - (T/2)·L_reg``; the model's τ is therefore the
per-time-step τ the paper reports (its LL-unit τ divided by T).
"""
from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import xarray as xr

from ...data.container import as_dataset, to_arrays
from .estep import Chain, chain_to_trials, laplace_estep, make_chain
from .lds_init import fit_lds, pca_init
from .mstep import RidgePrior, expected_stats, mstep, mstep_glm_obs, no_prior
from .params import PLRNNParams, check_laplace_model, params_from_model, params_to_model
from .selection import data_box, free_run_exit, free_run_observations

__all__ = ["fit_laplace_em", "prior_from_dynamics", "chain_from_dataset", "make_smoother", "restore_smoother",
           "SELECT_RULES"]

#: the rules for which EM iterate of an annealing stage is kept (``select=``)
SELECT_RULES = ("likelihood", "bounded", "dstsp")


def _scatter(values: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    """``values`` placed at ``index`` of a length-``n`` vector of NaN."""
    out = np.full(n, np.nan)
    out[index] = values
    return out


def _free_run_divergence(candidates: list[PLRNNParams], chain: Chain, rng: np.random.Generator,
                         burn_in: int = 1_000, min_steps: int = 10_000) -> np.ndarray:
    """D_stsp (KL(data ‖ model), the package's estimator) of each candidate's free run.

    Each candidate runs from its μ0 without process noise for ``burn_in`` plus
    max(``min_steps``, data length) steps; its observations are drawn from the observation model
    (Gaussian noise with Γ, Poisson or Bernoulli samples), so that the comparison is between
    the model's and the data's distributions of observations. Returns (P,) nats (NaN when
    undefined).
    """
    from ...metrics import state_space_divergence

    data = np.where(chain.mask, chain.x, np.nan)
    n = max(min_steps, data.shape[0])
    mean = free_run_observations(candidates, np.stack([c.mu0[None, :] for c in candidates]), burn_in + n)
    out = np.full(len(candidates), np.nan)
    for i, c in enumerate(candidates):
        m = mean[i, 0, burn_in:]
        if not np.all(np.isfinite(m)):
            continue
        if c.likelihood == "poisson":
            x = rng.poisson(np.minimum(m, 1e6)).astype(float)
        elif c.likelihood == "bernoulli":
            x = rng.binomial(1, m).astype(float)
        else:
            x = m + np.sqrt(c.Gamma) * rng.standard_normal(m.shape)
        out[i] = state_space_divergence(data, x)
    return out


def _start_states(iterates: list[tuple[float, PLRNNParams]], starts: np.ndarray, max_starts: int = 8) -> np.ndarray:
    """Initial states (P, S, M) of the free-run check: each iterate's μ0, then up to
    ``max_starts − 1`` of the trials' smoothed first states (shared by all iterates)."""
    starts = starts[: max_starts - 1]
    return np.stack([np.concatenate([p.mu0[None, :], starts], axis=0) for _, p in iterates])


def chain_from_dataset(ds: xr.Dataset) -> Chain:
    """The chain of all trials of a dsident dataset (missing samples masked)."""
    arr = to_arrays(ds)
    return make_chain(arr.x, arr.mask, arr.u, arr.length)


def prior_from_dynamics(dynamics: Any, n_trans: int) -> RidgePrior:
    """Ridge prior (LL units) from a PLRNN's ``quadratic_penalty()``, scaled by ``n_trans``."""
    M = dynamics.latent_dim
    if not hasattr(dynamics, "quadratic_penalty"):
        return no_prior(M)
    try:
        q = dynamics.quadratic_penalty()
    except ValueError as err:
        raise ValueError(f"method='laplace-em' needs a quadratic penalty (manifold, none, iplrnn, l2p, l2f): {err}") from err
    W_w = np.asarray(q.W_weight) * (1.0 - np.eye(M))
    return RidgePrior(n_trans * np.asarray(q.a_weight), np.asarray(q.a_target), n_trans * W_w,
                      np.asarray(q.W_target), n_trans * np.asarray(q.h_weight), np.asarray(q.h_target))


def make_smoother(params: PLRNNParams, *, max_iter: int = 50):
    """A callable ``(data) -> xr.Dataset`` with the Laplace posterior means ``z`` and variances ``z_var``."""
    state: dict[str, Any] = {"params": params}

    def smoother(data: Any) -> xr.Dataset:
        ds = data if isinstance(data, xr.Dataset) else as_dataset(data)
        chain = chain_from_dataset(ds)
        p = state["params"]
        if chain.x.shape[1] != p.obs_dim:
            raise ValueError(f"`data` has {chain.x.shape[1]} channel(s) but the model observes {p.obs_dim}: smooth "
                             "data with the channels it was fitted to, in the same order.")
        if chain.s.shape[1] != p.input_dim:
            raise ValueError(f"`data` has {chain.s.shape[1]} input(s) (variable `u`) but the model takes "
                             f"{p.input_dim}: smooth data with the inputs it was fitted with, e.g. "
                             "`dsident.data.as_dataset(x, u=u)`.")
        post = laplace_estep(state["params"], chain, None, max_iter=max_iter)
        var = np.diagonal(post.cov, axis1=1, axis2=2)
        z = chain_to_trials(chain, post.mean)
        zv = chain_to_trials(chain, var)
        coords = {"time": ds["time"].values} if "time" in ds.coords else {}
        if "trial" in ds.coords:
            coords["trial"] = ds["trial"].values
        return xr.Dataset({"z": (("trial", "time", "latent"), z), "z_var": (("trial", "time", "latent"), zv)},
                          coords=coords, attrs={"dt": float(ds.attrs.get("dt", 1.0)),
                                                "log_likelihood": float(post.log_lik), "method": "laplace-em"})
    return smoother


def restore_smoother(model: Any, history: dict[str, Any]) -> None:
    """Attach to a loaded ``model`` the Laplace smoother its Laplace-EM fit had (``model.smoother_``).

    The smoother needs only the parameters, which the model holds. A save keeps the tensors in
    the model's dtype (float32 by default) and the fit history keeps the fitted parameters in
    float64 (``history["params"]``); those are used when they agree with the model's to float32
    precision, so that ``smooth`` after ``load`` gives what it gave before ``save``. Otherwise
    (the model was changed after the fit) the model's own parameters are used.
    """
    params = params_from_model(model)
    saved = history.get("params") if isinstance(history, dict) else None
    if isinstance(saved, dict) and set(saved) == set(PLRNNParams._fields):
        try:
            exact = PLRNNParams(**{k: v if k in ("readout", "likelihood") or v is None else np.asarray(v, dtype=float)
                                   for k, v in saved.items()})
            fields = [f for f in PLRNNParams._fields if isinstance(getattr(params, f), np.ndarray)
                      and not (f == "Gamma" and params.likelihood != "gaussian")]      # unused for counts
            if exact.readout == params.readout and exact.likelihood == params.likelihood and all(
                    np.shape(getattr(exact, f)) == getattr(params, f).shape
                    and np.allclose(getattr(exact, f), getattr(params, f), rtol=1e-5, atol=1e-6) for f in fields):
                params = exact._replace(Sigma0=params.Sigma0 if exact.Sigma0 is None else exact.Sigma0)
        except (TypeError, ValueError):
            pass
    settings = history.get("settings", {}) if isinstance(history, dict) else {}
    model.smoother_ = make_smoother(params, max_iter=int(settings.get("max_estep_iter", 30)))


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency; stay silent if it is broken
        return None
    return tqdm(total=total, desc="laplace-em", leave=False)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check_options(**options: Any) -> None:
    """Refuse out-of-range settings of :func:`fit_laplace_em` by name, before any work."""
    counts = {"n_iter_per_stage": 1, "n_iter_lds": 0, "max_estep_iter": 1}
    for name, low in counts.items():
        value = options[name]
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < low:
            raise ValueError(f"`{name}` must be an integer >= {low}; got {name}={value!r}")
    tol = options["tol"]
    if not _is_number(tol) or not np.isfinite(tol) or tol < 0:
        raise ValueError(f"`tol` must be a finite number >= 0 (a fraction of the stage's first objective); "
                         f"got tol={tol!r}")
    for name in ("gamma_floor", "initial_var"):
        value = options[name]
        if value is None and name == "initial_var":
            continue
        if not _is_number(value) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"`{name}` must be a positive finite variance; got {name}={value!r}")


def _predictor_scale(x: np.ndarray, likelihood: str) -> np.ndarray:
    """Poisson counts or Bernoulli 0/1 data mapped through the inverse link of a smoothed value,
    as the observation models' own initialisation maps them; the Laplace parameters' predictor
    is per bin (b holds log bin_size), so the Poisson target is log(count + PSEUDO_COUNT)."""
    from ...observations.bernoulli import SMOOTHING
    from ...observations.poisson import PSEUDO_COUNT

    if likelihood == "poisson":
        return np.log(x + PSEUDO_COUNT)
    p = (x + SMOOTHING) / (1.0 + 2.0 * SMOOTHING)
    return np.log(p) - np.log1p(-p)


def fit_laplace_em(model: Any, data: Any, *, seed: int | None = None, progress: bool = True,
                   n_iter_per_stage: int = 20, anneal: tuple[float, ...] = (1.0, 0.1, 0.01, 0.001),
                   fix_B_after_first_stage: bool = True, tol: float = 1e-3, n_iter_lds: int = 20,
                   lds_init: bool = True, update_sigma: bool = False, flip: str = "all",
                   max_estep_iter: int = 30, gamma_floor: float = 1e-5, initial_var: float | None = None,
                   regularize: bool = True, manifold_init: bool = False, select: str = "bounded",
                   check_steps: int = 50_000, bound_margin: float = 1.0) -> dict:
    """Fit a PLRNN state-space model by Laplace-EM with the rPLRNN annealing protocol.

    Parameters
    ----------
    model : StateSpaceModel
        PLRNN dynamics (``piecewise_linear``) and a Gaussian, Poisson (exp link) or Bernoulli
        observation. Updated in place.
    data : xarray.Dataset or anything :func:`dsident.data.as_dataset` accepts
        ``x(trial, time, channel)``, optional inputs ``u(trial, time, input)``; NaN = missing.
    seed : int, optional
        For the random loadings of the initialisation.
    progress : bool
        tqdm progress bar over EM iterations.
    n_iter_per_stage : int
        Maximum EM iterations per annealing stage (20 in the reference protocol).
    anneal : tuple of float
        Process-noise variances of the stages (Σ = value·I, data units).
    fix_B_after_first_stage : bool
        Hold the loadings B after the first stage.
    tol : float
        A stage stops when its objective gains less than ``tol·|objective_0|``.
    n_iter_lds : int
        LDS-EM iterations of the initialisation; ``lds_init=False`` starts from the model's
        current parameters instead.
    update_sigma : bool
        Re-estimate Σ in the M-step instead of annealing it (then ``anneal`` gives only the start).
    flip : {"all", "single"}
        E-step constraint-flip rule.
    max_estep_iter : int
        Maximum block-tridiagonal solves per E-step.
    gamma_floor : float
        Lower bound of the observation-noise variances.
    initial_var : float, optional
        Variance of the first latent state; default the model's ``initial_var``.
    regularize : bool
        Use the dynamics' manifold-attractor penalty as the ridge prior.
    manifold_init : bool, default False
        After the LDS initialisation, set the regularized units to the penalty's targets
        (A_ii = 1, W_i,: = 0, h_i = 0), as in the rPLRNN's gradient-training initialisation
        (Fig. S1 of the paper). The default keeps the LDS values for every unit (A = diag of the
        LDS transition matrix), as the reference EM code's annealing does, and lets the penalty
        pull them. On the bursting neuron the default is the better start (docs/laplace_em.md,
        "Which initialisation": τ = 0.667 beats τ = 0 in 48 of 80 paired seeds from the LDS
        values, 16 of 30 from the manifold init).
    select : {"bounded", "likelihood", "dstsp"}
        Which iterate of a stage is kept. ``"likelihood"`` (the paper's rule): the highest
        objective. ``"bounded"`` (default): the highest objective among the iterates whose noise-free free
        run (from μ0 and from each trial's smoothed first state, inputs off) keeps its mean
        observation inside the data's range widened by ``bound_margin`` times its width for
        ``check_steps`` steps; a stage with no such iterate ends the annealing and the previous
        stage's choice is kept (in the first stage the rule falls back to the likelihood, with a
        warning). ``"dstsp"``: among the bounded iterates, the one whose free run (with
        observation noise) has the lowest state-space divergence from the training data; the
        model gets the lowest-divergence iterate of all stages, not necessarily of the last.
    check_steps : int
        Length of the free run of ``select="bounded"`` (time steps).
    bound_margin : float
        Widening of the data's per-channel range for ``select="bounded"``.

    Returns
    -------
    dict
        ``log_likelihood`` (Laplace log p(X) per EM iteration), ``objective`` (plus log prior),
        ``stage`` and ``sigma`` per iteration, ``lds_log_likelihood``, ``stage_best``
        (objective of each stage's kept iterate), ``stage_kept`` (its iteration index within the
        stage), ``stage_exit`` (per stage and iterate, the step at which its free run left the
        data's range, −1 = stayed inside, −2 = not checked because the best iterate stayed inside;
        ``select="bounded"`` only), ``stage_dstsp`` (per stage and iterate, the free run's
        D_stsp; ``select="dstsp"`` only), ``best_stage`` (the stage the model's parameters come
        from), ``annealing_stopped`` (the stage whose iterates all left
        the data's range, or None), ``estep_solves``, ``diverged`` (bool), ``message``,
        ``time_s`` and ``settings``.

    Raises
    ------
    ValueError
        If the dynamics is not a piecewise-linear PLRNN (use "svi", "bptt" or "teacher-forcing").
    """
    check_laplace_model(model)
    ds = data if isinstance(data, xr.Dataset) else as_dataset(data)
    _check_options(n_iter_per_stage=n_iter_per_stage, n_iter_lds=n_iter_lds, max_estep_iter=max_estep_iter,
                   tol=tol, gamma_floor=gamma_floor, initial_var=initial_var)
    try:
        bad_anneal = len(anneal) == 0 or any(not _is_number(a) or not np.isfinite(a) or a <= 0 for a in anneal)
    except TypeError:
        bad_anneal = True
    if bad_anneal:
        raise ValueError(f"`anneal` must be a non-empty sequence of positive process-noise variances, one per stage "
                         f"(e.g. (1.0, 0.1, 0.01, 0.001), or (0.1,) for one stage); got anneal={anneal!r}")
    if select not in SELECT_RULES:
        raise ValueError(f"`select` must be one of {SELECT_RULES}; got {select!r}")
    rng = np.random.default_rng(seed)
    if int(check_steps) < 1:
        raise ValueError(f"`check_steps` must be a positive number of time steps; got {check_steps!r}")
    chain = chain_from_dataset(ds)
    t0 = time.perf_counter()
    current = params_from_model(model)
    # counts span at least one count per bin: a silent neuron's box must admit a low fitted rate
    box = data_box(chain.x, chain.mask, bound_margin, min_width=1.0 if current.likelihood == "poisson" else 0.0) \
        if select != "likelihood" else None
    M, K = current.latent_dim, current.input_dim
    if K != chain.s.shape[1]:
        raise ValueError(f"the model takes {K} inputs but the data have {chain.s.shape[1]} (variable `u`)")
    init_var = float(np.exp(model.log_initial_var.detach().cpu().double().numpy()).mean()) if initial_var is None \
        else float(initial_var)
    prior = prior_from_dynamics(model.dynamics, chain.n_transitions) if regularize else no_prior(M)
    history: dict[str, Any] = {"log_likelihood": [], "objective": [], "stage": [], "sigma": [], "estep_solves": [],
                               "lds_log_likelihood": [], "stage_best": [], "stage_kept": [], "stage_exit": [],
                               "stage_dstsp": [], "best_stage": None, "annealing_stopped": None,
                               "diverged": False, "message": ""}
    best_dstsp = np.inf
    z_prev = None
    if lds_init:
        # the PCA reads Poisson / Bernoulli data on the predictor's scale, where B and b act (raw
        # counts as b put the rates at exp(mean count): a busy neuron's overflowed)
        pca_chain = chain if current.likelihood == "gaussian" else \
            chain._replace(x=_predictor_scale(chain.x, current.likelihood))
        p0 = pca_init(pca_chain, M, K, readout=current.readout, sigma=anneal[0], initial_var=init_var, seed=seed)
        p0 = p0._replace(likelihood=current.likelihood)
        if current.readout == "identity":    # the model's fixed offset (log bin_size for Poisson), not PCA's 0
            p0 = p0._replace(b=current.b)
        if current.likelihood == "gaussian":
            p0, lls, z_prev = fit_lds(chain, p0, n_iter=n_iter_lds)
            history["lds_log_likelihood"] = [float(v) for v in lls]
        current = p0
        if manifold_init:
            # the manifold-attractor init of the regularized units (A=1, W=0, h=0) where a prior pulls
            A = np.where(prior.A_weight > 0, prior.A_target, p0.A)
            W = np.where(prior.W_weight > 0, prior.W_target, p0.W)
            h = np.where(prior.h_weight > 0, prior.h_target, p0.h)
            current = p0._replace(A=A, W=W, h=h)
    else:
        current = current._replace(Sigma=np.full(M, anneal[0]), Sigma0=np.full(M, init_var))
    bar = _progress(n_iter_per_stage * len(anneal), progress)
    best_params = current
    try:
        for k, level in enumerate(anneal):
            current = current._replace(Sigma=np.full(M, float(level)) if not (update_sigma and k > 0) else current.Sigma)
            update_B = not (fix_B_after_first_stage and k > 0)
            obj0, prev_obj = None, None
            iterates: list[tuple[float, PLRNNParams]] = []   # (objective, parameters) of each E-step
            for it in range(n_iter_per_stage):
                try:
                    post = laplace_estep(current, chain, z_prev, flip=flip, max_iter=max_estep_iter)
                except np.linalg.LinAlgError as err:
                    history["diverged"], history["message"] = True, f"stage {k} iteration {it}: {err}"
                    break
                obj = post.log_lik + prior.value(current)
                if not np.isfinite(obj) or not current.is_finite():
                    history["diverged"], history["message"] = True, f"stage {k} iteration {it}: non-finite likelihood"
                    break
                z_prev = post.mean
                history["log_likelihood"].append(float(post.log_lik))
                history["objective"].append(float(obj))
                history["stage"].append(k)
                history["sigma"].append(float(level))
                history["estep_solves"].append(int(post.info.n_solves))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(stage=k, ll=f"{post.log_lik:.4g}")
                iterates.append((float(obj), current))
                if obj0 is None:
                    obj0 = obj
                elif obj - prev_obj < tol * abs(obj0) and obj - prev_obj >= 0:
                    break
                prev_obj = obj
                if it == n_iter_per_stage - 1:
                    break
                st = expected_stats(post, chain, readout=current.readout)
                new = mstep(st, current, prior, update_sigma=update_sigma, update_B=update_B,
                            gamma_floor=gamma_floor)
                if current.likelihood != "gaussian":
                    new = mstep_glm_obs(post, chain, new, update_B=update_B)
                if not new.is_finite():
                    history["diverged"], history["message"] = True, f"stage {k} iteration {it}: M-step diverged"
                    break
                current = new
            kept = int(np.argmax([o for o, _ in iterates])) if iterates else -1
            if select != "likelihood" and iterates:
                starts = z_prev[chain.start] if z_prev is not None else np.zeros((0, M))
                # the latent bound is generous: a diverging unit grows geometrically and crosses
                # any finite bound within a few steps, while a bounded orbit may roam beyond the
                # smoothed states' range
                zbox = data_box(z_prev, np.ones(z_prev.shape, dtype=bool), 10.0)
                z0 = _start_states(iterates, starts)
                # usually the best iterate is bounded: check it alone first, the rest only if not
                exits = np.full(len(iterates), -2)       # -2: not checked
                exits[kept] = free_run_exit([iterates[kept][1]], z0[kept:kept + 1], box, int(check_steps),
                                            latent_box=zbox)[0]
                if (exits[kept] >= 0 or select == "dstsp") and len(iterates) > 1:
                    rest = np.flatnonzero(np.arange(len(iterates)) != kept)
                    exits[rest] = free_run_exit([iterates[i][1] for i in rest], z0[rest], box, int(check_steps),
                                                latent_box=zbox)
                history["stage_exit"].append([int(e) for e in exits])
                ok = np.flatnonzero(exits < 0)
                if ok.size and select == "dstsp":
                    d = _free_run_divergence([iterates[i][1] for i in ok], chain, rng)
                    history["stage_dstsp"].append([float(v) for v in _scatter(d, ok, len(iterates))])
                    kept = int(ok[np.nanargmin(d)]) if np.isfinite(d).any() else \
                        int(ok[np.argmax([iterates[i][0] for i in ok])])
                    if np.nanmin(np.append(d, np.inf)) < best_dstsp:
                        best_dstsp, best_params = float(np.nanmin(d)), iterates[kept][1]
                        history["best_stage"] = k
                elif ok.size:
                    kept = int(ok[np.argmax([iterates[i][0] for i in ok])])
                elif k > 0:
                    history["annealing_stopped"] = k
                    history["message"] = (f"stage {k} (sigma={level:g}): every iterate's free run left the data's "
                                          f"range; kept stage {k - 1}")
                    break
                else:
                    warnings.warn(f"select={select!r}: no iterate of the first stage has a free run inside the "
                                  "data's range; keeping the highest-likelihood one (its free runs leave the "
                                  "data's range).", RuntimeWarning, stacklevel=2)
            stage_obj, stage_best = iterates[kept] if iterates else (-np.inf, current)
            history["stage_best"].append(float(stage_obj))
            history["stage_kept"].append(kept)
            current = stage_best
            if select != "dstsp" or not np.isfinite(best_dstsp):
                best_params = stage_best
                history["best_stage"] = k
            if history["diverged"]:
                break
    finally:
        if bar is not None:
            bar.close()
    if history["diverged"]:
        warnings.warn(f"laplace-em stopped early, the fit diverged ({history['message']}); the model keeps the "
                      "best parameters seen before.", RuntimeWarning, stacklevel=2)
    params_to_model(best_params, model)
    model.smoother_ = make_smoother(best_params, max_iter=max_estep_iter)
    history["time_s"] = time.perf_counter() - t0
    history["params"] = best_params._asdict()          # plain dict: JSON-able through the estimator's save
    history["settings"] = {"method": "laplace-em", "seed": seed, "n_iter_per_stage": n_iter_per_stage,
                           "anneal": list(anneal), "fix_B_after_first_stage": fix_B_after_first_stage, "tol": tol,
                           "n_iter_lds": n_iter_lds if lds_init else 0, "update_sigma": update_sigma, "flip": flip,
                           "max_estep_iter": max_estep_iter, "gamma_floor": gamma_floor, "initial_var": init_var,
                           "regularize": regularize, "manifold_init": manifold_init, "select": select,
                           "check_steps": int(check_steps),
                           "bound_margin": bound_margin, "n_transitions": chain.n_transitions}
    return history
