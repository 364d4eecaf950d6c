"""An untrained model of a run configuration: the baseline row of the quick benchmark.

The model is built exactly as the estimator's ``fit`` builds it before training (same seed,
same initialisation, the observation model initialised from the training data), so the
difference between its scores and the fitted model's is what training achieved.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import xarray as xr


def untrained_model(cfg: Mapping[str, Any], train: xr.Dataset) -> Any:
    """The :class:`dsident.StateSpaceModel` that ``fit`` would start from for ``cfg``.

    Parameters
    ----------
    cfg : mapping
        Resolved run configuration (model, model_params, seed).
    train : xarray.Dataset
        Training data (used for the channel count, ``dt`` and the readout's initialisation).

    Returns
    -------
    StateSpaceModel
    """
    from ..data.container import to_arrays
    from ..model import StateSpaceModel
    from .runner import build_estimator

    est, _, _ = build_estimator(cfg)
    arrays = to_arrays(train)
    input_dim = 0 if arrays.u is None else arrays.u.shape[-1]
    # the estimator's own builders, under its seed, as in LatentModelEstimator.fit
    with torch.random.fork_rng(devices=[]):
        if getattr(est, "seed", None) is not None:
            torch.manual_seed(int(est.seed))
        dynamics = est._build_dynamics(input_dim)
        observation = est._build_observation(arrays.x.shape[-1])
    observation.init_from_data(arrays.x, arrays.mask)
    return StateSpaceModel(dynamics, observation, process_noise=est.process_noise, initial_var=est.initial_var,
                           dt=float(train.attrs.get("dt", 1.0)))
