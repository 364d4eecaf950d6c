"""PhysioNet WFDB records through ``load_any`` and the command line (``from_wfdb``)."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning",
                                        "ignore:The inplace keyword")


def _record(tmp_path, *, units=("mV", "mV", "mV"), fs=250, n=2500, gap=None):
    """A 3-lead record written by wfdb itself; returns the signals as written (NaN where invalid)."""
    wfdb = pytest.importorskip("wfdb")
    t = np.arange(n) / fs
    beats = np.exp(-((t % 0.8) - 0.4) ** 2 / 2e-4)                           # one R peak every 0.8 s
    signal = np.column_stack([beats, -0.5 * beats + 0.1 * np.sin(2 * np.pi * 0.25 * t), 0.3 * np.cos(t)])
    if gap is not None:
        signal[gap[0]:gap[1], 1] = np.nan                                    # written as WFDB's invalid value
    wfdb.wrsamp("rec", fs=fs, units=list(units), sig_name=["MLII", "V5", "RESP"], p_signal=signal,
                fmt=["16"] * 3, adc_gain=[2000.0] * 3, baseline=[0] * 3, write_dir=str(tmp_path))
    return signal


def test_every_lead_is_read_with_its_units_and_invalid_samples_masked(tmp_path):
    from dsident.data import load_any

    signal = _record(tmp_path, gap=(700, 760))
    for path in ("rec.hea", "rec.dat"):                                      # the header, or the signal file beside it
        ds = load_any(tmp_path / path)
        assert list(ds["channel"].values) == ["MLII", "V5", "RESP"]
        assert ds.attrs["dt"] == pytest.approx(1 / 250) and ds.attrs["units"] == "mV"
        x = ds["x"].values[0]
        np.testing.assert_array_equal(np.isnan(x), np.isnan(signal))         # masked, not filled
        np.testing.assert_allclose(x[~np.isnan(x)], signal[~np.isnan(signal)], atol=1 / 2000)   # the ADC's step
    assert '"invalid_samples": 60' in ds.attrs["provenance"]


def test_leads_and_samples_are_chosen_by_name_or_position(tmp_path):
    from dsident.data import from_wfdb, load_any

    signal = _record(tmp_path)
    ds = load_any(tmp_path / "rec.hea", channels=["RESP", 0], sampfrom=100, sampto=600)
    assert list(ds["channel"].values) == ["RESP", "MLII"] and ds.sizes["time"] == 500
    np.testing.assert_allclose(ds["x"].values[0], signal[100:600][:, [2, 0]], atol=1 / 2000)
    with pytest.raises(ValueError, match=r"'V1' is not a lead of record .*\['MLII', 'V5', 'RESP'\]"):
        from_wfdb(tmp_path / "rec", channels="V1")
    with pytest.raises(ValueError, match="each kept lead once"):
        from_wfdb(tmp_path / "rec", channels=["V5", 1])
    with pytest.raises(ValueError, match=r"0 <= sampfrom < sampto <= 2500"):
        from_wfdb(tmp_path / "rec", sampfrom=600, sampto=100)
    with pytest.raises(FileNotFoundError, match="no WFDB header"):
        from_wfdb(tmp_path / "other")


def test_leads_of_different_units_are_refused_unless_allowed(tmp_path):
    from dsident.data import from_wfdb

    _record(tmp_path, units=("mV", "mV", "l/s"))
    with pytest.raises(ValueError, match=r"unit mismatch in `channels`.*allow_mixed_units=True"):
        from_wfdb(tmp_path / "rec.hea")
    assert from_wfdb(tmp_path / "rec.hea", channels=["MLII", "V5"]).attrs["units"] == "mV"
    assert from_wfdb(tmp_path / "rec.hea", allow_mixed_units=True).attrs["units"] == "mV; mV; l/s"


def test_a_dat_file_without_a_header_is_not_taken_for_a_record(tmp_path):
    from dsident.data.importers.physionet import wfdb_record_of

    (tmp_path / "raw.dat").write_bytes(b"\x00" * 64)                     # a vendor binary (Neo's .dat)
    assert wfdb_record_of(tmp_path / "raw.dat") is None
    assert wfdb_record_of(tmp_path / "raw.hea") == tmp_path / "raw"


def test_the_command_line_reads_a_record(tmp_path, capsys):
    from dsident.cli import main

    _record(tmp_path, n=5000)
    out = tmp_path / "insp"
    assert main(["inspect", str(tmp_path / "rec.hea"), "--read", "channels=MLII,V5", "--out", str(out),
                 "--no-progress"]) == 0
    text = (out / "inspect.md").read_text()
    assert "5000 samples × 2 channel(s); dt = 0.004 s" in text and "| MLII |" in text and "RESP" not in text
    assert main(["inspect", str(tmp_path / "rec.dat"), "--read", "sampto=3000", "--out", str(out)]) == 0
    assert "3000 samples × 3 channel(s)" in (out / "inspect.md").read_text()
    # a step that disagrees with the record's own is refused, not used
    assert main(["inspect", str(tmp_path / "rec.hea"), "--dt", "0.002", "--out", str(out)]) == 2
    assert "sampled at dt=0.004" in capsys.readouterr().err


def test_the_command_line_is_told_how_to_read_leads_of_mixed_units(tmp_path, capsys):
    from dsident.cli import main

    _record(tmp_path, units=("mV", "mV", "l/s"))
    out = tmp_path / "insp"
    assert main(["inspect", str(tmp_path / "rec.hea"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "`--read channels=MLII,V5`" in err and "`--read allow_mixed_units=true`" in err
    assert main(["inspect", str(tmp_path / "rec.hea"), "--read", "allow_mixed_units=true", "--out", str(out)]) == 0


def test_evaluate_takes_a_records_dat_for_its_hea(tmp_path):
    """A fit on ``rec.hea`` evaluated on ``rec.dat`` (the same record) scores the held-out end as fit
    did, and another record's ``.dat`` is read with the fit's ``--read``, as its ``.hea`` would be."""
    import json

    import xarray as xr

    from dsident.cli import main

    _record(tmp_path, n=2000, gap=(100, 110))                                # a gap in the training part only
    other = tmp_path / "other"
    other.mkdir()
    _record(other, n=2000)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.hea"), "--read", "channels=MLII,V5", "--test-fraction", "0.25",
                 "--model", "shplrnn", "--method", "bptt", "--train-length", "400", "--eval-length", "300",
                 "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress",
                 "--out", str(out)]) == 0
    fitted = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert main(["evaluate", str(out), str(tmp_path / "rec.dat"), "--out", str(tmp_path / "ev"), "--no-progress"]) == 0
    again = xr.open_dataset(tmp_path / "ev" / "metrics.nc", engine="h5netcdf")
    assert json.loads(again.attrs["data_length"]) == [300]
    np.testing.assert_allclose(again["state_space_divergence"].values, fitted["state_space_divergence"].values,
                               rtol=1e-12)
    assert "- test: the last 0.25 of every trial of the file" in (tmp_path / "ev" / "metrics.md").read_text()
    # another record by its signal file: the fit's two leads, not all three
    assert main(["evaluate", str(out), str(other / "rec.dat"), "--out", str(tmp_path / "ev2"), "--no-progress"]) == 0
    assert "| V5 |" in (tmp_path / "ev2" / "metrics.md").read_text()


def test_generate_writes_a_records_runs_in_its_units_and_labels_them_as_generated(tmp_path, monkeypatch):
    """generate after a z-scored fit of a record: generated.nc says mV and seconds (not a sentence
    for units and no time unit), and time_series.png calls the free run "generated", not "data";
    the fit's own generated.nc says it is in z-units."""
    import xarray as xr

    from dsident import plotting
    from dsident.cli import main

    _record(tmp_path, n=1500)
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.hea"), "--read", "channels=MLII,V5", "--zscore", "--test-fraction", "0.25",
                 "--model", "shplrnn", "--method", "bptt", "--train-length", "400", "--eval-length", "300",
                 "--param", "hidden_dim=8", "--option", "n_epochs=1", "--option", "seq_len=20", "--no-progress",
                 "--out", str(out)]) == 0
    # the fit's own free run (generated.nc beside fit.md) is scored in z-units, and says so
    assert xr.open_dataset(out / "generated.nc", engine="h5netcdf").attrs["units"].startswith("z-units")
    figures = {}
    draw = plotting.plot_time_series
    monkeypatch.setattr(plotting, "plot_time_series", lambda *a, **k: figures.setdefault("ts", draw(*a, **k)))
    assert main(["generate", str(out), "--steps", "200", "--out", str(tmp_path / "gen")]) == 0
    gen = xr.open_dataset(tmp_path / "gen" / "generated.nc", engine="h5netcdf")
    assert gen.attrs["units"] == "mV"
    ax = figures["ts"].axes[-1]
    assert ax.get_xlabel() == "time (s)"
    assert [t.get_text() for t in figures["ts"].axes[0].get_legend().get_texts()] == ["generated"]


def test_a_record_named_without_its_extension_points_to_its_header(tmp_path, capsys):
    from dsident.cli import main

    _record(tmp_path)
    assert main(["inspect", str(tmp_path / "rec"), "--out", str(tmp_path / "insp")]) == 2
    assert f"the WFDB record header '{tmp_path / 'rec.hea'}' does: give the header" in capsys.readouterr().err


def test_a_record_digest_covers_the_signal_files_its_header_names(tmp_path):
    # a record whose two leads live in files not named <record>.dat: editing either one must
    # change the digest a grid keeps, or a re-run would keep results fitted to the old samples
    from dsident.data import load_any
    from dsident.data.importers.physionet import wfdb_files
    from dsident.experiments.data_files import data_digests

    n = 200
    a = (1000 * np.sin(np.arange(n) / 7.0)).astype("<i2")
    b = (800 * np.cos(np.arange(n) / 5.0)).astype("<i2")
    a.tofile(tmp_path / "lead_a.dat")
    b.tofile(tmp_path / "lead_b.dat")
    (tmp_path / "rec.hea").write_text("# a hand-written header\nrec 2 250 200\n"
                                      "lead_a.dat 16 2000/mV 16 0 0 0 0 MLII\n"
                                      "lead_b.dat 16 2000/mV 16 0 0 0 0 V5\n")
    assert [p.name for p in wfdb_files(tmp_path / "rec.hea")] == ["rec.hea", "lead_a.dat", "lead_b.dat"]
    pytest.importorskip("wfdb")
    ds = load_any(tmp_path / "rec.hea")
    np.testing.assert_allclose(ds["x"].values[0, :, 1], b / 2000.0)            # the header read as wfdb reads it
    cfg = {"dataset": str(tmp_path / "rec.hea")}
    before = data_digests(cfg)
    (b[::-1].copy()).tofile(tmp_path / "lead_b.dat")                          # the same name, other samples
    assert data_digests(cfg) != before


def test_a_multi_segment_record_lists_each_segment_header_and_its_signal_file(tmp_path):
    from dsident.data.importers.physionet import wfdb_files

    (tmp_path / "multi.hea").write_text("multi/3 1 250 300\nseg1 100\n~ 100\nseg2 100\n")
    for seg in ("seg1", "seg2"):
        (tmp_path / f"{seg}.hea").write_text(f"{seg} 1 250 100\n{seg}.dat 16 2000/mV 16 0 0 0 0 MLII\n")
        np.zeros(100, dtype="<i2").tofile(tmp_path / f"{seg}.dat")
    assert [p.name for p in wfdb_files(tmp_path / "multi.hea")] == [
        "multi.hea", "seg1.hea", "seg1.dat", "seg2.hea", "seg2.dat"]
