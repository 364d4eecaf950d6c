"""Tests for dsident.data.spikes.bin_spikes (half-open bins, masks, trials)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsident.data import to_arrays
from dsident.data.spikes import bin_spikes


def test_counts_match_numpy_histogram_on_random_trains():
    rng = np.random.default_rng(0)
    units = [rng.uniform(0.0, 2.0, size=n) for n in (50, 7, 0)]
    ds = bin_spikes(units, bin_size=0.05, t_start=0.0, t_stop=2.0)
    edges = 0.05 * np.arange(41)
    expected = np.stack([np.histogram(u, bins=edges)[0] for u in units], axis=1)
    assert ds["x"].dims == ("trial", "time", "channel")
    np.testing.assert_array_equal(ds["x"].values[0], expected)
    assert ds.attrs["dt"] == 0.05 and ds.attrs["bin_size"] == 0.05
    assert ds.attrs["units"] == "spike counts per bin"
    assert list(ds["channel"].values) == ["u0", "u1", "u2"]


def test_spike_exactly_at_t_stop_is_not_counted_and_reported():
    spikes = [np.array([0.0, 0.1, 0.4])]
    ds = bin_spikes(spikes, bin_size=0.1, t_start=0.0, t_stop=0.4)
    assert ds["x"].values[0, :, 0].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert json.loads(ds.attrs["provenance"])["spikes_at_stop"] == 1
    # numpy closes the last bin, so it counts that spike: the documented difference
    assert np.histogram(spikes[0], bins=0.1 * np.arange(5))[0].sum() == 3


def test_spike_on_an_interior_edge_goes_to_the_bin_that_starts_there():
    # 0.3 is stored just below 3 * 0.1; it must still start bin 3
    ds = bin_spikes([[0.1, 0.2, 0.3]], bin_size=0.1, t_start=0.0, t_stop=0.5)
    assert ds["x"].values[0, :, 0].tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_partial_trailing_bin_is_dropped():
    ds = bin_spikes([[0.05, 0.26]], bin_size=0.1, t_start=0.0, t_stop=0.27)
    assert ds.sizes["time"] == 2
    assert ds["x"].values[0, :, 0].tolist() == [1.0, 0.0]


def test_bins_outside_recording_and_obs_intervals_are_nan():
    spikes = {"a": [0.55, 0.75], "b": [0.75]}
    ds = bin_spikes(spikes, bin_size=0.1, t_start=0.5, t_stop=1.0, trials=[[0.3, 0.9]],
                    obs_intervals=[None, [[0.6, 0.8]]])
    x = ds["x"].values[0]
    # bins start at 0.3, 0.4 (before the recording: NaN), 0.5, 0.6, 0.7, 0.8
    assert np.isnan(x[:2]).all()
    np.testing.assert_array_equal(x[2:, 0], [1.0, 0.0, 1.0, 0.0])
    assert np.isnan(x[2, 1]) and np.isnan(x[5, 1])
    np.testing.assert_array_equal(x[3:5, 1], [0.0, 1.0])
    assert list(ds["channel"].values) == ["a", "b"]
    mask = to_arrays(ds).mask
    assert mask[0, :, 0].tolist() == [False, False, True, True, True, True]


def test_partly_observed_bin_is_nan():
    ds = bin_spikes([[0.01]], bin_size=0.1, t_start=0.0, t_stop=0.4, obs_intervals=[[[0.0, 0.25]]])
    assert ds["x"].values[0, :2, 0].tolist() == [1.0, 0.0]
    assert np.isnan(ds["x"].values[0, 2:, 0]).all()


def test_ragged_trials_with_table_columns_and_overlap():
    trials = {"start_time": np.array([0.0, 0.2]), "stop_time": np.array([0.4, 0.5]),
              "condition": np.array(["left", "right"]), "x": np.array([1, 2])}
    ds = bin_spikes([[0.25, 0.35]], bin_size=0.1, t_start=0.0, t_stop=1.0, trials=trials)
    assert ds["length"].values.tolist() == [4, 3]
    assert ds["x"].values[0, :, 0].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert ds["x"].values[1, :3, 0].tolist() == [1.0, 1.0, 0.0]       # the overlap counts in both trials
    assert np.isnan(ds["x"].values[1, 3, 0])                           # padding
    assert ds["condition"].values.tolist() == ["left", "right"]
    assert ds["trial_x"].values.tolist() == [1, 2]                     # reserved name prefixed
    np.testing.assert_allclose(ds["trial_start"].values, [0.0, 0.2])
    np.testing.assert_allclose(ds["trial_stop"].values, [0.4, 0.5])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"bin_size": 0.0}, ValueError, "bin_size"),
    ({"bin_size": "1"}, TypeError, "bin_size"),
    ({"t_stop": -1.0}, ValueError, "t_stop"),
    ({"spike_times": [[0.1, np.nan]]}, ValueError, "unit 0"),
    ({"spike_times": [["a"]]}, TypeError, "unit 0"),
    ({"trials": [[5.0, 6.0]]}, ValueError, "no observed bin"),
    ({"trials": [[0.0, 0.05]]}, ValueError, "shorter than one bin"),
    ({"trials": [[0.0, 0.5, 1.0]]}, ValueError, r"shape \(trial, 2\)"),
    ({"trials": [[0.5, 0.2]]}, ValueError, "stop_time"),
    ({"trials": {"start_time": [0.0]}}, ValueError, "stop_time"),
    ({"unit_names": ["a", "b"]}, ValueError, "unit_names"),
    ({"obs_intervals": [[[0.3, 0.1]]]}, ValueError, "obs_intervals"),
    ({"obs_intervals": 5}, TypeError, r"`obs_intervals` must be a sequence"),
    ({"obs_intervals": [["a", "b"]]}, TypeError, r"`obs_intervals\[0\]` must be rows of two numbers"),
    ({"trials": np.array([[0.5, 0.55]])}, ValueError, r"trial 0 \[0.5, 0.55\) is shorter"),
])
def test_errors_name_the_argument(kwargs, error, match):
    args = {"spike_times": [[0.1]], "bin_size": 0.1, "t_start": 0.0, "t_stop": 1.0, **kwargs}
    with pytest.raises(error, match=match):
        bin_spikes(**args)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1.0, 3.0, allow_nan=False), max_size=30),
       st.sampled_from([0.01, 0.1, 0.25, 1.0 / 3.0]), st.floats(0.0, 1.0), st.floats(0.5, 2.0))
def test_every_spike_inside_the_trial_is_counted_exactly_once(times, bin_size, start, span):
    stop = start + max(span, bin_size)
    ds = bin_spikes([times], bin_size=bin_size, t_start=-1.0, t_stop=3.0, trials=[[start, stop]])
    end = float(ds["trial_stop"].values[0])
    t = np.asarray(times)
    tol = 1e-9 * bin_size                                   # the documented edge snapping
    inside = (t >= start - tol) & (t < end - tol)
    assert np.nansum(ds["x"].values) == inside.sum()
