"""Electrophysiology formats through Neo: :func:`from_neo` (optional extra ``neo``).

One Neo ``Segment`` is one trial. ``AnalogSignal``s are rescaled to one unit (the first
signal's, or ``units=``) before their magnitudes are read, because every Neo value carries a
``quantities`` unit; ``SpikeTrain``s are binned with :func:`dsident.data.bin_spikes` between
each train's ``t_start`` and ``t_stop``. Neo opens 50+ vendor formats (Blackrock, Plexon,
Spike2, Axon, Neuralynx, Intan, OpenEphys, NIX, ...) through ``neo.io.get_io``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from ..container import as_dataset
from ..spikes import bin_spikes
from ._common import provenance, require

__all__ = ["from_neo"]


def from_neo(source: Any, *, bin_size: float | None = None, signal: int | str = 0, units: str | None = None,
             name: str | None = None) -> xr.Dataset:
    """Convert a Neo ``Block`` (or ``Segment``, list of segments, or file) to the canonical dataset.

    Parameters
    ----------
    source : neo.Block, neo.Segment, sequence of neo.Segment, str or path-like
        In-memory Neo objects, or a file read with ``neo.io.get_io(path).read_block()``.
    bin_size : float, optional
        Seconds. Given: bin the segments' spike trains (counts, one channel per train);
        omitted: read analog signals.
    signal : int or str, default 0
        Analog mode: which ``AnalogSignal`` of each segment (index, or its ``name``).
    units : str, optional
        Analog mode: unit to rescale to (``"uV"``, ``"mV"``...); default the first segment's.
    name : str, optional
        ``attrs["name"]``; default the block's name or ``"neo"``.

    Returns
    -------
    xarray.Dataset
        Canonical dataset, one trial per segment. Analog: ``x`` in ``attrs["units"]``,
        ``dt = 1 / sampling_rate`` (s), channel names from the signal's ``channel_names``
        array annotation when present. Spikes: counts per bin (NaN outside each segment's
        ``[t_start, t_stop]``), channels named after the trains. ``trial_start(trial)`` holds
        each segment's start time (s).

    Raises
    ------
    ValueError
        A unit that the signals cannot be converted to (unit mismatch), segments with
        different sampling rates or channel counts, a segment without the requested signal or
        without spike trains, a missing signal name (the message lists those present).
    ImportError
        neo is not installed (``pip install 'dsident[neo]'``).
    """
    neo = require("neo", "from_neo")
    if bin_size is not None and (units is not None or (signal != 0 and not isinstance(signal, bool))):
        # `units` and `signal` pick and rescale an AnalogSignal; binned spikes would drop them without a word
        raise ValueError(f"`units`={units!r} / `signal`={signal!r} apply to analog signals, read without `bin_size`; "
                         f"with bin_size={bin_size!r} the spike trains are binned into counts. Leave them out, or "
                         "omit `bin_size` to read the analog signal.")
    path = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"no file at {str(path)!r}.")
        try:
            reader = neo.io.get_io(str(path))
        except (IOError, OSError, ValueError) as err:
            raise ValueError(f"neo cannot open {str(path)!r}: {err}") from None
        if type(reader).__name__ == "PickleIO":
            raise ValueError(f"{str(path)!r} is a pickle; dsident never unpickles files (they can run code).")
        source = reader.read_block()
    segments, label = _segments(neo, source)
    label = name or label
    if bin_size is not None:
        return _spikes(segments, bin_size, label, path)
    return _analog(segments, signal, units, label, path)


def _segments(neo: Any, source: Any) -> tuple[list[Any], str]:
    if isinstance(source, neo.Block):
        segments, label = list(source.segments), source.name or "neo"
    elif isinstance(source, neo.Segment):
        segments, label = [source], source.name or "neo"
    elif isinstance(source, (list, tuple)) and all(isinstance(s, neo.Segment) for s in source):
        segments, label = list(source), "neo"
    else:
        raise TypeError("`source` must be a neo.Block, a neo.Segment, a list of segments or a path; got "
                        f"{type(source).__name__}.")
    if not segments:
        raise ValueError("`source` holds no segments; expected at least one (one segment = one trial).")
    return segments, str(label)


def _analog(segments: list[Any], signal: int | str, units: str | None, label: str, path: Path | None) -> xr.Dataset:
    trials, rates, starts, names = [], [], [], None
    units_used = units
    for i, seg in enumerate(segments):
        sig = _pick_signal(seg, signal, i)
        # every segment is expressed in the first segment's unit unless `units` says otherwise
        target = units_used if units_used is not None else str(sig.units.dimensionality)
        try:
            values = sig.rescale(target).magnitude
        except ValueError as err:
            raise ValueError(f"unit mismatch: segment {i}'s signal is in {sig.units.dimensionality} and cannot be "
                             f"expressed in {target!r} ({err}).") from None
        units_used = target
        values = np.asarray(values, dtype=np.float64).reshape(values.shape[0], -1)
        ann = getattr(sig, "array_annotations", {}) or {}
        own = [str(c) for c in ann["channel_names"]] if "channel_names" in ann else None
        if own is not None and len(own) != values.shape[1]:
            own = None
        if i == 0:
            names = own if own is not None and len(set(own)) == len(own) else None
        elif names is not None and own is not None and own != names:
            # a channel is one electrode in every trial: match the columns by name, not by their order
            if sorted(own) != sorted(names):
                raise ValueError(f"segment {i}'s signal has the channels {own}, segment 0's {names}; one channel per "
                                 "electrode needs the same channels in every segment.")
            values = values[:, [own.index(n) for n in names]]
        trials.append(values)
        rates.append(float(sig.sampling_rate.rescale("Hz").magnitude))
        starts.append(float(sig.t_start.rescale("s").magnitude))
    if len(set(rates)) > 1:
        raise ValueError(f"segments have different sampling rates {sorted(set(rates))} Hz; resample them first or "
                         "read the segments separately.")
    prov = provenance("dsident.data.from_neo", path, read="analog", time_unit="s", signal=signal, units=units_used,
                      sampling_rate_hz=rates[0], n_segments=len(segments))
    ds = as_dataset(trials, dt=1.0 / rates[0], channel_names=names, name=label, provenance=prov, min_length=1)
    ds["trial_start"] = ("trial", np.array(starts))
    ds.attrs["units"] = units_used
    return ds


def _pick_signal(seg: Any, signal: int | str, i: int) -> Any:
    sigs = list(seg.analogsignals)
    if not sigs:
        raise ValueError(f"segment {i} has no AnalogSignal; to read spike trains pass `bin_size`.")
    if isinstance(signal, str):
        by_name = {s.name: s for s in sigs}
        if signal not in by_name:
            raise ValueError(f"segment {i} has no AnalogSignal named {signal!r}; it has {[s.name for s in sigs]}.")
        return by_name[signal]
    if isinstance(signal, (bool, np.bool_)) or not isinstance(signal, (int, np.integer)):
        raise TypeError(f"`signal` must be an AnalogSignal index (int) or name (str); got {type(signal).__name__} "
                        f"{signal!r}. Segment {i} has {len(sigs)} AnalogSignal(s) named {[s.name for s in sigs]}.")
    if not -len(sigs) <= int(signal) < len(sigs):
        raise ValueError(f"`signal`={signal!r} is out of range: segment {i} has {len(sigs)} AnalogSignal(s).")
    return sigs[int(signal)]


def _spikes(segments: list[Any], bin_size: float, label: str, path: Path | None) -> xr.Dataset:
    n_units = {len(seg.spiketrains) for seg in segments}
    if n_units == {0}:
        raise ValueError("no segment has spike trains; to read analog signals omit `bin_size`.")
    if len(n_units) > 1:
        raise ValueError(f"segments hold different numbers of spike trains {sorted(n_units)}; one channel per unit "
                         "needs the same units in every segment.")
    first = segments[0].spiketrains
    names = [str(st.name) if st.name else f"unit{j}" for j, st in enumerate(first)]
    named = all(st.name for st in first) and len(set(names)) == len(names)
    if len(set(names)) != len(names):
        names = [f"unit{j}" for j in range(len(first))]
    trials = []
    for i, seg in enumerate(segments):
        trains = list(seg.spiketrains)
        if named:
            # a channel is one unit in every trial: match the trains by name, not by their order
            by_name = {str(st.name): st for st in trains if st.name}
            if set(by_name) != set(names) or len(by_name) != len(trains):
                raise ValueError(f"segment {i} holds the spike trains {[st.name for st in trains]}, segment 0 "
                                 f"{names}; one channel per unit needs the same named units in every segment.")
            trains = [by_name[n] for n in names]
        t0 = min(float(st.t_start.rescale("s").magnitude) for st in trains)
        t1 = max(float(st.t_stop.rescale("s").magnitude) for st in trains)
        spikes = [np.asarray(st.rescale("s").magnitude, dtype=np.float64) for st in trains]
        # a train may cover less than the segment: outside its own [t_start, t_stop] it is NaN
        intervals = [[[float(st.t_start.rescale("s").magnitude), float(st.t_stop.rescale("s").magnitude)]]
                     for st in trains]
        trials.append(bin_spikes(spikes, bin_size, t0, t1, unit_names=names, obs_intervals=intervals))
    x = [ds["x"].values[0, : int(ds["length"].values[0])] for ds in trials]
    prov = provenance("dsident.data.from_neo", path, read="spiketrains", time_unit="s", bin_size=float(bin_size),
                      bins="half-open; see dsident.data.bin_spikes", n_segments=len(segments),
                      spikes_at_stop=int(sum(_at_stop(ds) for ds in trials)))
    out = as_dataset(x, dt=float(bin_size), channel_names=names, name=label, provenance=prov, min_length=1)
    out["trial_start"] = ("trial", np.array([float(ds["trial_start"].values[0]) for ds in trials]))
    out.attrs.update(bin_size=float(bin_size), units="spike counts per bin")
    return out


def _at_stop(ds: xr.Dataset) -> int:
    import json

    return int(json.loads(ds.attrs["provenance"]).get("spikes_at_stop", 0))
