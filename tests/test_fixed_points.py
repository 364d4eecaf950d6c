"""Exact PLRNN fixed points and cycles, the Newton finder, Fig. 4 statistics and flow fields."""
import numpy as np
import pytest
import torch

from dsident import analysis
from dsident.dynamics import PLRNN, ShallowPLRNN, PLRNNParams


def plrnn_map(p, z):
    return z * p.A + np.maximum(z, 0.0) @ p.W.T + p.h


def multistable_plrnn(m, seed):
    """A random PLRNN with strong coupling, so that several regions hold fixed points."""
    f = PLRNN(m, seed=seed, penalty="none").double()
    rng = np.random.default_rng(seed)
    f.set_params(A=rng.uniform(-0.5, 0.9, m), W=rng.normal(0, 1.5 / np.sqrt(m), (m, m)),
                 h=rng.normal(0, 1.0, m))
    return f


@pytest.mark.parametrize("m, seed", [(3, 4), (3, 6), (6, 4)])
def test_enumerated_fixed_points_satisfy_the_map_and_agree_with_newton(m, seed):
    f = multistable_plrnn(m, seed)
    p = f.params()
    exact = analysis.fixed_points(f, method="enumerate")
    assert exact.info["n_candidates"] == 2 ** m
    for z in exact.points[:, 0]:
        np.testing.assert_allclose(plrnn_map(p, z), z, atol=1e-10)
    # eigenvalues are those of the region's matrix A + W D_Omega
    for z, lam in zip(exact.points[:, 0], exact.eigenvalues):
        jac = np.diag(p.A) + p.W * (z > 0)[None]
        np.testing.assert_allclose(np.sort(np.abs(np.linalg.eigvals(jac))), np.sort(np.abs(lam)), atol=1e-10)
    assert np.array_equal(exact.stable, exact.max_abs_eigenvalue < 1)
    newton = analysis.newton_fixed_points(f, n_starts=100, init_scale=4.0, seed=0)
    assert len(newton) == len(exact) >= 2
    for z in exact.points[:, 0]:
        assert np.min(np.linalg.norm(newton.points[:, 0] - z, axis=1)) < 1e-6


def test_inconsistent_candidates_are_rejected():
    # a contracting 1-unit-per-region system with a single fixed point at z = h / (1 - a) < 0
    p = PLRNNParams(A=np.array([0.5, 0.5]), W=np.array([[0.0, 0.2], [0.2, 0.0]]), h=np.array([-1.0, -1.0]),
                    C=np.zeros((2, 0)))
    res = analysis.fixed_points(p)
    assert len(res) == 1
    np.testing.assert_allclose(res.points[0, 0], [-2.0, -2.0])
    assert res.stable[0] and res.kind == ["stable node"]


def test_constructed_two_cycle_is_found():
    # z1 = (1, -1) -> z2 = (-1, 1) -> z1 by construction (see the algebra in the comments)
    # F(z1) = .5 z1 + W (1, 0) + h = (.5 + h1, -.5 + W21 + h2) = (-1, 1);  F(z2) likewise
    f = PLRNN(2, penalty="none")
    f.set_params(A=np.array([0.5, 0.5]), W=np.array([[0.0, 3.0], [3.0, 0.0]]), h=np.array([-1.5, -1.5]))
    res = analysis.cycles(f, period=2)
    assert res.points.shape == (1, 2, 2)
    found = {tuple(np.round(z, 9)) for z in res.points[0]}
    assert found == {(1.0, -1.0), (-1.0, 1.0)}
    # the fixed points are not reported as 2-cycles
    fps = analysis.fixed_points(f)
    assert len(fps) >= 1
    for z in fps.points[:, 0]:
        assert not any(np.allclose(z, c) for c in res.points[0])
    # Jacobian of F^2 = J(z2) J(z1)
    j1 = np.diag([0.5, 0.5]) + np.array([[0.0, 3.0], [3.0, 0.0]]) * np.array([1.0, 0.0])
    j2 = np.diag([0.5, 0.5]) + np.array([[0.0, 3.0], [3.0, 0.0]]) * np.array([0.0, 1.0])
    np.testing.assert_allclose(np.sort(np.abs(res.eigenvalues[0])), np.sort(np.abs(np.linalg.eigvals(j2 @ j1))))


def test_three_cycles_found_by_enumeration_and_search():
    f = multistable_plrnn(3, 26)           # this draw has a stable and a saddle 3-cycle
    res = analysis.cycles(f, period=3)
    assert len(res) == 2 and sorted(res.kind) == ["saddle", "stable node"]
    p = f.params()
    for cyc in res.points:
        np.testing.assert_allclose(plrnn_map(p, cyc[0]), cyc[1], atol=1e-9)
        np.testing.assert_allclose(plrnn_map(p, cyc[2]), cyc[0], atol=1e-9)
    search = analysis.cycles(f, period=3, method="search", n_random=3000, seed=0)
    for cyc in res.points:
        assert any(np.allclose(cyc, other, atol=1e-7) for other in search.points)


def test_search_finds_the_enumerated_fixed_points_at_moderate_dimension():
    f = multistable_plrnn(12, 1)
    exact = analysis.fixed_points(f, method="enumerate")
    assert len(exact) >= 2
    search = analysis.fixed_points(f, method="search", n_trajectories=50, n_steps=200, n_random=200, seed=1)
    assert search.info["n_candidates"] < 2 ** 12 / 4        # far fewer regions than enumeration tried
    assert len(search) == len(exact)
    for z in exact.points[:, 0]:
        assert np.min(np.linalg.norm(search.points[:, 0] - z, axis=1)) < 1e-8


def test_exact_manifold_attractor_is_reported_as_singular():
    f = PLRNN(4, seed=0, penalty="iplrnn")        # A = I, W = 0, h = 0: every point is fixed
    res = analysis.fixed_points(f)
    assert len(res) == 0 and res.info["n_singular"] == 16


def test_search_survives_a_round_in_which_every_region_is_singular():
    # the search's first round solves only singular systems, so it has no regions to propose next
    f = PLRNN(20, seed=0, penalty="iplrnn")       # 2^20 regions: "auto" searches
    res = analysis.fixed_points(f, n_trajectories=5, n_steps=20, n_random=30, seed=0)
    assert res.method == "search"
    assert len(res) == 0 and res.info["n_singular"] == res.info["n_candidates"] > 0


def test_newton_works_for_non_piecewise_linear_dynamics_and_callables():
    f = ShallowPLRNN(2, hidden_dim=6, seed=3).double()
    res = analysis.fixed_points(f, n_starts=30, init_scale=3.0, seed=0)
    assert res.method == "newton" and len(res) >= 1
    with torch.no_grad():
        z = torch.as_tensor(res.points[:, 0])
        torch.testing.assert_close(f.step(z), z, atol=1e-7, rtol=0)
    # a plain callable: z -> 0.5 z + 1 has the fixed point 2
    cal = analysis.newton_fixed_points(lambda z: 0.5 * z + 1.0, starts=np.array([[10.0], [-3.0]]))
    np.testing.assert_allclose(cal.points[:, 0], [[2.0]])
    assert cal.kind == ["stable node"]
    with pytest.raises(ValueError, match="starts"):
        analysis.newton_fixed_points(lambda z: z)
    # a step given with a callable was dropped unused (the callable is called as model(z))
    with pytest.raises(ValueError, match=r"`dt`=0\.1 applies to a model's dynamics; a plain callable"):
        analysis.newton_fixed_points(lambda z: 0.5 * z + 1.0, starts=np.array([[10.0]]), dt=0.1)


def test_classify_eigenvalues():
    lam = np.array([[0.5, 0.2, 0.1], [1.5, 0.2, 0.1], [1.5, 2.0, 3.0], [0.3 + 0.4j, 0.3 - 0.4j, 0.1],
                    [1.0, 0.1, 0.1], [4.8, 1.0, 0.5], [1.0, 2.0 + 1.0j, 2.0 - 1.0j]])
    stable, kind = analysis.classify_eigenvalues(lam)
    assert stable.tolist() == [True, False, False, True, False, False, False]
    # a neutral direction beside a growing one does not make a point marginal: it is unstable
    assert kind == ["stable node", "saddle", "unstable node", "stable spiral", "marginal", "saddle",
                    "unstable spiral"]


def test_spectrum_statistics_by_hand():
    a = analysis.FixedPoints(points=np.zeros((2, 1, 2)), eigenvalues=np.array([[1.02, 0.1], [0.5, -0.2]]),
                             stable=np.array([False, True]), kind=["saddle", "stable node"])
    b = analysis.FixedPoints(points=np.zeros((1, 1, 2)), eigenvalues=np.array([[0.9j, 0.0]]),
                             stable=np.array([True]), kind=["stable spiral"])
    stats = analysis.jacobian_spectrum_statistics([a, b])
    np.testing.assert_allclose(stats["max_abs_eigenvalue"], [1.02, 0.5, 0.9])
    np.testing.assert_allclose(stats["min_deviation"], [0.02, 0.5, 0.1])
    assert stats.attrs["fraction_near_one"] == pytest.approx(1 / 3)
    assert stats.attrs["mean_min_deviation"] == pytest.approx((0.02 + 0.5 + 0.1) / 3)
    assert stats["model"].values.tolist() == [0, 0, 1]
    assert int(stats["histogram"].sum()) == 3


def test_flow_field_and_nullclines_of_a_linear_map():
    # step(z) = 0.5 z + (1, -1): displacement (-0.5 z0 + 1, -0.5 z1 - 1); nullclines z0 = 2 and z1 = -2
    f = PLRNN(2, penalty="none")
    f.set_params(A=np.array([0.5, 0.5]), W=np.zeros((2, 2)), h=np.array([1.0, -1.0]))
    field = analysis.flow_field(f, limits=((-3, 3), (-3, 3)), n_grid=7)
    g0 = field["axis0"].values
    np.testing.assert_allclose(field["flow"].sel(component=0).values, np.broadcast_to(-0.5 * g0[:, None] + 1, (7, 7)))
    lines = analysis.nullclines(f, limits=((-3.1, 3), (-3.1, 3)), n_grid=9)
    np.testing.assert_allclose(lines[0][..., 0], 2.0, atol=1e-12)     # z0 = 2 along the whole segment set
    np.testing.assert_allclose(lines[1][..., 1], -2.0, atol=1e-12)
    assert len(lines[0]) == 8
    with pytest.raises(ValueError, match="dims"):
        analysis.flow_field(f, dims=(0, 0))


def test_bad_period_and_method_are_named():
    f = PLRNN(2, seed=0)
    with pytest.raises(ValueError, match="period"):
        analysis.cycles(f, period=1)
    with pytest.raises(ValueError, match="method"):
        analysis.fixed_points(f, method="bisection")
    with pytest.raises(TypeError, match="PLRNN"):
        analysis.plrnn_cycles(ShallowPLRNN(2, 3, seed=0))


@pytest.mark.parametrize("option, value", [("tol", -1.0), ("tol", float("nan")), ("max_enumerate", 0),
                                           ("n_random", -5), ("max_iter", 0), ("init_scale", -1.0),
                                           ("max_candidates", 0)])
def test_bad_search_options_are_refused_by_name_not_answered_with_no_fixed_points(option, value):
    # z' = 0.5 z + h has the fixed point 2 h: a negative tol used to reject it as off its region
    p = PLRNNParams(np.array([0.5, 0.5]), np.zeros((2, 2)), np.array([0.3, -0.2]), np.zeros((2, 0)))
    np.testing.assert_allclose(analysis.plrnn_cycles(p).points[0, 0], [0.6, -0.4], atol=1e-12)
    with pytest.raises(ValueError, match=f"`{option}`"):
        analysis.plrnn_cycles(p, **{option: value})


def test_non_finite_plrnn_parameters_and_newton_options_are_refused_by_name():
    p = PLRNNParams(np.array([0.5, np.nan]), np.zeros((2, 2)), np.zeros(2), np.zeros((2, 0)))
    with pytest.raises(ValueError, match="A hold NaN"):
        analysis.plrnn_cycles(p)
    f = ShallowPLRNN(2, 3, seed=0)
    for option, value in (("n_starts", 0), ("max_iter", 0), ("tol", -1.0), ("speed_threshold", 0.0)):
        with pytest.raises(ValueError, match=f"`{option}`"):
            analysis.newton_fixed_points(f, **{option: value})


def test_constant_input_shifts_the_fixed_point():
    # z = 0.5 z + C u + h with W = 0: z* = 2 (h + C u)
    f = PLRNN(2, input_dim=1, penalty="none")
    f.set_params(A=np.array([0.5, 0.5]), W=np.zeros((2, 2)), h=np.array([-1.0, 1.0]), C=np.array([[2.0], [0.0]]))
    np.testing.assert_allclose(analysis.fixed_points(f).points[0, 0], [-2.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(analysis.fixed_points(f, u=np.array([1.0])).points[0, 0], [2.0, 2.0], atol=1e-12)
    with pytest.raises(ValueError, match="constant input"):
        analysis.fixed_points(f, u=np.zeros(3))


def test_accepts_fitted_estimators_and_state_space_models_and_refuses_unfitted():
    from dsident import StateSpaceModel
    from dsident.observations import Gaussian
    f = PLRNN(2, penalty="none")
    f.set_params(A=np.array([0.5, 0.5]), W=np.zeros((2, 2)), h=np.array([1.0, -1.0]))
    model = StateSpaceModel(f, Gaussian(2, 2, readout="identity"))

    class Fitted:
        model_ = model

        def fit(self):
            return self

    class Unfitted:
        def fit(self):
            return self

    for obj in (f, model, Fitted()):
        res = analysis.fixed_points(obj)
        np.testing.assert_allclose(res.points[0, 0], [2.0, -2.0], atol=1e-12)
    assert res.to_xarray().attrs["package_version"] == res.info["package_version"]
    with pytest.raises(TypeError, match="not fitted"):
        analysis.fixed_points(Unfitted())


def test_jacobian_product_norms_match_a_dense_product_and_theorem_2():
    f = multistable_plrnn(4, 0)
    res = analysis.jacobian_product_norms(f, 6, z0=np.array([[0.5, -1.0, 2.0, 0.1]]))
    p, z, prod = f.params(), np.array([0.5, -1.0, 2.0, 0.1]), np.eye(4)
    for lag in range(6):
        prod = (np.diag(p.A) + p.W * (z > 0)[None]) @ prod
        z = plrnn_map(p, z)
        assert res["norm"].values[0, lag] == pytest.approx(np.linalg.norm(prod, 2), rel=1e-10)
    np.testing.assert_allclose(res["z"].values[0, -1], z)
    # Theorem 2: identity rows on the regularized units keep ||dz_T/dz_0|| >= 1 at every lag
    reg = analysis.jacobian_product_norms(PLRNN(6, seed=1), 200, z0=np.random.default_rng(0).normal(size=(3, 6)))
    assert np.all(reg["norm"].values >= 1.0 - 1e-9)


def test_newton_leaves_the_callers_starts_unchanged_and_fixed_points_print_as_a_table():
    from dsident.analysis import newton_fixed_points

    starts = np.array([[0.3, -0.2], [1.5, 0.7]])
    before = starts.copy()

    def step(z):
        return 0.5 * z + 1.0                      # unique fixed point z* = 2

    found = newton_fixed_points(step, starts=starts)
    np.testing.assert_array_equal(starts, before)
    np.testing.assert_allclose(found.points[:, 0], [[2.0, 2.0]], atol=1e-8)
    text = repr(found)
    assert text.splitlines()[0].startswith("FixedPoints: 1 fixed point") and "stable node" in text


def test_region_solves_run_in_batches_within_the_memory_budget_with_the_same_answer(monkeypatch):
    import importlib

    fp_module = importlib.import_module("dsident.analysis.fixed_points")   # the module, not the function
    f = multistable_plrnn(12, 1)
    whole = analysis.fixed_points(f, method="enumerate")
    whole_cycles = analysis.cycles(f, period=2, method="search", n_random=500, seed=0)
    sizes = []
    solve = fp_module._solve_cycles

    def spy(p, tuples, tol):
        sizes.append(len(tuples))
        return solve(p, tuples, tol)

    budget = 50 * (1 + 5) * 12 * 12 * 8                 # 50 candidates a batch for fixed points (k = 1)
    monkeypatch.setattr(fp_module, "_SOLVE_BYTES", budget)
    monkeypatch.setattr(fp_module, "_solve_cycles", spy)
    batched = analysis.fixed_points(f, method="enumerate")
    assert max(sizes) == 50 and sum(sizes) == 2 ** 12
    np.testing.assert_array_equal(batched.points, whole.points)
    assert batched.info["n_singular"] == whole.info["n_singular"]
    sizes.clear()
    batched_cycles = analysis.cycles(f, period=2, method="search", n_random=500, seed=0)
    assert max(sizes) <= budget // ((2 + 5) * 12 * 12 * 8) and len(sizes) > 1
    np.testing.assert_array_equal(batched_cycles.points, whole_cycles.points)
    assert batched_cycles.info["n_candidates"] == whole_cycles.info["n_candidates"]


def test_cycle_search_of_a_wide_plrnn_does_not_overflow_counting_its_regions():
    # 2^(M k) region tuples: 2.0 ** 1200 overflows a float (dsident analyze on an M = 300 model, k = 4)
    p = PLRNNParams(A=np.full(300, 0.5), W=np.zeros((300, 300)), h=np.full(300, 0.1), C=np.zeros((300, 0)))
    res = analysis.cycles(p, period=4, n_trajectories=2, n_steps=8, n_random=2, max_iter=1, seed=0)
    assert res.method == "search" and len(res) == 0        # a contracting affine map has no 4-cycle
    assert 0 < res.info["n_candidates"] <= 16
    with pytest.raises(ValueError, match="2\\^1200"):
        analysis.cycles(p, period=4, method="enumerate")


class _FakeClock:
    """Stands in for the module's ``time``: seconds pass only when a batch of solves runs."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now


def test_a_time_budget_stops_the_search_between_batches_and_keeps_the_regions_visited_most(monkeypatch):
    import importlib

    fp_module = importlib.import_module("dsident.analysis.fixed_points")
    f = multistable_plrnn(12, 1)
    exact = analysis.fixed_points(f, method="enumerate")
    options = dict(method="search", n_trajectories=50, n_steps=200, n_random=200, seed=1)
    whole = analysis.fixed_points(f, **options)
    assert not whole.info["timed_out"] and not whole.info["truncated"]
    clock, solve, sizes = _FakeClock(), fp_module._solve_cycles, []

    def one_second_a_batch(p, tuples, tol):
        sizes.append(len(tuples))
        clock.now += 1.0
        return solve(p, tuples, tol)

    monkeypatch.setattr(fp_module, "time", clock)
    monkeypatch.setattr(fp_module, "_SOLVE_BYTES", 20 * (1 + 5) * 12 * 12 * 8)     # 20 candidates a batch
    monkeypatch.setattr(fp_module, "_solve_cycles", one_second_a_batch)
    cut = analysis.fixed_points(f, **options, time_budget=2.5)
    # batches start at t = 0, 1, 2; the one due at t = 3 is past the budget
    assert sizes == [20, 20, 20] and cut.info["n_candidates"] == 60 < whole.info["n_candidates"]
    assert cut.info["timed_out"] and cut.info["truncated"] and cut.info["seconds"] == 3.0
    for z in cut.points[:, 0]:                          # what it found is real ...
        assert np.min(np.linalg.norm(exact.points[:, 0] - z, axis=1)) < 1e-8
    # ... and the runs' resting places came first: every stable fixed point is among them
    for z in exact.points[exact.stable, 0]:
        assert np.min(np.linalg.norm(cut.points[:, 0] - z, axis=1)) < 1e-8
    sizes.clear()
    none = analysis.cycles(f, period=2, method="search", seed=0, time_budget=0)
    assert sizes == [] and len(none) == 0 and none.info["n_candidates"] == 0 and none.info["timed_out"]


@pytest.mark.parametrize("budget", [-1.0, float("nan"), "60", True])
def test_a_bad_time_budget_is_refused_by_name(budget):
    with pytest.raises(ValueError, match="time_budget"):
        analysis.fixed_points(multistable_plrnn(3, 4), time_budget=budget)


@pytest.mark.parametrize("name,options", [("GatedNODE", {"hidden_dim": 16, "gate_hidden_dim": 16, "method": "rk4"}),
                                          ("LTC", {"method": "rk4"})])
def test_newton_eigenvalues_of_a_flow_are_those_of_its_step_over_dt(name, options):
    # the analytic step Jacobian of continuous-time dynamics needs the step's dt; without it
    # the reported eigenvalues were those of a step one time unit long (|1 + λ| instead of
    # |exp(λ dt)|), and a stable point was printed as an unstable spiral
    import scipy.linalg

    from dsident import dynamics
    from dsident.analysis.ct_tools import vector_field_jacobian

    f, dt = getattr(dynamics, name)(3, seed=1, **options).double(), 0.05
    res = analysis.newton_fixed_points(f, starts=np.random.default_rng(0).normal(size=(40, 3)), dt=dt, seed=0)
    assert len(res) >= 1
    for point, eig in zip(res.points[:, 0], res.eigenvalues):
        z = torch.as_tensor(point)
        step_jac = torch.func.jacrev(lambda v: f.step(v[None], None, dt)[0])(z).detach().numpy()
        np.testing.assert_allclose(np.sort(np.abs(eig)), np.sort(np.abs(np.linalg.eigvals(step_jac))), atol=1e-9)
        # independent route: RK4 over a short step is exp(J dt) of the vector field's Jacobian
        flow = scipy.linalg.expm(vector_field_jacobian(f, point[None])[0] * dt)
        np.testing.assert_allclose(np.sort(np.abs(eig)), np.sort(np.abs(np.linalg.eigvals(flow))), atol=1e-5)


def test_a_fixed_point_on_a_region_border_is_not_called_stable_when_one_side_repels():
    # z' = diag(a) z + W relu(z), h = 0: the origin is a fixed point on every border. Off the
    # positive orthant the map is diag(a) (stable), but the positive orthant is invariant and there
    # J = diag(a) + W has a Perron eigenvalue 0.4 + sqrt(0.51) > 1: the origin repels. It was
    # called a "stable node" from the side `z > 0` happened to pick (all off).
    a, w = np.array([0.5, 0.3]), np.array([[0.0, 1.0], [0.5, 0.0]])
    p = PLRNNParams(a, w, np.zeros(2), np.zeros((2, 0)))
    found = analysis.plrnn_cycles(p)
    assert len(found) == 1 and np.allclose(found.points[0, 0], 0.0)
    assert not found.stable[0] and found.kind[0] == "border"
    np.testing.assert_allclose(found.max_abs_eigenvalue[0], np.abs(np.linalg.eigvals(np.diag(a) + w)).max())
    z = np.array([1e-6, 1e-6])                  # the map itself: a tiny start in that orthant grows
    for _ in range(100):
        z = a * z + w @ np.maximum(z, 0.0)
    assert np.linalg.norm(z) > 1e-2
    # a border point whose every side contracts keeps its type
    calm = analysis.plrnn_cycles(PLRNNParams(a, 0.1 * w, np.zeros(2), np.zeros((2, 0))))
    assert calm.kind == ["stable node"] and bool(calm.stable[0])


def test_newton_keeps_roots_not_the_slow_points_where_it_stalls():
    # the Euler map of dz/dt = |z| + eps over dt = 0.01: the flow never stops (speed >= eps), but
    # Newton stalls at the kink z = 0, where the displacement dt (|z| + eps) < 1e-6 passed
    # speed_threshold and was reported as a fixed point ("unstable node", |λ| = 1.01)
    dt, eps = 0.01, 2e-5
    starts = np.random.default_rng(0).normal(size=(20, 1))
    assert len(analysis.newton_fixed_points(lambda z: z + dt * (z.abs() + eps), starts=starts)) == 0
    assert len(analysis.newton_fixed_points(lambda z: z + dt * (z.abs() + eps), starts=starts,
                                            root_check=False)) == 1
    # a flow with roots at ±eps keeps both, with the Euler map's multipliers 1 ± dt
    found = analysis.newton_fixed_points(lambda z: z + dt * (z.abs() - eps), starts=starts)
    np.testing.assert_allclose(np.sort(found.points[:, 0, 0]), [-eps, eps], atol=1e-12)
    np.testing.assert_allclose(np.sort(found.max_abs_eigenvalue), [1 - dt, 1 + dt], atol=1e-12)


def test_newton_takes_a_constant_input_as_the_exact_search_does():
    # a PLRNN with input: Newton's fixed points under u agree with the exact region solve for
    # h + C u (an independent route), and differ from those without input
    from dsident.dynamics import PLRNN

    dyn = PLRNN(3, input_dim=2, seed=4, penalty="none").double()
    p = multistable_plrnn(3, 4).params()
    dyn.set_params(A=p.A, W=p.W, h=p.h)
    with torch.no_grad():
        dyn.C.copy_(torch.tensor([[0.4, -0.2], [0.1, 0.3], [-0.3, 0.1]], dtype=torch.float64))
    u = np.array([0.6, -1.1])
    exact = analysis.plrnn_cycles(dyn, 1, u=u)
    newton = analysis.newton_fixed_points(dyn, u=u, n_starts=300, init_scale=5.0, seed=0)
    assert len(exact) >= 1 and len(newton) == len(exact)
    for p in exact.points[:, 0]:
        assert np.min(np.linalg.norm(newton.points[:, 0] - p, axis=1)) < 1e-7
    plain = analysis.newton_fixed_points(dyn, n_starts=300, init_scale=5.0, seed=0)
    assert not np.allclose(np.sort(plain.points[:, 0, 0]), np.sort(newton.points[:, 0, 0])) or len(plain) != len(newton)
    # through fixed_points(method="newton") too
    again = analysis.fixed_points(dyn, method="newton", u=u, n_starts=300, init_scale=5.0, seed=0)
    np.testing.assert_allclose(again.points, newton.points)


def test_newton_constant_input_of_a_flow_is_a_root_of_its_vector_field():
    # gnODE with an input: at each point Newton returns under u, the vector field with that input
    # is zero (checked by its own vector_field, not the step Newton iterated)
    from dsident.dynamics import GatedNODE

    torch.manual_seed(0)
    dyn = GatedNODE(2, input_dim=1, hidden_dim=16).double()
    u = np.array([0.8])
    fps = analysis.newton_fixed_points(dyn, u=u, dt=0.1, n_starts=100, init_scale=3.0, seed=0)
    assert len(fps) >= 1
    z = torch.as_tensor(fps.points[:, 0])
    with torch.no_grad():
        speed = dyn.vector_field(z, torch.full((len(z), 1), 0.8, dtype=torch.float64))
    assert float(speed.abs().max()) < 1e-6


def test_newton_refuses_an_input_it_cannot_use():
    from dsident.dynamics import PLRNN

    with pytest.raises(ValueError, match="takes no inputs"):
        analysis.newton_fixed_points(PLRNN(2), u=[1.0])
    with pytest.raises(ValueError, match=r"`u` must be a finite constant input of shape \(2,\)"):
        analysis.newton_fixed_points(PLRNN(2, input_dim=2), u=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"`u` must be a finite constant input"):
        analysis.newton_fixed_points(PLRNN(2, input_dim=2), u=[1.0, float("nan")])
    with pytest.raises(ValueError, match="plain callable"):
        analysis.newton_fixed_points(lambda z: 0.5 * z, starts=np.zeros((1, 1)), u=[1.0])


def test_classify_eigenvalues_refuses_what_it_cannot_classify():
    # audit-s53: a 1-D array failed with numpy's AxisError, a list with "'list' object has no
    # attribute 'size'", and a NaN eigenvalue was called a 'saddle'
    stable, kind = analysis.classify_eigenvalues([[0.5, 0.2]])          # a list reads as its array
    assert stable.tolist() == [True] and kind == ["stable node"]
    with pytest.raises(ValueError, match=r"`eigenvalues` must have shape \(n, M\), one row per point; got shape \(2,\)"):
        analysis.classify_eigenvalues(np.array([0.5, 1.2]))
    with pytest.raises(ValueError, match=r"`eigenvalues` row 1 holds NaN"):
        analysis.classify_eigenvalues(np.array([[0.5, 0.2], [np.nan, 0.5]]))
    # an overflowed exp(λ dt) (inf + nan j) is still an unstable direction, not a NaN
    with np.errstate(over="ignore", invalid="ignore"):
        lam = np.exp(np.array([[1000.0 + 0j, -1.0 + 0j]]))
    assert analysis.classify_eigenvalues(lam)[1] == ["saddle"]


def test_spectral_abscissa_and_spectrum_statistics_name_a_bad_shape_or_histogram():
    # audit-s53: numpy's LinAlgError / histogram messages, the latter after every fixed point was found
    jac = np.array([[[-1.0, 2.0], [0.0, -3.0]], [[0.5, 0.0], [0.0, -0.1]]])
    np.testing.assert_allclose(analysis.spectral_abscissa(jac), [-1.0, 0.5])   # triangular: the diagonals
    for bad in (np.zeros(3), np.zeros((2, 3)), np.zeros((1, 2, 3))):
        with pytest.raises(ValueError, match=r"`jacobians` must have shape \(n, M, M\)"):
            analysis.spectral_abscissa(bad)
    points = analysis.FixedPoints(points=np.zeros((1, 1, 2)), eigenvalues=np.array([[0.5, 0.1]]),
                                  stable=np.array([True]), kind=["stable node"])
    for options in ({"bins": 0}, {"value_range": (2.0, 0.0)}, {"value_range": (0.0, np.inf)}):
        with pytest.raises(ValueError, match=r"`bins`=.* with `value_range`=.* do not define a histogram"):
            analysis.jacobian_spectrum_statistics(points, **options)


def test_newton_refuses_a_step_a_map_would_drop_or_no_flow_can_take():
    # audit-s53: dt=-1 or dt=0.5 on a discrete-time PLRNN was dropped unused without a word
    from dsident import dynamics
    from dsident.model import StateSpaceModel
    from dsident.observations import Gaussian

    dyn = dynamics.PLRNN(2, seed=0)
    with torch.no_grad():
        dyn.a.copy_(torch.tensor([0.5, 0.25]))
        dyn.W.zero_()
        dyn.h.copy_(torch.tensor([1.0, -1.0]))
    model = StateSpaceModel(dyn, Gaussian(2, 2), dt=1.0).double()
    starts = np.zeros((3, 2))
    found = analysis.newton_fixed_points(model, starts=starts, dt=1.0)     # its own step is fine
    np.testing.assert_allclose(found.points[:, 0], [[2.0, -4.0 / 3.0]], rtol=1e-10)   # z = h / (1 - A)
    for bad in (0.5, 2.0):
        with pytest.raises(ValueError, match=r"`dt`=.*: PLRNN is a discrete-time map, one step per sample of its "
                                             r"fit's step dt=1\.0"):
            analysis.newton_fixed_points(model, starts=starts, dt=bad)
    with pytest.raises(ValueError, match=r"PLRNN is a discrete-time map, one step per sample; another dt"):
        analysis.newton_fixed_points(dyn, starts=starts, dt=1.0)
    for bad in (-1.0, 0.0, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match=r"`dt` must be a positive finite number"):
            analysis.newton_fixed_points(dynamics.GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0),
                                         starts=starts, dt=bad)


def test_starts_with_nan_are_refused_not_reported_as_no_fixed_points():
    # audit-s53: NaN starts (e.g. states of a diverged run) came back as "0 fixed points"
    from dsident import dynamics

    starts = np.array([[0.0, 0.0], [np.nan, 1.0], [0.5, np.inf]])
    with pytest.raises(ValueError, match=r"`starts` must be finite; 2 of its 3 rows hold NaN or inf \(the first is row 1\)"):
        analysis.newton_fixed_points(lambda z: 0.5 * z + 1.0, starts=starts)
    found = analysis.newton_fixed_points(lambda z: 0.5 * z + 1.0, starts=starts[:1])
    np.testing.assert_allclose(found.points[:, 0], [[2.0, 2.0]], rtol=1e-10)     # z = 0.5 z + 1
    flow = dynamics.GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0)
    with pytest.raises(ValueError, match=r"`starts` must be finite"):
        analysis.vector_field_fixed_points(flow, starts)


def test_vector_field_jacobian_names_a_bad_state_or_an_input_it_would_drop():
    # audit-s53: a state of the wrong width failed inside torch ("mat1 and mat2 shapes cannot be
    # multiplied"), and `u` for dynamics without inputs was dropped without a word
    from dsident import dynamics

    flow = dynamics.GatedNODE(2, hidden_dim=4, gate_hidden_dim=4, seed=0).double()
    z = np.array([[0.3, -0.2]])
    jac = analysis.vector_field_jacobian(flow, z)
    eps = 1e-6                      # independent route: central differences of the vector field
    field = lambda v: flow.vector_field(torch.tensor(v[None]), None)[0].detach().numpy()
    fd = np.stack([(field(z[0] + eps * e) - field(z[0] - eps * e)) / (2 * eps) for e in np.eye(2)], axis=1)
    np.testing.assert_allclose(jac[0], fd, atol=1e-7)
    with pytest.raises(ValueError, match=r"`z` must have shape \(n, 2\) or \(2,\); got \(3, 5\)"):
        analysis.vector_field_jacobian(flow, np.zeros((3, 5)))
    for call in (lambda: analysis.vector_field_jacobian(flow, z, u=np.ones((1, 1))),
                 lambda: analysis.vector_field_fixed_points(flow, z, u=np.ones(1)),
                 lambda: analysis.vector_field_grid(flow, u=np.ones(1))):
        with pytest.raises(ValueError, match=r"`u` was given .* but GatedNODE takes no inputs \(input_dim=0\)"):
            call()
