"""Audit session 53: preprocessing and embedding (refusals with the argument's name, flat and
missing channels, auxiliary channels through an embedding, slow channels of irregular samples)."""
import json

import numpy as np
import pytest

from dsident.data import as_dataset
from dsident.data import preprocessing as pp


@pytest.mark.parametrize("kwargs, argname", [
    ({"delay": 0}, "delay"), ({"delay": -1}, "delay"), ({"delay": 1.5}, "delay"),
    ({"max_dim": 0}, "max_dim"), ({"max_dim": 2.0}, "max_dim"), ({"max_points": 0}, "max_points"),
    ({"ratio_threshold": -1.0}, "ratio_threshold"), ({"size_threshold": 0.0}, "size_threshold"),
])
def test_false_neighbours_refuse_bad_settings_by_name(kwargs, argname):
    # delay 0 gave a curve of zeros, a negative delay a numpy broadcast error, max_dim 0 an empty curve
    s = np.sin(np.arange(500) / 7.0)
    options = {"delay": 3, "max_dim": 3, **kwargs}
    with pytest.raises(ValueError, match=f"`{argname}`"):
        pp.false_nearest_neighbors(s, options.pop("delay"), options.pop("max_dim"), **options)


def test_choose_dimension_refuses_a_threshold_outside_zero_one():
    # a negative threshold can never be reached: max_dim came back as if chosen
    with pytest.raises(ValueError, match="`threshold`"):
        pp.choose_dimension(np.sin(np.arange(500) / 7.0), 3, max_dim=3, threshold=-0.01)


def test_a_flat_series_gets_no_delay_or_dimension():
    # a flat channel (a disconnected electrode) came back with delay = max_lag and dimension 1
    flat = np.full(600, 2.5)
    flat[100:110] = np.nan
    with pytest.raises(ValueError, match="constant"):
        pp.choose_delay(flat, 20)
    with pytest.raises(ValueError, match="constant"):
        pp.false_nearest_neighbors(flat, 2, 3)
    with pytest.raises(ValueError, match="constant"):
        pp.auto_embed(as_dataset(flat), max_lag=20, max_dim=3)


def test_zscore_refuses_a_channel_without_observed_samples():
    # an all-NaN channel was "z-scored" with mean and std NaN written into the attrs
    x = np.random.default_rng(0).normal(size=(100, 2))
    x[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"\['x1'\].*no observed"):
        pp.zscore(as_dataset(x))
    # with the constants given there is nothing to estimate: the channel stays missing
    out = pp.zscore(as_dataset(x), mean=[0.0, 0.0], std=[1.0, 1.0])
    assert np.isnan(out["x"].values[..., 1]).all()
    np.testing.assert_allclose(out["x"].values[0, :, 0], x[:, 0])


def test_embedded_slow_channels_stay_auxiliary_and_keep_their_own_scale():
    # delay_embed renamed slow(x0) to slow(x0)(t+k) but left attrs["auxiliary_channels"] naming the
    # old channels: the scores then compared the slow channels, and unzscore gave them x0's constants
    from dsident.data import add_slow_channels
    from dsident.data.slow_channels import scored_channels

    rng = np.random.default_rng(1)
    t = np.arange(2000) * 0.01
    raw = as_dataset(3.0 + 2.0 * np.sin(2 * np.pi * 0.5 * t) + 0.3 * rng.normal(size=t.size), dt=0.01)
    slow, _ = add_slow_channels(pp.zscore(raw), 2.0)
    emb = pp.delay_embed(slow, [0, 5])
    names = [str(c) for c in emb["channel"].values]
    aux = json.loads(emb.attrs["auxiliary_channels"])
    assert aux == ["slow(x0)(t+0)", "slow(x0)(t+5)", "slow_q(x0)(t+0)", "slow_q(x0)(t+5)"]
    assert [names[i] for i in scored_channels(emb)] == ["x0(t+0)", "x0(t+5)"]
    back = pp.unzscore(emb)["x"].values[0]
    np.testing.assert_allclose(back[:, 0], raw["x"].values[0, :-5, 0])           # data units again
    np.testing.assert_allclose(back[:, 2:], emb["x"].values[0, :, 2:])           # slow channels untouched
    # embedding only the recorded channel leaves no auxiliary channel behind
    assert json.loads(pp.delay_embed(slow, [0, 5], channels=["x0"]).attrs["auxiliary_channels"]) == []


def test_slow_channels_refuse_irregular_samples_but_take_evenly_spaced_times():
    # the Butterworth filter assumed samples dt apart and filtered irregular ones without a word
    from dsident.data import add_slow_channels

    rng = np.random.default_rng(2)
    times = np.cumsum(rng.uniform(0.005, 0.03, size=3000))
    irregular = as_dataset(np.sin(2 * np.pi * 0.5 * times), time=times, dt=0.0175)
    with pytest.raises(ValueError, match="sampled irregularly.*resample"):
        add_slow_channels(irregular, 2.0)
    # after linear resampling (evenly spaced sample times) the same call goes through
    even = pp.resample(irregular, 0.0175, method="linear")
    out, _ = add_slow_channels(even, 2.0)
    assert out.sizes["channel"] == 3
    # times that are evenly spaced from the start are as good as none
    t = 5.0 + np.arange(1000) * 0.01
    a, _ = add_slow_channels(as_dataset(np.sin(t), time=t), 2.0)
    b, _ = add_slow_channels(as_dataset(np.sin(t), dt=0.01), 2.0)
    np.testing.assert_allclose(a["x"].values, b["x"].values)


@pytest.mark.parametrize("method", ["polyphase", "linear"])
def test_resample_refuses_a_step_that_leaves_one_sample(method):
    # a 10-sample trial at dt 0.1 resampled to dt 5 came back as a 1-sample trial, which every
    # later step refused as data of "only 1 time steps"
    with pytest.raises(ValueError, match=r"`dt`=5.0.*trial\(s\) \[1\]"):
        pp.resample(as_dataset([np.sin(np.arange(100) * 0.1), np.sin(np.arange(10) * 0.1)], dt=0.1), 5.0,
                    method=method)
    # a step that leaves two samples (span 0.9 ≥ dt) is fine
    out = pp.resample(as_dataset(np.sin(np.arange(10) * 0.1), dt=0.1), 0.9, method="linear")
    np.testing.assert_allclose(out["x"].values[0, :, 0], np.sin([0.0, 0.9]), atol=1e-12)


@pytest.mark.parametrize("period", [100.0, 137.0, 250.0])
def test_the_ami_delay_of_a_clean_sine_is_near_a_quarter_period(period):
    # the histogram AMI zig-zags over the first lags; the next-lag test took that for the first
    # minimum and chose 2-4 samples on these sines, where a quarter period is 25-62
    s = np.sin(2 * np.pi * np.arange(8000) / period)
    delay, ami = pp.choose_delay(s, 100)
    assert period / 8 <= delay <= 3 * period / 8
    # the choice is still a local minimum of the curve it returns
    assert ami[delay] < ami[delay - 1] and ami[delay] <= ami[delay + 1]


def test_delay_embed_refuses_a_repeated_channel_by_its_own_name():
    # the refusal named `channel_names`, an argument the caller never passed
    ds = as_dataset(np.random.default_rng(0).normal(size=(200, 2)), channel_names=["a", "b"])
    with pytest.raises(ValueError, match=r"`channels` must not repeat a channel; got \['a', 'a'\]"):
        pp.delay_embed(ds, [0, 2], channels=["a", "a"])
