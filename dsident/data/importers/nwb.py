"""Neurodata Without Borders files: :func:`from_nwb` (optional extra ``nwb`` = pynwb).

Two things can be read from an NWB file:

- **continuous series** (``TimeSeries`` / ``ElectricalSeries`` in ``acquisition`` or a
  processing module), in physical units: ``data * conversion (* channel_conversion) + offset``
  (pynwb's ``get_data_in_units``), never the raw stored integers;
- **spikes** of the ``Units`` table, binned with :func:`dsident.data.bin_spikes` (half-open
  bins; bins outside a unit's ``obs_intervals`` are NaN).

With a ``trials`` table, each trial ``[start_time, stop_time)`` becomes one trial of the
dataset (ragged trials are NaN-padded) and the table's other one-value-per-trial columns become
``(trial,)`` variables (e.g. a condition label).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from ..container import as_dataset
from ..spikes import _EDGE_TOLERANCE, bin_spikes
from ._common import check_same_units, provenance, require, units_attr

__all__ = ["from_nwb"]


def from_nwb(source: str | os.PathLike | Any, *, series: str | Sequence[str] | None = None,
             bin_size: float | None = None, trials: bool = True, units: Sequence[Any] | None = None,
             name: str | None = None) -> xr.Dataset:
    """Read continuous series or binned spikes from an NWB file.

    Parameters
    ----------
    source : str, path-like or ``pynwb.NWBFile``
        The file (opened read-only and closed again), or an NWBFile already in memory.
    series : str or sequence of str, optional
        Names of ``TimeSeries`` to read (searched in ``acquisition`` and in every processing
        module, also inside containers such as ``LFP``). Several series are stacked as channels
        and must share sampling and units. Give either ``series`` or ``bin_size``.
    bin_size : float, optional
        Read the ``Units`` table and bin its spike times with this bin width (seconds).
    trials : bool, default True
        Cut the data into the file's trials (``nwb.trials``) when it has a trials table;
        otherwise (or ``False``) the whole recording is one trial.
    units : sequence, optional
        Spikes only: the unit ids to read (default all), in the output's channel order.
    name : str, optional
        ``attrs["name"]``; default the file's identifier.

    Returns
    -------
    xarray.Dataset
        Canonical dataset. Series: ``x`` in the series' physical unit (``attrs["units"]``),
        ``dt = 1 / rate`` (irregular timestamps are kept as ``sample_time``), channels named by
        electrode id for ``ElectricalSeries``. Spikes: counts per bin (see
        :func:`~dsident.data.bin_spikes`), channels named by unit id, unit-table columns of
        one string/number per unit as ``(channel,)`` variables. ``attrs["provenance"]`` records
        the file, identifier, session start and what was read.

    Raises
    ------
    ValueError
        A series name not in the file (the message lists the series that exist); neither or
        both of ``series`` and ``bin_size``; stacked series with different rates, lengths or
        units (unit mismatch); no ``Units`` table; unknown unit ids.
    ImportError
        pynwb is not installed (``pip install 'dsident[nwb]'``).
    """
    pynwb = require("pynwb", "from_nwb")
    if (series is None) == (bin_size is None):
        raise ValueError("give exactly one of `series` (continuous TimeSeries names) or `bin_size` (bin the Units "
                         f"spike times); got series={series!r}, bin_size={bin_size!r}." + _what_is_there(pynwb, source))
    if series is not None and units is not None:
        # `units` picks spike units of the Units table; with `series` it would be dropped without a word
        raise ValueError(f"`units`={units!r} picks units of the Units table, read with `bin_size`; it does not apply to "
                         f"series={series!r}. Leave `units` out, or bin the spikes with bin_size=... instead.")
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"no NWB file at {str(path)!r}.")
        io = None
        try:
            io = pynwb.NWBHDF5IO(str(path), "r")
            nwb = io.read()
        except (OSError, TypeError, ValueError, KeyError) as err:      # not HDF5, or HDF5 but no NWB file
            if io is not None:
                io.close()
            raise ValueError(f"{str(path)!r} is not a readable NWB file ({type(err).__name__}: {err}); check that it "
                             "is the file you meant and that it was written completely.") from None
        # everything is read inside the context: pynwb datasets are lazy h5py views
        with io:
            return _read(nwb, path, series, bin_size, trials, units, name)
    if isinstance(source, pynwb.NWBFile):
        return _read(source, None, series, bin_size, trials, units, name)
    raise TypeError(f"`source` must be a path to an .nwb file or a pynwb.NWBFile; got {type(source).__name__}.")


def _what_is_there(pynwb: Any, source: Any) -> str:
    """The series a file holds and whether it has spikes, for the message that asks to choose
    (and the command line's spelling); empty when the file cannot be opened."""
    try:
        if isinstance(source, pynwb.NWBFile):
            names, has_units = _series_names(source), source.units is not None
        else:
            with pynwb.NWBHDF5IO(str(source), "r") as io:
                nwb = io.read()
                names, has_units = _series_names(nwb), nwb.units is not None
    except Exception:       # the message stands without the listing
        return ""
    return (f" The file holds the series {names}" + (" and a Units table of spike times" if has_units else "")
            + " (from the command line: --read series=NAME, or --dt BIN to bin the spikes).")


def _read(nwb: Any, path: Path | None, series: Any, bin_size: float | None, trials: bool,
          units: Sequence[Any] | None, name: str | None) -> xr.Dataset:
    table = _trials_table(nwb) if trials else None
    name = name or str(nwb.identifier)
    base = dict(identifier=str(nwb.identifier), session_start_time=str(nwb.session_start_time))
    if bin_size is not None:
        return _read_spikes(nwb, path, bin_size, table, units, name, base)
    return _read_series(nwb, path, [series] if isinstance(series, str) else list(series), table, name, base)


def _trials_table(nwb: Any) -> dict[str, np.ndarray] | None:
    tab = getattr(nwb, "trials", None)
    if tab is None or len(tab) == 0:
        return None
    out: dict[str, np.ndarray] = {}
    for col in tab.colnames:
        column = tab[col]
        if hasattr(column, "target"):          # a ragged column: table[col] is the index, skip it
            continue
        values = _plain_column(column.data[:])
        if values is not None:
            out[col] = values
    return out


def _plain_column(data: Any) -> np.ndarray | None:
    """A 1-D column of numbers or strings; None for anything else (references, nested values)."""
    values = np.asarray(data)
    if values.ndim != 1:
        return None
    if values.dtype.kind in "biuf":
        return values
    if values.dtype.kind in "SU" or all(isinstance(v, (str, bytes)) for v in values):
        return np.array([v.decode() if isinstance(v, bytes) else str(v) for v in values], dtype=str)
    return None


# --------------------------------------------------------------------------- spikes


def _read_spikes(nwb: Any, path: Path | None, bin_size: float, table: dict | None, units: Any, name: str,
                 base: dict) -> xr.Dataset:
    tab = getattr(nwb, "units", None)
    if tab is None or len(tab) == 0:
        raise ValueError(f"{_where(path)} has no Units table; read continuous data with `series=` instead "
                         f"(available series: {_series_names(nwb)}).")
    ids = np.asarray(tab.id.data[:])
    # one bulk read of the flat spike times and their end offsets (one read per unit is slow)
    flat = np.asarray(tab.spike_times.data[:], dtype=np.float64)
    ends = np.asarray(tab.spike_times_index.data[:], dtype=np.int64)
    spikes = np.split(flat, ends[:-1])
    intervals: list[Any] = [None] * len(ids)
    if "obs_intervals" in tab.colnames:
        iv_flat = np.asarray(tab.obs_intervals.data[:], dtype=np.float64).reshape(-1, 2)
        iv_ends = np.asarray(tab.obs_intervals_index.data[:], dtype=np.int64)
        intervals = np.split(iv_flat, iv_ends[:-1])
    pick = np.arange(len(ids))
    if units is not None:
        if isinstance(units, (str, bytes)) or not hasattr(units, "__iter__"):
            units = [units]
        # an id as the output's channel name spells it ("3", from --read units='["3"]') is that id
        lookup = {str(v): i for i, v in enumerate(ids.tolist())}
        lookup.update({v: i for i, v in enumerate(ids.tolist())})
        missing = [u for u in units if u not in lookup and str(u) not in lookup]
        if missing:
            raise ValueError(f"`units` {missing} are not unit ids of {_where(path)}; ids: {ids.tolist()}.")
        pick = np.array([lookup[u] if u in lookup else lookup[str(u)] for u in units], dtype=np.int64)
    spikes = [spikes[i] for i in pick]
    intervals = [intervals[i] for i in pick]
    t_start, t_stop = _recording_span(spikes, intervals, table, bin_size)
    window = None if table is None else table
    prov = provenance("dsident.data.from_nwb", path, read="Units", time_unit="s", **base)
    ds = bin_spikes(spikes, bin_size, t_start, t_stop, trials=window, unit_names=[str(ids[i]) for i in pick],
                    obs_intervals=intervals, name=name, provenance=prov)
    for col in tab.colnames:
        if col in ("spike_times", "obs_intervals") or hasattr(tab[col], "target"):
            continue
        values = _plain_column(tab[col].data[:])
        if values is not None and len(values) == len(ids):
            ds[f"unit_{col}"] = ("channel", values[pick])
    return ds


def _recording_span(spikes: list[np.ndarray], intervals: list[Any], table: dict | None,
                    bin_size: float) -> tuple[float, float]:
    """The recorded span: trials and observation intervals, extended to hold every spike's bin.

    NWB has no single "recording stop"; ending the span at the last spike would drop that spike
    (bins are half-open), so the span runs to the end of the bin holding the last spike.
    """
    lo, hi = [0.0], []                         # NWB times are relative to the session start
    if table is not None:
        lo.append(float(np.min(table["start_time"])))
        hi.append(float(np.max(table["stop_time"])))
    for iv in intervals:
        if iv is not None and np.size(iv):
            lo.append(float(np.min(iv)))
            hi.append(float(np.max(iv)))
    times = [s for s in spikes if s.size]
    if times:
        first, last = min(float(s.min()) for s in times), max(float(s.max()) for s in times)
        lo.append(first)
        start = min(lo)
        # the bin holding the last spike, as bin_spikes finds it (a spike at 0.7 s is in bin 7 of 0.1 s
        # bins though 0.7 / 0.1 = 6.999...): without its tolerance the span ended at that spike, dropping it
        hi.append(start + (np.floor((last - start) / bin_size + _EDGE_TOLERANCE) + 1) * bin_size)
    start = min(lo)
    if not hi:
        raise ValueError("the Units table holds no spike times and the file has no trials; nothing to bin.")
    return start, max(max(hi), start + bin_size)


# --------------------------------------------------------------------------- series


def _read_series(nwb: Any, path: Path | None, names: list[str], table: dict | None, name: str,
                 base: dict) -> xr.Dataset:
    available = _all_series(nwb)
    if not names:
        raise ValueError(f"`series` is empty; name at least one of the series in {_where(path)}: {sorted(available)}.")
    missing = [n for n in names if n not in available]
    if missing:
        raise ValueError(f"series {missing} not found in {_where(path)}; it holds the series {sorted(available)}.")
    blocks, channel_names, units, times, rates = [], [], [], [], []
    for n in names:
        ts = available[n]
        values = np.asarray(ts.get_data_in_units(), dtype=np.float64)
        values = values[:, None] if values.ndim == 1 else values.reshape(values.shape[0], -1)
        blocks.append(values)
        channel_names += _channel_names(ts, n, values.shape[1])
        units += [str(ts.unit)] * values.shape[1]
        times.append(np.asarray(ts.get_timestamps(), dtype=np.float64))
        rates.append(None if ts.rate is None else float(ts.rate))
    check_same_units(channel_names, units, "series",
                     "read them in separate calls (or rescale them to one unit first).")
    lengths = {b.shape[0] for b in blocks}
    if len(lengths) > 1 or len(set(rates)) > 1 or not all(np.array_equal(times[0], t) for t in times):
        raise ValueError(f"series {names} do not share one time base (rates {rates}, lengths "
                         f"{[b.shape[0] for b in blocks]}); read them in separate calls.")
    values, t = np.concatenate(blocks, axis=1), times[0]
    rate = rates[0]
    prov = provenance("dsident.data.from_nwb", path, read="series", time_unit="s", series=names,
                      rate=rate, starting_time=float(t[0]) if t.size else None, **base)
    if table is None:
        trials_x, trials_t = [values], [t]
    else:
        trials_x, trials_t = _cut(values, t, table, rate)
    time_arg = None if rate is not None else [tt - tt[0] for tt in trials_t]
    ds = as_dataset(trials_x, dt=None if rate is None else 1.0 / rate, channel_names=channel_names, name=name,
                    provenance=prov, time=time_arg, min_length=1)
    ds["trial_start"] = ("trial", np.array([tt[0] for tt in trials_t]))
    if table is not None:
        for key, col in table.items():
            if key not in ("start_time", "stop_time"):
                ds[key if key not in ds.variables else f"trial_{key}"] = ("trial", col)
    ds.attrs["units"] = units_attr(units)
    return ds


def _cut(values: np.ndarray, t: np.ndarray, table: dict, rate: float | None) -> tuple[list, list]:
    xs, ts = [], []
    # a trial time and a sample time that are the same instant may differ in the last bits (the
    # timestamps are starting_time + k / rate): compare them to a millionth of a sampling step, or
    # trials of one duration come out one sample longer or shorter and shifted by a sample
    step = 1.0 / rate if rate else (float(np.median(np.diff(t))) if t.size > 1 else 0.0)
    tol = 1e-6 * step
    for i, (a, b) in enumerate(zip(table["start_time"], table["stop_time"])):
        lo, hi = np.searchsorted(t, a - tol, side="left"), np.searchsorted(t, b - tol, side="left")   # [start, stop)
        if hi - lo < 1:
            raise ValueError(f"trial {i} [{a!r}, {b!r}) holds no sample of the series (samples span "
                             f"[{t[0]!r}, {t[-1]!r}]).")
        xs.append(values[lo:hi])
        ts.append(t[lo:hi])
    return xs, ts


def _all_series(nwb: Any) -> dict[str, Any]:
    """Every TimeSeries in acquisition and processing modules, by name (nested containers too)."""
    from pynwb import TimeSeries

    found: dict[str, Any] = {}

    def visit(obj: Any) -> None:
        if isinstance(obj, TimeSeries):
            found.setdefault(obj.name, obj)
            return
        children = getattr(obj, "children", None) or []
        for child in children:
            visit(child)

    for obj in nwb.acquisition.values():
        visit(obj)
    for module in nwb.processing.values():
        for obj in module.data_interfaces.values():
            visit(obj)
    return found


def _series_names(nwb: Any) -> list[str]:
    return sorted(_all_series(nwb))


def _channel_names(ts: Any, series_name: str, n: int) -> list[str]:
    electrodes = getattr(ts, "electrodes", None)
    if electrodes is not None:
        try:
            ids = np.asarray(electrodes.table.id.data[:])[np.asarray(electrodes.data[:])]
            if len(ids) == n:
                return [f"{series_name}_e{int(i)}" for i in ids]
        except (AttributeError, IndexError, TypeError):
            pass
    return [series_name] if n == 1 else [f"{series_name}_{i}" for i in range(n)]


def _where(path: Path | None) -> str:
    return "the NWB file" if path is None else repr(str(path))
