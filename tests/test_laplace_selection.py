"""select="bounded": the batched free-run check against a plain loop, and the rule inside a fit."""
import numpy as np
import pytest

import dsident
from dsident.inference.laplace_em import PLRNNParams
from dsident.inference.laplace_em.selection import DataBox, data_box, free_run_exit


def _params(A, W, h, B, b, readout="linear", likelihood="gaussian"):
    M, N = len(A), B.shape[0]
    return PLRNNParams(A=np.asarray(A, float), W=np.asarray(W, float), h=np.asarray(h, float), C=np.zeros((M, 0)),
                       Sigma=np.ones(M), mu0=np.zeros(M), B=np.asarray(B, float), b=np.asarray(b, float),
                       Gamma=np.ones(N), readout=readout, likelihood=likelihood)


def _loop_exit(p, z0, box, n_steps, latent_box=None):
    """The same question answered one run and one step at a time (check at every step)."""
    first = -1
    for z in np.asarray(z0, float):
        with np.errstate(over="ignore", invalid="ignore"):
            for t in range(1, n_steps + 1):
                z = p.A * z + p.W @ np.maximum(z, 0) + p.h
                g = np.maximum(z, 0) if p.readout == "relu" else z
                x = p.B @ g + p.b
                out = not np.all(np.isfinite(x) & (x >= box.lo) & (x <= box.hi))
                if latent_box is not None:
                    out |= not np.all(np.isfinite(z) & (z >= latent_box.lo) & (z <= latent_box.hi))
                if out:
                    first = t if first < 0 else min(first, t)
                    break
    return first


def _random_params(rng, M=4, N=2, scale=1.0, readout="linear"):
    W = scale * rng.normal(size=(M, M)) / np.sqrt(M)
    np.fill_diagonal(W, 0)
    return _params(rng.uniform(0.5, 1.05, M), W, 0.3 * rng.normal(size=M), rng.normal(size=(N, M)),
                   rng.normal(size=N), readout=readout)


def test_batched_check_equals_a_plain_loop():
    rng = np.random.default_rng(1)
    cands = [_random_params(rng, scale=s) for s in (0.2, 0.6, 1.0, 1.4, 1.8, 2.2)]
    z0 = rng.normal(size=(3, 4))
    box = DataBox(np.full(2, -6.0), np.full(2, 6.0))
    got = free_run_exit(cands, z0, box, 400, check_every=1)
    want = [_loop_exit(p, z0, box, 400) for p in cands]
    assert list(got) == want
    # the set must contain both outcomes, or the comparison says little
    assert (got < 0).any() and (got > 0).any()
    # checking every 10 steps sees only multiples of 10 (an excursion between checks can be
    # missed), so it never reports an exit earlier than the exact one, nor one where none is
    coarse = free_run_exit(cands, z0, box, 400, check_every=10)
    for g, c in zip(got, coarse):
        assert c < 0 or (g > 0 and c >= g and c % 10 == 0)
        if g < 0:
            assert c < 0


def test_relu_readout_hides_a_latent_divergence_that_the_latent_box_catches():
    # unit 1 is rectified away from the readout and runs off to -inf (A = 1.2, h < 0)
    p = _params([0.5, 1.2], np.zeros((2, 2)), [0.5, -1.0], np.array([[1.0, 1.0]]), [0.0], readout="relu")
    box = DataBox(np.array([-2.0]), np.array([2.0]))
    z0 = np.zeros((1, 2))
    assert free_run_exit([p], z0, box, 2_000)[0] == -1
    zbox = DataBox(np.full(2, -50.0), np.full(2, 50.0))
    step = free_run_exit([p], z0, box, 2_000, check_every=1, latent_box=zbox)[0]
    assert step == _loop_exit(p, z0, box, 2_000, latent_box=zbox) and step > 0


def test_poisson_check_uses_expected_counts():
    # eta grows linearly: exp(eta) leaves a count box long before eta itself would
    p = _params([1.0], np.zeros((1, 1)), [0.05], np.array([[1.0]]), [0.0], likelihood="poisson")
    box = DataBox(np.array([-1.0]), np.array([10.0]))      # counts up to 10: eta up to log 10
    step = free_run_exit([p], np.zeros((1, 1)), box, 200, check_every=1)[0]
    assert step == int(np.floor(np.log(10.0) / 0.05)) + 1


def test_data_box_ignores_masked_samples_and_checks_its_arguments():
    x = np.array([[0.0, 1.0], [2.0, 100.0], [1.0, 3.0]])
    mask = np.array([[True, True], [True, False], [True, True]])
    box = data_box(x, mask, margin=0.5)
    np.testing.assert_allclose(box.lo, [-1.0, 0.0])
    np.testing.assert_allclose(box.hi, [3.0, 4.0])
    with pytest.raises(ValueError, match="bound_margin"):
        data_box(x, mask, margin=-1.0)
    with pytest.raises(ValueError, match="z0"):
        free_run_exit([_random_params(np.random.default_rng(0))], np.zeros((2, 3)), box, 10)


def test_unknown_select_rule_is_refused():
    ds = dsident.data.as_dataset(np.random.default_rng(0).normal(size=(100, 2)), dt=1.0)
    with pytest.raises(ValueError, match="select"):
        dsident.models.PLRNN(latent_dim=2, seed=0).fit(ds, method="laplace-em", progress=False, select="best")


@pytest.mark.slow
def test_bounded_rule_keeps_the_best_iterate_whose_free_run_stays_in_range():
    from dsident.datasets import load
    from dsident.inference.laplace_em import chain_from_dataset

    ds = load("bursting_neuron", split="short").isel(trial=[1])
    est = dsident.models.PLRNN(latent_dim=10, tau=0.0, seed=110)
    est.fit(ds, method="laplace-em", progress=False, select="bounded", check_steps=20_000)
    h = est.history_
    obj, stage = np.array(h["objective"]), np.array(h["stage"])
    # with these settings the low-noise stage has iterates whose free runs leave (the rule is exercised)
    assert any(e > 0 for exits in h["stage_exit"] for e in exits)
    n_stages = len(h["stage_kept"])
    assert n_stages >= 1 and len(h["stage_exit"]) >= n_stages
    for k in range(n_stages):
        exits = np.array(h["stage_exit"][k])
        o = obj[stage == k]
        kept = h["stage_kept"][k]
        if (exits == -1).any():
            # the kept iterate is bounded and no bounded iterate of the stage has a higher objective
            assert exits[kept] == -1
            assert o[kept] == pytest.approx(o[exits == -1].max())
            # iterates are left unchecked (-2) only when the best one of all was bounded
            if (exits == -2).any():
                assert o[kept] == pytest.approx(o.max())
    # independent route: the fitted model's own (torch) free run from its mu0 stays in the data's range
    box = data_box(*chain_from_dataset(ds)[:2], margin=1.0)
    gen = est.generate(20_000, seed=0)
    x = gen["x"].values[0]
    assert gen.attrs["diverged"] == 0
    assert np.all((x >= box.lo) & (x <= box.hi))


def test_dstsp_rule_keeps_the_lowest_divergence_bounded_iterate():
    rng = np.random.default_rng(0)
    t = np.arange(600) * 0.2
    x = np.stack([np.sin(t), np.cos(t), np.sin(2 * t)], -1) + 0.1 * rng.normal(size=(600, 3))
    ds = dsident.data.as_dataset(x, dt=0.2)
    est = dsident.models.PLRNN(latent_dim=4, tau=0.0, seed=0)
    est.fit(ds, method="laplace-em", progress=False, select="dstsp", n_iter_per_stage=4, anneal=(1.0, 0.1, 0.01),
            check_steps=5_000)
    h = est.history_
    assert len(h["stage_dstsp"]) == len(h["stage_kept"]) >= 2
    mins = []
    for k, d in enumerate(h["stage_dstsp"]):
        d = np.array(d)
        exits = np.array(h["stage_exit"][k])
        # every iterate was checked, and only the bounded ones were scored
        assert np.all(exits != -2) and np.all(np.isnan(d[exits >= 0]))
        assert h["stage_kept"][k] == int(np.nanargmin(d))
        mins.append(np.nanmin(d))
    assert h["best_stage"] == int(np.argmin(mins))
    gen = est.generate(5_000, seed=0)
    assert gen.attrs["diverged"] == 0 and np.all(np.isfinite(gen["x"].values))
