"""dsident.data.summary (what a dataset holds) and `dsident inspect`: numbers checked against
direct numpy computations on data built with known statistics and rhythms."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dsident.data import as_dataset
from dsident.data.summary import FEW_PERIODS, describe, describe_markdown


def _recording(n=8000, dt=0.5, unit="ms"):
    t = np.arange(n)
    x = np.column_stack([-60 + 2.0 * np.sin(2 * np.pi * t / 40),       # far from 0 for its spread
                         0.01 * np.sin(2 * np.pi * t / 800),            # slow (10 cycles), and 200x smaller
                         np.full(n, 3.0)])                               # constant
    x[100:120, 0] = np.nan
    return as_dataset(x, dt=dt, channel_names=["V", "slow", "flat"], provenance={"time_unit": unit})


def test_describe_gives_each_channels_statistics_and_period():
    ds = _recording()
    out = describe(ds, eval_length=2000)
    x = ds["x"].values[0]
    v, slow, flat = out["per_channel"]
    assert out["trials"] == 1 and out["samples"] == [8000] and out["channels"] == ["V", "slow", "flat"]
    assert out["dt"] == 0.5 and out["time_unit"] == "ms" and out["duration"] == pytest.approx(4000.0)
    assert v["mean"] == pytest.approx(np.nanmean(x[:, 0])) and v["std"] == pytest.approx(np.nanstd(x[:, 0]))
    assert v["min"] == pytest.approx(np.nanmin(x[:, 0])) and v["missing"] == pytest.approx(20 / 8000)
    # the longest observed stretch of V (7880 samples) holds 197 periods of 40 samples
    assert v["period_samples"] == pytest.approx(40.0, rel=0.01) and v["period"] == pytest.approx(20.0, rel=0.01)
    assert slow["period_samples"] == pytest.approx(800.0)
    assert flat["std"] == 0.0 and math.isnan(flat["period"])


def test_describe_notes_what_would_hurt_a_fit():
    notes = " ".join(describe(_recording(), eval_length=2000)["notes"])
    assert "channel 'flat' is constant (3)" in notes
    assert "standard deviations span" in notes and "--zscore" in notes            # V vs slow: 200x
    assert "far from 0 for their spread: V (mean -60" in notes
    assert "missing samples" in notes and "V 0.25 %" in notes
    # 2000 samples over an 800-sample rhythm: 2.5 periods < FEW_PERIODS
    assert "spans 2.5 of them" in notes and f"--eval-length {FEW_PERIODS * 800 + 1}" in notes
    assert "time unit is not named" not in notes
    # a clean, unit-less recording: only the unit is noted
    t = np.arange(3000)
    clean = as_dataset(np.column_stack([np.sin(2 * np.pi * t / 30), np.cos(2 * np.pi * t / 30)]), dt=0.01)
    notes = describe(clean)["notes"]
    assert len(notes) == 1 and "time unit is not named" in notes[0]


def test_a_wide_array_is_noted_as_maybe_transposed_and_long_lists_say_how_many_more():
    rng = np.random.default_rng(0)
    wide = as_dataset(rng.standard_normal((300, 6)).T, dt=0.01)          # (channel, time) saved as is
    summary = describe(wide)
    assert summary["notes"][0].startswith("more channels (300) than samples a trial (6)")
    assert "dims=[\"channel\", \"time\"]" in summary["notes"][0]
    text = describe_markdown(summary)
    assert text.index("## Notes") < text.index("| channel |")            # not below a 300-row table
    assert not any(n.startswith("more channels") for n in describe(_recording())["notes"])
    x = rng.standard_normal((500, 200)) + 100.0
    x[10:20] = np.nan
    notes = " ".join(describe(as_dataset(x, dt=0.01))["notes"])
    assert "x0 2 %, x1 2 %, x2 2 %, x3 2 %, x4 2 %, x5 2 %, and 194 more channels." in notes
    assert "far from 0 for their spread: x0 (mean 100" in notes and "), and 196 more channels;" in notes


def test_describe_markdown_and_several_trials():
    x = [np.sin(np.arange(n) / 5.0)[:, None] for n in (300, 500)]
    ds = as_dataset(x, dt=1.0)
    out = describe(ds)
    assert out["samples"] == [300, 500] and out["duration"] == pytest.approx(800.0)
    # the padding of the shorter trial is not missing data
    assert out["per_channel"][0]["missing"] == 0.0
    text = describe_markdown(out)
    assert "2 trials of 300–500 samples (800 in all) × 1 channel(s)" in text and "| x0 |" in text
    same = describe_markdown(describe(as_dataset([np.sin(np.arange(400) / 5.0)[:, None]] * 3, dt=1.0)))
    assert "3 trials of 400 samples (1200 in all)" in same and "400–400" not in same
    with pytest.raises(ValueError, match="`eval_length` must be an integer ≥ 2"):
        describe(ds, eval_length=1)
    with pytest.raises(TypeError, match="canonical xarray.Dataset"):
        describe(np.zeros((3, 2)))


def test_cli_inspect_writes_the_report_and_figures(tmp_path, capsys):
    from dsident.cli import main

    t = np.arange(3000) * 0.05
    np.savetxt(tmp_path / "rec.csv", np.column_stack([t, np.sin(2 * np.pi * t / 2.0), np.cos(2 * np.pi * t / 2.0)]),
               delimiter=",", header="time_ms,a,b", comments="", fmt="%.8g")
    out = tmp_path / "insp"
    assert main(["inspect", str(tmp_path / "rec.csv"), "--out", str(out), "--no-progress"]) == 0
    text = (out / "inspect.md").read_text()
    assert "3000 samples × 2 channel(s); dt = 0.05 ms (20 samples per ms)" in text
    assert "| a |" in text and "| 2 | 40.0 |" in text                     # the period: 2 ms = 40 samples
    assert "Nothing to note." in text and text in capsys.readouterr().out
    for name in ("time_series.png", "spectra.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    # the reader's options as for fit: the time column kept as data is a channel that never returns
    assert main(["inspect", str(tmp_path / "rec.csv"), "--read", "time_column=false", "--dt", "0.05",
                 "--out", str(out)]) == 0
    text = (out / "inspect.md").read_text()
    assert "× 3 channel(s)" in text and "| time_ms |" in text and "time unit is not named" in text
    assert main(["inspect", str(tmp_path / "rec.csv"), "--read", "keys=1", "--out", str(out)]) == 2
    assert "unexpected keyword argument 'keys'" in capsys.readouterr().err


def test_a_one_channel_recording_is_offered_a_delay_embedding():
    from dsident.data.preprocessing import auto_embed, choose_embedding

    t = np.arange(6000)
    v = np.sin(2 * np.pi * t / 40) + 0.01 * np.random.default_rng(0).standard_normal(t.size)
    ds = as_dataset(v[:, None], dt=0.1, channel_names=["V"])
    note = next(n for n in describe(ds)["notes"] if n.startswith("one channel"))
    choice = choose_embedding(v, fnn_threshold=0.05)
    # a sine's mutual information with itself is least near a quarter period (10 samples)
    assert 6 <= choice["delay"] <= 12 and choice["delays"] == [k * choice["delay"] for k in range(choice["dimension"])]
    assert f"`--delay-embed auto` fits it delay-embedded, at delays {choice['delays']} samples" in note
    # the library's auto_embed makes the same choice (its own threshold given)
    embedded = auto_embed(ds, fnn_threshold=0.05)
    assert [str(c) for c in embedded["channel"].values] == [f"V(t+{d})" for d in choice["delays"]]
    # two channels: no such note
    two = as_dataset(np.column_stack([v, np.cos(2 * np.pi * t / 40)]), dt=0.1)
    assert not any(n.startswith("one channel") for n in describe(two)["notes"])


def test_counts_get_a_note_and_a_gaussian_fit_of_them_a_warning(tmp_path, capsys):
    """Spike counts fitted with the default Gaussian likelihood were modelled as a continuous
    signal without a word; inspect notes it and fit warns, naming the count likelihood."""
    import warnings

    from dsident import datasets
    from dsident.cli import main
    from dsident.data.summary import counts_note

    spikes = datasets.load("lorenz63_spikes", split="train")
    counts = spikes["x"].values[0, :1500, :6]
    assert (counts >= 0).all() and (counts == np.round(counts)).all()
    assert "--param observation=poisson" in counts_note(as_dataset(counts, dt=0.01))
    # not counts: a signal, negative integers, or a digitised voltage of many levels per channel
    rng = np.random.default_rng(0)
    assert counts_note(as_dataset(rng.normal(size=(500, 2)), dt=0.01)) is None
    assert counts_note(as_dataset(counts - 3.0, dt=0.01)) is None
    assert counts_note(as_dataset(np.round(1000 + 200 * rng.normal(size=(500, 2))), dt=0.01)) is None
    np.save(tmp_path / "counts.npy", counts)
    assert main(["inspect", str(tmp_path / "counts.npy"), "--dt", "0.01", "--out", str(tmp_path / "insp")]) == 0
    assert "every channel holds counts" in (tmp_path / "insp" / "inspect.md").read_text()
    tiny = ["--dt", "0.01", "--model", "shplrnn", "--method", "bptt", "--param", "hidden_dim=8", "--option",
            "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--test-fraction", "0.25", "--eval-length", "200"]
    with pytest.warns(UserWarning, match=r"every channel holds counts .* --param observation=poisson"):
        assert main(["fit", str(tmp_path / "counts.npy"), *tiny, "--out", str(tmp_path / "fit")]) == 0
    signal = rng.normal(size=(1500, 2)).cumsum(axis=0) * 0.1
    np.save(tmp_path / "signal.npy", signal)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["fit", str(tmp_path / "signal.npy"), *tiny, "--out", str(tmp_path / "fit2")]) == 0
    assert not any("holds counts" in str(w.message) for w in seen)
