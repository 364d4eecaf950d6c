"""Audit s53: array-file metadata, MAT cells and text-table shapes that load_array misread."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import scipy.io

from dsident.data.importers import from_neo, load_array

RNG = np.random.default_rng(53)
DATA = RNG.standard_normal((30, 3))                      # (time, channel)


def test_a_stored_sampling_rate_is_read_in_every_array_format(tmp_path):
    # `sampling_rate` was kept out of the data candidates but never read: dt silently 1.0
    np.savez(tmp_path / "a.npz", x=DATA, sampling_rate=500.0)
    scipy.io.savemat(tmp_path / "a.mat", {"x": DATA, "sampling_rate": 500.0})
    with h5py.File(tmp_path / "a.h5", "w") as fh:        # HDF5 datasets (not attributes) fs / channel_names
        fh["data"], fh["fs"], fh["channel_names"] = DATA, 500.0, np.array([b"Fz", b"Cz", b"Pz"])
    for name in ("a.npz", "a.mat", "a.h5"):
        ds = load_array(tmp_path / name)
        assert ds.attrs["dt"] == pytest.approx(1 / 500.0), name
        assert json.loads(ds.attrs["provenance"])["time_unit"] == "s"
        np.testing.assert_array_equal(ds["x"].values[0], DATA)
    assert list(load_array(tmp_path / "a.h5")["channel"].values) == ["Fz", "Cz", "Pz"]


def test_stored_channel_names_as_bytes_or_a_mat_cell_are_read_as_text(tmp_path):
    np.savez(tmp_path / "a.npz", x=DATA, channel_names=np.array([b"Fz", b"Cz", b"Pz"]))
    assert list(load_array(tmp_path / "a.npz")["channel"].values) == ["Fz", "Cz", "Pz"]     # was "b'Fz'"
    scipy.io.savemat(tmp_path / "a.mat", {"x": DATA, "fs": 100.0,
                                          "channel_names": np.array(["Fz", "Cz", "Pz"], dtype=object)})
    assert list(load_array(tmp_path / "a.mat")["channel"].values) == ["Fz", "Cz", "Pz"]


def test_a_mat_structs_own_rate_applies_to_its_field(tmp_path):
    scipy.io.savemat(tmp_path / "s.mat", {"s": {"data": DATA, "fs": 250.0}})
    assert load_array(tmp_path / "s.mat", key="s.data").attrs["dt"] == pytest.approx(0.004)


def test_a_stored_rate_that_is_not_one_positive_number_is_refused_by_name(tmp_path):
    np.savez(tmp_path / "zero.npz", x=DATA, fs=0.0)                    # was ZeroDivisionError
    with pytest.raises(ValueError, match=r"'zero.npz' stores `fs` = 0.0.*fs=\.\.\. or dt="):
        load_array(tmp_path / "zero.npz")
    assert load_array(tmp_path / "zero.npz", fs=10.0).attrs["dt"] == pytest.approx(0.1)   # the call's own rate wins
    np.savez(tmp_path / "two.npz", x=DATA, dt=np.array([0.01, 0.02]))   # was numpy's "only 0-dimensional arrays"
    with pytest.raises(ValueError, match=r"stores `dt` = .*shape \(2,\)"):
        load_array(tmp_path / "two.npz")
    np.savez(tmp_path / "one.npz", x=DATA, dt=np.array([0.01]))          # a one-element array is one number
    assert load_array(tmp_path / "one.npz").attrs["dt"] == pytest.approx(0.01)


def test_stored_sample_times_are_used_not_dropped(tmp_path):
    t = 5.0 + np.cumsum(RNG.uniform(0.5, 1.5, DATA.shape[0])) * 1e-3   # irregular, in s
    np.savez(tmp_path / "a.npz", x=DATA, time=t)
    scipy.io.savemat(tmp_path / "a.mat", {"x": DATA, "time": t})
    with h5py.File(tmp_path / "a.h5", "w") as fh:
        fh["data"], fh["time"] = DATA, t
    for name in ("a.npz", "a.mat", "a.h5"):
        ds = load_array(tmp_path / name)
        np.testing.assert_allclose(ds["sample_time"].values[0], t)
        assert ds.attrs["dt"] == pytest.approx(float(np.median(np.diff(t))))
    np.savez(tmp_path / "short.npz", x=DATA, time=t[:-1])
    with pytest.raises(ValueError, match=r"'short.npz' stores `time` of shape \(29,\).*\[30\] samples"):
        load_array(tmp_path / "short.npz")


def test_a_2d_mat_cell_array_of_trials_is_read_in_matlab_order(tmp_path):
    trials = [RNG.standard_normal((5 + i, 2)) for i in range(4)]
    cell = np.empty((2, 2), dtype=object)
    cell[0, 0], cell[1, 0], cell[0, 1], cell[1, 1] = trials              # c{1}, c{2}, c{3}, c{4}
    scipy.io.savemat(tmp_path / "c.mat", {"c": cell})
    ds = load_array(tmp_path / "c.mat")                                  # was TypeError "dtype object"
    assert ds.sizes["trial"] == 4
    for i, tr in enumerate(trials):
        np.testing.assert_array_equal(ds["x"].values[i, : len(tr)], tr)


def test_a_mat_v73_files_sampling_rate_and_channel_name_cell_are_read(tmp_path):
    path = tmp_path / "v73.mat"
    with h5py.File(path, "w", userblock_size=512) as fh:                # as MATLAB writes it: column-major
        refs = fh.create_group("#refs#")
        fh.create_dataset("x", data=DATA.T).attrs["MATLAB_class"] = np.bytes_("double")
        fh.create_dataset("sampling_rate", data=[[250.0]]).attrs["MATLAB_class"] = np.bytes_("double")
        cell = fh.create_dataset("channel_names", shape=(3, 1), dtype=h5py.special_dtype(ref=h5py.Reference))
        for i, n in enumerate(["Fz", "Cz", "Pz"]):
            item = refs.create_dataset(f"c{i}", data=np.array([[ord(c)] for c in n], dtype=np.uint16))
            item.attrs["MATLAB_class"] = np.bytes_("char")
            cell[i, 0] = item.ref
        cell.attrs["MATLAB_class"] = np.bytes_("cell")
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file".ljust(116, b" ") + b"\x00" * 8 + b"\x00\x02IM")
    ds = load_array(path)
    assert ds.attrs["dt"] == pytest.approx(0.004)
    assert list(ds["channel"].values) == ["Fz", "Cz", "Pz"]
    np.testing.assert_array_equal(ds["x"].values[0], DATA)


def _csv_rows(t, v, end=""):
    return "".join(f"{a:.3f},{b:.6f},{c:.6f}{end}\n" for a, (b, c) in zip(t, v))


def test_a_separator_at_the_end_of_every_line_adds_no_empty_channel(tmp_path):
    t, v = 0.01 * np.arange(12), DATA[:12, :2]
    path = tmp_path / "rec.csv"
    path.write_text("time,a,b,\n" + _csv_rows(t, v, end=","))
    ds = load_array(path)                                    # was a third channel '' of nothing but NaN
    assert list(ds["channel"].values) == ["a", "b"]
    np.testing.assert_allclose(ds["x"].values[0], np.round(v, 6))
    path.write_text(_csv_rows(t, v, end=","))                 # no header: the same
    assert load_array(path, time_column=0).sizes["channel"] == 2


def test_a_quoted_header_name_holding_the_separator_is_one_name(tmp_path):
    t, v = 0.01 * np.arange(12), DATA[:12, :2]
    path = tmp_path / "rec.csv"
    path.write_text('"time","Vm, mV","I, pA"\n' + _csv_rows(t, v))
    ds = load_array(path)                                    # was "`channel_names` has 3 entries; expected 2"
    assert list(ds["channel"].values) == ["Vm, mV", "I, pA"]
    np.testing.assert_allclose(ds["sample_time"].values[0], t)


def test_a_header_that_does_not_fit_the_rows_is_refused_by_file_and_counts(tmp_path):
    path = tmp_path / "rec.txt"                               # whitespace-separated: "Time (ms)" is two names
    path.write_text("Time (ms) Vm\n" + "".join(f"{i} {np.sin(i):.4f}\n" for i in range(12)))
    with pytest.raises(ValueError, match=r"'rec.txt': the header line names 3 column\(s\).*2 field\(s\)"):
        load_array(path)


def test_comment_lines_above_the_header_are_skipped(tmp_path):
    t, v = 0.01 * np.arange(12), DATA[:12, :2]
    path = tmp_path / "rec.csv"
    path.write_text("# rig 3, 2024-05-01\n# cell 7\ntime,a,b\n" + _csv_rows(t, v))
    ds = load_array(path)                                    # was "data row 1, column 1 holds 'time'"
    assert list(ds["channel"].values) == ["a", "b"]
    np.testing.assert_allclose(ds["x"].values[0], np.round(v, 6))
    np.testing.assert_allclose(ds["sample_time"].values[0], t)
    rows = _csv_rows(t, v).splitlines(keepends=True)
    rows[3] = "0.030,,1.5\n"                                 # an empty cell: the cell-by-cell route too
    path.write_text("# rig 3\ntime,a,b\n" + "".join(rows))
    ds = load_array(path)
    assert ds.sizes["time"] == 12 and np.isnan(ds["x"].values[0, 3, 0]) and ds["x"].values[0, 3, 1] == 1.5


def _nwb_with_trials(starts, duration, rate=1000.0, t0=0.1):
    pynwb = pytest.importorskip("pynwb")
    import datetime

    nwb = pynwb.NWBFile("audit", "audit-s53", datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc))
    nwb.add_acquisition(pynwb.TimeSeries(name="v", data=np.arange(20000.0), unit="mV", rate=rate, starting_time=t0))
    for a in starts:
        nwb.add_trial(start_time=a, stop_time=a + duration)
    nwb.add_unit(spike_times=[0.5, 1.0])
    nwb.add_unit(spike_times=[0.7])
    return nwb


def test_nwb_trials_of_one_duration_get_one_length_and_start_at_their_sample():
    from dsident.data.importers import from_nwb

    # trial times computed in floating point (0.1 + 0.317 k) and sample times 0.1 + i / 1000 meet
    # exactly on samples, but differ in their last bits: trials came out 250 or 251 samples long,
    # their first sample one late
    k = np.arange(30)
    nwb = _nwb_with_trials(0.1 + 0.3 * k + 0.017 * k, 0.25)
    ds = from_nwb(nwb, series="v")
    assert set(ds["length"].values.tolist()) == {250}
    np.testing.assert_array_equal(ds["x"].values[:, 0, 0], 317 * k)          # data = sample index
    np.testing.assert_array_equal(ds["x"].values[:, 249, 0], 317 * k + 249)


def test_nwb_empty_series_and_unit_ids_spelt_as_channel_names():
    from dsident.data.importers import from_nwb

    nwb = _nwb_with_trials([0.2], 1.0)
    with pytest.raises(ValueError, match=r"`series` is empty.*\['v'\]"):      # was numpy's "need at least one array"
        from_nwb(nwb, series=[])
    by_str = from_nwb(nwb, bin_size=0.1, units=["1"], trials=False)          # the channel name of unit 1
    by_int = from_nwb(nwb, bin_size=0.1, units=[1], trials=False)
    assert list(by_str["channel"].values) == ["1"]
    np.testing.assert_array_equal(by_str["x"].values, by_int["x"].values)
    assert np.nansum(by_int["x"].values) == 1                                 # unit 1 has one spike
    assert list(from_nwb(nwb, bin_size=0.1, units=1, trials=False)["channel"].values) == ["1"]   # --read units=1
    with pytest.raises(ValueError, match=r"`units` \['7'\] are not unit ids"):
        from_nwb(nwb, bin_size=0.1, units=["7"])


def test_neo_signal_index_that_is_not_an_integer_is_refused():
    neo = pytest.importorskip("neo")
    import quantities as pq

    seg = neo.Segment()
    for name in ("a", "b"):
        seg.analogsignals.append(neo.AnalogSignal(np.zeros((20, 2)), units="mV", sampling_rate=1 * pq.kHz, name=name))
    with pytest.raises(TypeError, match=r"`signal` must be .*got float 1.7.*\['a', 'b'\]"):   # was read as signal 1
        from_neo(seg, signal=1.7)
    assert from_neo(seg, signal=1).sizes["channel"] == 2


@pytest.mark.parametrize("last", [0.3, 0.7, 2.3, 4.1])
def test_nwb_spikes_the_last_spike_is_counted_when_its_time_over_the_bin_rounds_down(last):
    pynwb = pytest.importorskip("pynwb")
    import datetime

    from dsident.data.importers import from_nwb

    assert np.floor(last / 0.1) < round(last / 0.1)        # the case: 0.7 / 0.1 = 6.999...
    nwb = pynwb.NWBFile("audit", "audit-s53", datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc))
    nwb.add_unit(spike_times=[0.05, last])
    ds = from_nwb(nwb, bin_size=0.1)                         # the span ended at the last spike, dropping it
    assert np.nansum(ds["x"].values) == 2
    assert ds["x"].values[0, int(round(last / 0.1)), 0] == 1


@pytest.mark.parametrize("ext, what", [(".npy", ".npy"), (".npz", ".npz"), (".mat", "MAT"), (".h5", "HDF5")])
def test_a_file_its_reader_cannot_open_is_named_not_called_a_pickle(tmp_path, ext, what):
    from dsident.data.importers import load_any

    path = tmp_path / f"rec{ext}"
    path.write_bytes(b"not the format at all \x00\x01" * 8)
    # was: .npy "stores a pickled (object) array", .npz numpy's "load it unsafely using allow_pickle=",
    # .mat scipy's "Unknown mat file type" and .h5 h5py's "file signature not found", none naming the file
    with pytest.raises(ValueError, match=rf"'.*rec{ext}' is not a readable {what} file") as err:
        load_any(path, fs=100.0)
    assert "allow_pickle" not in str(err.value) and "pickled" not in str(err.value)


def test_a_truncated_or_empty_array_file_is_named(tmp_path):
    np.save(tmp_path / "a.npy", DATA)
    np.savez(tmp_path / "b.npz", x=DATA)
    for name in ("a.npy", "b.npz"):
        raw = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(raw[: len(raw) // 2])
        with pytest.raises(ValueError, match=rf"'.*{name}' is not a readable"):
            load_array(tmp_path / name)
    (tmp_path / "c.npy").write_bytes(b"")                    # was EOFError "No data left in file"
    with pytest.raises(ValueError, match=r"'.*c.npy' is not a readable .npy file \(EOFError: the file is empty\)"):
        load_array(tmp_path / "c.npy")


def test_a_pickle_under_an_array_name_is_still_refused_as_a_pickle(tmp_path):
    import pickle

    (tmp_path / "p.npy").write_bytes(pickle.dumps({"x": [1, 2]}))
    with pytest.raises(ValueError, match="is a pickle, not a .npy file"):
        load_array(tmp_path / "p.npy")


def test_an_nwb_or_mne_file_that_cannot_be_read_is_named(tmp_path):
    from dsident.data.importers import load_any

    pytest.importorskip("pynwb")
    (tmp_path / "rec.nwb").write_bytes(b"garbage" * 20)
    with pytest.raises(ValueError, match=r"'.*rec.nwb' is not a readable NWB file"):   # was h5py's OSError
        load_any(tmp_path / "rec.nwb", series="v")
    with h5py.File(tmp_path / "plain.nwb", "w") as fh:            # HDF5, but no NWB file: was pynwb's TypeError
        fh["x"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"'.*plain.nwb' is not a readable NWB file"):
        load_any(tmp_path / "plain.nwb", series="v")
    pytest.importorskip("mne")
    (tmp_path / "rec.edf").write_bytes(b"garbage" * 40)
    with pytest.raises(ValueError, match=r"MNE cannot read '.*rec.edf'"):                # was "Bad EDF file provided."
        load_any(tmp_path / "rec.edf")


def test_a_mat_struct_array_field_is_read_as_one_trial_per_element(tmp_path):
    trials = [RNG.standard_normal((20 + i, 2)) for i in range(3)]
    sa = np.empty((1, 3), dtype=[("data", object), ("cond", object)])
    for i, tr in enumerate(trials):
        sa[0, i]["data"], sa[0, i]["cond"] = tr, i
    scipy.io.savemat(tmp_path / "sa.mat", {"trials": sa, "fs": 100.0})
    ds = load_array(tmp_path / "sa.mat", key="trials.data")    # was "'data' is not in trials; available: []"
    assert ds["length"].values.tolist() == [20, 21, 22] and ds.attrs["dt"] == pytest.approx(0.01)
    for i, tr in enumerate(trials):
        np.testing.assert_array_equal(ds["x"].values[i, : len(tr)], tr)
    with pytest.raises(TypeError, match=r"struct array of 3 elements with the fields \['cond', 'data'\]"):
        load_array(tmp_path / "sa.mat", key="trials")               # was "'trials{1}' has dtype object"
    with pytest.raises(ValueError, match=r"struct array .*key='trials.<field>'"):
        load_array(tmp_path / "sa.mat", key="trials.nope")


@pytest.mark.parametrize("glitch", ["repeat", "backward"])
def test_a_time_column_with_a_repeated_or_backward_timestamp_is_refused_not_fitted_as_data(tmp_path, glitch):
    t = np.round(0.01 * np.arange(40), 3)
    t[20] = t[19] if glitch == "repeat" else t[18]
    path = tmp_path / "rec.csv"
    path.write_text("time,v\n" + "".join(f"{a},{b:.4f}\n" for a, b in zip(t, np.sin(np.arange(40)))))
    for kwargs in ({}, {"fs": 100.0}):      # with fs the column was silently a data channel named 'time'
        with pytest.raises(ValueError, match=r"'time' of 'rec.csv' holds the sample times but does not increase on 1 "
                                             r"data row\(s\) \(\[21\]"):
            load_array(path, **kwargs)
    assert list(load_array(path, time_column=False, fs=100.0)["channel"].values) == ["time", "v"]


def test_neo_spike_trains_are_matched_to_channels_by_name_in_every_segment():
    neo = pytest.importorskip("neo")
    import quantities as pq

    spikes = {"u1": [0.1], "u2": [0.1, 0.2, 0.3]}
    block = neo.Block()
    for order in (["u1", "u2"], ["u2", "u1"]):                # the second segment lists its units the other way
        seg = neo.Segment()
        for n in order:
            seg.spiketrains.append(neo.SpikeTrain(spikes[n] * pq.s, t_stop=1 * pq.s, name=n))
        block.segments.append(seg)
    ds = from_neo(block, bin_size=0.5)                          # was u2's counts under 'u1' in trial 1
    assert list(ds["channel"].values) == ["u1", "u2"]
    np.testing.assert_array_equal(np.nansum(ds["x"].values, axis=1), [[1, 3], [1, 3]])
    block.segments[1].spiketrains[0].name = "u3"
    with pytest.raises(ValueError, match=r"segment 1 holds the spike trains \['u3', 'u1'\]"):
        from_neo(block, bin_size=0.5)


def test_neo_analog_channels_are_matched_by_name_in_every_segment():
    neo = pytest.importorskip("neo")
    import quantities as pq

    block = neo.Block()
    for names in (["Fz", "Cz"], ["Cz", "Fz"]):
        seg = neo.Segment()
        values = np.column_stack([np.full(10, 1.0 if n == "Fz" else 2.0) for n in names])   # Fz = 1, Cz = 2
        seg.analogsignals.append(neo.AnalogSignal(values, units="mV", sampling_rate=1 * pq.kHz,
                                                  array_annotations={"channel_names": np.array(names)}))
        block.segments.append(seg)
    ds = from_neo(block)                                        # was Cz's samples under 'Fz' in trial 1
    assert list(ds["channel"].values) == ["Fz", "Cz"]
    np.testing.assert_array_equal(ds["x"].values[:, 0, :], [[1, 2], [1, 2]])
    block.segments[1].analogsignals[0].array_annotations["channel_names"] = np.array(["Cz", "Pz"])
    with pytest.raises(ValueError, match=r"segment 1's signal has the channels \['Cz', 'Pz'\]"):
        from_neo(block)


def test_hdf5_metadata_beside_a_dataset_in_a_group_is_read(tmp_path):
    t = 2.0 + 0.004 * np.arange(DATA.shape[0])
    with h5py.File(tmp_path / "a.h5", "w") as fh:
        fh["ecog/data"], fh["ecog/time"] = DATA, t               # the times were dropped (dt silently 1.0)
        fh["ecog/channel_names"] = np.array([b"e1", b"e2", b"e3"])
        fh["trials/fs"] = 250.0                                  # was read as a trial of shape ()
        fh["trials/t1"], fh["trials/t2"] = DATA[:10], DATA[:12]
    ds = load_array(tmp_path / "a.h5", key="ecog/data")
    np.testing.assert_allclose(ds["sample_time"].values[0], t)
    assert ds.attrs["dt"] == pytest.approx(0.004) and list(ds["channel"].values) == ["e1", "e2", "e3"]
    trials = load_array(tmp_path / "a.h5", key="trials")
    assert trials["length"].values.tolist() == [10, 12] and trials.attrs["dt"] == pytest.approx(0.004)


def test_mne_picks_that_select_nothing_name_the_channels_and_the_bad_ones():
    mne = pytest.importorskip("mne")
    from dsident.data.importers import from_mne

    raw = mne.io.RawArray(RNG.standard_normal((3, 200)) * 1e-5,
                          mne.create_info(["Fz", "Cz", "EOG"], 100.0, ["eeg", "eeg", "eog"]), verbose="error")
    raw.info["bads"] = ["Fz", "Cz"]
    # was MNE's "picks ('data') could not be interpreted as channel names ...", which hides the cause
    with pytest.raises(ValueError, match=r"`picks`=None selects no channel.*'Fz': 'eeg'.*marked bad \['Fz', 'Cz'\]"):
        from_mne(raw)
    ds = from_mne(raw, picks=["Fz", "Cz"])                      # picked by name: the bad channels are read
    np.testing.assert_allclose(ds["x"].values[0], raw.get_data(picks=["Fz", "Cz"]).T)


def test_a_time_column_for_a_file_that_is_no_text_table_is_refused(tmp_path):
    np.savez(tmp_path / "a.npz", x=DATA, t=np.arange(DATA.shape[0]) * 0.01)
    with pytest.raises(ValueError, match=r"`time_column`='t' applies to text tables.*'a.npz' is a .npz file"):
        load_array(tmp_path / "a.npz", key="x", time_column="t")          # was dropped: dt silently 1.0
    assert load_array(tmp_path / "a.npz", key="x", time_column=False).attrs["dt"] == 1.0


def test_nwb_units_with_series_is_refused_not_dropped():
    from dsident.data.importers import from_nwb

    nwb = _nwb_with_trials([0.2], 1.0)
    with pytest.raises(ValueError, match=r"`units`=\[1\] picks units of the Units table"):   # was ignored
        from_nwb(nwb, series="v", units=[1])


def test_neo_analog_options_with_bin_size_are_refused_not_dropped():
    neo = pytest.importorskip("neo")
    import quantities as pq

    seg = neo.Segment()
    seg.spiketrains.append(neo.SpikeTrain([0.1, 0.2] * pq.s, t_stop=1 * pq.s, name="u1"))
    for kwargs in ({"units": "uV"}, {"signal": "lfp"}):          # were ignored
        with pytest.raises(ValueError, match="apply to analog signals"):
            from_neo(seg, bin_size=0.5, **kwargs)
    assert np.nansum(from_neo(seg, bin_size=0.5)["x"].values) == 2
