"""PLRNN and shallow PLRNN: step, analytic Jacobians, penalties and initialization."""
import numpy as np
import pytest
import torch

from dsident.dynamics import DYNAMICS_REGISTRY, PLRNN, ShallowPLRNN


def autograd_jacobian(f, z, u=None):
    def single(zi, ui):
        return f.step(zi[None], None if ui is None else ui[None])[0]
    if u is None:
        return torch.func.vmap(torch.func.jacrev(lambda zi: single(zi, None)))(z)
    return torch.func.vmap(torch.func.jacrev(single, argnums=0))(z, u)


def test_step_matches_equation_1_in_numpy():
    f = PLRNN(4, 2, seed=3, penalty="none")
    with torch.no_grad():
        f.W.fill_diagonal_(7.0)                 # the diagonal of W must be ignored
    p = f.params()
    rng = np.random.default_rng(0)
    z, u = rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    expected = z @ np.diag(p.A).T + np.maximum(z, 0) @ p.W.T + u @ p.C.T + p.h
    got = f.step(torch.tensor(z, dtype=torch.float32), torch.tensor(u, dtype=torch.float32))
    np.testing.assert_allclose(got.detach().numpy(), expected, rtol=1e-5, atol=1e-5)
    assert np.all(np.diag(p.W) == 0)


@pytest.mark.parametrize("penalty", ["manifold", "none", "orthogonal"])
def test_plrnn_jacobian_matches_autograd(penalty):
    f = PLRNN(6, 2, seed=1, penalty=penalty).double()
    gen = torch.Generator().manual_seed(0)
    z = torch.randn(8, 6, generator=gen, dtype=torch.float64)
    u = torch.randn(8, 2, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(f.jacobian(z, u), autograd_jacobian(f, z, u))


@pytest.mark.parametrize("clip", [False, True])
def test_shallow_plrnn_jacobian_matches_autograd(clip):
    f = ShallowPLRNN(3, hidden_dim=11, input_dim=1, clip=clip, seed=2).double()
    gen = torch.Generator().manual_seed(1)
    z = torch.randn(10, 3, generator=gen, dtype=torch.float64)
    u = torch.randn(10, 1, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(f.jacobian(z, u), autograd_jacobian(f, z, u))


def test_shallow_step_matches_formula_and_clipping_bounds_the_nonlinearity():
    f = ShallowPLRNN(2, hidden_dim=5, clip=True, seed=0).double()
    z = torch.tensor([[1.5, -0.3], [100.0, -100.0]], dtype=torch.float64)
    with torch.no_grad():
        pre = z @ f.W2.T
        hidden = torch.relu(pre + f.h2) - torch.relu(pre)
        expected = f.a * z + hidden @ f.W1.T + f.h1
        torch.testing.assert_close(f.step(z), expected)
        # each clipped hidden unit lies between 0 and h2 (sign included), whatever z
        assert torch.all(hidden.abs() <= f.h2.abs() + 1e-12)


def _small_plrnn(penalty, **kw):
    f = PLRNN(3, seed=0, penalty=penalty, reg_fraction=2 / 3, **kw).double()
    with torch.no_grad():
        f.a.copy_(torch.tensor([0.5, 2.0, -1.0]))
        f.W.copy_(torch.tensor([[9.0, 1.0, 2.0], [3.0, 9.0, -1.0], [0.5, 0.25, 9.0]]))
        f.h.copy_(torch.tensor([1.0, -2.0, 3.0]))
    return f


def test_manifold_regularizer_by_hand():
    f = _small_plrnn("manifold", tau_A=2.0, tau_W=3.0, tau_h=5.0)
    assert f.n_regularized == 2
    # units 0 and 1: (A-1)^2 = 0.25 + 1; W rows 0,1 off-diagonal: 1+4+9+1 = 15; h: 1+4 = 5
    expected = 2.0 * 1.25 + 3.0 * 15.0 + 5.0 * 5.0
    assert float(f.regularization().detach()) == pytest.approx(expected)


def test_manifold_regularizer_on_the_last_units_by_hand():
    f = _small_plrnn("manifold", tau_A=2.0, tau_W=3.0, tau_h=5.0, reg_units="last")
    # units 1 and 2: (A-1)^2 = 1 + 4; W rows 1,2 off-diagonal: 9+1+0.25+0.0625; h: 4+9
    expected = 2.0 * 5.0 + 3.0 * 10.3125 + 5.0 * 13.0
    assert float(f.regularization().detach()) == pytest.approx(expected)
    q = f.quadratic_penalty()
    np.testing.assert_array_equal(q.a_weight > 0, [False, True, True])
    np.testing.assert_array_equal(q.a_target, [0.0, 1.0, 1.0])
    # the initialization puts the last units on the manifold attractor
    p = PLRNN(6, seed=4, reg_units="last").params()
    np.testing.assert_array_equal(p.A[3:], 1.0)
    np.testing.assert_array_equal(p.W[3:], 0.0)
    assert np.all(p.A[:3] != 1.0)


def test_manifold_regularizer_mean_normalization_by_hand():
    f = _small_plrnn("manifold", tau=4.0, reg_normalization="mean")
    expected = 4.0 * (1.25 / 2 + 15.0 / 4 + 5.0 / 2)
    assert float(f.regularization().detach()) == pytest.approx(expected)


def test_l2_penalties_by_hand():
    l2p = _small_plrnn("l2p", tau=1.0)
    assert float(l2p.regularization().detach()) == pytest.approx((0.25 + 4.0) + 15.0 + 5.0)
    l2f = _small_plrnn("l2f", tau=2.0)
    full = (0.25 + 4.0 + 1.0) + (15.0 + 0.25 + 0.0625) + (1.0 + 4.0 + 9.0)
    assert float(l2f.regularization().detach()) == pytest.approx(2.0 * full)


def test_orthogonal_penalty_by_hand():
    f = _small_plrnn("orthogonal", tau=0.5)
    aw = np.array([[0.5, 1.0, 2.0], [3.0, 2.0, -1.0], [0.5, 0.25, -1.0]])
    expected = 0.5 * np.sum((aw @ aw.T - np.eye(3)) ** 2)
    assert float(f.regularization().detach()) == pytest.approx(expected)
    with pytest.raises(ValueError, match="orthogonal"):
        f.quadratic_penalty()


@pytest.mark.parametrize("penalty", ["none", None, "iplrnn"])
def test_unpenalized_variants_have_zero_regularization(penalty):
    assert float(_small_plrnn(penalty, tau=10.0).regularization().detach()) == 0.0


def test_regularizer_gradient_pulls_towards_the_manifold_attractor():
    f = _small_plrnn("manifold", tau=1.0)
    f.regularization().backward()
    assert f.a.grad[0] < 0 and f.a.grad[1] > 0 and f.a.grad[2] == 0   # A_00 = .5 -> 1, A_11 = 2 -> 1
    assert torch.all(f.W.grad[2] == 0) and f.W.grad[0, 0] == 0 and f.W.grad[0, 1] > 0


def test_manifold_initialization():
    f = PLRNN(6, seed=4)
    p = f.params()
    assert f.n_regularized == 3
    np.testing.assert_array_equal(p.A[:3], 1.0)
    np.testing.assert_array_equal(p.W[:3], 0.0)
    np.testing.assert_array_equal(p.h[:3], 0.0)
    assert np.all(p.A[3:] != 1.0) and np.any(p.W[3:] != 0)
    assert float(f.regularization().detach()) == 0.0       # initialised on the manifold attractor


def test_iplrnn_initialization_is_identity_and_vanilla_is_contracting():
    p = PLRNN(5, seed=0, penalty="iplrnn").params()
    np.testing.assert_array_equal(p.A, 1.0)
    np.testing.assert_array_equal(p.W, 0.0)
    np.testing.assert_array_equal(p.h, 0.0)
    q = PLRNN(30, seed=0, penalty="none").params()
    assert np.max(np.abs(np.linalg.eigvals(np.diag(q.A) + q.W))) <= 1.0 + 1e-9


def test_seed_reproducible_and_config_roundtrip():
    f = PLRNN(5, 2, seed=7, tau=3.0, penalty="l2p")
    g = DYNAMICS_REGISTRY["PLRNN"](**f.config())
    for pf, pg in zip(f.parameters(), g.parameters()):
        torch.testing.assert_close(pf, pg)
    s = ShallowPLRNN(3, 4, clip=True, seed=1)
    assert ShallowPLRNN(**s.config()).config() == s.config()
    assert PLRNN(5, seed=1).params().W.tolist() != PLRNN(5, seed=2).params().W.tolist()


def test_quadratic_penalty_reproduces_regularization():
    f = _small_plrnn("manifold", tau_A=1.5, tau_W=0.5, tau_h=2.0)
    q, p = f.quadratic_penalty(), f.params()
    total = (np.sum(q.a_weight * (p.A - q.a_target) ** 2) + np.sum(q.W_weight * (p.W - q.W_target) ** 2)
             + np.sum(q.h_weight * (p.h - q.h_target) ** 2))
    assert float(f.regularization().detach()) == pytest.approx(total)


def test_set_params_and_shape_check():
    f = PLRNN(3, seed=0)
    f.set_params(A=np.eye(3) * 0.3, h=np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(f.params().A, 0.3, rtol=1e-6)
    with pytest.raises(ValueError, match="`W` must have shape"):
        f.set_params(W=np.zeros((2, 2)))


@pytest.mark.parametrize("kwargs, match", [
    ({"latent_dim": 0}, "latent_dim"),
    ({"latent_dim": 3, "reg_fraction": 1.5}, "reg_fraction"),
    ({"latent_dim": 3, "penalty": "l1"}, "penalty"),
    ({"latent_dim": 3, "tau": -1.0}, "tau"),
    ({"latent_dim": 3, "tau_W": float("nan")}, "tau_W"),
    ({"latent_dim": 3, "reg_normalization": "max"}, "reg_normalization"),
    ({"latent_dim": 3, "reg_units": "middle"}, "reg_units"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PLRNN(**kwargs)


def test_piecewise_linear_flags():
    assert PLRNN.piecewise_linear is True and ShallowPLRNN.piecewise_linear is False


def test_input_width_must_match_input_dim():
    with pytest.raises(ValueError, match="input_dim=2"):
        PLRNN(3, 2, seed=0).step(torch.zeros(1, 3), torch.zeros(1, 3))
    with pytest.raises(ValueError, match="input_dim=0"):
        ShallowPLRNN(3, 4, seed=0).step(torch.zeros(1, 3), torch.zeros(1, 1))
    assert PLRNN(3, seed=0).step(torch.zeros(1, 3), torch.zeros(1, 0)).shape == (1, 3)


def test_a_negative_seed_is_refused_by_the_dynamics_that_draw_their_start():
    from dsident.dynamics import PLRNN, ShallowPLRNN

    for cls in (PLRNN, ShallowPLRNN):
        with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer or None; got seed=-1"):
            cls(3, seed=-1)
