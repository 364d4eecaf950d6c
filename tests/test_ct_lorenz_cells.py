"""The continuous-time models' Lorenz-63 benchmark cells and the init options they use.

* ``ORGaNICs(norm_weight_scale=...)``: the initial normalisation weights are scaled, and a small
  factor keeps the modulator subsystem stable for principal potentials of the size of z-scored
  data (checked with autograd Jacobians of the vector field, not with the analytic one).
* there is a ``("lorenz63", gnode|ltc|rfwp|organics, method)`` cell of ``PAIR_DEFAULTS`` for
  both methods (that every cell builds without dropping a setting is tested for all datasets
  in ``test_experiments.py``).
"""
import math

import pytest
import torch

from dsident.dynamics.organics import ORGaNICs
from dsident.experiments.config import PAIR_DEFAULTS

F64 = torch.float64


def _modulator_jacobian(model: ORGaNICs, y: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """d(da/dt)/da at the state [y, a] (n, n), by autograd through ``vector_field``."""
    n = model.n_neurons

    def da_dt(aa: torch.Tensor) -> torch.Tensor:
        return model.vector_field(torch.cat([y, aa])[None])[0, n:]

    return torch.autograd.functional.jacobian(da_dt, a)


def test_norm_weight_scale_multiplies_the_initial_weights():
    base = ORGaNICs(4, recurrence="free", seed=3)
    scaled = ORGaNICs(4, recurrence="free", norm_weight_scale=0.05, seed=3)
    assert torch.allclose(scaled.norm_weight, 0.05 * base.norm_weight, rtol=1e-6)
    # everything else starts the same
    assert torch.equal(scaled.recurrent_weight, base.recurrent_weight)
    assert torch.equal(scaled.drive_bias, base.drive_bias)
    assert scaled.config()["norm_weight_scale"] == 0.05


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, "1"])
def test_norm_weight_scale_rejects_non_positive(value):
    with pytest.raises(ValueError, match="norm_weight_scale"):
        ORGaNICs(3, norm_weight_scale=value)


def test_small_norm_weights_keep_the_modulators_stable_at_data_scale():
    # principal potentials of a z-scored Lorenz-63 channel (|y| up to about 2.9) read out directly
    n = 3
    y = torch.full((n,), 2.5, dtype=F64)
    a = torch.full((n,), 0.5, dtype=F64)
    for seed in range(3):
        default = ORGaNICs(n, recurrence="free", seed=seed).double()
        small = ORGaNICs(n, recurrence="free", norm_weight_scale=0.05, seed=seed).double()
        grow = torch.linalg.eigvals(_modulator_jacobian(default, y, a)).real.max()
        settle = torch.linalg.eigvals(_modulator_jacobian(small, y, a)).real.max()
        assert grow > 0, "the default start has growing modulators at |y| = 2.5"
        assert settle < 0, "norm_weight_scale=0.05 starts with decaying modulators at |y| = 2.5"


def test_norm_weight_scale_bound_in_the_docstring():
    # stable for |y| < 1 / sqrt(factor * n): W diag(y^2) then has row sums < 1
    for factor, n in ((0.05, 3), (0.2, 8)):
        model = ORGaNICs(n, recurrence="free", norm_weight_scale=factor, seed=n).double()
        y = torch.full((n,), 0.99 / math.sqrt(factor * n), dtype=F64)
        jac = _modulator_jacobian(model, y, torch.ones(n, dtype=F64))
        assert torch.linalg.eigvals(jac).real.max() < 0


def test_the_estimator_passes_norm_weight_scale_on():
    import numpy as np

    from dsident.models import ORGaNICs as ORGaNICsEstimator

    t = np.arange(300) * 0.01
    x = np.stack([np.sin(3 * t), np.cos(3 * t), np.sin(6 * t)], -1)
    est = ORGaNICsEstimator(3, readout="identity", rate_readout=False, norm_weight_scale=0.05, seed=0)
    est.fit(x[None], method="teacher-forcing", n_epochs=1, batches_per_epoch=1, seq_len=20, eval_every=0,
            progress=False)
    assert est.model_.dynamics.norm_weight_scale == 0.05
    # one Adam step (lr 3e-3) moves log W by at most about 3e-3: still about 0.05 times the default
    default = ORGaNICs(3, recurrence="free", seed=0)
    ratio = est.model_.dynamics.norm_weight.detach() / default.norm_weight
    assert torch.allclose(ratio, torch.full_like(ratio, 0.05), rtol=0.02)


CT_LORENZ_CELLS = [key for key in PAIR_DEFAULTS
                   if key[0] == "lorenz63" and key[1] in ("gnode", "ltc", "rfwp", "organics")]


def test_there_are_eight_continuous_time_lorenz_cells():
    assert {(m, meth) for _, m, meth in CT_LORENZ_CELLS} == {
        (m, meth) for m in ("gnode", "ltc", "rfwp", "organics") for meth in ("svi", "teacher-forcing")}
