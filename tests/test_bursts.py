"""Burst detection (dsident.analysis.bursts) and ``--slow-channels auto``, which reads its cutoff from it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from dsident.analysis.bursts import (CUTOFF_PER_BURST, MIN_BURSTS, _otsu_split, burst_cutoff, find_bursts,
                                     find_spikes)
from dsident.data import as_dataset


def burst_train(n_bursts: int = 30, spikes: int = 5, isi: int = 6, period: int = 120, noise: float = 0.02,
                jitter: int = 0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A voltage-like series of ``n_bursts`` bursts of ``spikes`` narrow spikes ``isi`` samples
    apart, one burst every ``period`` samples (± ``jitter``), and the burst onsets it was built with."""
    rng = np.random.default_rng(seed)
    onsets = 50 + np.arange(n_bursts) * period + (rng.integers(-jitter, jitter + 1, n_bursts) if jitter else 0)
    t = np.arange(int(onsets[-1]) + period)
    x = noise * rng.standard_normal(t.size)
    for onset in onsets:
        for j in range(spikes):
            x += np.exp(-0.5 * ((t - onset - j * isi) / 0.8) ** 2)
    return x, onsets


def test_a_built_burst_train_gives_its_period_spikes_and_onsets():
    x, onsets = burst_train()
    b = find_bursts(x, 0.5)
    assert b is not None
    assert b.period == pytest.approx(120 * 0.5)
    assert b.spikes_per_burst == 5
    # the first burst has no gap before it, so it is not an onset
    np.testing.assert_array_equal(b.onsets, onsets[1:])
    assert b.n_spikes == 30 * 5
    assert b.isi_ratio == pytest.approx((120 - 4 * 6) / 6)
    assert 6 * 0.5 < b.threshold < (120 - 24) * 0.5
    assert b.period_cv == pytest.approx(0.0, abs=1e-12)
    assert burst_cutoff(b) == pytest.approx(CUTOFF_PER_BURST / 60.0)


def test_a_jittered_burst_train_gives_the_median_onset_interval():
    x, onsets = burst_train(jitter=10, seed=3)
    b = find_bursts(x, 1.0)
    assert b is not None
    np.testing.assert_array_equal(b.onsets, onsets[1:])
    intervals = np.diff(onsets[1:]).astype(float)          # between the onsets it can see
    assert b.period == pytest.approx(float(np.median(intervals)))
    assert b.period_cv == pytest.approx(intervals.std() / intervals.mean())


def test_otsu_split_matches_a_brute_force_search():
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(0, 0.3, 40), rng.normal(3, 0.5, 15)])
    s = np.sort(values)

    def between(i):
        a, b = s[:i], s[i:]
        return len(a) * len(b) * (a.mean() - b.mean()) ** 2

    assert _otsu_split(s) == max(range(1, s.size), key=between)


@pytest.mark.parametrize("case", ["tonic", "pairs", "few", "sine", "flat"])
def test_what_does_not_burst_gives_none(case):
    t = np.arange(20_000)
    if case == "tonic":       # one interval class: a regular spiker with jitter
        x, _ = burst_train(n_bursts=200, spikes=1, period=40, jitter=3)
    elif case == "pairs":     # two peaks a cycle, as the ECG's R and T waves
        x, _ = burst_train(spikes=2, isi=20)
    elif case == "few":
        x, _ = burst_train(n_bursts=MIN_BURSTS - 1)
    elif case == "sine":
        x = np.sin(2 * np.pi * t / 50.0)
    else:
        x = np.zeros(t.size)
    assert find_bursts(x, 1.0) is None


def test_pairs_burst_when_two_spikes_are_allowed():
    x, _ = burst_train(spikes=2, isi=20)
    b = find_bursts(x, 1.0, min_spikes=2)
    assert b is not None and b.spikes_per_burst == 2 and b.period == pytest.approx(120)


def test_missing_samples_split_the_series_and_no_interval_spans_a_gap():
    x, onsets = burst_train(n_bursts=40)
    gapped = x.copy()
    gap = slice(int(onsets[20]) - 30, int(onsets[22]) + 10)      # hides bursts 20 and 21 and cuts into 22
    gapped[gap] = np.nan
    b = find_bursts(gapped, 1.0)
    assert b is not None and b.period == pytest.approx(120)
    assert not np.isin(b.onsets, np.arange(gap.start, gap.stop)).any()
    # burst 22's spikes after the gap have no gap before them inside their stretch: no onset there,
    # so burst 23 is the first onset after the gap
    after = b.onsets[b.onsets >= gap.stop]
    assert after[0] == onsets[23]
    spikes = find_spikes(gapped)
    assert len(spikes) == 2 and all(np.isfinite(gapped[s]).all() for s in spikes)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="`series` must be one channel"):
        find_bursts(np.zeros((100, 2)), 1.0)
    with pytest.raises(ValueError, match="`dt` must be a positive"):
        find_bursts(np.zeros(100), 0.0)
    with pytest.raises(ValueError, match="`prominence`"):
        find_spikes(np.zeros(100), prominence=2.0)


def test_the_bursting_neuron_bursts_at_its_spectral_rhythm_and_the_other_sets_do_not():
    """Two routes to one period: the onsets of the bursts and the spectrum's line."""
    from dsident import datasets
    from dsident.analysis import rhythm_period

    ds = datasets.load("bursting_neuron", split="test")
    dt = float(ds.attrs["dt"])
    v = ds["x"].values[0, :, 0]
    b = find_bursts(v, dt)
    assert b is not None and b.spikes_per_burst == 15
    assert b.period == pytest.approx(rhythm_period(v, dt), rel=0.02)
    assert find_bursts(ds["x"].values[0, :, 2], dt) is None           # h, the slow variable, does not spike
    for name in ("lorenz63", "ecg"):
        other = datasets.load(name, split="test")
        for k in range(min(3, other.sizes["channel"])):
            assert find_bursts(other["x"].values[0, :, k], float(other.attrs["dt"])) is None, (name, k)


# ---------------------------------------------------------------------------------------------
# --slow-channels auto
# ---------------------------------------------------------------------------------------------
def test_auto_cutoff_is_resolved_on_the_training_data_and_reused():
    from dsident.data import add_slow_channels
    from dsident.experiments.inputs import in_fit_units, slow_channels_for_fit

    x, _ = burst_train(n_bursts=40)
    train = as_dataset(x[:, None], dt=0.5)
    out, spec = slow_channels_for_fit(train, {"cutoff": "auto"})
    assert spec["chosen"] == "auto" and spec["burst_period"] == pytest.approx(60.0)
    assert spec["cutoff"] == pytest.approx(CUTOFF_PER_BURST / 60.0)
    direct, _ = add_slow_channels(train, CUTOFF_PER_BURST / 60.0)
    np.testing.assert_allclose(out["x"].values, direct["x"].values)
    # a saved configuration gives the same channels again, without looking for bursts
    again = in_fit_units(train, {"slow_channels": json.loads(json.dumps(spec))})
    np.testing.assert_allclose(again["x"].values, out["x"].values)


def test_auto_cutoff_refuses_data_without_bursts():
    from dsident.experiments.inputs import check_slow_channels, slow_channels_for_fit

    t = np.arange(4_000)
    train = as_dataset(np.sin(2 * np.pi * t / 50.0)[:, None], dt=1.0)
    with pytest.raises(ValueError, match="do not burst.*--slow-channels 0.4"):
        slow_channels_for_fit(train, {"cutoff": "auto"})
    with pytest.raises(ValueError, match="positive frequency or \"auto\"; got 'fast'"):
        check_slow_channels({"cutoff": "fast"})
    with pytest.raises(ValueError, match="`slow_channels.channel`"):
        slow_channels_for_fit(train, {"cutoff": "auto", "channel": "V"})


def test_cli_slow_channels_flag_takes_auto_or_a_frequency():
    import argparse

    from dsident.cli_main_job import _slow_cutoff

    assert _slow_cutoff("auto") == "auto" and _slow_cutoff("0.25") == 0.25
    for bad in ("fast", "-1", "0"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive frequency"):
            _slow_cutoff(bad)


def test_cli_fit_with_auto_slow_channels_records_the_choice(tmp_path):
    from dsident.cli import main

    x, _ = burst_train(n_bursts=60)
    np.save(tmp_path / "v.npy", x)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "v.npy"), "--dt", "0.5", "--slow-channels", "auto", "--test-fraction", "0.25",
                 "--model", "shplrnn", "--method", "bptt", "--latent-dim", "4", "--param", "hidden_dim=8",
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--out", str(out), "--no-progress"]) == 0
    saved = json.loads((out / "config.json").read_text())["slow_channels"]
    assert saved["chosen"] == "auto" and saved["cutoff"] == pytest.approx(CUTOFF_PER_BURST / saved["burst_period"])
    assert saved["burst_period"] == pytest.approx(60.0)
    text = (out / "fit.md").read_text()
    assert "slow channels: channel 'x0'" in text and "bursts are 60 time units apart" in text
    # a recording's shallow PLRNN with slow channels runs clipped (RECORDING_SLOW_CLIPPED)
    assert json.loads((out / "config.json").read_text())["model_params"]["clip"] is True
    assert "- adapted to the data: clip False -> True (slow channels on a recording" in text
    # the free run's bursts beside the test data's (15 held-out bursts, 14 onsets after the first)
    assert "- bursts of x0 (medians; `dsident.analysis.find_bursts`): free run " in text
    assert "data 14 bursts of 5 spikes, 60 time units apart" in text


def test_inspect_notes_the_bursts_of_a_one_channel_recording():
    from dsident.data.summary import describe, describe_markdown

    x, _ = burst_train(n_bursts=40)
    summary = describe(as_dataset(x[:, None], dt=0.5))
    row = summary["per_channel"][0]
    assert row["burst_period"] == pytest.approx(60.0) and row["spikes_per_burst"] == 5
    note = next(n for n in summary["notes"] if "fires in bursts" in n)
    assert "--slow-channels auto" in note and f"{CUTOFF_PER_BURST / 60.0:.3g}" in note
    assert "60 time units (120 samples) apart" in note          # the period against the training windows
    assert "| 60 × 5 |" in describe_markdown(summary)
    t = np.arange(8_000)
    plain = describe(as_dataset(np.sin(2 * np.pi * t / 50.0)[:, None], dt=1.0))
    assert not any("fires in bursts" in n for n in plain["notes"])
    assert np.isnan(plain["per_channel"][0]["burst_period"])


def test_cli_fit_of_a_bursting_channel_without_slow_channels_suggests_them(tmp_path):
    from dsident.cli import main

    x, _ = burst_train(n_bursts=60)
    t = np.arange(x.size)
    args = ["--dt", "0.5", "--test-fraction", "0.25", "--model", "shplrnn", "--method", "bptt", "--latent-dim", "3",
            "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress"]
    for name, series, hinted in (("bursts", x, True), ("sine", np.sin(2 * np.pi * t / 50.0), False)):
        np.save(tmp_path / f"{name}.npy", series)
        assert main(["fit", str(tmp_path / f"{name}.npy"), *args, "--out", str(tmp_path / name)]) == 0
        text = (tmp_path / name / "fit.md").read_text()
        assert ("fires in bursts" in text and "`--slow-channels auto`" in text) is hinted, name
        assert ("(120 samples) apart" in text) is hinted, name


def test_run_bursts_compares_the_runs_bursts_with_the_datas_on_one_channel():
    from dsident.experiments.scoring import run_bursts

    data, _ = burst_train(n_bursts=12, period=120)
    faster, _ = burst_train(n_bursts=14, period=100, seed=2)
    n = min(data.size, faster.size)
    quiet = 0.01 * np.random.default_rng(4).standard_normal(n)
    test = as_dataset(np.column_stack([data[:n], quiet]), dt=0.5)       # the bursting channel is the first
    run = as_dataset(np.column_stack([faster[:n], quiet]), dt=0.5)
    out = run_bursts(test, run)
    assert out["channel"] == "x0"
    assert out["data"].period == pytest.approx(60.0) and out["generated"].period == pytest.approx(50.0)
    flat = as_dataset(np.column_stack([np.zeros(n), quiet]), dt=0.5)
    assert run_bursts(test, flat)["generated"] is None
    assert run_bursts(flat, test) is None            # nothing in the data bursts: nothing to compare


def test_only_a_recordings_shallow_plrnn_with_slow_channels_is_clipped_and_only_by_default():
    from dsident.experiments.runner import adapt_to_data

    data = as_dataset(np.zeros((50, 1)), dt=1.0)
    base = {"model": "shplrnn", "dataset": "rec.npy", "model_params": {"latent_dim": 3},
            "slow_channels": {"cutoff": "auto"}}
    assert adapt_to_data(base, data)["model_params"]["clip"] is True
    assert "clip" not in adapt_to_data({**base, "slow_channels": None}, data)["model_params"]
    assert "clip" not in adapt_to_data({**base, "dataset": "ecg"}, data)["model_params"]     # a shipped set's cell
    assert "clip" not in adapt_to_data({**base, "model": "gnode"}, data)["model_params"]
    mine = {**base, "model_params": {"latent_dim": 3, "clip": False}, "user_keys": {"model_params": ["clip"]}}
    out = adapt_to_data(mine, data)
    assert out["model_params"]["clip"] is False and "clip" not in (out.get("adapted") or {})


def test_late_run_bursts_are_flat_numbers_and_nan_for_a_run_that_does_not_burst():
    from dsident.experiments.late_run import BURST_KEYS, _bursts

    data, _ = burst_train(n_bursts=12, period=120)
    faster, _ = burst_train(n_bursts=14, period=100, seed=2)
    n = min(data.size, faster.size)
    test, run = as_dataset(data[:n, None], dt=0.5), as_dataset(faster[:n, None], dt=0.5)
    out = _bursts(test, run)
    assert set(out) == set(BURST_KEYS)
    assert out["burst_period"] == pytest.approx(50.0) and out["data_burst_period"] == pytest.approx(60.0)
    assert out["spikes_per_burst"] == out["data_spikes_per_burst"] == 5
    diverged = _bursts(test, None)               # a diverged run: the data's bursts, none of the run's
    assert np.isnan(diverged["burst_period"]) and diverged["data_burst_period"] == pytest.approx(60.0)
    t = np.arange(n)
    assert _bursts(as_dataset(np.sin(t / 9.0)[:, None], dt=0.5), run) == {}


def test_bursts_table_gives_the_datas_bursts_and_each_cells_medians():
    from dsident.experiments.runner import records_to_dataset
    from dsident.experiments.tables import bursts_table

    def record(seed, period, spikes, cv):
        late = {"regime": "chaotic", "lambda_max": 0.1, "D_stsp": 1.0, "D_H": 0.1, "steps": 100,
                "burst_period": period, "spikes_per_burst": spikes, "burst_cv": cv,
                "data_burst_period": 60.0, "data_spikes_per_burst": 5.0, "data_burst_cv": 0.0}
        return {"status": "done", "config": {"dataset": "v.npz", "model": "gnode", "method": "teacher-forcing",
                                              "seed": seed}, "scores": {"D_stsp": 1.0}, "late": late}

    results = records_to_dataset([record(0, 50.0, 4.0, 0.1), record(1, 70.0, 6.0, 0.3),
                                  record(2, float("nan"), float("nan"), float("nan"))])
    text = bursts_table(results, unit={"v.npz": "ms"})
    assert "| *test data* | 60 × 5, CV 0.00 |" in text
    assert "| gnode × teacher-forcing | 60 × 5, CV 0.20 (2/3 burst) |" in text
    assert "(periods: v.npz in ms)" in text
    plain = records_to_dataset([{**record(0, 50.0, 4.0, 0.1), "late": {"regime": "chaotic"}}])
    assert bursts_table(plain) == ""


def test_sweep_table_gets_a_bursts_column_only_where_the_test_data_burst():
    from dsident.experiments.runner import records_to_dataset
    from dsident.experiments.sweep import sweep_table

    def record(seed, lr, period, data_period=60.0):
        late = {"regime": "cycle", "lambda_max": 0.0, "D_stsp": 1.0, "D_H": 0.1, "steps": 100,
                "burst_period": period, "spikes_per_burst": 4.0, "burst_cv": 0.1,
                "data_burst_period": data_period, "data_spikes_per_burst": 5.0, "data_burst_cv": 0.02}
        return {"status": "done", "config": {"dataset": "v.npz", "model": "gnode", "method": "teacher-forcing",
                                              "seed": seed, "lr": lr}, "scores": {"D_stsp": 1.0}, "late": late}

    res = records_to_dataset([record(0, 0.01, 50.0), record(1, 0.01, 54.0), record(0, 0.001, float("nan")),
                              record(1, 0.001, float("nan"))], sweep_keys=["lr"])
    text = sweep_table(res, ["lr"])
    assert text.splitlines()[0].endswith("| free run (2T) | bursts (2T) |")
    assert "| 0.01 | 2/2 |" in text and text.splitlines()[3].endswith("| 52 × 4, CV 0.10 (2/2 burst) |")
    assert text.splitlines()[2].endswith("| – (0/2 burst) |")
    assert "The test data: v.npz 60 × 5, CV 0.02" in text
    quiet = records_to_dataset([record(0, 0.01, 50.0, data_period=float("nan"))], sweep_keys=["lr"])
    assert "bursts (2T)" not in sweep_table(quiet, ["lr"]) and "The test data" not in sweep_table(quiet, ["lr"])


def test_benchmark_on_a_bursting_file_tables_the_free_runs_bursts(tmp_path):
    from dsident.cli import main

    x, _ = burst_train(n_bursts=80)
    np.savez(tmp_path / "v.npz", x=x[:, None], dt=0.5)
    out = tmp_path / "bench"
    assert main(["benchmark", "--datasets", str(tmp_path / "v.npz"), "--models", "shplrnn", "--seeds", "1",
                 "--option", "n_epochs=1", "--option", "seq_len=20", "--param", "hidden_dim=8",
                 "--out", str(out), "--no-progress"]) == 0
    text = (out / "results.md").read_text()
    assert "### Bursts of the free runs at twice the evaluation length" in text
    assert "| *test data* | 60 × 5, CV 0.00 |" in text


def test_spike_counts_are_not_read_as_bursts_but_an_integer_voltage_is():
    from dsident.analysis.bursts import looks_like_counts

    rng = np.random.default_rng(0)
    t = np.arange(20_000)
    rate = 2.0 * (1 + np.sin(2 * np.pi * t / 50.0))                # a smoothly modulated Poisson train
    counts = rng.poisson(rate).astype(float)
    counts[100:110] = np.nan                                       # a masked stretch does not matter
    assert looks_like_counts(counts) and find_bursts(counts, 0.02) is None
    # the counts have plenty of local maxima to call spikes: the count rule, not a lack of them, refuses them
    from dsident.analysis.bursts import find_spikes
    assert sum(p.size for p in find_spikes(counts)) > 100
    # a voltage digitised as unsigned integers (an ADC's 0..4095) spans far more levels
    x, _ = burst_train()
    adc = np.round(1000 + 1000 * x)
    assert not looks_like_counts(adc) and find_bursts(adc, 0.5).spikes_per_burst == 5
    assert not looks_like_counts(x) and not looks_like_counts(np.full(10, np.nan))
