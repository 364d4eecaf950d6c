"""dsident.dynamics.solvers against exact solutions of linear ODEs."""
import math

import numpy as np
import pytest
import torch

from dsident.dynamics import solvers as S

DT = torch.float64


A = torch.tensor([[-0.5, 2.0, 0.0], [-2.0, -0.3, 0.4], [0.1, 0.0, -1.0]], dtype=DT)   # 3 states
Z0 = torch.tensor([[1.0, 0.0, 0.5], [0.5, -1.0, 0.2], [0.1, 0.2, -0.3], [2.0, 1.0, 1.0], [0.0, 0.0, 1.0]],
                  dtype=DT)                                                            # batch 5 != 3


def exact(t, z0=Z0):
    """z(t) = expm(A t) z0 for a float t or a (B, 1) tensor of times."""
    if isinstance(t, torch.Tensor):
        return torch.stack([torch.linalg.matrix_exp(A * float(ti)) @ zi for ti, zi in zip(t[:, 0], z0)])
    return z0 @ torch.linalg.matrix_exp(A * t).T


def linear_field(z, u):
    return z @ A.T


@pytest.mark.parametrize("method, order", [("euler", 1), ("rk4", 4)])
def test_convergence_order_on_a_linear_ode(method, order):
    errors = []
    for n in (16, 32, 64):
        out = S.integrate(lambda t, z: z @ A.T, Z0, [0.0, 1.0], method, {"n_substeps": n})
        errors.append(float((out[:, -1] - exact(1.0)).abs().max()))
    observed = [math.log2(errors[i] / errors[i + 1]) for i in range(2)]
    assert all(abs(o - order) < 0.3 for o in observed), observed


@pytest.mark.parametrize("method", ["euler", "rk4", "dopri5"])
def test_per_trial_dt_matches_separate_calls_and_exact_solution(method):
    dt = torch.tensor([[0.1], [0.2], [0.05], [0.3], [0.15]], dtype=DT)
    n_sub = 200 if method == "euler" else 4
    out = S.solver_step(linear_field, Z0, None, dt, method, n_substeps=n_sub)
    assert out.shape == Z0.shape
    for b in range(Z0.shape[0]):
        alone = S.solver_step(linear_field, Z0[b:b + 1], None, float(dt[b]), method, n_substeps=n_sub)
        assert torch.allclose(out[b:b + 1], alone, atol=1e-8 if method == "dopri5" else 1e-12)
    tol = {"euler": 5e-3, "rk4": 2e-5, "dopri5": 1e-5}[method]
    assert float((out - exact(dt)).abs().max()) < tol


def test_integrate_on_per_trial_irregular_grids():
    gen = torch.Generator().manual_seed(0)
    steps = 0.05 + 0.3 * torch.rand(Z0.shape[0], 6, generator=gen, dtype=DT)
    t = torch.cat([torch.zeros(Z0.shape[0], 1, dtype=DT), steps.cumsum(1)], dim=1)       # (B, 7)
    out = S.integrate(lambda tt, z: z @ A.T, Z0, t, "rk4", {"step_size": 0.01})
    assert out.shape == (Z0.shape[0], 7, 3)
    want = torch.stack([exact(t[:, k:k + 1]) for k in range(7)], dim=1)
    assert float((out - want).abs().max()) < 1e-8


def test_dopri5_accuracy_and_time_dependent_field():
    out = S.integrate(lambda t, z: z @ A.T, Z0, torch.linspace(0, 2, 5), "dopri5", {"rtol": 1e-10, "atol": 1e-12})
    assert float((out[:, -1] - exact(2.0)).abs().max()) < 1e-8
    # dz/dt = cos(t): z(t) = z0 + sin(t)
    out = S.integrate(lambda t, z: torch.full_like(z, math.cos(t)), Z0, [0.0, 1.0, 3.0], "dopri5",
                      {"rtol": 1e-10, "atol": 1e-12})
    assert torch.allclose(out[:, 2], Z0 + math.sin(3.0), atol=1e-8)


def test_fused_step_is_the_closed_form_and_converges_to_the_exact_solution():
    a = torch.tensor([0.5, 2.0, 10.0], dtype=DT)
    b = torch.tensor([1.0, -1.0, 3.0], dtype=DT)
    field = S.SplitVectorField(lambda t, z: (a.expand_as(z), b.expand_as(z)))
    one = S.integrate(field, Z0, [0.0, 0.7], "fused")
    assert torch.allclose(one[:, -1], (Z0 + 0.7 * b) / (1 + 0.7 * a))
    want = b / a + (Z0 - b / a) * torch.exp(-a * 1.0)
    errors = [float((S.integrate(field, Z0, [0.0, 1.0], "semi-implicit", {"n_substeps": n})[:, -1] - want).abs().max())
              for n in (100, 200)]
    assert 1.7 < errors[0] / errors[1] < 2.3          # first order
    # any vector field can use fused only with a split
    with pytest.raises(ValueError, match="decay_and_drive"):
        S.solver_step(linear_field, Z0, None, 0.1, "fused")


@pytest.mark.parametrize("method", ["euler", "rk4"])
def test_step_jacobian_chain_rule_equals_autograd(method):
    dt = torch.tensor([[0.1], [0.4], [0.05], [0.3], [0.2]], dtype=DT)

    def field(z, u):
        return torch.tanh(z) @ A.T - 0.1 * z ** 3

    def field_jac(z, u):
        return A[None] * (1 - torch.tanh(z) ** 2)[:, None, :] - torch.diag_embed(0.3 * z ** 2)

    jac = S.solver_step_jacobian(field, field_jac, Z0, None, dt, method, n_substeps=3)
    for b in range(Z0.shape[0]):
        want = torch.autograd.functional.jacobian(
            lambda zz: S.solver_step(field, zz[None], None, float(dt[b]), method, n_substeps=3)[0], Z0[b])
        assert torch.allclose(jac[b], want, atol=1e-12)


def test_unknown_method_and_bad_arguments_are_refused_clearly():
    with pytest.raises(ValueError, match="expected one of .*dopri5.*euler"):
        S.integrate(lambda t, z: z, Z0, [0.0, 1.0], "leapfrog")
    with pytest.raises(ValueError, match="dt"):
        S.solver_step(linear_field, Z0, None, -0.1, "rk4")
    with pytest.raises(ValueError, match=r"shape \(batch, 1\)"):
        S.solver_step(linear_field, Z0, None, torch.ones(3, 1, dtype=DT), "rk4")
    with pytest.raises(ValueError, match="strictly increasing"):
        S.integrate(lambda t, z: z, Z0, [0.0, 1.0, 1.0], "rk4")
    with pytest.raises(ValueError, match="Unknown solver option"):
        S.integrate(lambda t, z: z, Z0, [0.0, 1.0], "rk4", {"stepsize": 0.1})


@pytest.mark.parametrize("method, options, match", [
    ("euler", {"step_size": 0.0}, "`step_size` must be a positive finite number; got step_size=0.0"),
    ("rk4", {"step_size": -0.1}, "`step_size` must be a positive finite number; got step_size=-0.1"),
    ("rk4", {"step_size": float("nan")}, "`step_size` must be a positive finite number; got step_size=nan"),
    ("euler", {"n_substeps": 0}, "`n_substeps` must be a positive integer; got n_substeps=0"),
    ("euler", {"n_substeps": 2.5}, "`n_substeps` must be a positive integer; got n_substeps=2.5"),
    ("rk4", {"n_substeps": 100, "step_size": 1.0}, "not both; got step_size=1.0, n_substeps=100"),
    ("euler", {"rtol": 1e-3}, r"\['rtol'\] do not apply to method='euler'"),
    ("dopri5", {"step_size": 0.5}, r"\['step_size'\] do not apply to method='dopri5'"),
    ("dopri5", {"rtol": -1.0}, "`rtol` must be a non-negative finite number; got rtol=-1.0"),
    ("dopri5", {"rtol": 0.0, "atol": 0.0}, "both 0"),
    ("dopri5", {"max_steps": 0}, "`max_steps` must be a positive integer; got max_steps=0"),
])
def test_integrate_refuses_bad_or_unused_options_by_name(method, options, match):
    # each of these used to divide by zero, truncate, or be dropped without a word (a negative
    # step_size gave one sub-step, n_substeps beside step_size and rtol with euler were ignored)
    with pytest.raises(ValueError, match=match):
        S.integrate(lambda t, z: z @ A.T, Z0, [0.0, 1.0], method, options)


def test_integrate_takes_numpy_integer_sub_steps_and_step_jacobian_checks_them():
    out = S.integrate(lambda t, z: z @ A.T, Z0, [0.0, 1.0], "rk4", {"n_substeps": np.int64(32)})
    assert float((out[:, -1] - exact(1.0)).abs().max()) < 1e-5
    with pytest.raises(ValueError, match="`n_substeps` must be a positive integer; got 0"):
        S.solver_step_jacobian(linear_field, lambda z, u: A.expand(z.shape[0], -1, -1), Z0, None, 0.1, "euler",
                               n_substeps=0)


def test_dopri5_reports_divergence():
    with pytest.raises((FloatingPointError, RuntimeError)):
        S.integrate(lambda t, z: z ** 2, torch.ones(1, 1, dtype=DT) * 10, [0.0, 1.0], "dopri5",
                    {"max_steps": 200})


def test_solvers_table_lists_every_method():
    assert {"euler", "rk4", "fused", "semi-implicit", "dopri5"} <= set(S.SOLVERS)
    assert np.isclose(S.SOLVERS["rk4"]["order"], 4)
