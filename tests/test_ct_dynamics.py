"""Continuous-time latent dynamics: Jacobians, shapes, LTC bounds, ORGaNICs steady state and stability."""
import json
import math

import numpy as np
import pytest
import torch

from dsident.dynamics.base import DYNAMICS_REGISTRY, LatentDynamics
from dsident.dynamics.gnode import GatedNODE
from dsident.dynamics.ltc import LTC
from dsident.dynamics.organics import ORGaNICs, divisive_normalization
from dsident.dynamics.rfwp import RecurrentFWP
from dsident.dynamics.solvers import integrate

F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """These tensors are tiny: intra-op threads only add scheduling latency on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

MODELS = {
    "gnode-euler": lambda: GatedNODE(4, 2, hidden_dim=6, n_layers=3, seed=0),
    "gnode-2layer-gate-rk4": lambda: GatedNODE(4, 2, hidden_dim=6, gate_layers=2, gate_hidden_dim=5,
                                               method="rk4", n_substeps=2, seed=1),
    "node-fused": lambda: GatedNODE(4, 2, hidden_dim=6, gated=False, method="fused", seed=2),
    "mgru": lambda: GatedNODE.mgru(4, 2, seed=3),
    "ltc-synaptic-fused": lambda: LTC(4, 2, seed=0),
    "ltc-compact-rk4": lambda: LTC(4, 2, form="compact", method="rk4", n_substeps=2, seed=1),
    "ltc-synaptic-euler": lambda: LTC(4, 2, method="euler", n_substeps=3, seed=2),
    "rfwp-delta": lambda: RecurrentFWP(4, 2, n_heads=2, hidden_dim=8, seed=0),
    "rfwp-oja-euler": lambda: RecurrentFWP(4, 2, n_heads=1, head_dim=3, rule="oja", hidden_dim=8,
                                           method="euler", seed=1),
    "rfwp-hebb": lambda: RecurrentFWP(4, 2, n_heads=2, rule="hebb", hidden_dim=8, seed=2),
    "organics-identity": lambda: ORGaNICs(3, 2, seed=0),
    "organics-spectral-rk4": lambda: ORGaNICs(3, 2, recurrence="spectral", method="rk4", seed=1),
    "organics-rectified-free": lambda: ORGaNICs(3, 2, recurrence="free", rectified=True, seed=2),
}


def _state(model, batch, gen):
    z = torch.randn(batch, model.latent_dim, generator=gen, dtype=F64)
    if isinstance(model, ORGaNICs):     # modulator potentials away from the kink of sqrt(floor(a)) at 0
        z[:, model.n_neurons:] = z[:, model.n_neurons:].abs() + 0.1
    return z


@pytest.mark.parametrize("name", list(MODELS))
def test_jacobians_equal_autograd(name):
    model = MODELS[name]().double()
    gen = torch.Generator().manual_seed(1)
    z = _state(model, 3, gen)
    u = torch.randn(3, 2, generator=gen, dtype=F64)
    dt = torch.tensor([[0.1], [0.35], [0.02]], dtype=F64)
    jac = model.jacobian(z, u, dt)
    assert jac.shape == (3, model.latent_dim, model.latent_dim)
    for b in range(3):
        want = torch.autograd.functional.jacobian(lambda zz: model.step(zz[None], u[b:b + 1], float(dt[b]))[0], z[b])
        assert torch.allclose(jac[b], want, atol=1e-10), name
        if hasattr(model, "vector_field_jacobian"):
            got = model.vector_field_jacobian(z[b:b + 1], u[b:b + 1])[0]
            want_vf = torch.autograd.functional.jacobian(lambda zz: model.vector_field(zz[None], u[b:b + 1])[0], z[b])
            assert torch.allclose(got, want_vf, atol=1e-10), name


@pytest.mark.parametrize("name", list(MODELS))
def test_batched_step_with_irregular_dt_equals_one_trial_at_a_time(name):
    model = MODELS[name]().double()
    gen = torch.Generator().manual_seed(2)
    batch = 5                                                   # != latent_dim of every model
    z = _state(model, batch, gen)
    u = torch.randn(batch, 2, generator=gen, dtype=F64)
    dt = torch.tensor([[0.01], [0.1], [0.5], [0.05], [0.2]], dtype=F64)
    out = model.step(z, u, dt)
    assert out.shape == (batch, model.latent_dim) and torch.isfinite(out).all()
    for b in range(batch):
        assert torch.allclose(out[b:b + 1], model.step(z[b:b + 1], u[b:b + 1], float(dt[b])), atol=1e-12)
    # a (B,) dt is accepted as (B, 1); dt=None means one time unit
    assert torch.allclose(model.step(z, u, dt[:, 0]), out)
    assert torch.allclose(model.step(z, u, None), model.step(z, u, 1.0))


@pytest.mark.parametrize("name", list(MODELS))
def test_config_round_trip_rebuilds_the_same_model(name):
    model = MODELS[name]()
    cfg = model.config()
    json.dumps(cfg)
    clone = DYNAMICS_REGISTRY[type(model).__name__](**cfg)
    assert clone.config() == cfg
    for (k1, v1), (k2, v2) in zip(model.state_dict().items(), clone.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)


@pytest.mark.parametrize("form", ["compact", "synaptic"])
def test_ltc_fused_step_stays_inside_the_theorem_2_bounds_for_any_dt(form):
    model = LTC(6, 2, form=form, seed=4).double()
    lo, hi = model.state_bounds()
    gen = torch.Generator().manual_seed(5)
    for dt in np.logspace(-3, 3, 13):
        z = lo + (hi - lo) * torch.rand(16, 6, generator=gen, dtype=F64)     # start inside the bounds
        for _ in range(20):
            z = model.step(z, 3.0 * torch.randn(16, 2, generator=gen, dtype=F64), float(dt))
            assert bool((z >= lo - 1e-12).all() and (z <= hi + 1e-12).all()), (form, dt)
    # from outside the bounds the fused step never overshoots: it stays within [min(z0, lo), max(z0, hi)]
    z0 = 10.0 * torch.randn(16, 6, generator=gen, dtype=F64)
    z1 = model.step(z0, None, 1e3)
    assert bool((z1 >= torch.minimum(z0, lo) - 1e-12).all() and (z1 <= torch.maximum(z0, hi) + 1e-12).all())
    # explicit Euler has no such guarantee: a huge step leaves the bounds
    euler = LTC(6, 2, form=form, method="euler", n_substeps=1, seed=4).double()
    zi = lo + (hi - lo) * torch.rand(16, 6, generator=gen, dtype=F64)
    ze = euler.step(zi, None, 1e3)
    assert not bool((ze >= lo - 1e-9).all() and (ze <= hi + 1e-9).all())


@pytest.mark.parametrize("form", ["compact", "synaptic"])
def test_ltc_liquid_time_constant_obeys_theorem_1(form):
    model = LTC(5, 2, form=form, seed=6).double()
    gen = torch.Generator().manual_seed(7)
    z = 3.0 * torch.randn(50, 5, generator=gen, dtype=F64)
    tau_sys = model.liquid_time_constant(z, torch.randn(50, 2, generator=gen, dtype=F64))
    lo, hi = model.time_constant_bounds()
    assert bool((tau_sys >= lo - 1e-12).all() and (tau_sys <= hi + 1e-12).all())


def test_gnode_critical_init_puts_the_flow_jacobian_at_the_edge_of_stability():
    # paper eq. 56: with ReLU hidden layers and Kaiming scaling, rho(J_F) = 1 at the origin
    for n_layers in (2, 3):
        model = GatedNODE(300, hidden_dim=300, n_layers=n_layers, init="critical", seed=n_layers).double()
        _, jac = model.flow(torch.zeros(1, 300, dtype=F64), None, with_jacobian=True)
        rho = float(torch.linalg.eigvals(jac[0].detach()).abs().max())
        assert abs(rho - 1.0) < 0.15, (n_layers, rho)
    kaiming = GatedNODE(300, hidden_dim=300, n_layers=3, init="kaiming", seed=3).double()
    _, jac = kaiming.flow(torch.zeros(1, 300, dtype=F64), None, with_jacobian=True)
    assert float(torch.linalg.eigvals(jac[0].detach()).abs().max()) > 1.3        # the paper: Kaiming is unstable


def test_mgru_euler_step_is_the_gated_convex_combination():
    model = GatedNODE.mgru(3, 1, tau=0.5, seed=0).double()
    gen = torch.Generator().manual_seed(0)
    h, x = torch.randn(4, 3, generator=gen, dtype=F64), torch.randn(4, 1, generator=gen, dtype=F64)
    fl, gl = model.flow.layers[0], model.gate.layers[0]
    cand = torch.tanh(h @ fl.weight.T + fl.bias + x @ model.flow.input_layer.weight.T)
    gate = torch.sigmoid(h @ gl.weight.T + gl.bias + x @ model.gate.input_layer.weight.T)
    alpha = 0.5 / 0.5                                          # dt / tau = 1: the paper's flip-flop setting
    assert torch.allclose(model.step(h, x, 0.5), (1 - alpha * gate) * h + alpha * gate * cand)


def test_rfwp_latent_layout_and_delta_rule_keeps_fast_weights_bounded():
    model = RecurrentFWP(6, 1, n_heads=2, seed=0).double()
    assert model.latent_dim == 6 + 2 * 3 * 3 and model.observed_latent_dim == 6
    assert model.readout_slice == slice(0, 6)
    gen = torch.Generator().manual_seed(0)
    z = torch.zeros(2, model.latent_dim, dtype=F64)
    z[:, :6] = torch.randn(2, 6, generator=gen, dtype=F64)
    traj = model.simulate(z, 150, u=torch.randn(2, 150, 1, generator=gen, dtype=F64), dt=0.5)
    _, w = model.split_latent(traj[:, -1])
    # with softmax keys and tanh values the delta rule drives W k towards v, |v| <= 1: ||W|| stays O(1)
    assert float(w.abs().max()) < 5.0
    hebb = RecurrentFWP(6, 1, n_heads=2, rule="hebb", seed=0).double()
    traj_h = hebb.simulate(z, 150, u=torch.randn(2, 150, 1, generator=gen, dtype=F64), dt=0.5)
    assert float(hebb.split_latent(traj_h[:, -1])[1].abs().max()) > float(w.abs().max())


def _normalization_circuit(n, seed, gain=0.7):
    model = ORGaNICs(n, 3, seed=seed).double()
    logit = math.log(gain / (1 - gain))
    with torch.no_grad():                     # b = b0 = gain for every neuron: eq. 2 must hold exactly
        model.raw_gain.fill_(logit)
        model.raw_gain0.fill_(logit)
        model.gain_input_weight.zero_()
    return model


def test_organics_steady_state_is_divisive_normalization():
    model = _normalization_circuit(5, seed=0)
    gen = torch.Generator().manual_seed(1)
    u = torch.randn(4, 3, generator=gen, dtype=F64)
    state = model.steady_state(u)
    z, _, _ = model.drive_and_gains(4, u)
    # eq. 2 written out independently in numpy
    zn, w = z.detach().numpy(), model.norm_weight.detach().numpy()
    want_plus = np.maximum(zn, 0) ** 2 / (1.0 + (zn ** 2) @ w.T)
    assert np.allclose(model.firing_rates(state).detach().numpy(), want_plus, atol=1e-12)
    plus, minus = divisive_normalization(z, model.norm_weight, 1.0, 0.7, 0.7)
    assert torch.allclose(plus, model.firing_rates(state)) and torch.allclose(minus, torch.relu(-state[:, :5]) ** 2)
    # an independent route: integrate the ODE from a generic start until it settles
    start = torch.cat([torch.zeros(4, 5, dtype=F64), torch.ones(4, 5, dtype=F64)], dim=1)
    with torch.no_grad():
        end = integrate(lambda t, s: model.vector_field(s, u), start, [0.0, 300.0], "dopri5",
                        {"rtol": 1e-10, "atol": 1e-12})[:, -1]
    assert torch.allclose(end, state, atol=1e-7)


def test_organics_identity_recurrence_is_stable_and_matches_eq_6():
    for seed in range(5):
        model = ORGaNICs(6, 3, seed=seed).double()
        with torch.no_grad():
            model.raw_rates.copy_(torch.randn(2, 6, generator=torch.Generator().manual_seed(seed), dtype=F64))
        u = torch.randn(3, 3, generator=torch.Generator().manual_seed(10 + seed), dtype=F64)
        state = model.steady_state(u)
        eig, abscissa = model.stability(u)
        assert bool((abscissa < 0).all())
        # eq. 6 assembled by hand
        y, a = state[0, :6], state[0, 6:]
        ry, ra = model.rates
        w = model.norm_weight
        top = torch.cat([torch.diag(-a.sqrt() * ry), torch.diag(-y / (2 * a.sqrt()) * ry)], dim=1)
        bottom = torch.cat([2 * torch.diag(ra) @ w @ torch.diag(a * y),
                            torch.diag(ra) @ (-torch.eye(6, dtype=F64) + w @ torch.diag(y * y))], dim=1)
        assert torch.allclose(model.vector_field_jacobian(state, u)[0], torch.cat([top, bottom]), atol=1e-10)


def test_organics_random_spectral_norm_one_recurrence_is_stable():
    # the reference code's sampling (seed 003, section 2.5): b, b0 ~ U(0, 1), W ~ U(0, 1), ||z|| = 1
    for seed in range(6):
        gen = torch.Generator().manual_seed(seed)
        model = ORGaNICs(8, 8, recurrence="spectral", seed=seed).double()
        with torch.no_grad():
            model.recurrent_raw.copy_(torch.randn(8, 8, generator=gen, dtype=F64))
            model.log_norm_weight.copy_(torch.rand(8, 8, generator=gen, dtype=F64).log())
            model.raw_gain.copy_(torch.logit(torch.rand(8, generator=gen, dtype=F64)))
            model.raw_gain0.copy_(torch.logit(torch.rand(8, generator=gen, dtype=F64)))
            model.gain_input_weight.zero_()
            model.input_weight.copy_(torch.eye(8, dtype=F64))
            model.drive_bias.zero_()
        assert abs(float(torch.linalg.matrix_norm(model.recurrent_weight, ord=2)) - 1.0) < 1e-10
        zin = torch.randn(1, 8, generator=gen, dtype=F64)
        u = zin / zin.norm()
        state = model.steady_state(u, max_iter=200)
        assert float(model.vector_field(state, u).abs().max()) < 1e-8
        assert float(model.stability(u, state)[1][0]) < 0


def test_bad_arguments_are_refused_with_the_value():
    with pytest.raises(ValueError, match="method"):
        GatedNODE(3, method="leapfrog")
    with pytest.raises(ValueError, match="form"):
        LTC(3, form="dense")
    with pytest.raises(ValueError, match="rule"):
        RecurrentFWP(3, rule="anti-hebb")
    with pytest.raises(ValueError, match="recurrence"):
        ORGaNICs(3, recurrence="orthogonal")
    with pytest.raises(ValueError, match="tau"):
        GatedNODE(3, tau=0.0)
    with pytest.raises(ValueError, match="2 input channels"):
        LTC(3, 2).step(torch.zeros(1, 3), torch.zeros(1, 5), 0.1)


def test_all_four_models_are_registered_latent_dynamics():
    for name in ("GatedNODE", "LTC", "RecurrentFWP", "ORGaNICs"):
        assert issubclass(DYNAMICS_REGISTRY[name], LatentDynamics)
