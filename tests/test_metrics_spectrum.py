"""D_H and the spectrum MSE against analytic spectra of pure (integer-bin) sinusoids."""
import numpy as np
import pytest

from dsident.metrics import power_spectrum, power_spectrum_distance, power_spectrum_mse

T = 4096


def _cos(k, n=T, phase=0.0, amplitude=1.0):
    """A cosine with exactly k periods in n samples: all its power sits in rfft bin k."""
    return amplitude * np.cos(2 * np.pi * k * np.arange(n) / n + phase)


def test_identical_and_phase_shifted_give_zero():
    x = np.stack([_cos(37), _cos(300)], axis=1)
    assert power_spectrum_distance(x, x) == pytest.approx(0.0, abs=1e-7)
    assert power_spectrum_distance(_cos(37), _cos(37, phase=1.0)) == pytest.approx(0.0, abs=1e-7)


def test_disjoint_spectra_give_one():
    # bins 50 and 500 are further apart than twice the kernel radius 4 * sigma = 80 bins
    assert power_spectrum_distance(_cos(50), _cos(500), sigma=20) == pytest.approx(1.0, abs=1e-12)
    assert power_spectrum_distance(_cos(50), _cos(51), sigma=0) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("shift", [5, 20, 60])
def test_shifted_frequency_matches_overlap_of_two_kernels(shift):
    sigma, k1 = 20.0, 1000
    k2 = k1 + shift
    # independent route: each smoothed spectrum is the normalised truncated Gaussian kernel at its bin
    offsets = np.arange(-80, 81)
    w = np.exp(-0.5 * offsets ** 2 / sigma ** 2)
    w /= w.sum()
    p = np.zeros(T // 2 + 1)
    q = np.zeros(T // 2 + 1)
    p[k1 + offsets] = w
    q[k2 + offsets] = w
    expected = np.sqrt(1 - np.sum(np.sqrt(p * q)))
    got = power_spectrum_distance(_cos(k1), _cos(k2), sigma=sigma)
    assert got == pytest.approx(expected, abs=1e-9)
    # and close to the continuous-Gaussian Bhattacharyya value exp(-shift^2 / (8 sigma^2))
    assert got == pytest.approx(np.sqrt(1 - np.exp(-shift ** 2 / (8 * sigma ** 2))), abs=5e-3)


def test_spectra_are_averaged_over_trials():
    # trials at bins 40 and 400 vs one trial holding both: the averaged spectra agree
    true = np.stack([_cos(40), _cos(400)])[:, :, None]
    gen = (_cos(40) + _cos(400))[None, :, None]
    assert power_spectrum_distance(true, gen) == pytest.approx(0.0, abs=1e-7)
    assert power_spectrum_distance(true[:1], gen) > 0.5


def test_per_channel_and_mean():
    true = np.stack([_cos(50), _cos(300)], axis=1)
    gen = np.stack([_cos(50), _cos(900)], axis=1)
    per = power_spectrum_distance(true, gen, per_channel=True)
    np.testing.assert_allclose(per, [0.0, 1.0], atol=1e-7)
    assert power_spectrum_distance(true, gen) == pytest.approx(0.5, abs=1e-7)


def test_constant_channel_scores_one():
    assert power_spectrum_distance(_cos(50), np.full(T, 3.0)) == 1.0
    assert power_spectrum_distance(np.full(T, 1.0), np.full(T, 3.0)) == 0.0


def test_power_spectrum_is_normalised_and_peaks_at_the_bin():
    p = power_spectrum(_cos(123), sigma=5)
    assert p.shape == (T // 2 + 1,)
    assert p.sum() == pytest.approx(1.0)
    assert int(np.argmax(p)) == 123


def test_clear_errors():
    with pytest.raises(ValueError, match="same length"):
        power_spectrum_distance(_cos(5, 1000), _cos(5, 999))
    with pytest.raises(ValueError, match="same number of channels"):
        power_spectrum_distance(np.zeros((100, 2)), np.zeros((100, 3)))
    x = _cos(5, 1000)
    x[10] = np.nan
    with pytest.raises(ValueError, match="gap-free"):
        power_spectrum_distance(x, _cos(5, 1000))
    with pytest.raises(ValueError, match="sigma"):
        power_spectrum_distance(_cos(5, 1000), _cos(5, 1000), sigma=-1)


def test_spectrum_mse_of_sinusoids_with_band_split():
    # fs = 2000 Hz, n = 2000: bins are 1 Hz apart; amplitude spectrum of A cos at 30 Hz is A at bin 30
    n, fs = 2000, 2000.0
    a, b = 1.5, 0.5
    res = power_spectrum_mse(_cos(30, n, amplitude=a), _cos(30, n, amplitude=b), fs=fs, cutoff=50.0,
                             max_frequency=600.0)
    assert res.frequency[30] == pytest.approx(30.0)
    n_low = 51                        # 0 … 50 Hz inclusive
    n_all = 601                       # 0 … 600 Hz
    assert res.low == pytest.approx((a - b) ** 2 / n_low, rel=1e-9)
    assert res.high == pytest.approx(0.0, abs=1e-20)
    assert res.total == pytest.approx((a - b) ** 2 / n_all, rel=1e-9)
    # a component above the cutoff lands in the high band only
    hi = power_spectrum_mse(_cos(30, n), _cos(30, n) + _cos(200, n, amplitude=2.0), fs=fs, cutoff=50.0)
    assert hi.low == pytest.approx(0.0, abs=1e-20)
    assert hi.high == pytest.approx(4.0 / (n // 2 + 1 - n_low), rel=1e-9)
    norm = power_spectrum_mse(_cos(30, n, amplitude=a), _cos(30, n, amplitude=b), fs=fs, normalize=True)
    assert norm.total == pytest.approx((a - b) ** 2 / a ** 2, rel=1e-9)
    with pytest.raises(ValueError, match="cutoff"):
        power_spectrum_mse(_cos(30, n), _cos(30, n), fs=fs, cutoff=1500.0)


@pytest.mark.parametrize("shape", [(400,), (400, 1), (2, 400, 1), (400, 3)])
@pytest.mark.parametrize("metric", [
    power_spectrum_distance,
    lambda a, b: power_spectrum(a),
    lambda a, b: power_spectrum_mse(a, b, zscore=True, normalize=True, sigma=2.0),
    lambda a, b: __import__("dsident.metrics", fromlist=["x"]).state_space_divergence(a, b),
])
def test_metrics_leave_their_inputs_untouched(metric, shape):
    """The spectra are z-scored in a channel-major copy; with one channel that reordering is
    already contiguous, and the copy must still be made (the caller's data were once
    standardised in place, among them a teacher-forcing scorer's reference and start sample)."""
    rng = np.random.default_rng(0)
    true, generated = rng.normal(3.0, 2.0, shape), rng.normal(-1.0, 0.5, shape)
    kept_true, kept_generated = true.copy(), generated.copy()
    if len(shape) == 1 and metric is not power_spectrum_distance:
        true, generated = true[:, None], generated[:, None]
        kept_true, kept_generated = kept_true[:, None], kept_generated[:, None]
    metric(true, generated)
    np.testing.assert_array_equal(true, kept_true)
    np.testing.assert_array_equal(generated, kept_generated)


def test_a_dataset_is_left_untouched_by_the_power_spectrum_distance():
    from dsident.data import as_dataset

    rng = np.random.default_rng(1)
    ds = as_dataset(rng.normal(5.0, 3.0, (300, 1)), dt=0.1)
    kept = ds["x"].values.copy()
    power_spectrum_distance(ds, ds["x"].values[0] * 2.0)
    np.testing.assert_array_equal(ds["x"].values, kept)


def test_a_list_of_trials_is_read_as_trials():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 1024)).cumsum(axis=1)
    g = rng.normal(size=(2, 1024))
    as_array = power_spectrum_distance(np.stack([a, b])[..., None], g[..., None])
    assert as_array > 0.1
    assert power_spectrum_distance([a, b], list(g)) == pytest.approx(as_array, rel=1e-12)
    with pytest.raises(ValueError, match=r"trials of `true` differ in length \(1024, 1000 time steps\)"):
        power_spectrum_distance([a, b[:1000]], [a, b[:1000]])



def test_identical_spectra_give_exactly_zero():
    # sqrt(1 − Σ sqrt(p·q)) gave 1.5e-8 for identical spectra: the round-off of the overlap, square-rooted
    rng = np.random.default_rng(4)
    t = np.arange(4096)
    x = np.stack([np.sin(0.05 * t), np.sin(0.3 * t) + 0.1 * rng.normal(size=t.size)], axis=1)
    assert power_spectrum_distance(x, x) == 0.0
    # a circular shift leaves |rfft|² as it is, up to the FFT's round-off
    assert power_spectrum_distance(x, np.roll(x, 700, axis=0)) == pytest.approx(0.0, abs=1e-12)
    # distances away from 0 are the SPEC's sqrt(1 − Σ sqrt(p·q)) of the compared spectra
    y = x + rng.normal(size=x.shape)
    p, q = power_spectrum(x), power_spectrum(y)
    np.testing.assert_allclose(power_spectrum_distance(x, y, per_channel=True),
                               np.sqrt(1 - np.sum(np.sqrt(p * q), axis=0)), rtol=1e-9)


@pytest.mark.parametrize("value", [0.1, 1 / 3, 7.3])
def test_a_constant_channel_scores_one_whatever_its_value(value):
    # z-scored by its round-off std (1e-17) a constant 0.1 became a spectrum all in the DC bin: against a
    # slow sine it scored 0.14, not the documented 1
    n = 1000
    const, sine = np.full(n, value), np.sin(0.1 * np.arange(n))
    assert power_spectrum_distance(sine, const) == 1.0
    assert power_spectrum_distance(const, const) == 0.0
    assert np.all(power_spectrum(const) == 0.0)


def test_z_scored_spectrum_mse_of_two_constants_is_zero():
    # divided by its round-off std (1e-17), a constant 0.1 became a DC amplitude of 1
    a, b = np.full(2000, 0.1), np.zeros(2000)
    assert power_spectrum_mse(a, b, zscore=True).total == pytest.approx(0.0, abs=1e-25)
    assert power_spectrum_mse(a, b).total == pytest.approx(0.1 ** 2 / 1001)     # raw: the DC amplitudes differ by 0.1


def test_datasets_at_different_steps_are_refused_not_compared_bin_by_bin():
    # audit-s53: a sine sampled every 0.1 and the same samples labelled every 0.2 (half the
    # frequency in time units) scored D_H = 0 and a spectrum MSE of 0
    import dsident
    from dsident.metrics import floor, power_spectrum_mse

    t = np.arange(1000)
    x = np.sin(0.1 * t)[:, None]
    a, b = dsident.as_dataset(x, dt=0.1), dsident.as_dataset(x, dt=0.2)
    assert power_spectrum_distance(a, dsident.as_dataset(x, dt=0.1)) == 0.0
    for call in (lambda: power_spectrum_distance(a, b), lambda: power_spectrum_mse(a, b)):
        with pytest.raises(ValueError, match=r"`true` is sampled every 0\.1 \(attrs\['dt'\]\) but `generated` every 0\.2"):
            call()
    with pytest.raises(ValueError, match=r"`dataset` is sampled every 0\.1 \(attrs\['dt'\]\) but `other` every 0\.2"):
        floor(a, b, n_pairs=1, length=200)
    assert power_spectrum_distance(a, x) == 0.0             # a plain array carries no step: taken at the Dataset's


def test_spectrum_mse_of_datasets_reads_the_rate_from_their_step():
    # a Dataset sampled every 0.5 ms (2000 Hz): the frequency axis and the cutoff are in Hz without
    # fs; an array has no step and keeps cycles per sample
    from dsident.data import as_dataset

    n = 2000
    true, gen = _cos(30, n, amplitude=1.5), _cos(30, n, amplitude=0.5)
    ds_true, ds_gen = as_dataset(true, dt=0.0005), as_dataset(gen, dt=0.0005)
    by_step = power_spectrum_mse(ds_true, ds_gen, cutoff=50.0, max_frequency=600.0)
    by_fs = power_spectrum_mse(true, gen, fs=2000.0, cutoff=50.0, max_frequency=600.0)
    assert by_step.frequency[30] == pytest.approx(30.0)
    assert by_step.low == pytest.approx(by_fs.low) and by_step.total == pytest.approx(by_fs.total)
    assert power_spectrum_mse(true, gen).frequency[-1] == pytest.approx(0.5)
    # a given fs still wins
    assert power_spectrum_mse(ds_true, ds_gen, fs=1.0).frequency[-1] == pytest.approx(0.5)
