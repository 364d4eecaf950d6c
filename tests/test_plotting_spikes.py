"""Tests for dsident.plotting_spikes (figures built without pyplot; PNG written when asked)."""
from __future__ import annotations

import numpy as np
import pytest

from dsident.data.spikes import bin_spikes
from dsident.plotting_spikes import plot_latents_by_condition, plot_psth, plot_raster_rates

RNG = np.random.default_rng(0)


@pytest.fixture()
def spikes():
    units = [np.sort(RNG.uniform(0, 4.0, size=n)) for n in (30, 12, 25)]
    trials = {"start_time": np.arange(4.0), "stop_time": np.arange(4.0) + 1.0,
              "condition": np.array(["a", "b", "a", "b"])}
    return bin_spikes(units, 0.05, 0.0, 3.5, trials=trials, obs_intervals=[None, [[0.0, 2.0]], None])


def test_raster_beside_rates(spikes, tmp_path):
    rates = np.full(spikes["x"].shape, 0.5)
    fig = plot_raster_rates(spikes, rates, trial=0, held_out=[2], save=tmp_path / "raster.png")
    assert (tmp_path / "raster.png").stat().st_size > 1000
    raster, image = fig.axes[0], fig.axes[1]
    # one tick per non-empty bin of trial 0
    n_ticks = sum(len(c.get_segments()) for c in raster.collections if hasattr(c, "get_segments"))
    assert n_ticks == int((np.nan_to_num(spikes["x"].values[0]) > 0).sum())
    np.testing.assert_allclose(image.images[0].get_array(), rates[0].T)
    with pytest.raises(ValueError, match="rates"):
        plot_raster_rates(spikes, rates[:, :5])
    with pytest.raises(ValueError, match="trial"):
        plot_raster_rates(spikes, trial=9)


def test_psth_observed_and_predicted(spikes):
    rates = np.nan_to_num(spikes["x"].values) + 0.1
    fig = plot_psth(spikes, "condition", rates=rates, neurons=[0, 2], smooth_sd=0.0)
    ax = fig.axes[0]
    assert len(ax.lines) == 4                                   # 2 conditions × (observed, predicted)
    observed_a = np.nanmean(spikes["x"].values[[0, 2], :, 0], axis=0)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), observed_a)
    np.testing.assert_allclose(ax.lines[1].get_ydata(), np.nanmean(rates[[0, 2], :, 0], axis=0))
    with pytest.raises(ValueError, match="neurons"):
        plot_psth(spikes, "condition", neurons=[5])
    with pytest.raises(ValueError, match="conditions"):
        plot_psth(spikes, "nope")


@pytest.mark.parametrize("dims", [(0, 1), (0, 1, 2)])
def test_latents_by_condition(dims):
    z = RNG.standard_normal((4, 20, 3))
    labels = np.array([0, 1, 0, 1])
    fig = plot_latents_by_condition(z, labels, dims=dims)
    ax = fig.axes[0]
    assert len(ax.lines) == 4 + 2 * 2                            # trials + (mean, start marker) per condition
    mean0 = z[[0, 2]].mean(axis=0)
    thick = [line for line in ax.lines if line.get_linewidth() == 2.0]
    np.testing.assert_allclose(np.asarray(thick[0].get_data_3d() if len(dims) == 3 else thick[0].get_data())[0],
                               mean0[:, 0])
    with pytest.raises(ValueError, match="conditions"):
        plot_latents_by_condition(z, labels[:3])
    with pytest.raises(ValueError, match="dims"):
        plot_latents_by_condition(z, labels, dims=(0,))


def test_raster_of_a_short_trial_ends_with_it_and_names_the_time_unit():
    # a ragged trial's NaN padding past its end was drawn and shaded grey as if its bins were masked,
    # and the time axis said "time" although the data are binned in seconds
    from dsident.data import as_dataset

    counts = RNG.poisson(0.5, size=(200, 3)).astype(float)
    ds = as_dataset([counts, counts[:120]], dt=0.01, provenance={"time_unit": "s"})
    fig = plot_raster_rates(ds, np.nan_to_num(ds["x"].values), trial=1, n_bins=None)
    raster = fig.axes[0]
    assert not [c for c in raster.collections if not hasattr(c, "get_segments")]     # nothing shaded
    assert raster.get_xlim()[1] < 1.25                       # the trial's 120 bins of 0.01 s, not 200
    assert fig.axes[1].images[0].get_array().shape == (3, 120)
    assert raster.get_xlabel() == "time (s)"
    assert plot_psth(ds, [0, 1], neurons=[0]).axes[0].get_xlabel() == "time (s)"
    # a masked bin inside the trial is still shaded
    ds["x"].values[1, 50:60, 0] = np.nan
    shaded = [c for c in plot_raster_rates(ds, trial=1, n_bins=None).axes[0].collections
              if not hasattr(c, "get_segments")]
    assert len(shaded) == 1


@pytest.mark.parametrize("kwargs, match", [({"n_bins": 0}, "`n_bins` must be a positive integer"),
                                           ({"trial": True}, "`trial` must be an integer")])
def test_raster_refuses_bad_arguments_by_name(spikes, kwargs, match):
    # n_bins=0 failed with numpy's IndexError; trial=True indexed the array with a boolean
    with pytest.raises(ValueError, match=match):
        plot_raster_rates(spikes, np.full(spikes["x"].shape, 0.5), **kwargs)


def test_an_object_that_is_not_spike_counts_is_refused_by_name():
    with pytest.raises(TypeError, match="`spikes` must be a dataset .* got str"):
        plot_raster_rates("session1.nwb")


def test_raster_refuses_held_out_neurons_it_does_not_have(spikes):
    # held_out=[9] of 3 neurons drew nothing orange under the title "(orange: held out)"
    with pytest.raises(ValueError, match=r"`held_out` must be a non-empty list of indices in \[0, 3\); got \[9\]"):
        plot_raster_rates(spikes, held_out=[9])
    assert "held out" not in plot_raster_rates(spikes, held_out=[]).axes[0].get_title()


def test_psth_of_a_recording_with_fewer_than_four_neurons_draws_them_all():
    # the default neurons=(0, 1, 2, 3) refused two neurons: "`neurons` must be ... got [0, 1, 2, 3]"
    counts = RNG.poisson(0.5, size=(4, 50, 2)).astype(float)
    fig = plot_psth(counts, ["a", "b", "a", "b"], smooth_sd=0.0)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["neuron 0", "neuron 1"]
    np.testing.assert_allclose(visible[1].lines[1].get_ydata(), counts[[1, 3], :, 1].mean(axis=0))
