"""PhysioNet WFDB records (``.hea`` header + signal files): :func:`from_wfdb` (optional extra
``ecg`` = wfdb).

A record becomes one trial with every lead as a channel (or the ones ``channels`` names), in
physical units. Samples the record marks invalid (WFDB's reserved digital value) become NaN and
are masked downstream, never filled.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from ..container import as_dataset
from ._common import check_same_units, provenance, require, units_attr

__all__ = ["from_wfdb", "WFDB_EXTENSIONS", "wfdb_record_of", "wfdb_files"]

#: the header extension; a record's ``.dat`` signal file is read through it when the header is beside it
WFDB_EXTENSIONS = (".hea",)


def wfdb_record_of(path: str | os.PathLike) -> Path | None:
    """The record name (path without extension) when ``path`` is a WFDB header, or a signal
    file with its ``.hea`` header beside it; None otherwise."""
    path = Path(path)
    if path.suffix.lower() == ".hea":
        return path.with_suffix("")
    if path.suffix.lower() == ".dat" and path.with_suffix(".hea").is_file():
        return path.with_suffix("")
    return None


def wfdb_files(record: str | os.PathLike) -> list[Path]:
    """The files a WFDB record reads, found beside its header: the ``.hea`` itself and the signal
    files its signal lines name (``100.dat``, or ``100_1.dat`` and ``100_2.dat``, or another name
    entirely), and, for a multi-segment record, each segment's header and signal files. Files
    not on disk are left out; a header that cannot be read gives its ``.dat`` namesake, if any."""
    header = Path(record).with_suffix(".hea")
    found: list[Path] = []

    def visit(hea: Path, depth: int) -> None:
        if not hea.is_file() or hea in found:
            return
        found.append(hea)
        try:
            lines = [ln.split() for ln in hea.read_text(errors="replace").splitlines()
                     if ln.strip() and not ln.lstrip().startswith("#")]
            first = lines[0]
            multi = "/" in first[0]
            # the record line: "name nsig ..." (a signal line each), or "name/nseg nsig ..." (a
            # segment line each)
            n_lines = int(first[0].split("/")[1]) if multi else int(first[1])
        except (OSError, IndexError, ValueError):
            lines, multi, n_lines = [], False, 0
        names = [ln[0] for ln in lines[1:1 + n_lines] if ln]
        if not names and not multi:
            names = [hea.with_suffix(".dat").name]
        for name in names:
            if multi:                       # a segment: its own header, or "~" for a gap
                if name != "~" and depth < 2:
                    visit(hea.parent / f"{name}.hea", depth + 1)
            elif name != "~" and (hea.parent / name).is_file() and hea.parent / name not in found:
                found.append(hea.parent / name)

    visit(header, 0)
    return found


def from_wfdb(record: str | os.PathLike, *, channels: str | int | Sequence[str | int] | None = None,
              sampfrom: int = 0, sampto: int | None = None, allow_mixed_units: bool = False,
              name: str | None = None) -> xr.Dataset:
    """Read a PhysioNet WFDB record (ECG, EEG, respiration, ...) into the canonical dataset.

    Parameters
    ----------
    record : str or path-like
        The record: its header ``100.hea``, its signal file ``100.dat`` (with the header
        beside it), or the name without extension ``.../100``.
    channels : str, int or sequence of them, optional
        Leads to keep, by signal name (``"MLII"``) or 0-based position, in the order given;
        default every lead.
    sampfrom, sampto : int, optional
        The samples read, ``[sampfrom, sampto)``; default the whole record.
    allow_mixed_units : bool, default False
        Accept leads of different units in one dataset (an ECG in mV beside a respiration
        channel). They live on different scales; z-score before fitting.
    name : str, optional
        ``attrs["name"]``; default the record's name.

    Returns
    -------
    xarray.Dataset
        One trial of shape (time, channel), ``dt = 1 / fs`` seconds, the record's signal names as
        channel names, ``attrs["units"]``; invalid samples NaN (their count in
        ``attrs["provenance"]["invalid_samples"]``).

    Raises
    ------
    FileNotFoundError
        No header for ``record``.
    ValueError
        An unknown lead name or a position out of range (the message lists the record's leads),
        a lead named twice, a bad sample range, or leads of different units without
        ``allow_mixed_units``.
    ImportError
        wfdb is not installed (``pip install 'dsident[ecg]'``).
    """
    wfdb = require("wfdb", "from_wfdb")
    base = wfdb_record_of(record) or Path(record)
    if base.suffix.lower() in (".dat", ".hea"):
        base = base.with_suffix("")
    header = base.with_name(base.name + ".hea")
    if not header.is_file():
        raise FileNotFoundError(f"no WFDB header {str(header)!r} for record {str(record)!r}; a record needs its "
                                ".hea file beside its signal files.")
    meta = wfdb.rdheader(str(base))
    names = [str(s) for s in meta.sig_name]
    index = _lead_positions(channels, names, str(record))
    n_total = int(meta.sig_len)
    sampto_ = n_total if sampto is None else sampto
    if not (isinstance(sampfrom, (int, np.integer)) and isinstance(sampto_, (int, np.integer))
            and 0 <= sampfrom < sampto_ <= n_total):
        raise ValueError(f"`sampfrom`={sampfrom!r}, `sampto`={sampto!r}: expected whole numbers with "
                         f"0 <= sampfrom < sampto <= {n_total} (the record's length in samples).")
    units = [str(meta.units[i]) for i in index]
    if not allow_mixed_units:
        check_same_units([names[i] for i in index], units, "channels",
                         "keep leads of one unit (channels=[...]; `--read channels=MLII,V5` on the command "
                         "line) or pass allow_mixed_units=True (`--read allow_mixed_units=true`) and z-score "
                         "before fitting (`--zscore`).")
    rec = wfdb.rdrecord(str(base), sampfrom=int(sampfrom), sampto=int(sampto_), channels=index)
    signal = np.asarray(rec.p_signal, dtype=float)
    prov = provenance("dsident.data.from_wfdb", header, time_unit="s", fs=float(meta.fs), sampfrom=int(sampfrom),
                      sampto=int(sampto_), invalid_samples=int(np.isnan(signal).sum()))
    ds = as_dataset(signal, dt=1.0 / float(meta.fs), channel_names=[names[i] for i in index],
                    name=name or str(meta.record_name), provenance=prov)
    ds.attrs["units"] = units_attr(units)
    return ds


def _lead_positions(channels: Any, names: list[str], record: str) -> list[int]:
    """0-based positions of the leads ``channels`` names (all leads for None)."""
    if channels is None:
        return list(range(len(names)))
    wanted = [channels] if isinstance(channels, (str, int, np.integer)) else list(channels)
    out = []
    for c in wanted:
        if isinstance(c, str) and c in names:
            out.append(names.index(c))
        elif isinstance(c, (int, np.integer)) and not isinstance(c, bool) and 0 <= int(c) < len(names):
            out.append(int(c))
        else:
            raise ValueError(f"`channels` {c!r} is not a lead of record {record!r}; its {len(names)} signals are "
                             f"{names} (names, or 0-based positions).")
    if not out or len(set(out)) != len(out):
        raise ValueError(f"`channels` must name each kept lead once; got {channels!r}.")
    return out
