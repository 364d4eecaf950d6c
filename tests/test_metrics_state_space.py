"""D_stsp against independent routes: a dense histogram, CDF bin probabilities, the Gaussian KL."""
import numpy as np
import pytest
import xarray as xr
from scipy.stats import norm

from dsident.metrics import state_space_coverage, state_space_divergence


def _dense_binned_kl(xt, xg, n_bins, alpha):
    """Straightforward dense-histogram KL on the true grid (reference route)."""
    lo = xt.min(0) - 0.1 * xt.std(0)
    hi = xt.max(0) + 0.1 * xt.std(0)
    edges = [np.linspace(lo[d], hi[d], n_bins + 1) for d in range(xt.shape[1])]
    ht, _ = np.histogramdd(xt, bins=edges)
    hg, _ = np.histogramdd(xg, bins=edges)
    k = ht.size
    p = (ht + alpha) / (ht.sum() + alpha * k)
    q = (hg + alpha) / (hg.sum() + alpha * k)
    return float(np.sum(p * np.log(p / q)))


def test_identical_distributions_give_zero():
    x = np.random.default_rng(0).normal(size=(5000, 3))
    assert state_space_divergence(x, x) == pytest.approx(0.0, abs=1e-12)
    assert state_space_divergence(x, x, method="gmm", gmm_points=500, mc_samples=200) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("direction", ["forward", "reverse", "symmetric"])
def test_sparse_binned_matches_dense_histogram(direction):
    rng = np.random.default_rng(1)
    xt = rng.normal(size=(20_000, 3))
    xg = rng.normal(0.3, 1.3, size=(15_000, 3))   # some points fall off the grid and are dropped
    forward = _dense_binned_kl(xt, xg, 12, 1e-5)
    lo, hi = xt.min(0) - 0.1 * xt.std(0), xt.max(0) + 0.1 * xt.std(0)
    inside = np.all((xt >= lo) & (xt < hi), 1)
    assert inside.all()
    # reverse: KL(gen || true) on the same (true) grid, computed densely with roles swapped
    edges = [np.linspace(lo[d], hi[d], 13) for d in range(3)]
    ht, _ = np.histogramdd(xt, bins=edges)
    hg, _ = np.histogramdd(xg, bins=edges)
    p = (ht + 1e-5) / (ht.sum() + 1e-5 * ht.size)
    q = (hg + 1e-5) / (hg.sum() + 1e-5 * hg.size)
    reverse = float(np.sum(q * np.log(q / p)))
    expected = {"forward": forward, "reverse": reverse, "symmetric": 0.5 * (forward + reverse)}[direction]
    got = state_space_divergence(xt, xg, n_bins=12, direction=direction)
    assert got == pytest.approx(expected, rel=1e-9)


def test_binned_kl_of_two_gaussians_from_cdf_bin_probabilities():
    # deterministic "samples" at the quantiles, so the histograms equal S * (bin probability) to within 1 count
    s = 200_000
    u = (np.arange(s) + 0.5) / s
    xt = norm.ppf(u)[:, None]
    xg = norm.ppf(u, loc=0.5, scale=1.2)[:, None]
    n_bins, alpha = 30, 1e-5
    lo, hi = xt.min() - 0.1 * xt.std(), xt.max() + 0.1 * xt.std()
    edges = np.linspace(lo, hi, n_bins + 1)
    pt = s * np.diff(norm.cdf(edges))
    pg = s * np.diff(norm.cdf(edges, loc=0.5, scale=1.2))        # mass off the grid is dropped
    p = (pt + alpha) / (pt.sum() + alpha * n_bins)
    q = (pg + alpha) / (pg.sum() + alpha * n_bins)
    expected = float(np.sum(p * np.log(p / q)))
    assert expected > 0.1
    assert state_space_divergence(xt, xg, n_bins=n_bins) == pytest.approx(expected, rel=2e-3)


@pytest.mark.parametrize("n_bins", [12, 20])   # 12^5 cells: counted in a vector; 20^5: sorted codes
def test_empty_bins_closed_form_term_in_five_dimensions(n_bins):
    # 5-D: most cells are empty in both; their closed-form term must match the dense route
    rng = np.random.default_rng(2)
    xt = rng.normal(size=(3000, 5))
    xg = rng.standard_t(5, size=(3000, 5))
    expected = _dense_binned_kl(xt, xg, n_bins, 1e-5)
    assert state_space_divergence(xt, xg, n_bins=n_bins) == pytest.approx(expected, rel=1e-9)


def test_sorted_and_vector_counting_agree(monkeypatch):
    from dsident.metrics import state_space as ss

    rng = np.random.default_rng(11)
    xt, xg = rng.normal(size=(5000, 3)), rng.normal(0.5, 1.0, size=(4000, 3))
    vector = state_space_divergence(xt, xg)
    monkeypatch.setattr(ss, "_DENSE_COUNT_CELLS", 0)
    assert state_space_divergence(xt, xg) == pytest.approx(vector, rel=1e-12)


def test_invariant_to_sample_order_and_trial_layout():
    rng = np.random.default_rng(3)
    xt = rng.normal(size=(6000, 2))
    xg = rng.normal(0.2, 1.1, size=(6000, 2))
    base = state_space_divergence(xt, xg)
    assert base > 0
    assert state_space_divergence(xt[rng.permutation(6000)], xg[rng.permutation(6000)]) == pytest.approx(base, rel=1e-12)
    assert state_space_divergence(xt.reshape(3, 2000, 2), xg.reshape(2, 3000, 2)) == pytest.approx(base, rel=1e-12)


def test_nan_rows_are_excluded():
    rng = np.random.default_rng(4)
    xt = rng.normal(size=(4000, 3))
    xg = rng.normal(0.1, 1.0, size=(4000, 3))
    base = state_space_divergence(xt, xg)
    xt_nan = np.concatenate([xt, np.full((50, 3), np.nan)])
    xg_nan = xg.copy()
    xg_nan = np.concatenate([xg_nan, [[np.nan, 0.0, 0.0]] * 30])   # partly missing rows are left out too
    assert state_space_divergence(xt_nan, xg_nan) == pytest.approx(base, rel=1e-12)


def test_accepts_datasets():
    rng = np.random.default_rng(5)
    xt, xg = rng.normal(size=(1, 3000, 3)), rng.normal(size=(1, 3000, 3))
    ds_t = xr.Dataset({"x": (("trial", "time", "channel"), xt)})
    ds_g = xr.Dataset({"x": (("trial", "time", "channel"), xg)})
    assert state_space_divergence(ds_t, ds_g) == pytest.approx(state_space_divergence(xt, xg))


def test_no_generated_point_on_grid_gives_nan():
    x = np.random.default_rng(6).normal(size=(1000, 2))
    assert np.isnan(state_space_divergence(x, x + 100.0))


def test_clear_errors():
    x = np.zeros((100, 3)) + np.arange(100)[:, None]
    with pytest.raises(ValueError, match="same number of channels"):
        state_space_divergence(x, x[:, :2])
    with pytest.raises(ValueError, match="`method`"):
        state_space_divergence(x, x, method="kde")
    with pytest.raises(ValueError, match="`direction`"):
        state_space_divergence(x, x, direction="both")
    with pytest.raises(ValueError, match="no row without missing"):
        state_space_divergence(np.full((10, 3), np.nan), x)


def test_gmm_single_components_give_gaussian_kl():
    # one component each (gmm_points=1): p = N(a, s I), q = N(b, s I), KL = |a - b|^2 / (2 s)
    rng = np.random.default_rng(7)
    a = rng.normal(size=8)
    b = a + rng.normal(size=8) / np.sqrt(8)
    s = 0.7
    xt = np.vstack([a, rng.normal(size=(5, 8))])
    xg = np.vstack([b, rng.normal(size=(5, 8))])
    expected = np.sum((a - b) ** 2) / (2 * s)
    for direction in ("forward", "reverse", "symmetric"):
        got = state_space_divergence(xt, xg, method="gmm", gmm_points=1, gmm_scaling=s, mc_samples=200_000,
                                     direction=direction, seed=0)
        assert got == pytest.approx(expected, abs=0.02 * max(1.0, expected))


def test_gmm_auto_for_six_channels_and_seeded():
    rng = np.random.default_rng(8)
    xt, xg = rng.normal(size=(800, 6)), rng.normal(0.3, 1.0, size=(800, 6))
    auto = state_space_divergence(xt, xg, seed=3)
    assert auto == state_space_divergence(xt, xg, method="gmm", seed=3)
    assert auto != state_space_divergence(xt, xg, method="gmm", seed=4)
    assert auto > 0


def test_gmm_chunked_density_matches_direct_sum(monkeypatch):
    from dsident.metrics import state_space as ss

    rng = np.random.default_rng(9)
    x, c = rng.normal(size=(300, 4)), rng.normal(size=(50, 4))
    direct = np.log(np.mean(np.exp(-0.5 * ((x[:, None] - c[None]) ** 2).sum(-1)), axis=1)) - 2 * np.log(2 * np.pi)
    monkeypatch.setattr(ss, "_GMM_BLOCK_BYTES", 8 * 50 * 7)       # 7 rows per block
    np.testing.assert_allclose(ss._mixture_log_density(x, c, 1.0), direct, rtol=1e-10)


def test_very_high_dimensional_bins_use_row_keys():
    # 30^13 does not fit in int64: the binning falls back to row keys and still gives 0 for identical data
    x = np.random.default_rng(10).normal(size=(500, 13))
    assert state_space_divergence(x, x, method="bins") == pytest.approx(0.0, abs=1e-12)
    assert state_space_divergence(x, x[::-1] * 1.5, method="bins") > 0


# --- coverage: the share of the true samples whose bin the generated series visits -------------

def test_coverage_counts_true_mass_in_visited_bins():
    # the integers 0..9 fall in ten distinct bins of the true grid; value k occurs k + 1 times,
    # so the generated values {2, 5, 9} cover (3 + 6 + 10) / 55 of the true samples
    values = np.arange(10.0)
    xt = np.repeat(values, np.arange(1, 11))[:, None]
    xg = np.array([2.0, 5.0, 5.0, 9.0, 42.0])[:, None]           # 42 lies off the grid
    assert state_space_coverage(xt, xg) == pytest.approx(19 / 55, abs=1e-15)
    assert state_space_coverage(xt, xt) == 1.0
    assert state_space_coverage(xt, xg + 100.0) == 0.0
    assert state_space_coverage(xt, np.full((4, 1), np.nan)) == 0.0   # no finite generated row


def test_coverage_matches_a_dense_histogram_and_explains_the_binned_divergence():
    rng = np.random.default_rng(11)
    xt = rng.normal(size=(10_000, 3))
    for shift in (0.0, 0.5, 1.5):
        xg = rng.normal(shift, 0.7, size=(10_000, 3))
        lo, hi = xt.min(0) - 0.1 * xt.std(0), xt.max(0) + 0.1 * xt.std(0)
        edges = [np.linspace(lo[d], hi[d], 31) for d in range(3)]
        ht, _ = np.histogramdd(xt, bins=edges)
        hg, _ = np.histogramdd(xg, bins=edges)
        dense = ht[hg > 0].sum() / ht.sum()
        cov = state_space_coverage(xt, xg)
        assert cov == pytest.approx(dense, abs=1e-12)
        # a missed bin's term p·log(p/q0) with q0 the smoothing mass alone: summed over the
        # missed bins it is a lower bound on the part of D_stsp those bins contribute and
        # grows with the missed mass
        q0 = 1e-5 / (hg.sum() + 1e-5 * 30 ** 3)
        p = (ht + 1e-5) / (ht.sum() + 1e-5 * 30 ** 3)
        missed_term = float(np.sum(np.where((hg == 0) & (ht > 0), p * np.log(p / q0), 0.0)))
        assert missed_term >= 9.0 * (1 - cov)
    assert state_space_coverage(xt, rng.normal(1.5, 0.7, size=(10_000, 3))) < state_space_coverage(xt, xt[::-1])


def test_coverage_with_row_keys_and_trials_equals_the_flat_route():
    # 13 channels: the bins are keyed by rows (30^13 overflows int64); copies of one channel give
    # the one-channel answer, and a trial layout with NaN padding gives the pooled answer
    base = np.random.default_rng(12).normal(size=(600, 1))
    gen = base[:300] * 0.8
    flat = state_space_coverage(base, gen)
    assert 0.0 < flat < 1.0
    assert state_space_coverage(np.repeat(base, 13, axis=1), np.repeat(gen, 13, axis=1)) == pytest.approx(flat)
    padded = np.full((2, 300, 1), np.nan)
    padded[0], padded[1, :200] = base[:300], base[300:500]
    assert state_space_coverage(padded, gen) == pytest.approx(state_space_coverage(base[:500], gen))


def test_coverage_per_sample_marks_each_true_sample_in_the_true_layout():
    values = np.arange(10.0)
    xt = np.repeat(values, np.arange(1, 11))[:, None]
    mask = state_space_coverage(xt, np.array([[2.0], [9.0]]), per_sample=True)
    np.testing.assert_array_equal(mask, np.isin(xt[:, 0], [2.0, 9.0]).astype(float))
    assert state_space_coverage(xt[:, 0], np.array([2.0, 9.0]), per_sample=True).shape == (55,)
    trials = np.stack([xt[:30], np.concatenate([xt[30:], np.full((5, 1), np.nan)])])   # (2, 30, 1), padded
    per = state_space_coverage(trials, np.array([[9.0]]), per_sample=True)
    assert per.shape == (2, 30) and np.isnan(per[1, 25:]).all()
    assert np.nanmean(per) == pytest.approx(state_space_coverage(trials, np.array([[9.0]])))
    np.testing.assert_array_equal(per[1, :25], (xt[30:, 0] == 9.0).astype(float))
    ds = xr.Dataset({"x": (("trial", "time", "channel"), trials)})
    np.testing.assert_array_equal(state_space_coverage(ds, np.array([[9.0]]), per_sample=True), per)


def test_coverage_clear_errors():
    x = np.zeros((10, 2))
    with pytest.raises(ValueError, match="same number of channels"):
        state_space_coverage(x, np.zeros((10, 3)))
    with pytest.raises(ValueError, match="no row without missing values"):
        state_space_coverage(np.full((5, 2), np.nan), x)
    with pytest.raises(ValueError, match="n_bins"):
        state_space_coverage(x, x, n_bins=0)


def test_a_list_is_a_list_of_trials_as_as_dataset_reads_it():
    # two 1-D trials were read as one series of 2 samples with 3000 channels (the GMM route)
    rng = np.random.default_rng(5)
    a, b, c = rng.normal(size=3000), rng.normal(size=3000), 1.3 * rng.normal(size=2000) + 0.2
    stacked = np.stack([a, b])[..., None]
    assert state_space_divergence([a, b], c) == pytest.approx(state_space_divergence(stacked, c), rel=1e-12)
    assert state_space_divergence([a, b], c) == pytest.approx(
        _dense_binned_kl(np.concatenate([a, b])[:, None], c[:, None], 30, 1e-5), rel=1e-10)
    # trials of unequal length are pooled (padding is missing, never data)
    x = rng.normal(size=(3000, 2))
    ragged = state_space_divergence([x[:500], x[500:2600]], x[:, ::-1])
    assert ragged == pytest.approx(_dense_binned_kl(x[:2600], x[:, ::-1], 30, 1e-5), rel=1e-10)
    covered = state_space_coverage([x[:500], x[500:2600]], x[:1000], per_sample=True)
    assert covered.shape == (2, 2100) and np.isnan(covered[0, 500:]).all() and not np.isnan(covered[1]).any()
    with pytest.raises(ValueError, match=r"same number of channels; got \[2, 1\]"):
        state_space_divergence([x[:500], x[:500, :1]], x)


def test_a_dataarray_is_read_by_its_dim_names():
    x = np.random.default_rng(6).normal(size=(2000, 2))
    y = x * [1.0, 2.0]
    da = xr.DataArray(y.T, dims=("channel", "time"))
    assert state_space_divergence(x, da) == pytest.approx(state_space_divergence(x, y), rel=1e-12)


@pytest.mark.parametrize("setting, value", [("smoothing_alpha", "a"), ("gmm_scaling", "1"), ("gmm_points", 0),
                                            ("mc_samples", 1.5), ("gmm_scaling", np.nan), ("smoothing_alpha", True)])
def test_every_setting_is_checked_whichever_estimator_runs(setting, value):
    # gmm settings were passed over by the binned route; non-numbers raised numpy's own TypeError
    x = np.random.default_rng(7).normal(size=(200, 2))
    with pytest.raises(ValueError, match=f"`{setting}` must be .*; got {value!r}"):
        state_space_divergence(x, x, **{setting: value})


def test_gmm_divergence_does_not_depend_on_where_the_data_lie():
    # far from the origin, |x|² − 2x·c + |c|² cancelled: 1 % off at an offset of 1e7 (unit-variance data)
    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(1000, 6)), 1.2 * rng.normal(size=(1000, 6)) + 0.3
    near = state_space_divergence(x, y, mc_samples=300)
    assert near > 0.1
    for offset in (1e7, -3e8):
        assert state_space_divergence(x + offset, y + offset, mc_samples=300) == pytest.approx(near, rel=1e-6)


@pytest.mark.parametrize("value", [0.1, 1 / 3, 1e5 + 0.1])
def test_a_constant_channel_is_constant_whatever_its_value(value):
    # a constant 0.1 has a round-off std of 1e-17: its grid had zero width and D_stsp(x, x) was NaN
    rng = np.random.default_rng(9)
    x, g = rng.normal(size=(3000, 2)), 1.2 * rng.normal(size=(3000, 2))
    x[:, 1] = g[:, 1] = value
    x0, g0 = x.copy(), g.copy()
    x0[:, 1] = g0[:, 1] = 0.0                              # the same data with the constant at 0 (std exactly 0)
    assert state_space_divergence(x, x) == 0.0
    assert state_space_divergence(x, g) == pytest.approx(state_space_divergence(x0, g0), rel=1e-12)
    assert state_space_coverage(x, g) == state_space_coverage(x0, g0)


@pytest.mark.parametrize("seed", [-1, "a", 1.5, True])
def test_a_seed_numpy_cannot_take_is_refused_by_name(seed):
    # audit-s53: the GMM estimator passed it to numpy, which said only "expected non-negative
    # integer" or "SeedSequence expects int ..."; the binned one ignored it
    rng = np.random.default_rng(0)
    xt, xg = rng.normal(size=(300, 6)), rng.normal(size=(300, 6))
    for method in ("gmm", "bins"):
        with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer, a numpy Generator or None; "
                                             f"got seed={seed!r}"):
            state_space_divergence(xt, xg, method=method, seed=seed, gmm_points=200, mc_samples=100)
    # a Generator is used as given: the same draws give the same estimate
    a = state_space_divergence(xt, xg, seed=np.random.default_rng(5), gmm_points=200, mc_samples=100)
    assert a == state_space_divergence(xt, xg, seed=5, gmm_points=200, mc_samples=100)



def test_coverage_refuses_a_per_sample_flag_that_is_no_bool():
    # audit-s53: per_sample="no" is truthy and returned the per-sample array instead of the share
    x = np.arange(10.0)[:, None]
    assert state_space_coverage(x, x[:5], per_sample=False) == 0.5          # the docstring's example
    np.testing.assert_array_equal(state_space_coverage(x, x[:5], per_sample=np.bool_(True)), [1.0] * 5 + [0.0] * 5)
    for flag in ("no", 0, None):
        with pytest.raises(TypeError, match=f"`per_sample` must be True or False; got per_sample={flag!r}"):
            state_space_coverage(x, x[:5], per_sample=flag)


def test_an_overflowed_generated_value_is_refused_not_left_out_as_missing():
    # audit-s53: a run whose second half overflowed to inf was scored on its first half alone,
    # as if it had stayed on the attractor (NaN marks missing; inf is a diverged value)
    from dsident.metrics import state_space_projections

    rng = np.random.default_rng(0)
    xt = rng.normal(size=(400, 2))
    xg = xt[rng.permutation(400)]
    half = xg.copy()
    half[200:] = np.nan                        # missing: still scored on the observed rows
    assert np.isfinite(state_space_divergence(xt, half))
    bad = xg.copy()
    bad[200:, 1] = np.inf
    for call in (state_space_divergence, state_space_coverage, state_space_projections):
        with pytest.raises(ValueError, match=r"`generated` contains 200 inf value\(s\), the first in trial 0 at "
                                             r"time step 200, channel 1"):
            call(xt, bad)
        with pytest.raises(ValueError, match=r"`true` contains 200 inf value\(s\)"):
            call(bad, xt)
