"""One entry point for files of any supported format: :func:`load_any`."""
from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .arrays import ARRAY_EXTENSIONS, PICKLE_EXTENSIONS, _pickle_message, load_array
from .eeg import MNE_EXTENSIONS, from_mne
from .physionet import WFDB_EXTENSIONS, wfdb_record_of

__all__ = ["load_any", "NEO_EXTENSIONS"]

#: vendor extracellular / intracellular formats handed to Neo (`neo.io.get_io`)
NEO_EXTENSIONS = (".nix", ".ns1", ".ns2", ".ns3", ".ns4", ".ns5", ".ns6", ".nev", ".plx", ".pl2", ".nex", ".nex5",
                  ".smr", ".smrx", ".abf", ".axgd", ".axgx", ".ncs", ".nse", ".ntt", ".nvt", ".rhd", ".rhs",
                  ".continuous", ".oebin", ".mcd", ".kwik", ".trc", ".dat", ".meta", ".sev", ".tev", ".tsq",
                  ".tbk", ".xdat", ".wcp", ".ddt", ".bin")


def load_any(path: str | os.PathLike, **options: Any) -> xr.Dataset:
    """Read a data file of any supported format into the canonical dataset, by its extension.

    ==================================================== =========================================
    extension                                            reader
    ==================================================== =========================================
    ``.nc``                                              :func:`dsident.data.load_dataset`
    ``.npy .npz .csv .tsv .txt .h5 .hdf5 .mat``          :func:`~dsident.data.importers.load_array`
    ``.nwb``                                             :func:`~dsident.data.importers.from_nwb`
    ``.hea`` (and ``.dat`` beside a ``.hea``; WFDB)      :func:`~dsident.data.importers.from_wfdb`
    ``.fif .edf .bdf .vhdr .set ...`` (MNE)              :func:`~dsident.data.importers.from_mne`
    ``.nix .ns5 .nev .plx .smr .abf .ncs .rhd ...`` (Neo) :func:`~dsident.data.importers.from_neo`
    ==================================================== =========================================

    Parameters
    ----------
    path : str or path-like
        The file (a folder for folder-based Neo formats such as Neuralynx or OpenEphys
        needs ``format="neo"``).
    **options
        Passed to the reader (e.g. ``key=``, ``fs=``, ``dims=`` for arrays; ``series=`` or
        ``bin_size=`` for NWB; ``picks=`` for MNE; ``channels=``, ``sampfrom=`` for WFDB;
        ``bin_size=`` for Neo). ``format`` (one of ``"netcdf"``, ``"array"``, ``"nwb"``,
        ``"wfdb"``, ``"mne"``, ``"neo"``) overrides the extension.
        ``dt`` (seconds) is understood by every format, so that one command line fits all:
        the sampling step of array files; the bin width of NWB spikes when no ``series`` is
        given (``bin_size``); otherwise a check — a file whose own sampling step differs
        raises ``ValueError`` (resample it first).

    Returns
    -------
    xarray.Dataset
        The canonical dataset.

    Raises
    ------
    ValueError
        Pickle files (never read), an unknown extension (the message lists the known ones),
        ``.nwb`` without ``series`` or ``bin_size``.
    FileNotFoundError
        No file at ``path``.
    ImportError
        The reader's optional package is missing (the message names the extra to install).
    """
    path = Path(path)
    fmt = options.pop("format", None)
    if not path.exists():
        raise FileNotFoundError(f"no file or folder at {str(path)!r}.")
    name = path.name.lower()
    ext = path.suffix.lower()
    if fmt is None:
        # a WFDB signal file shares `.dat` with several Neo formats: its header beside it decides
        fmt = "wfdb" if wfdb_record_of(path) is not None else _format_of(name, ext)
    dt = options.pop("dt", None)
    if fmt == "array":
        _check_options(load_array, options)
        return load_array(path, dt=dt, **options)
    if fmt == "nwb" and dt is not None and options.get("series") is None and options.get("bin_size") is None:
        options["bin_size"] = dt
    if fmt == "netcdf":
        from ..io import load_dataset as reader
    elif fmt == "nwb":
        from .nwb import from_nwb as reader
    elif fmt == "wfdb":
        from .physionet import from_wfdb as reader
    elif fmt == "mne":
        reader = from_mne
    elif fmt == "neo":
        from .ephys import from_neo as reader
    else:
        raise ValueError(f"`format`={fmt!r} is unknown; expected 'netcdf', 'array', 'nwb', 'wfdb', 'mne' or 'neo'.")
    _check_options(reader, options)
    ds = reader(path, **options)
    if dt is not None and not np.isclose(float(ds.attrs["dt"]), float(dt), rtol=1e-9, atol=0.0):
        raise ValueError(f"{str(path)!r} is sampled at dt={ds.attrs['dt']!r} but dt={dt!r} was asked for; "
                         "resample it (dsident.data.preprocessing.resample) or leave `dt` out.")
    return ds


class UnknownReaderOptions(TypeError):
    """Options a format's reader does not take: ``unknown`` names them, ``accepted`` lists what it
    takes, so a caller (``--read``) can name just the wrong ones."""

    def __init__(self, reader: str, unknown: list[str], accepted: list[str]) -> None:
        self.unknown, self.accepted = unknown, accepted
        words = "an unexpected keyword argument" if len(unknown) == 1 else "unexpected keyword arguments"
        super().__init__(f"{reader}() got {words} {', '.join(repr(u) for u in unknown)}; it takes "
                         f"{', '.join(accepted)} (and load_any's `dt` and `format`, as every format does)")


def _check_options(reader: Any, options: dict[str, Any]) -> None:
    """Refuse every option ``reader`` does not take at once (Python's own TypeError names only
    the first, and lists none of those it takes)."""
    params = inspect.signature(reader).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    accepted = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "dt"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise UnknownReaderOptions(f"{reader.__name__}", unknown, accepted)


def _format_of(name: str, ext: str) -> str:
    if ext in PICKLE_EXTENSIONS:
        raise ValueError(_pickle_message(Path(name)))
    if ext in (".nc", ".nc4", ".netcdf"):
        return "netcdf"
    if ext in ARRAY_EXTENSIONS:
        return "array"
    if ext == ".nwb":
        return "nwb"
    if ext in MNE_EXTENSIONS or name.endswith(".fif.gz"):
        return "mne"
    if ext in NEO_EXTENSIONS:
        return "neo"
    known = (".nc", *ARRAY_EXTENSIONS, ".nwb", *WFDB_EXTENSIONS, *MNE_EXTENSIONS, *NEO_EXTENSIONS)
    raise ValueError(f"cannot tell the format of {name!r} from its extension {ext!r}; known extensions: "
                     f"{', '.join(known)}. Pass format='array' | 'nwb' | 'wfdb' | 'mne' | 'neo' | 'netcdf'.")
