"""Preprocessing: z-score, smoothing, resampling, delay embedding, automatic delay/dimension."""
import json

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter1d

from dsident.data import as_dataset
from dsident.data import preprocessing as pp
from dsident.data.systems import simulate


@pytest.fixture(scope="module")
def lorenz_x():
    return simulate("lorenz63", 8_000, 0.01, transient=10.0, rtol=1e-8, atol=1e-8)[:, 0]


def _steps(ds):
    return json.loads(ds.attrs["preprocessing"])


# ----------------------------------------------------------------------------- z-score


def test_zscore_standardises_over_all_trials_and_records_constants():
    rng = np.random.default_rng(0)
    data = [rng.normal(3.0, 2.0, size=(50, 2)), rng.normal(3.0, 2.0, size=(30, 2))]
    out = pp.zscore(as_dataset(data))
    stacked = np.concatenate(data)
    step = _steps(out)[-1]
    np.testing.assert_allclose(step["mean"], stacked.mean(0))
    np.testing.assert_allclose(step["std"], stacked.std(0))
    x = out["x"].values
    np.testing.assert_allclose(np.nanmean(x, axis=(0, 1)), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(x, axis=(0, 1)), 1.0)


def test_zscore_ignores_missing_samples_and_keeps_them_missing():
    data = np.array([[1.0], [np.nan], [3.0], [5.0]])
    out = pp.zscore(as_dataset(data))
    step = _steps(out)[-1]
    assert step["mean"] == [3.0] and step["std"] == pytest.approx([np.sqrt(8 / 3)])
    assert np.isnan(out["x"].values[0, 1, 0])


def test_zscore_with_given_constants_and_unzscore_round_trip():
    rng = np.random.default_rng(1)
    test = as_dataset(rng.normal(size=(40, 3)))
    out = pp.zscore(test, mean=[1.0, 2.0, 3.0], std=[2.0, 4.0, 0.5])
    np.testing.assert_allclose(out["x"].values[0, :, 1], (test["x"].values[0, :, 1] - 2.0) / 4.0)
    back = pp.unzscore(out)
    np.testing.assert_allclose(back["x"].values, test["x"].values)
    assert _steps(back) == []
    np.testing.assert_allclose(pp.unzscore(out, np.zeros((5, 3)))[0], [1.0, 2.0, 3.0])


def test_unzscore_maps_each_embedded_channel_back_with_its_own_source_constants():
    # three channels of very different scales; embedding only "c" (or all) after the z-score
    rng = np.random.default_rng(3)
    raw = rng.normal(size=(300, 3)) * [1.0, 10.0, 100.0] + [0.0, 50.0, -7.0]
    scored = pp.zscore(as_dataset(raw, channel_names=["a", "b", "c"]))
    only_c = pp.delay_embed(scored, [0, 2, 5], channels=["c"])          # 3 channels, as many as were z-scored
    back = pp.unzscore(only_c)["x"].values[0]
    for k, d in enumerate([0, 2, 5]):
        np.testing.assert_allclose(back[:, k], raw[d:d + 295, 2])
    np.testing.assert_allclose(pp.unzscore(only_c, only_c["x"].values[0]), back)
    every = pp.delay_embed(scored, [0, 4])                             # 6 channels: a, a, b, b, c, c
    np.testing.assert_allclose(pp.unzscore(every)["x"].values[0][:, [1, 3, 5]], raw[4:, :])
    with pytest.raises(ValueError, match="one column per channel"):
        pp.unzscore(every, np.zeros((5, 4)))


def test_zscore_constants_are_the_last_step_and_map_a_new_series_the_same_way():
    rng = np.random.default_rng(2)
    raw = rng.normal(3.0, 2.0, size=(50, 2))
    once = pp.zscore(as_dataset(raw))
    twice = pp.zscore(once, mean=[0.5, -0.5], std=[2.0, 4.0])
    mean, std = pp.zscore_constants(once)
    np.testing.assert_allclose(mean, raw.mean(0))
    np.testing.assert_allclose(std, raw.std(0))
    np.testing.assert_allclose(pp.zscore_constants(twice)[1], [2.0, 4.0])          # the most recent step
    other = rng.normal(size=(7, 2))
    np.testing.assert_allclose(pp.zscore(as_dataset(other), mean=mean, std=std)["x"].values[0], (other - mean) / std)
    with pytest.raises(ValueError, match="no zscore step"):
        pp.zscore_constants(as_dataset(raw))


def test_zscore_with_only_the_mean_given_divides_by_the_datas_own_std():
    rng = np.random.default_rng(5)
    raw = rng.normal(5.0, 2.0, size=(400, 1))
    out = pp.zscore(as_dataset(raw), mean=[0.0])
    assert _steps(out)[-1]["std"] == pytest.approx([raw.std()])
    np.testing.assert_allclose(out["x"].values[0, :, 0], raw[:, 0] / raw.std())


def test_zscore_constant_channel_error_and_center_option():
    data = np.stack([np.arange(10.0), np.full(10, 7.0)], axis=1)
    with pytest.raises(ValueError, match=r"\['x1'\] are constant"):
        pp.zscore(as_dataset(data))
    out = pp.zscore(as_dataset(data), constant="center")
    np.testing.assert_allclose(out["x"].values[0, :, 1], 0.0)
    assert _steps(out)[-1]["std"][1] == 1.0


def test_zscore_bad_constants_are_refused():
    with pytest.raises(ValueError, match="`std` must be positive"):
        pp.zscore(as_dataset(np.zeros((5, 1)) + np.arange(5)[:, None]), mean=[0.0], std=[0.0])
    with pytest.raises(ValueError, match="`mean` must be 2 finite numbers"):
        pp.zscore(as_dataset(np.random.default_rng(0).normal(size=(5, 2))), mean=[0.0])


def test_split_in_time_keeps_auxiliary_channels_and_per_trial_windows():
    from dsident.data import add_slow_channels, bin_spikes
    from dsident.data.slow_channels import auxiliary_channels

    t = np.arange(3000) * 0.01
    slow, _ = add_slow_channels(as_dataset(np.sin(2 * np.pi * 0.3 * t) + np.sin(2 * np.pi * 7 * t), dt=0.01), 1.0)
    for part in pp.split_in_time(slow, 0.3):
        assert auxiliary_channels(part) == ["slow(x0)", "slow_q(x0)"]        # never scored as data channels
    spikes = bin_spikes([[0.1, 0.5, 1.2, 3.3], [0.7]], 0.1, 0.0, 4.0,
                        trials={"start_time": [0.0, 2.0], "stop_time": [2.0, 3.0], "condition": ["go", "stop"]})
    lead, tail = pp.split_in_time(spikes, 0.5)
    # 20 and 10 bins: the leads hold 10 and 5; each part's window is where its bins lie
    np.testing.assert_allclose(lead["trial_stop"].values, [1.0, 2.5])
    np.testing.assert_allclose(tail["trial_start"].values, [1.0, 2.5])
    np.testing.assert_allclose(tail["trial_stop"].values, [2.0, 3.0])
    assert tail["condition"].values.tolist() == ["go", "stop"] and tail.attrs["bin_size"] == 0.1


# ----------------------------------------------------------------------------- smoothing


def test_split_in_time_cuts_every_trial_at_its_own_length():
    rng = np.random.default_rng(0)
    trials = [rng.normal(size=(40, 2)), rng.normal(size=(25, 2))]        # ragged
    trials[0][3, 1] = np.nan
    ds = as_dataset(trials, dt=0.5, u=[rng.normal(size=(40, 1)), rng.normal(size=(25, 1))])
    head, tail = pp.split_in_time(ds, 0.3)
    assert head["length"].values.tolist() == [28, 18] and tail["length"].values.tolist() == [12, 7]   # floor(0.3 n)
    for i, x in enumerate(trials):
        n = len(x) - int(np.floor(0.3 * len(x)))
        joined = np.concatenate([head["x"].values[i, :n], tail["x"].values[i, :len(x) - n]])
        np.testing.assert_array_equal(joined, x)                         # NaN stays NaN, nothing lost
        np.testing.assert_array_equal(tail["u"].values[i, :len(x) - n], ds["u"].values[i, n:len(x)])
    assert head.attrs["dt"] == tail.attrs["dt"] == 0.5


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.2, True, "0.5"])
def test_split_in_time_refuses_a_bad_fraction_by_its_callers_name(fraction):
    with pytest.raises(ValueError, match="`--test-fraction` must be a fraction"):
        pp.split_in_time(as_dataset(np.zeros((50, 1)), dt=1.0), fraction, argname="--test-fraction")


def test_split_in_time_refuses_parts_shorter_than_two_samples():
    with pytest.raises(ValueError, match="fewer than 2 time steps"):
        pp.split_in_time(as_dataset(np.arange(10.0)[:, None], dt=1.0), 0.1)


def test_gaussian_smooth_equals_scipy_filter_without_missing_samples():
    x = np.random.default_rng(2).normal(size=(200, 2))
    out = pp.gaussian_smooth(as_dataset(x), 3.0)
    np.testing.assert_allclose(out["x"].values[0], gaussian_filter1d(x, 3.0, axis=0, mode="reflect"), atol=1e-12)
    assert _steps(out)[-1] == {"step": "gaussian_smooth", "sigma_samples": 3.0, "truncate": 4.0}


def test_gaussian_smooth_keeps_nan_missing_and_leaves_constants_unchanged():
    x = np.full((50, 1), 2.5)
    x[10] = np.nan
    out = pp.gaussian_smooth(as_dataset(x), 2.0)["x"].values[0, :, 0]
    assert np.isnan(out[10])
    np.testing.assert_allclose(np.delete(out, 10), 2.5)


def test_gaussian_smooth_rejects_bad_sigma():
    with pytest.raises(ValueError, match="`sigma` must be a positive"):
        pp.gaussian_smooth(as_dataset(np.zeros((5, 1)) + 1), 0.0)


# ----------------------------------------------------------------------------- resampling


def test_resample_polyphase_reproduces_a_slow_sine():
    t = np.arange(2000) * 0.01
    ds = as_dataset(np.sin(2 * np.pi * 0.5 * t), dt=0.01)
    up = pp.resample(ds, 0.004)                          # ratio 5/2
    t_new = np.arange(up.sizes["time"]) * 0.004
    assert up.attrs["dt"] == 0.004 and up.sizes["time"] == int(round(19.99 / 0.004)) + 1
    interior = slice(200, -200)
    np.testing.assert_allclose(up["x"].values[0, interior, 0], np.sin(2 * np.pi * 0.5 * t_new)[interior], atol=1e-3)
    step = _steps(up)[-1]
    assert (step["up"], step["down"]) == (5, 2)


def test_resample_polyphase_refuses_a_step_ratio_it_would_approximate_with_drift():
    # 360 Hz -> 700.3 Hz with max_denominator=10 becomes 19/10: a 700 s trial drifts by thousands of samples
    t = np.arange(20_000) / 360
    ds = as_dataset(np.sin(2 * np.pi * 1.1 * t), dt=1 / 360)
    with pytest.raises(ValueError, match="19/10.*drifts"):
        pp.resample(ds, 1 / 700.3, max_denominator=10)
    y = pp.resample(ds, 1 / 700.3)["x"].values[0, :, 0]                     # default denominator: exact enough
    np.testing.assert_allclose(y[100:-100], np.sin(2 * np.pi * 1.1 * np.arange(len(y)) / 700.3)[100:-100], atol=0.01)


def test_resample_linear_marks_neighbours_of_missing_samples():
    x = np.arange(10.0)
    x[4] = np.nan
    out = pp.resample(as_dataset(x, dt=1.0), 0.5, method="linear")["x"].values[0, :, 0]
    np.testing.assert_allclose(out[:7], [0, 0.5, 1, 1.5, 2, 2.5, 3])
    assert np.isnan(out[7]) and np.isnan(out[8]) and np.isnan(out[9]) and out[10] == 5.0


def test_resample_polyphase_refuses_missing_samples():
    x = np.arange(10.0)
    x[3] = np.nan
    with pytest.raises(ValueError, match="method='linear'"):
        pp.resample(as_dataset(x), 0.5)


def test_irregular_sample_times_are_resampled_at_those_times_and_kept_by_every_step():
    rng = np.random.default_rng(4)
    t = 3.0 + np.cumsum(rng.uniform(0.02, 0.18, 400))                 # irregular sampling from t = 3
    ds = as_dataset(np.sin(1.3 * t), time=t)
    out = pp.resample(ds, 0.05, method="linear")
    new_t = out["sample_time"].values[0]
    np.testing.assert_allclose(np.diff(new_t), 0.05)
    assert new_t[0] == t[0] and new_t[-1] <= t[-1] < new_t[-1] + 0.05
    np.testing.assert_allclose(out["x"].values[0, :, 0], np.sin(1.3 * new_t), atol=0.01)   # not the index grid
    with pytest.raises(ValueError, match="irregularly"):
        pp.resample(ds, 0.05)
    np.testing.assert_array_equal(pp.gaussian_smooth(ds, 2.0)["sample_time"].values, ds["sample_time"].values)
    np.testing.assert_array_equal(pp.delay_embed(ds, [0, 3])["sample_time"].values[0], t[:-3])


def test_smoothing_resampling_and_embedding_keep_per_trial_variables():
    from dsident.data import bin_spikes
    spikes = bin_spikes([[0.1, 0.5, 1.2, 3.3], [0.7]], 0.1, 0.0, 4.0,
                        trials={"start_time": [0.0, 2.0], "stop_time": [2.0, 4.0], "condition": ["go", "stop"]})
    for out, n_bins in ((pp.gaussian_smooth(spikes, 1.0), 20), (pp.delay_embed(spikes, [0, 2]), 18)):
        np.testing.assert_array_equal(out["trial_start"].values, [0.0, 2.0])
        np.testing.assert_allclose(out["trial_stop"].values, [0.0, 2.0] + np.full(2, n_bins * 0.1))
        assert out["condition"].values.tolist() == ["go", "stop"]
    assert pp.resample(spikes, 0.2)["condition"].values.tolist() == ["go", "stop"]


# ----------------------------------------------------------------------------- delay embedding


def test_delay_embed_uses_forward_shifts_in_given_order():
    s = np.arange(100.0)
    out = pp.delay_embed(as_dataset(s), (0, 20, 68, 55, 10))
    x = out["x"].values[0]
    assert x.shape == (32, 5)
    np.testing.assert_array_equal(x[:, 2], s[68:100])
    np.testing.assert_array_equal(x[:, 3], s[55:87])
    assert list(out["channel"].values)[1] == "x0(t+20)"
    assert _steps(out)[-1]["delays"] == [0, 20, 68, 55, 10]


def test_delay_embed_ragged_trials_and_inputs():
    ds = as_dataset([np.arange(10.0), np.arange(6.0)], u=[np.ones((10, 1)), np.ones((6, 1))])
    out = pp.delay_embed(ds, [0, 2])
    assert out["length"].values.tolist() == [8, 4]
    assert out["u"].shape == (2, 8, 1)


@pytest.mark.parametrize("delays, err", [([], ValueError), ([0, -1], ValueError), ([0, 0], ValueError),
                                         ("ab", TypeError)])
def test_delay_embed_rejects_bad_delays(delays, err):
    with pytest.raises(err, match="delays"):
        pp.delay_embed(as_dataset(np.arange(10.0)), delays)


def test_delay_embed_needs_trials_longer_than_the_span():
    with pytest.raises(ValueError, match="longer than the largest delay"):
        pp.delay_embed(as_dataset(np.arange(5.0)), [0, 5])


# ----------------------------------------------------------------------------- automatic choice


def test_ami_of_independent_noise_is_near_zero_beyond_lag_zero():
    noise = np.random.default_rng(3).normal(size=20_000)
    ami = pp.average_mutual_information(noise, 5, n_bins=16)
    assert ami[0] > 2.0 and ami[1:].max() < 0.02


def test_ami_lag_zero_is_the_entropy_of_the_binned_series():
    s = np.random.default_rng(4).uniform(size=50_000)
    ami = pp.average_mutual_information(s, 1, n_bins=8)
    assert ami[0] == pytest.approx(np.log(8), rel=1e-3)


def test_lorenz_delay_and_dimension(lorenz_x):
    delay, ami = pp.choose_delay(lorenz_x, 60)
    assert 10 <= delay <= 25 and ami[delay] < ami[delay - 1]
    dim, fnn = pp.choose_dimension(lorenz_x, delay, max_dim=6)
    assert dim == 3 and fnn[0] > 0.5


def test_sine_needs_two_dimensions():
    t = np.arange(4000)
    dim, fnn = pp.choose_dimension(np.sin(2 * np.pi * t / 100), 25, max_dim=4)
    assert dim == 2 and fnn[0] > 0.3


def test_false_neighbours_do_not_join_the_series_across_a_gap():
    # a missing stretch must not splice samples 13 apart into one delay vector
    s = np.sin(2 * np.pi * np.arange(3000) / 40.3)
    s[1000:1013] = np.nan
    dim, fnn = pp.choose_dimension(s, 10, max_dim=4)
    assert dim == 2 and fnn[1] == 0.0
    with pytest.raises(ValueError, match="complete delay vectors"):
        pp.false_nearest_neighbors(np.where(np.arange(200) % 4 == 0, np.nan, 1.0 * np.arange(200)), 1, 3)


def test_bad_preprocessing_options_are_refused_by_name():
    ds = as_dataset(np.sin(np.arange(200) / 5.0)[:, None].repeat(2, axis=1))
    with pytest.raises(ValueError, match="`truncate`"):
        pp.gaussian_smooth(ds, 2.0, truncate=-1.0)
    with pytest.raises(TypeError, match=r"\['x0'\]"):
        pp.delay_embed(ds, [0, 3], channels="x0")
    with pytest.raises(ValueError, match="`max_lag` must be an integer"):
        pp.average_mutual_information(np.arange(100.0), 5.5)
    with pytest.raises(ValueError, match="`n_bins`"):
        pp.average_mutual_information(np.arange(100.0), 5, n_bins=1)
    with pytest.raises(ValueError, match="0 observed"):
        pp.average_mutual_information(np.full(100, np.nan), 5)


def test_auto_embed_records_its_choice(lorenz_x):
    out = pp.auto_embed(as_dataset(lorenz_x, dt=0.01, channel_names=["x"]), max_lag=60, max_dim=6)
    auto, embed = _steps(out)[-2:]
    assert auto["step"] == "auto_embed" and embed["step"] == "delay_embed"
    assert embed["delays"] == [k * auto["delay"] for k in range(auto["dimension"])]
    assert out.sizes["channel"] == auto["dimension"] and len(auto["ami"]) == 61


def test_auto_embed_needs_a_channel_for_multichannel_data():
    with pytest.raises(ValueError, match="`channel` is required"):
        pp.auto_embed(as_dataset(np.random.default_rng(0).normal(size=(100, 2))))


# ----------------------------------------------------------------------------- ECG pipeline


def _toy_ecg(fs, seconds):
    """A spiky 1 Hz beat train with a slow wave: enough structure for the pipeline checks."""
    t = np.arange(int(fs * seconds)) / fs
    phase = (t % 1.0) - 0.3
    return np.exp(-0.5 * (phase / 0.01) ** 2) + 0.2 * np.exp(-0.5 * ((phase - 0.3) / 0.05) ** 2)


def test_ecg_pipeline_resamples_scores_smooths_and_embeds():
    from dsident.data import ecg

    raw = ecg.from_array(_toy_ecg(360.0, 20.0), 360.0)
    emb = ecg.ecg_pipeline(raw)
    steps = [s["step"] for s in _steps(emb)]
    assert steps == ["resample", "zscore", "gaussian_smooth", "delay_embed"]
    assert emb.attrs["dt"] == pytest.approx(1 / 700) and emb.sizes["channel"] == 5
    from dsident.data.time_units import time_unit

    assert time_unit(raw) == "s" and time_unit(emb) == "s"     # a rate in Hz: seconds, through the pipeline
    x = emb["x"].values[0]
    np.testing.assert_array_equal(x[:-68, 2], x[68:, 0][: len(x) - 68])
    train, test = ecg.split_contiguous(emb, 5000)
    assert train.sizes["time"] == 5000 and test.sizes["time"] == emb.sizes["time"] - 5000
    np.testing.assert_array_equal(test["x"].values[0, 0], x[5000])


def test_ecg_pipeline_auto_delays_are_recorded():
    from dsident.data import ecg

    emb = ecg.ecg_pipeline(ecg.from_array(_toy_ecg(700.0, 12.0), 700.0), delays="auto", max_lag=150, max_dim=5)
    auto = _steps(emb)[-2]
    assert auto["step"] == "auto_embed" and emb.sizes["channel"] == auto["dimension"] >= 2
    assert "resample" not in [s["step"] for s in _steps(emb)]          # already at 700 Hz


def test_ecg_from_array_errors():
    from dsident.data import ecg

    with pytest.raises(ValueError, match="sampling_rate"):
        ecg.from_array(np.zeros(10), 0.0)
    with pytest.raises(ValueError, match="one ECG lead"):
        ecg.from_array(np.zeros((10, 2)), 100.0)


def test_synthetic_ecg_is_reproducible_for_a_seed():
    from dsident.data import ecg

    a = ecg.synthetic_ecg(2.0, sampling_rate=200.0, seed=5)["x"].values
    b = ecg.synthetic_ecg(2.0, sampling_rate=200.0, seed=5)["x"].values
    np.testing.assert_array_equal(a, b)
    assert a.shape == (1, 400, 1)


def test_synthetic_ecg_baseline_wander_is_the_low_passed_breathing():
    """z is linear in itself and in z0 (the wave terms depend on the phase only), so the
    difference between runs with and without the respiratory term obeys d/dt Δ = −(Δ − A sin ωt):
    after the transient, Δ = A / √(1 + ω²) · sin(ωt − atan ω) exactly (the wander that
    benchmarks/bench_ecg_components.py prices)."""
    from dsident.data import ecg

    amp, f_resp, rate, transient = 0.005, 0.25, 100.0, 5.0
    kw = dict(sampling_rate=rate, seed=3, transient=transient)
    with_wander = ecg.synthetic_ecg(12.0, resp_amplitude=amp, f_resp=f_resp, **kw)["x"].values[0, :, 0]
    without = ecg.synthetic_ecg(12.0, resp_amplitude=0.0, f_resp=f_resp, **kw)["x"].values[0, :, 0]
    t = transient + np.arange(with_wander.size) / rate
    omega = 2 * np.pi * f_resp
    # the free part decays as exp(−t): after 5 s it is below 1 % of the amplitude
    expected = amp / np.hypot(1.0, omega) * np.sin(omega * t - np.arctan(omega))
    np.testing.assert_allclose(with_wander - without, expected, atol=0.01 * amp)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore:The inplace keyword")
def test_wfdb_record_round_trip(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    from dsident.data import ecg

    signal = _toy_ecg(250.0, 4.0)
    wfdb.wrsamp("rec", fs=250, units=["mV", "mV"], sig_name=["MLII", "V5"],
                p_signal=np.stack([signal, -signal], axis=1), fmt=["16", "16"], write_dir=str(tmp_path))
    ds = ecg.load_wfdb(tmp_path / "rec", channel="V5")
    assert ds.attrs["dt"] == pytest.approx(1 / 250) and ds.attrs["units"] == "mV"
    np.testing.assert_allclose(ds["x"].values[0, :, 0], -signal, atol=1e-3)      # 16-bit quantisation
    with pytest.raises(ValueError, match="signals are"):
        ecg.load_wfdb(tmp_path / "rec", channel="V1")


def test_wfdb_without_the_package_says_how_to_install(monkeypatch):
    import importlib.util

    from dsident.data import ecg

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wfdb" else real(name, *a))
    with pytest.raises(ImportError, match=r"dsident\[ecg\]"):
        ecg.load_wfdb("anything")
