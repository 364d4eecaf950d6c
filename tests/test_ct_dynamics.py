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
from dsident.dynamics.plrnn import PLRNN, ShallowPLRNN
from dsident.dynamics.rfwp import RecurrentFWP
from dsident.dynamics.solvers import integrate

F64 = torch.float64


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


@pytest.mark.parametrize("input_dim", [0, 3])
def test_ltc_dedicated_fused_loop_equals_the_generic_solver(input_dim):
    from dsident.dynamics.solvers import solver_step

    model = LTC(5, input_dim, seed=8).double()
    gen = torch.Generator().manual_seed(8)
    z = torch.randn(4, 5, generator=gen, dtype=F64)
    u = torch.randn(4, input_dim, generator=gen, dtype=F64) if input_dim else None
    dt = torch.rand(4, 1, generator=gen, dtype=F64) + 0.1
    want = solver_step(model.vector_field, z, u, dt, "fused", n_substeps=model.n_substeps)
    assert torch.allclose(model.step(z, u, dt), want, atol=1e-13)


@pytest.mark.parametrize("form", ["compact", "synaptic"])
def test_ltc_liquid_time_constant_obeys_theorem_1(form):
    model = LTC(5, 2, form=form, seed=6).double()
    gen = torch.Generator().manual_seed(7)
    z = 3.0 * torch.randn(50, 5, generator=gen, dtype=F64)
    tau_sys = model.liquid_time_constant(z, torch.randn(50, 2, generator=gen, dtype=F64))
    lo, hi = model.time_constant_bounds()
    assert bool((tau_sys >= lo - 1e-12).all() and (tau_sys <= hi + 1e-12).all())


@pytest.mark.parametrize("form,reference", [("synaptic", 0.5), ("compact", 1.0)])
def test_ltc_time_constant_sets_the_initial_membrane_time_constant(form, reference):
    # Theorem 1's upper bound is the membrane time constant tau (synaptic: C / g_leak)
    default = LTC(4, 1, form=form, seed=2)
    assert torch.allclose(default.time_constant_bounds()[1], torch.full((4,), reference), rtol=1e-6)
    slow = LTC(4, 1, form=form, time_constant=150.0, seed=2)
    assert torch.allclose(slow.time_constant_bounds()[1], torch.full((4,), 150.0), rtol=1e-6)
    # only that start changes: every other parameter is drawn as before, and the default is the
    # reference start itself
    same = LTC(4, 1, form=form, time_constant=reference, seed=2)
    for (name, p), q in zip(default.state_dict().items(), same.state_dict().values()):
        assert torch.equal(p, q), name
    changed = [n for (n, p), q in zip(default.state_dict().items(), slow.state_dict().values()) if not torch.equal(p, q)]
    assert changed == (["raw_capacitance"] if form == "synaptic" else ["raw_tau"])
    assert LTC(**slow.config()).time_constant == 150.0
    for bad in (0.0, -1.0, math.inf, True, "slow", (5.0, 1.0), (1.0, 2.0, 3.0), (0.0, 1.0)):
        with pytest.raises(ValueError, match="time_constant"):
            LTC(3, time_constant=bad)


@pytest.mark.parametrize("form", ["synaptic", "compact"])
def test_ltc_time_constant_pair_spreads_the_neurons_geometrically(form):
    model = LTC(5, 1, form=form, time_constant=(0.5, 150.0), seed=1)
    expected = 0.5 * (150.0 / 0.5) ** (np.arange(5) / 4)       # 0.5, 2.07, 8.66, 36.0, 150
    np.testing.assert_allclose(model.time_constant_bounds()[1].detach().numpy(), expected, rtol=1e-5)
    assert LTC(**model.config()).time_constant == [0.5, 150.0]
    # one neuron: the fastest value
    assert float(LTC(1, form=form, time_constant=(2.0, 9.0)).time_constant_bounds()[1][0].detach()) == pytest.approx(2.0)


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


def test_rfwp_tau_fast_scales_only_the_fast_weight_part_of_the_vector_field():
    gen = torch.Generator().manual_seed(3)
    base = RecurrentFWP(4, 1, n_heads=2, tau=0.5, seed=1).double()
    slow = RecurrentFWP(4, 1, n_heads=2, tau=0.5, tau_fast=2.0, seed=1).double()
    z = torch.randn(3, base.latent_dim, generator=gen, dtype=F64)
    u = torch.randn(3, 1, generator=gen, dtype=F64)
    f, g = base.vector_field(z, u), slow.vector_field(z, u)
    torch.testing.assert_close(g[:, :4], f[:, :4])                  # the state keeps tau
    torch.testing.assert_close(g[:, 4:], f[:, 4:] * 0.5 / 2.0)      # the fast weights: tau / tau_fast
    assert slow.config()["tau_fast"] == 2.0 and base.config()["tau_fast"] is None
    for bad in (0.0, -1.0, float("inf"), True):
        with pytest.raises(ValueError, match="tau_fast"):
            RecurrentFWP(4, tau_fast=bad)


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


@pytest.mark.parametrize("build, name", [
    (lambda value: GatedNODE(3, gated=value), "gated"),
    (lambda value: ORGaNICs(3, rectified=value), "rectified"),
    (lambda value: ORGaNICs(3, learn_tau=value), "learn_tau"),
])
def test_switches_refuse_strings_that_bool_would_read_as_true(build, name):
    # bool("false") is True: a switch read from a config file or the command line as text used
    # to turn the gate, the rectification or the learned time constants on without a word
    for text in ("false", "off", "0"):
        with pytest.raises(ValueError, match=rf"`{name}` must be True or False; got {name}='{text}'"):
            build(text)
    assert build(np.bool_(False)).config()[name] is False


@pytest.mark.parametrize("build", [
    lambda: PLRNN(3, 2, seed=0),
    lambda: ShallowPLRNN(3, 4, 2, seed=0),
    lambda: GatedNODE(3, 2, hidden_dim=4),
    lambda: LTC(3, 2),
    lambda: LTC(3, 2, form="compact", method="rk4"),
    lambda: RecurrentFWP(3, 2, n_heads=1),
    lambda: ORGaNICs(3, 2),
], ids=["plrnn", "shallow", "gnode", "ltc-fused", "ltc-compact", "rfwp", "organics"])
def test_step_and_jacobian_name_a_wrong_state_or_input_shape(build):
    # a state of the wrong width or inputs for another batch used to fail deep inside torch
    # ("mat1 and mat2 shapes cannot be multiplied", "shape '[2, 1, 3, 3]' is invalid", ...)
    model = build()
    m = model.latent_dim
    wide = torch.zeros(2, m + 1)
    for call in (lambda: model.step(wide, torch.zeros(2, 2), 0.1), lambda: model.jacobian(wide, None, 0.1)):
        with pytest.raises(ValueError, match=rf"`z` must have a last \(latent\) dimension of size latent_dim={m}; "
                                             rf"got shape \(2, {m + 1}\)"):
            call()
    with pytest.raises(ValueError, match=r"`u` must have one row per state in `z` \(2\); got shape \(3, 2\)"):
        model.step(torch.zeros(2, m), torch.zeros(3, 2), 0.1)
    assert model.step(torch.zeros(2, m), torch.zeros(2, 2), 0.1).shape == (2, m)


def test_time_constants_refuse_a_bool():
    with pytest.raises(ValueError, match="tau"):
        GatedNODE(3, tau=True)
    with pytest.raises(ValueError, match="max_rate_y"):
        ORGaNICs(3, max_rate_y=True)


def test_all_four_models_are_registered_latent_dynamics():
    for name in ("GatedNODE", "LTC", "RecurrentFWP", "ORGaNICs"):
        assert issubclass(DYNAMICS_REGISTRY[name], LatentDynamics)


# -- analysis tools and the flip-flop task ---------------------------------------------------------
class _CircleEcho(LatentDynamics):
    """Test double: the next state is the current input (padded), so the latent traces the input."""

    def __init__(self, latent_dim: int = 3) -> None:
        super().__init__()
        self.latent_dim, self.input_dim = latent_dim, 2
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def step(self, z, u=None, dt=None):
        return torch.cat([u, torch.zeros(z.shape[0], self.latent_dim - 2, dtype=z.dtype)], dim=1)


def test_arc_length_and_trajectory_length_against_the_circle():
    from dsident.analysis.trajectory_length import arc_length, circle_input, trajectory_length

    n = 50
    _, circle = circle_input(n)
    chord = 2 * math.sin(math.pi / (n - 1))
    assert math.isclose(arc_length(circle), (n - 1) * chord, rel_tol=1e-12)
    res = trajectory_length(_CircleEcho(), n_samples=n, warmup=1)
    # after one lap the echo trails the input by one sample: u[n-1] (= u[0]), u[0], ..., u[n-2]
    assert math.isclose(res.length, (n - 2) * chord, rel_tol=1e-9)
    assert np.allclose(res.explained_variance, [0.5, 0.5], atol=0.05)
    ltc = trajectory_length(LTC(8, 2, seed=0), n_samples=40)
    assert ltc.length > 0 and ltc.projection.shape == (40, 2) and 0 < ltc.explained_variance.sum() <= 1 + 1e-12
    with pytest.raises(ValueError, match="input_dim >= 2"):
        trajectory_length(LTC(4, 1, seed=0))


def test_vector_field_fixed_points_of_a_linear_node_match_the_linear_solve():
    from dsident.analysis.ct_tools import vector_field_fixed_points, vector_field_grid, vector_field_jacobian

    model = GatedNODE(3, n_layers=1, output_nonlinearity="identity", gated=False, tau=0.5, init="glorot",
                      seed=3).double()
    w = model.flow.layers[0].weight.detach().numpy()
    b = model.flow.layers[0].bias.detach().numpy()
    want = np.linalg.solve(np.eye(3) - w, b)                  # -z + W z + b = 0
    starts = np.random.default_rng(0).normal(size=(10, 3)) + want
    fps = vector_field_fixed_points(model, starts, range_filter=False)
    assert len(fps) == 1 and np.allclose(fps.points[0], want, atol=1e-8)
    eig_want = np.linalg.eigvals((w - np.eye(3)) / 0.5)
    assert np.isclose(fps.spectral_abscissa[0], eig_want.real.max())
    top = eig_want.real.max()
    assert fps.kind[0] == ("marginal" if abs(top) <= 0.01 else ("stable" if top < 0 else "unstable"))
    assert np.allclose(vector_field_jacobian(model, want), (w - np.eye(3)) / 0.5)
    # the paper's range filter drops points far outside the visited states
    far = vector_field_fixed_points(model, starts * 0.0 + 1e-3 * starts, range_filter=True)
    assert far.info["n_out_of_range"] == (0 if np.abs(want).max() < 2e-3 else 1)
    grid = vector_field_grid(model, n_grid=4, limits=((-1, 1), (-2, 2)), anchor=[0, 0, 0.5])
    z = np.array([grid.axis0.values[1], grid.axis1.values[2], 0.5])
    vel = model.vector_field(torch.as_tensor(z[None]), None)[0].detach().numpy()
    assert np.allclose(grid.flow.values[1, 2], vel[:2]) and np.isclose(grid.speed.values[1, 2], np.linalg.norm(vel))


@pytest.mark.parametrize("amplitude, n_bits", [("fixed", 3), ("variable", 3), ("rectangle", 2), ("disk", 2),
                                               ("ring", 2)])
def test_flipflop_targets_hold_the_last_pulse(amplitude, n_bits):
    from dsident.data.flipflop import make_flipflop

    ds = make_flipflop(40, n_bits=n_bits, amplitude=amplitude, seed=7)
    u, x = ds.u.values, ds.x.values
    assert u.shape == x.shape == (40, 100, n_bits) and ds.attrs["dt"] == 0.01
    for trial in range(40):
        target = np.array([2.0, 0.0]) if amplitude == "ring" else (np.ones(n_bits) if amplitude == "fixed"
                                                                    else np.zeros(n_bits))
        for t in range(100):
            target = np.where(u[trial, t] != 0, u[trial, t], target)
            assert np.array_equal(x[trial, t], target), (amplitude, trial, t)
    pulses = u[u != 0]
    if amplitude == "fixed":
        assert set(np.unique(pulses)) <= {-1.0, 1.0}
    if amplitude in ("disk", "ring"):
        onsets = np.abs(u).sum(-1) > 0
        radius = np.linalg.norm(u[onsets], axis=-1)
        assert (radius > 1 - 1e-12).all() and (radius < 2 + 1e-12).all()
        if amplitude == "ring":
            assert np.allclose(radius, 2.0)
    again = make_flipflop(40, n_bits=n_bits, amplitude=amplitude, seed=7)
    assert np.array_equal(again.u.values, u)


def test_flipflop_pulse_count_follows_the_poisson_rate():
    from dsident.data.flipflop import make_flipflop

    u = make_flipflop(300, amplitude="variable", seed=0).u.values
    onsets = (u != 0) & (np.roll(u, 1, axis=1) != u)
    onsets[:, 0] = u[:, 0] != 0
    assert 10.0 < onsets.sum(axis=(1, 2)).mean() < 14.0
    with pytest.raises(ValueError, match="amplitude"):
        make_flipflop(2, amplitude="square")
    with pytest.raises(ValueError, match="2-channel"):
        make_flipflop(2, n_bits=3, amplitude="disk")


def test_ltc_fused_step_bound_holds_for_hypothesis_drawn_steps_and_states():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    model = LTC(4, 1, form="compact", seed=9).double()
    lo, hi = model.state_bounds()

    @hypothesis.settings(max_examples=40, deadline=None)
    @hypothesis.given(dt=st.floats(1e-4, 1e3), seed=st.integers(0, 2 ** 16), u_scale=st.floats(0.0, 50.0))
    def check(dt, seed, u_scale):
        gen = torch.Generator().manual_seed(seed)
        z = lo + (hi - lo) * torch.rand(3, 4, generator=gen, dtype=F64)
        z = model.step(z, u_scale * torch.randn(3, 1, generator=gen, dtype=F64), dt)
        assert bool((z >= lo - 1e-12).all() and (z <= hi + 1e-12).all())

    check()


@pytest.mark.parametrize("n_inputs, per_trial_dt", [(3, False), (3, True), (0, False)])
def test_ltc_fused_backward_matches_autograd_of_the_plain_loop(n_inputs, per_trial_dt):
    """The hand-written backward of the fused LTC step against (a) autograd through the plain
    unfold loop (taken when ``dt`` itself needs a gradient) and (b) finite differences."""
    from dsident.dynamics.ltc import LTC as LTCDynamics

    torch.manual_seed(0)
    m = LTCDynamics(5, n_inputs, seed=1).double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    z = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    u = torch.randn(4, n_inputs, dtype=torch.float64, requires_grad=True) if n_inputs else None
    dt_value = torch.rand(4, 1, dtype=torch.float64) + 0.1 if per_trial_dt else torch.full((4, 1), 0.3, dtype=torch.float64)
    weights = torch.randn(4, 5, dtype=torch.float64)
    inputs = [z] + ([u] if u is not None else []) + list(m.parameters())

    fused = m.step(z, u, dt_value)
    fused_grads = torch.autograd.grad((fused * weights).sum(), inputs, allow_unused=True)
    plain = m.step(z, u, dt_value.clone().requires_grad_(True))      # plain loop: dt needs a gradient
    plain_grads = torch.autograd.grad((plain * weights).sum(), inputs, allow_unused=True)

    torch.testing.assert_close(fused, plain, rtol=1e-12, atol=1e-12)
    for a, b in zip(fused_grads, plain_grads):
        if a is None or b is None:
            assert (a is None or not a.abs().any()) and (b is None or not b.abs().any())
        else:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda zz: m.step(zz, u if u is None else u.detach(), dt_value), (z,),
                                    eps=1e-6, atol=1e-6)
