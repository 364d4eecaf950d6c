"""D_stsp of each channel and channel pair (dsident.metrics.state_space_projections)."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from dsident.data import as_dataset
from dsident.metrics import state_space_divergence, state_space_projections


def _correlated(n: int = 20_000, seed: int = 0) -> np.ndarray:
    """Three channels: a, a + small noise, independent c (so the (0, 1) pair is coupled)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    return np.column_stack([a, a + 0.2 * rng.normal(size=n), rng.normal(size=n)])


def test_shuffling_one_channel_in_time_shows_only_in_the_pairs_it_belongs_to():
    x = _correlated()
    g = x.copy()
    g[:, 1] = np.random.default_rng(1).permutation(g[:, 1])    # same marginal, coupling to channel 0 lost
    d = state_space_projections(x, g)
    assert d.dims == ("channel", "other_channel") and d.shape == (3, 3)
    # identical histograms: every marginal and the untouched pair are exactly 0
    assert np.all(np.diag(d.values) == 0.0)
    assert float(d[0, 2]) == 0.0
    # the broken coupling: a coupled pair against an independent one on a 30 × 30 grid
    assert float(d[0, 1]) > 1.0
    # channel 1 and channel 2 were independent anyway: the shuffle costs only sampling noise
    assert float(d[1, 2]) < 0.1 * float(d[0, 1])
    np.testing.assert_array_equal(d.values, d.values.T)


def test_each_entry_is_the_binned_dstsp_of_those_columns():
    x = _correlated()
    g = _correlated(seed=5) * np.array([1.0, 1.3, 0.8]) + np.array([0.0, 0.2, 0.0])
    d = state_space_projections(x, g, n_bins=20, direction="symmetric")
    for i in range(3):
        for j in range(3):
            cols = [i] if i == j else [i, j]
            ref = state_space_divergence(x[:, cols], g[:, cols], method="bins", n_bins=20, direction="symmetric")
            assert float(d[i, j]) == pytest.approx(ref, rel=1e-12)
    assert d.attrs["n_bins"] == 20 and d.attrs["direction"] == "symmetric"
    # a scaled channel is visible in its own marginal, the untouched channel 0 is not
    assert float(d[1, 1]) > 10 * float(d[0, 0])


def test_a_missing_sample_removes_its_time_point_from_every_projection():
    x = _correlated(5_000)
    g = _correlated(5_000, seed=3)
    g_nan = g.copy()
    g_nan[::7, 2] = np.nan                     # missing in channel 2 only
    d = state_space_projections(x, g_nan)
    kept = g[np.all(np.isfinite(g_nan), axis=1)]
    ref = state_space_divergence(x[:, [0]], kept[:, [0]], method="bins")
    # the marginal of channel 0 also loses the rows where channel 2 is missing
    assert float(d[0, 0]) == pytest.approx(ref, rel=1e-12)
    assert np.isfinite(d.values).all()


def test_channel_names_come_from_a_dataset_or_the_argument():
    x = _correlated(3_000)
    ds = as_dataset(x, channel_names=["V", "n", "h"])
    d = state_space_projections(ds, x)
    assert list(d["channel"].values) == ["V", "n", "h"] and list(d["other_channel"].values) == ["V", "n", "h"]
    d2 = state_space_projections(x, x, channels=["a", "b", "c"])
    assert list(d2["channel"].values) == ["a", "b", "c"]
    assert isinstance(d2, xr.DataArray) and float(np.abs(d2).max()) == 0.0


@pytest.mark.parametrize("kwargs, match", [
    ({"channels": ["a", "b"]}, "`channels` must name the 3 channel"),
    ({"direction": "sideways"}, "`direction`"),
    ({"n_bins": 0}, "`n_bins`"),
    ({"smoothing_alpha": -1.0}, "`smoothing_alpha`"),
])
def test_bad_settings_are_named(kwargs, match):
    x = _correlated(1_000)
    with pytest.raises(ValueError, match=match):
        state_space_projections(x, x, **kwargs)


def test_channel_mismatch_and_empty_truth_are_refused():
    x = _correlated(1_000)
    with pytest.raises(ValueError, match="same number of channels"):
        state_space_projections(x, x[:, :2])
    with pytest.raises(ValueError, match="no row without missing values"):
        state_space_projections(np.full_like(x, np.nan), x)
