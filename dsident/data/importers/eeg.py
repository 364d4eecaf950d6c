"""EEG / MEG / iEEG through MNE-Python: :func:`from_mne` (optional extra ``eeg`` = mne).

``Raw`` recordings become one trial; spans annotated ``BAD_*`` become NaN (masked), as MNE's
``reject_by_annotation="NaN"`` gives them. ``Epochs`` become one trial per epoch, transposed
from MNE's ``(epoch, channel, time)`` to ``(trial, time, channel)``; the event code of each
epoch is kept as ``event(trial)``.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import xarray as xr

from ..container import as_dataset
from ._common import check_same_units, provenance, require, units_attr

__all__ = ["from_mne", "MNE_EXTENSIONS"]

#: extensions opened with ``mne.io.read_raw`` (``-epo.fif`` files with ``mne.read_epochs``)
MNE_EXTENSIONS = (".fif", ".fif.gz", ".edf", ".bdf", ".gdf", ".vhdr", ".set", ".cnt", ".mff", ".sqd", ".con",
                  ".ds", ".egi", ".nxe", ".lay", ".eeg")

#: MNE's SI unit of each FIFF unit name, as printed in attrs["units"]
_FIFF_UNITS = {"V": "V", "T": "T", "T_M": "T/m", "AM": "A·m", "NONE": "", "UNITLESS": "", "MOL": "mol",
               "C": "°C", "K": "K", "S": "S", "A": "A", "M": "m"}
_SCALED = {"V", "T", "T/m"}                    # the units that MNE's `units=` argument rescales


def from_mne(source: Any, *, picks: Any = None, units: str | Mapping[str, str] | None = None,
             reject_by_annotation: bool = True, allow_mixed_units: bool = False,
             name: str | None = None) -> xr.Dataset:
    """Convert an MNE ``Raw`` or ``Epochs`` object (or a file MNE reads) to the canonical dataset.

    Parameters
    ----------
    source : mne.io.Raw, mne.Epochs, str or path-like
        An object the user already holds (after their MNE preprocessing), or a file: names
        ending ``-epo.fif``/``_epo.fif`` are read with ``mne.read_epochs``, others with
        ``mne.io.read_raw`` (.fif, .edf, .bdf, .vhdr, .set, ...).
    picks : str, list or slice, optional
        MNE channel selection (``"eeg"``, names, indices); default ``"data"`` (all data
        channels, no stimulus channels, channels marked bad left out).
    units : str or dict, optional
        Units to return, as MNE's ``get_data(units=...)`` takes them (``"uV"``, or
        ``{"eeg": "uV", "mag": "fT"}``). Default SI (V, T, T/m).
    reject_by_annotation : bool, default True
        Raw only: samples inside ``BAD_*`` annotations become NaN (masked downstream).
    allow_mixed_units : bool, default False
        Accept channels of different units in one dataset (e.g. EEG in V with MEG in T). They
        live on very different scales; z-score before fitting.
    name : str, optional
        ``attrs["name"]``; default the recording's file name or ``"mne"``.

    Returns
    -------
    xarray.Dataset
        Canonical dataset with ``dt = 1 / sfreq`` (seconds), MNE channel names,
        ``attrs["units"]``, ``channel_type(channel)``, and for Epochs ``event(trial)`` and
        ``attrs["tmin"]`` (time of the first sample relative to the event).

    Raises
    ------
    ValueError
        Channels of different units without ``allow_mixed_units`` (unit mismatch), a file MNE
        cannot read.
    TypeError
        ``source`` is neither an MNE object nor a path.
    ImportError
        mne is not installed (``pip install 'dsident[eeg]'``).
    """
    mne = require("mne", "from_mne")
    path = None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"no file at {str(path)!r}.")
        try:
            if re.search(r"[-_]epo\.fif(\.gz)?$", path.name):
                source = mne.read_epochs(str(path), preload=True, verbose="error")
            else:
                source = mne.io.read_raw(str(path), preload=True, verbose="error")
        except (ValueError, OSError, EOFError, KeyError, IndexError, RuntimeError) as err:
            # MNE's own messages ("Bad EDF file provided.") name neither the file nor the reader
            raise ValueError(f"MNE cannot read {str(path)!r} ({type(err).__name__}: {err}); check that it is the "
                             "file you meant and that it was written completely.") from None
    is_raw = isinstance(source, mne.io.BaseRaw)
    if not (is_raw or isinstance(source, mne.BaseEpochs)):
        raise TypeError(f"`source` must be an mne.io.Raw, an mne.Epochs or a path; got {type(source).__name__}.")
    info = source.info
    try:
        names = _picked_names(source, "data" if picks is None else picks)
    except ValueError as err:
        # MNE's message names neither the recording's channels nor those marked bad (a type pick skips them)
        chans = dict(zip(info["ch_names"], source.get_channel_types()))
        shown = dict(list(chans.items())[:12])
        raise ValueError(f"`picks`={picks!r} selects no channel of the recording (MNE: {err}); its channels are "
                         f"{shown}{' ...' if len(chans) > 12 else ''}, those marked bad {list(info['bads'])} (a type pick "
                         "such as 'eeg' or the default 'data' leaves them out; pick them by name, or clear "
                         "info['bads']).") from None
    types = source.get_channel_types(picks=names)
    ch_units = [_unit_of(info["chs"][info["ch_names"].index(n)]["unit"], t, units) for n, t in zip(names, types)]
    if not allow_mixed_units:
        check_same_units(names, ch_units, "picks", "pick one kind of channel (picks='eeg', 'mag', ...) or pass "
                                                   "allow_mixed_units=True and z-score before fitting.")
    dt = 1.0 / float(info["sfreq"])
    fname = getattr(source, "filenames", None)
    label = name or (Path(str(fname[0])).stem if fname and fname[0] else "mne")
    if is_raw:
        data = source.get_data(picks=names, units=units, reject_by_annotation="NaN" if reject_by_annotation else None)
        n_bad = int(np.isnan(data[0]).sum()) if data.size else 0
        prov = provenance("dsident.data.from_mne", path, kind="Raw", time_unit="s", sfreq=float(info["sfreq"]),
                          first_time=float(source.first_time), bad_samples=n_bad,
                          bad_annotations="NaN" if reject_by_annotation else "kept")
        ds = as_dataset(data.T, dt=dt, channel_names=names, name=label, provenance=prov)
    else:
        data = source.get_data(picks=names, units=units)            # (epoch, channel, time)
        prov = provenance("dsident.data.from_mne", path, kind="Epochs", time_unit="s", sfreq=float(info["sfreq"]),
                          tmin=float(source.tmin), event_id={str(k): int(v) for k, v in source.event_id.items()})
        ds = as_dataset(np.transpose(data, (0, 2, 1)), dt=dt, channel_names=names, name=label, provenance=prov)
        ds["event"] = ("trial", np.asarray(source.events[:, 2], dtype=np.int64))
        ds.attrs["tmin"] = float(source.tmin)
    ds["channel_type"] = ("channel", np.array(types, dtype=str))
    ds.attrs["units"] = units_attr(ch_units)
    return ds


def _picked_names(source: Any, picks: Any) -> list[str]:
    """Channel names MNE selects for ``picks`` (bad channels excluded for type picks)."""
    try:
        from mne._fiff.pick import _picks_to_idx          # no copy of the data
    except ImportError:                                   # other MNE versions: the public route
        return list(source.copy().pick(picks).ch_names)
    return [source.info["ch_names"][i] for i in np.atleast_1d(_picks_to_idx(source.info, picks))]


def _unit_of(fiff_unit: Any, ch_type: str, units: str | Mapping[str, str] | None) -> str:
    """The unit label of one channel after MNE's optional rescaling."""
    match = re.search(r"FIFF_UNIT_(\w+)", str(fiff_unit))
    si = _FIFF_UNITS.get(match.group(1), match.group(1)) if match else str(fiff_unit)
    if units is None or si not in _SCALED:
        return si
    if isinstance(units, str):
        return units
    return str(units.get(ch_type, si))
