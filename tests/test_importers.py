"""Tests for dsident.data.importers: every format with a tiny file written by the test itself.

Formats whose optional package is missing are skipped (pynwb, mne, neo).
"""
from __future__ import annotations

import datetime
import json
import sys
import warnings

import h5py
import numpy as np
import pytest
import scipy.io
import xarray as xr

from dsident.data import as_dataset, save_dataset, to_arrays
from dsident.data.importers import from_mne, from_neo, from_nwb, load_any, load_array

RNG = np.random.default_rng(0)
DATA = RNG.standard_normal((40, 3))                      # (time, channel)


# --------------------------------------------------------------------------- npy / npz


def test_npy_round_trip(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, DATA)
    ds = load_array(path, fs=100.0)
    np.testing.assert_array_equal(ds["x"].values[0], DATA)
    assert ds.attrs["dt"] == pytest.approx(0.01)
    assert json.loads(ds.attrs["provenance"])["format"] == "npy"


def test_pickled_npy_is_refused(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([np.zeros(3), np.zeros(4)], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="pickled"):
        load_array(path)


def test_pickle_extension_is_refused(tmp_path):
    path = tmp_path / "x.pkl"
    path.write_bytes(b"not read")
    for reader in (load_array, load_any):
        with pytest.raises(ValueError, match="unpickling"):
            reader(path)


def test_npz_key_metadata_and_missing_key(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=DATA, b=DATA[:, :1], fs=50.0)
    with pytest.raises(ValueError, match=r"several arrays \['a', 'b'\]"):
        load_array(path)
    with pytest.raises(ValueError, match="'nope' is not in"):
        load_array(path, key="nope")
    ds = load_array(path, key="b")
    assert ds.sizes["channel"] == 1 and ds.attrs["dt"] == pytest.approx(0.02)     # fs read from the file


def test_dims_reorders_axes(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.transpose(DATA[None].repeat(2, 0), (2, 1, 0)))   # stored (channel, time, trial)
    ds = load_array(path, dims=("channel", "time", "trial"))
    assert ds["x"].shape == (2, 40, 3)
    np.testing.assert_array_equal(ds["x"].values[1], DATA)
    with pytest.raises(ValueError, match="dims"):
        load_array(path, dims=("channel", "time"))


# --------------------------------------------------------------------------- csv


def test_csv_needs_a_sampling_rate_and_reads_header_and_nan(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1.0,2.0\n,4.0\n5.0,6.0\n")
    with pytest.raises(ValueError, match="`fs`"):
        load_array(path)
    ds = load_array(path, fs=10.0)
    assert list(ds["channel"].values) == ["a", "b"]
    assert np.isnan(ds["x"].values[0, 1, 0]) and ds["x"].values[0, 2, 1] == 6.0
    assert not to_arrays(ds).mask[0, 1, 0]


def test_csv_time_column_gives_sample_times(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("t,v\n0.0,1\n0.1,2\n0.3,3\n")
    ds = load_array(path, time_column="t")
    np.testing.assert_allclose(ds["sample_time"].values[0], [0.0, 0.1, 0.3])
    assert list(ds["channel"].values) == ["v"]


def _uniform_table(path, header, ramp_col=None):
    """A csv of DATA with (optionally) a uniformly rising column inserted at ``ramp_col``."""
    table = DATA.copy()
    if ramp_col is not None:
        table = np.insert(table, ramp_col, 0.05 * np.arange(len(DATA)), axis=1)
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt="%.6g")
    return table


@pytest.mark.parametrize("name", ["time", "Time (s)", "t_ms", "timestamp", "t [s]"])
def test_csv_header_time_column_is_read_as_sample_times(tmp_path, name):
    # A time column left in the data would be fitted as a channel that never returns.
    path = tmp_path / "rec.csv"
    table = _uniform_table(path, f"a,{name},b,c", ramp_col=1)
    ds = load_array(path)
    assert list(ds["channel"].values) == ["a", "b", "c"]
    np.testing.assert_allclose(ds["x"].values[0], np.delete(table, 1, axis=1), rtol=1e-5)
    assert ds.attrs["dt"] == 0.05                       # the step of the times, without the text's rounding
    assert json.loads(ds.attrs["provenance"])["time_column"] == name
    # the same column kept as data on request (then the step must be given)
    kept = load_array(path, time_column=False, dt=0.05)
    assert list(kept["channel"].values) == ["a", name, "b", "c"]


def test_csv_ramp_column_without_a_time_name_is_refused(tmp_path):
    path = tmp_path / "rec.csv"
    _uniform_table(path, "", ramp_col=0)                 # no header line
    with pytest.raises(ValueError, match=r"column 1 changes by the same step \(0.05\) on every row"):
        load_array(path, dt=0.05)
    ds = load_array(path, time_column=0)
    assert ds.sizes["channel"] == 3 and ds.attrs["dt"] == 0.05
    # a recorded variable is never a ramp: the same file without the column loads as before
    np.savetxt(path, DATA, delimiter=",")
    assert load_array(path, dt=0.05).sizes["channel"] == 3


def test_csv_channel_named_like_time_but_not_increasing_stays_data(tmp_path):
    path = tmp_path / "rec.csv"
    np.savetxt(path, DATA, delimiter=",", header="t,b,c", comments="")
    ds = load_array(path, dt=0.1)
    assert list(ds["channel"].values) == ["t", "b", "c"] and "sample_time" not in ds
    for name in ("ts", "th", "tmin", "theta"):      # names that only start like one
        np.savetxt(path, np.insert(DATA, 0, np.arange(len(DATA)), axis=1), delimiter=",",
                   header=f"{name},a,b,c", comments="")
        with pytest.raises(ValueError, match=f"column 1 \\({name!r}\\) changes by the same step"):
            load_array(path, dt=0.1)


def test_csv_time_column_with_an_empty_cell_is_refused_not_read_as_data(tmp_path):
    # a missing timestamp once made the time column a data channel (with fs) or a "no sampling rate" error
    path = tmp_path / "rec.csv"
    path.write_text("time,v\n0.0,1\n,2\n0.2,3\n0.3,4\n0.4,5\n")
    for kwargs in ({}, {"fs": 10.0}):
        with pytest.raises(ValueError, match=r"'time' of 'rec.csv' holds the sample times but has no time on 1 "):
            load_array(path, **kwargs)
    kept = load_array(path, time_column=False, fs=10.0)
    assert list(kept["channel"].values) == ["time", "v"]


def test_dt_that_contradicts_the_sample_times_is_refused(tmp_path):
    path = tmp_path / "rec.csv"
    _uniform_table(path, "time,a,b,c", ramp_col=0)
    assert load_array(path, dt=0.05).attrs["dt"] == 0.05
    with pytest.raises(ValueError, match=r"`dt`=50.0 disagrees with the sample times, whose median step is 0.05"):
        load_array(path, dt=50.0)                     # milliseconds given for seconds
    with pytest.raises(ValueError, match="disagrees with the sample times"):
        as_dataset(DATA, dt=0.1, time=0.05 * np.arange(len(DATA)))


def test_cli_reads_a_csv_with_a_time_column_without_dt(tmp_path):
    from dsident.experiments.inputs import carries_step, load_data

    path = tmp_path / "rec.csv"
    _uniform_table(path, "time,a,b,c", ramp_col=0)
    assert carries_step(path)
    ds = load_data(str(path))
    assert list(ds["channel"].values) == ["a", "b", "c"] and ds.attrs["dt"] == 0.05
    np.savetxt(path, DATA, delimiter=",", header="a,b,c", comments="")
    assert not carries_step(path)
    with pytest.raises(ValueError, match="carries no sampling step: pass `dt`"):
        load_data(str(path))


def test_a_semicolon_or_tab_separated_table_is_read_by_its_header_lines_separator(tmp_path):
    from dsident.experiments.inputs import carries_step, load_data

    path = tmp_path / "semi.csv"
    path.write_text("time;V\n" + "".join(f"{0.01 * i:.2f};{np.sin(0.3 * i):.6f}\n" for i in range(20)))
    assert carries_step(path)         # read with `,`, `time;V` was one column and no time axis
    ds = load_data(str(path))
    assert list(ds["channel"].values) == ["V"] and ds.attrs["dt"] == pytest.approx(0.01)
    np.testing.assert_allclose(ds["x"].values[0, :3, 0], np.round(np.sin([0.0, 0.3, 0.6]), 6))
    path.write_text("a\tb\n1\t2\n3\t4\n")
    assert load_any(path, dt=0.1)["x"].values[0].tolist() == [[1, 2], [3, 4]]
    (tmp_path / "c.txt").write_text("a, b\n1, 2\n3, 4\n")
    assert load_any(tmp_path / "c.txt", dt=0.1)["x"].values[0].tolist() == [[1, 2], [3, 4]]
    path.write_text("a;b\n0,5;2\n1;2\n")    # a locale's decimal comma is refused, and named
    with pytest.raises(ValueError, match=r"holds '0,5', which is not a number \(a decimal comma"):
        load_any(path, dt=0.1)


@pytest.mark.parametrize("name, unit", [("time", None), ("Time (s)", "s"), ("t_ms", "ms"), ("timestamp", None),
                                        ("t [s]", "s"), ("time (min)", "min"), ("seconds", "s"), ("ms", "ms"),
                                        # audit-s53: microsecond stamps were read as a data channel
                                        ("time_us", "us"), ("Time (\u00b5s)", "us"), ("timestamp [usec]", "us")])
def test_csv_time_column_names_the_time_unit(tmp_path, name, unit):
    # periods, Lyapunov exponents and axes then say "ms" where the column did
    from dsident.data.time_units import frequency_label, per_time, time_label, time_unit

    path = tmp_path / "rec.csv"
    _uniform_table(path, f"{name},a,b,c", ramp_col=0)
    ds = load_array(path)
    assert time_unit(ds) == unit
    assert time_label(ds) == (f"time ({unit})" if unit else "time")
    assert per_time(ds) == f"per {unit or 'time unit'}"
    assert frequency_label(ds) == {"s": "frequency (Hz)", None: "frequency (1 / time unit)"}.get(
        unit, f"frequency (1 / {unit})")
    # the column chosen by index carries its name's unit too; kept as data, nothing names a unit
    assert time_unit(load_array(path, time_column=0)) == unit
    assert time_unit(load_array(path, time_column=False, dt=0.05)) is None


def test_time_unit_from_a_rate_in_hz_and_not_from_a_bare_step(tmp_path):
    from dsident.data.time_units import time_unit

    path = tmp_path / "x.npy"
    np.save(path, DATA)
    assert time_unit(load_array(path, fs=100.0)) == "s"       # Hz: samples per second
    assert time_unit(load_array(path, dt=0.01)) is None        # a step says nothing of its unit
    assert time_unit(as_dataset(DATA, dt=0.01)) is None
    # a file's own rate in Hz names seconds; its own dt, or the call's dt over its rate, does not
    h5 = tmp_path / "x.h5"
    with h5py.File(h5, "w") as fh:
        fh.create_dataset("rate", data=DATA).attrs["fs"] = 200.0
        fh.create_dataset("step", data=DATA).attrs["dt"] = 0.005
    assert time_unit(load_array(h5, key="rate")) == "s" and time_unit(load_array(h5, key="step")) is None
    assert time_unit(load_array(h5, key="rate", dt=0.005)) is None
    np.savez(tmp_path / "x.npz", x=DATA, fs=200.0)
    scipy.io.savemat(tmp_path / "x.mat", {"x": DATA, "fs": 200.0})
    assert time_unit(load_array(tmp_path / "x.npz")) == "s" and time_unit(load_array(tmp_path / "x.mat")) == "s"
    lorenz = as_dataset(DATA, dt=0.01, provenance={"time_unit": "a.u."})
    assert time_unit(lorenz) is None                            # the Lorenz-63 convention: no unit


def test_plain_numbers_take_the_fast_reader_and_read_as_the_cell_by_cell_route(tmp_path):
    from dsident.data.importers.arrays import _read_cell_by_cell, _read_plain_numbers

    path = tmp_path / "rec.csv"
    table = np.column_stack([0.05 * np.arange(200), RNG.standard_normal((200, 2)) * 1e3])
    table[5, 1] = np.inf                                 # read as a number by both, refused later by as_dataset
    np.savetxt(path, table, delimiter=",", header="time,a,b", comments="", fmt="%.10g")
    fast, slow = _read_plain_numbers(path, ",", 1), _read_cell_by_cell(path, ",", 1)
    np.testing.assert_array_equal(fast, slow)
    # an empty cell is not a number for the fast reader: the cell-by-cell route reads it as missing
    path.write_text("a,b\n1,\n2,3\n")
    assert _read_plain_numbers(path, ",", 1) is None
    np.testing.assert_array_equal(load_array(path, dt=1.0)["x"].values[0], [[1.0, np.nan], [2.0, 3.0]])


def test_a_spreadsheets_byte_order_mark_and_empty_tables(tmp_path):
    # Excel's "CSV UTF-8" starts with a byte-order mark: the first header name must still read "time"
    path = tmp_path / "rec.csv"
    _uniform_table(path, "time,a,b,c", ramp_col=0)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ds = load_array(path)
    assert list(ds["channel"].values) == ["a", "b", "c"] and ds.attrs["dt"] == 0.05
    path.write_text("time,a\n")
    with pytest.raises(ValueError, match="'rec.csv' holds no data rows below its header line"):
        load_array(path)
    path.write_text("")
    with pytest.raises(ValueError, match="'rec.csv' is empty"):
        load_array(path, dt=1.0)


# --------------------------------------------------------------------------- HDF5


def test_hdf5_dataset_group_of_trials_and_errors(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("rec/data", data=DATA).attrs["fs"] = 200.0
        for i, n in enumerate((10, 12, 11)):        # names sort naturally: t2 before t10
            fh.create_dataset(f"trials/t{[2, 10, 1][i]}", data=np.full((n, 3), float(i)))
    with pytest.raises(ValueError, match=r"choose one, or a group of per-trial arrays \[.trials.\], with `key=`"):
        load_array(path)
    with pytest.raises(ValueError, match="'rec/nope' is not in"):
        load_array(path, key="rec/nope")
    ds = load_array(path, key="rec/data")
    np.testing.assert_array_equal(ds["x"].values[0], DATA)
    assert ds.attrs["dt"] == pytest.approx(0.005)
    trials = load_array(path, key="trials", fs=1.0)
    assert trials["length"].values.tolist() == [11, 10, 12]                 # t1, t2, t10
    assert trials["x"].values[1, 0, 0] == 0.0 and trials["x"].values[2, 0, 0] == 1.0


# --------------------------------------------------------------------------- MAT


def _write_mat73(path, variables):
    """A MAT v7.3 file as MATLAB writes it: HDF5 with a 512-byte header, column-major arrays."""
    with h5py.File(path, "w", userblock_size=512) as fh:
        refs = fh.create_group("#refs#")
        for key, value in variables.items():
            if isinstance(value, list):                                      # a cell array
                ref_dtype = h5py.special_dtype(ref=h5py.Reference)
                cell = fh.create_dataset(key, shape=(len(value), 1), dtype=ref_dtype)
                for i, v in enumerate(value):
                    item = refs.create_dataset(f"{key}{i}", data=np.asarray(v, dtype=np.float64).T)
                    item.attrs["MATLAB_class"] = np.bytes_("double")
                    cell[i, 0] = item.ref
                cell.attrs["MATLAB_class"] = np.bytes_("cell")
            else:
                dset = fh.create_dataset(key, data=np.atleast_2d(np.asarray(value, dtype=np.float64)).T)
                dset.attrs["MATLAB_class"] = np.bytes_("double")
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Sat Nov 21 2026 HDF5 schema 1.00 ."
    with open(path, "r+b") as fh:
        fh.write(header.ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02" + b"IM")


def test_mat_v5_and_v73_give_the_same_dataset(tmp_path):
    trials = [RNG.standard_normal((n, 2)) for n in (6, 9)]
    v5, v73 = tmp_path / "a.mat", tmp_path / "b.mat"
    cell = np.empty((2, 1), dtype=object)
    cell[0, 0], cell[1, 0] = trials
    scipy.io.savemat(v5, {"x": DATA, "trials": cell, "fs": 250.0})
    _write_mat73(v73, {"x": DATA, "trials": trials, "fs": 250.0})
    for key in ("x", "trials"):
        a, b = load_array(v5, key=key), load_array(v73, key=key)
        np.testing.assert_array_equal(a["x"].values, b["x"].values)
        assert a.attrs["dt"] == b.attrs["dt"] == pytest.approx(0.004)
    # MATLAB's 40 x 3 matrix is (time, channel) in both, not the (3, 40) h5py sees in v7.3
    assert load_array(v73, key="x")["x"].shape == (1, 40, 3)
    np.testing.assert_array_equal(load_array(v73, key="trials")["x"].values[1, :9], trials[1])
    assert json.loads(load_array(v73, key="x").attrs["provenance"])["format"] == "mat-v7.3"


def test_mat_struct_field_and_errors(tmp_path):
    path = tmp_path / "s.mat"
    scipy.io.savemat(path, {"s": {"data": DATA, "label": "trial"}, "y": DATA})
    np.testing.assert_array_equal(load_array(path, key="s.data")["x"].values[0], DATA)
    with pytest.raises(TypeError, match="struct"):
        load_array(path, key="s")
    with pytest.raises(ValueError, match="'nope' is not in"):
        load_array(path, key="s.nope")
    with pytest.raises(ValueError, match="several arrays"):
        load_array(path)


# --------------------------------------------------------------------------- load_any


def test_load_any_dispatches_by_extension(tmp_path):
    np.save(tmp_path / "a.npy", DATA)
    ds = load_any(tmp_path / "a.npy", fs=10.0)
    save_dataset(ds, tmp_path / "a.nc")
    back = load_any(tmp_path / "a.nc")
    np.testing.assert_allclose(back["x"].values, ds["x"].values)
    assert load_any(tmp_path / "a.npy", dt=0.5).attrs["dt"] == 0.5
    (tmp_path / "a.xyz").write_text("?")
    with pytest.raises(ValueError, match="known extensions"):
        load_any(tmp_path / "a.xyz")
    with pytest.raises(FileNotFoundError):
        load_any(tmp_path / "missing.npy")


def test_a_key_for_a_one_array_file_and_options_no_reader_takes_are_refused_by_name(tmp_path):
    np.save(tmp_path / "a.npy", DATA)
    (tmp_path / "a.csv").write_text("u,v\n1,2\n3,5\n")
    for name in ("a.npy", "a.csv"):     # one array each: a key would otherwise be dropped unseen
        with pytest.raises(ValueError, match=rf"`key`='foo': '{name}' is a .* so `key` names nothing"):
            load_any(tmp_path / name, key="foo", dt=0.1)
    with pytest.raises(TypeError, match="unexpected keyword arguments 'bogus', 'zz'; it takes key, dims") as err:
        load_any(tmp_path / "a.npy", key="foo", bogus=1, zz=2, dt=0.1)
    assert err.value.unknown == ["bogus", "zz"]        # the known `key` is not among them


@pytest.mark.parametrize("module, reader, extra", [("pynwb", from_nwb, "nwb"), ("mne", from_mne, "eeg"),
                                                   ("neo", from_neo, "neo")])
def test_missing_optional_package_names_the_extra(monkeypatch, tmp_path, module, reader, extra):
    monkeypatch.setitem(sys.modules, module, None)         # makes `import module` fail
    with pytest.raises(ImportError, match=rf"dsident\[{extra}\]"):
        reader(tmp_path / "whatever", bin_size=0.1) if module != "mne" else reader(tmp_path / "whatever")


# --------------------------------------------------------------------------- NWB


@pytest.fixture()
def nwb_file(tmp_path):
    pynwb = pytest.importorskip("pynwb")
    nwb = pynwb.NWBFile(session_description="test", identifier="tiny",
                        session_start_time=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc))
    raw = np.arange(200, dtype=np.int16).reshape(100, 2)
    nwb.add_acquisition(pynwb.TimeSeries(name="lfp", data=raw, unit="V", conversion=1e-3, offset=0.5,
                                         rate=100.0, starting_time=0.0))
    nwb.add_acquisition(pynwb.TimeSeries(name="pos", data=np.arange(5.0), unit="m",
                                         timestamps=[0.0, 0.1, 0.25, 0.3, 0.5]))
    nwb.add_unit_column("quality", "sorting quality")
    nwb.add_unit(spike_times=[0.01, 0.2, 0.95], obs_intervals=[[0.0, 1.0]], quality="good")
    nwb.add_unit(spike_times=[0.5, 0.75], obs_intervals=[[0.0, 0.5], [0.7, 1.0]], quality="mua")
    nwb.add_trial_column("condition", "reach target")
    nwb.add_trial(start_time=0.0, stop_time=0.5, condition="left")
    nwb.add_trial(start_time=0.5, stop_time=1.0, condition="right")
    path = tmp_path / "tiny.nwb"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pynwb.NWBHDF5IO(str(path), "w") as io:
            io.write(nwb)
    return path, raw


def test_nwb_series_in_physical_units_cut_into_trials(nwb_file):
    path, raw = nwb_file
    ds = from_nwb(path, series="lfp")
    expected = raw * 1e-3 + 0.5                            # data * conversion + offset, not raw integers
    np.testing.assert_allclose(ds["x"].values[0], expected[:50])
    np.testing.assert_allclose(ds["x"].values[1], expected[50:])
    assert ds.attrs["dt"] == pytest.approx(0.01) and ds.attrs["units"] == "V"
    assert ds["condition"].values.tolist() == ["left", "right"]
    assert json.loads(ds.attrs["provenance"])["identifier"] == "tiny"
    assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"      # NWB times are seconds


def test_nwb_irregular_series_keeps_sample_times(nwb_file):
    ds = from_nwb(nwb_file[0], series="pos", trials=False)
    np.testing.assert_allclose(ds["sample_time"].values[0], [0.0, 0.1, 0.25, 0.3, 0.5])
    assert ds.attrs["units"] == "m"


def test_nwb_units_binned_with_obs_intervals(nwb_file):
    ds = from_nwb(nwb_file[0], bin_size=0.1)
    assert ds["x"].shape == (2, 5, 2) and list(ds["channel"].values) == ["0", "1"]
    np.testing.assert_array_equal(ds["x"].values[0, :, 0], [1, 0, 1, 0, 0])
    np.testing.assert_array_equal(ds["x"].values[1, :, 0], [0, 0, 0, 0, 1])
    # unit 1 is not observed in (0.5, 0.7): its spike at 0.5 lies in a masked bin
    x1 = ds["x"].values[1, :, 1]
    assert np.isnan(x1[:2]).all() and x1[2:].tolist() == [1.0, 0.0, 0.0]
    assert ds["unit_quality"].values.tolist() == ["good", "mua"]
    assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"
    picked = from_nwb(nwb_file[0], bin_size=0.1, units=[1])
    assert list(picked["channel"].values) == ["1"]


def test_nwb_errors(nwb_file):
    path = nwb_file[0]
    with pytest.raises(ValueError, match=r"not found .* holds the series \['lfp', 'pos'\]"):
        from_nwb(path, series="spikes")
    with pytest.raises(ValueError, match="unit mismatch"):
        from_nwb(path, series=["lfp", "pos"], trials=False)
    with pytest.raises(ValueError, match=r"exactly one of.*holds the series \['lfp', 'pos'\] and a Units table.*"
                                         r"--read series=NAME"):
        from_nwb(path)
    with pytest.raises(ValueError, match="unit ids"):
        from_nwb(path, bin_size=0.1, units=[7])
    assert load_any(path, bin_size=0.1)["x"].shape == (2, 5, 2)
    assert load_any(path, dt=0.1)["x"].shape == (2, 5, 2)              # dt = bin width for Units
    assert load_any(path, series="lfp", dt=0.01).attrs["dt"] == pytest.approx(0.01)
    with pytest.raises(ValueError, match="sampled at dt=0.01"):
        load_any(path, series="lfp", dt=0.02)


# --------------------------------------------------------------------------- MNE


@pytest.fixture()
def raw_eeg():
    mne = pytest.importorskip("mne")
    info = mne.create_info(["Fz", "Cz", "MEG1"], 100.0, ["eeg", "eeg", "mag"])
    data = np.vstack([np.full(300, 2e-6), np.full(300, -1e-6), np.full(300, 1e-12)])
    raw = mne.io.RawArray(data, info, verbose="error")
    raw.set_annotations(mne.Annotations(onset=[1.0], duration=[0.5], description=["BAD_blink"]))
    return mne, raw


def test_mne_raw_bad_annotations_become_nan(raw_eeg, tmp_path):
    mne, raw = raw_eeg
    ds = from_mne(raw, picks="eeg", units="uV")
    x = ds["x"].values[0]
    assert x.shape == (300, 2) and ds.attrs["dt"] == pytest.approx(0.01)
    assert np.isnan(x[100:150]).all() and np.isfinite(x[:100]).all() and np.isfinite(x[150:]).all()
    np.testing.assert_allclose(x[0], [2.0, -1.0])                       # microvolts
    assert ds.attrs["units"] == "uV" and ds["channel_type"].values.tolist() == ["eeg", "eeg"]
    assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"
    path = tmp_path / "rec_raw.fif"
    raw.save(path, verbose="error")
    back = load_any(path, picks="eeg")
    np.testing.assert_allclose(back["x"].values, ds["x"].values * 1e-6)


def test_mne_unit_mismatch_and_epochs(raw_eeg):
    mne, raw = raw_eeg
    with pytest.raises(ValueError, match="unit mismatch"):
        from_mne(raw)
    assert from_mne(raw, allow_mixed_units=True).sizes["channel"] == 3
    data = RNG.standard_normal((4, 2, 50))                              # MNE: (epoch, channel, time)
    epochs = mne.EpochsArray(data, mne.create_info(["a", "b"], 200.0, "eeg"), tmin=-0.1, verbose="error",
                             events=np.array([[i * 100, 0, 1 + i % 2] for i in range(4)]),
                             event_id={"go": 1, "stop": 2})
    ds = from_mne(epochs)
    np.testing.assert_allclose(ds["x"].values, np.transpose(data, (0, 2, 1)))
    assert ds["event"].values.tolist() == [1, 2, 1, 2] and ds.attrs["tmin"] == pytest.approx(-0.1)


# --------------------------------------------------------------------------- Neo


@pytest.fixture()
def neo_block():
    neo = pytest.importorskip("neo")
    pq = pytest.importorskip("quantities")
    block = neo.Block(name="session")
    for i in range(2):
        seg = neo.Segment(name=f"trial{i}")
        seg.analogsignals.append(neo.AnalogSignal(
            np.full((100, 2), i + 1.0), units="mV" if i == 0 else "V", sampling_rate=1 * pq.kHz,
            t_start=i * pq.s, name="lfp", array_annotations={"channel_names": np.array(["c0", "c1"])}))
        seg.spiketrains.append(neo.SpikeTrain([0.01, 0.05, 0.1] * pq.s + i * pq.s, t_start=i * pq.s,
                                              t_stop=(i + 0.1) * pq.s, name="u0"))
        seg.spiketrains.append(neo.SpikeTrain([0.02] * pq.s + i * pq.s, t_start=i * pq.s,
                                              t_stop=(i + 0.05) * pq.s, name="u1"))
        block.segments.append(seg)
    return block


def test_neo_analog_rescaled_to_one_unit(neo_block):
    ds = from_neo(neo_block)
    assert ds.attrs["units"] == "mV" and list(ds["channel"].values) == ["c0", "c1"]
    assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"
    np.testing.assert_allclose(ds["x"].values[:, 0, 0], [1.0, 2000.0])   # 2 V = 2000 mV
    np.testing.assert_allclose(from_neo(neo_block, units="uV")["x"].values[:, 0, 0], [1e3, 2e6])
    np.testing.assert_allclose(ds["trial_start"].values, [0.0, 1.0])
    with pytest.raises(ValueError, match="unit mismatch"):
        from_neo(neo_block, units="Hz")
    with pytest.raises(ValueError, match="no AnalogSignal named 'eeg'"):
        from_neo(neo_block, signal="eeg")


def test_neo_spike_trains_binned_per_segment(neo_block):
    ds = from_neo(neo_block, bin_size=0.02)
    x = ds["x"].values
    assert x.shape == (2, 5, 2) and list(ds["channel"].values) == ["u0", "u1"]
    np.testing.assert_array_equal(x[:, :, 0], [[1, 0, 1, 0, 0]] * 2)          # the spike at t_stop is dropped
    assert json.loads(ds.attrs["provenance"])["spikes_at_stop"] == 2
    assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"
    np.testing.assert_array_equal(x[:, :2, 1], [[0, 1]] * 2)
    assert np.isnan(x[:, 2:, 1]).all()                                      # past u1's t_stop


def test_a_ragged_csv_is_refused_with_the_file_and_the_row(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text("1,2\n3\n5,6\n")
    with pytest.raises(ValueError, match=r"'ragged.csv' is not a table with the same number of columns.*Line #2"):
        load_any(path, dt=0.1)


def test_a_file_that_is_not_netcdf_is_named_when_read_as_one(tmp_path):
    from dsident.data import load_dataset
    from dsident.experiments.inputs import load_data

    path = tmp_path / "notes.nc"
    path.write_text("not a NetCDF file\n")
    for read in (lambda: load_dataset(path), lambda: load_data(str(path))):
        with pytest.raises(ValueError, match=r"notes.nc' is not a readable NetCDF file"):
            read()
    # the same reader still takes a real file (the CLI's route and the library's are one)
    ds = as_dataset(np.arange(12.0).reshape(6, 2), dt=0.5)
    save_dataset(ds, tmp_path / "real.nc")
    assert np.array_equal(load_data(str(tmp_path / "real.nc"))["x"].values, ds["x"].values)


def test_a_word_in_a_csv_is_refused_not_masked(tmp_path):
    # genfromtxt reads "x" as NaN; masking it would drop a typo from the fit without a word
    path = tmp_path / "typo.csv"
    path.write_text("a,b\n1,2\n3,x\n5,6\n")
    with pytest.raises(ValueError, match=r"'typo.csv': data row 2, column 2 holds 'x', which is not a number"):
        load_any(path, dt=0.1)
    # the marks of a missing sample still read as masked samples, with or without a header
    for text in ("1,NA\n,2\n3,nan\n4,N/A\n5,6\n", "a,b\n1,NA\n,2\n3,nan\n4,N/A\n5,6\n"):
        path.write_text(text)
        x = load_any(path, dt=0.1)["x"].values[0]
        assert np.isnan(x).sum() == 4 and x[4, 1] == 6.0
    # spreadsheet exports quote their numbers and names; both are read as what they say
    path.write_text('"a","b"\n"1.5","2"\n3,"NA"\n')
    ds = load_any(path, dt=0.1)
    assert list(ds["channel"].values) == ["a", "b"]
    np.testing.assert_array_equal(ds["x"].values[0], [[1.5, 2.0], [3.0, np.nan]])


# --------------------------------------------------------------------------- the command line's --read


def test_cli_read_options_reach_the_reader_and_evaluate_reuses_them(tmp_path, capsys):
    """An HDF5 file holding several arrays is fitted with --read key=...; config.json keeps the
    option and evaluate reads a file of the same format with it; a wrong option names --read."""
    from dsident import datasets
    from dsident.cli import main

    x = datasets.load("lorenz63", split="train")["x"].values[0, :600]
    path = tmp_path / "rec.h5"
    with h5py.File(path, "w") as fh:
        fh.create_dataset("lorenz", data=x).attrs["dt"] = 0.01
        fh.create_dataset("other", data=np.zeros((600, 3)))
    tiny = ["--model", "shplrnn", "--method", "bptt", "--param", "hidden_dim=8", "--option", "n_epochs=1",
            "--option", "seq_len=20", "--no-progress"]
    out = tmp_path / "fit"
    assert main(["fit", str(path), *tiny, "--test-fraction", "0.25", "--out", str(out)]) == 2
    assert "holds several arrays ['lorenz', 'other']" in capsys.readouterr().err
    assert main(["fit", str(path), *tiny, "--test-fraction", "0.25", "--read", "key=lorenz", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["read"] == {"key": "lorenz"}
    assert main(["evaluate", str(out), str(path), "--eval-length", "300", "--no-progress"]) == 0
    assert (out / "evaluation" / "metrics.md").is_file()
    assert main(["fit", str(path), *tiny, "--read", "keys=lorenz", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "--read ['keys']" in err and "unexpected keyword argument 'keys'" in err
    # only the options the reader does not take are named, not the good `key` beside them
    assert main(["fit", str(path), *tiny, "--read", "key=lorenz", "--read", "bogus=1",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "--read ['bogus']: the reader of 'rec.h5' does not take it" in capsys.readouterr().err
    save_dataset(as_dataset(x, dt=0.01), tmp_path / "rec.nc")
    assert main(["fit", str(tmp_path / "rec.nc"), *tiny, "--read", "key=lorenz", "--out", str(tmp_path / "bad")]) == 2
    assert "is a NetCDF file, which is read as it is" in capsys.readouterr().err
    assert main(["fit", "lorenz63", *tiny, "--read", "key=x", "--out", str(tmp_path / "bad")]) == 2
    assert "apply to a data file, but the data are a shipped set" in capsys.readouterr().err


def test_read_channels_drops_a_constant_channel_for_fit_evaluate_and_inspect(tmp_path, capsys):
    from dsident import datasets
    from dsident.cli import main
    from dsident.experiments.inputs import select_channels

    x = datasets.load("lorenz63", split="train")["x"].values[0, :600]
    rec = np.column_stack([x[:, 0], np.full(600, 2.0), x[:, 2]])      # a constant middle channel
    np.save(tmp_path / "rec.npy", rec)
    tiny = ["--dt", "0.01", "--model", "shplrnn", "--method", "bptt", "--param", "hidden_dim=8", "--option",
            "n_epochs=1", "--option", "seq_len=20", "--no-progress", "--test-fraction", "0.25"]
    out = tmp_path / "fit"
    assert main(["fit", str(tmp_path / "rec.npy"), *tiny, "--out", str(out)]) == 2
    assert "['x1'] are constant" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "rec.npy"), *tiny, "--read", "channels=x0,x2", "--out", str(out)]) == 0
    scored = xr.open_dataset(out / "metrics.nc", engine="h5netcdf")
    assert list(scored["channel"].values) == ["x0", "x2"]
    assert main(["evaluate", str(out), str(tmp_path / "rec.npy"), "--no-progress"]) == 0   # the fit's selection
    assert main(["inspect", str(tmp_path / "rec.npy"), "--dt", "0.01", "--read", "channels=[0, 2]",
                 "--out", str(tmp_path / "insp")]) == 0
    assert "2 channel(s)" in (tmp_path / "insp" / "inspect.md").read_text()
    ds = as_dataset(rec, dt=0.01)
    # names or positions, in the order given; a wrong one is named with what there is
    np.testing.assert_array_equal(select_channels(ds, ["x2", 0])["x"].values[0], rec[:, [2, 0]])
    with pytest.raises(ValueError, match=r"'V' is not a channel of the data; they are \['x0', 'x1', 'x2'\]"):
        select_channels(ds, "V")
    with pytest.raises(ValueError, match="position 3 is outside"):
        select_channels(ds, [3])
    with pytest.raises(ValueError, match="each kept channel once"):
        select_channels(ds, "x0,x0")
