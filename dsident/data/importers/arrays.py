"""Plain array files into the canonical dataset: :func:`load_array`.

Formats: ``.npy`` / ``.npz`` (never unpickled), ``.csv`` / ``.tsv`` / ``.txt`` (a sampling rate is
required: text carries none), ``.h5`` / ``.hdf5`` (h5py), ``.mat`` v4–v7.2 (``scipy.io.loadmat``)
and v7.3 (HDF5, read with h5py).

Axis order
----------
``dims`` names the axes of the stored array in the order the *writer* saw them, from
``("trial", "time", "channel")`` (``"trial"`` optional). For MAT files that is MATLAB's order
(what ``size(x)`` prints in MATLAB) for both v5 and v7.3: h5py sees a v7.3 matrix with its axes
reversed (MATLAB is column-major), and :func:`load_array` turns them back, so the same data
saved as v5 and as v7.3 load identically. Singleton axes of MAT variables are dropped (a MATLAB
column or row vector is one channel).
"""
from __future__ import annotations

import csv
import os
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import xarray as xr

from ..container import as_dataset
from ..time_units import TIME_COLUMN_NAME, time_unit_of_name
from ._common import provenance, require, sampling_step

__all__ = ["load_array", "time_column_of", "ARRAY_EXTENSIONS", "PICKLE_EXTENSIONS"]

ARRAY_EXTENSIONS = (".npy", ".npz", ".csv", ".tsv", ".txt", ".h5", ".hdf5", ".mat")
#: file types that can only be read by unpickling, which dsident never does
PICKLE_EXTENSIONS = (".pkl", ".pickle", ".joblib", ".jl", ".pt", ".pth", ".ckpt")

_DIM_NAMES = ("trial", "time", "channel")
_METADATA_KEYS = {"dt", "fs", "sampling_rate", "channel_names", "time"}


def load_array(path: str | os.PathLike, *, key: str | None = None, dims: Sequence[str] | None = None,
               fs: float | None = None, dt: float | None = None, channel_names: Sequence[str] | None = None,
               time_column: str | int | None = None, name: str | None = None) -> xr.Dataset:
    """Read an array file into the canonical dataset ``x(trial, time, channel)``.

    Parameters
    ----------
    path : str or path-like
        The file; the format follows the extension (see the module docstring).
    key : str, optional
        Which array: an ``.npz`` entry, an HDF5 dataset path (``"group/data"``; a group holding
        one dataset per trial is read as ragged trials, in natural name order), or a MAT
        variable (``"s.field"`` reaches into a struct). Needed when the file holds more than
        one candidate; the error lists them.
    dims : sequence of str, optional
        Axis names of the stored array (see the module docstring). Default ``("time",)``,
        ``("time", "channel")`` or ``("trial", "time", "channel")`` by rank. For ragged trials
        (MAT cell arrays, HDF5 groups) it names the axes of each trial.
    fs, dt : float, optional
        Sampling rate (Hz) or step (s); at most one. Required for text files. Otherwise taken
        from the file when it stores ``dt``/``fs``/``sampling_rate`` (an ``.npz`` entry, an HDF5
        attribute of the dataset or file or a dataset at its root, a MAT variable or a field of the
        struct ``key`` reaches into), or ``time`` (one sample time per sample, kept as
        ``sample_time``), else 1.0 (one sample per time unit).
    channel_names : sequence of str, optional
        Channel names; default the csv header, else ``x0, x1, ...``.
    time_column : str, int or False, optional
        Text files: a column holding the sample times instead of data (irregular sampling is
        kept as ``sample_time``; ``fs``/``dt`` are then optional, and a ``dt`` given as well must
        agree with the times). Default: the header column named like a time axis (``time``,
        ``t``, ``time_s``, ``Time (ms)``, ``timestamp``, ``seconds``, ...; see
        :func:`time_column_of`), if there is one. ``False`` reads every column as data.
    name : str, optional
        ``attrs["name"]``; default the file's stem.

    Returns
    -------
    xarray.Dataset
        Canonical dataset; NaN in the file stays NaN (masked). ``attrs["provenance"]`` records
        the file, key, format and axis order.

    Raises
    ------
    ValueError
        Pickled (object) arrays, a missing or ambiguous ``key`` (the message lists what
        exists), a ``key`` for a ``.npy`` or text file (they hold one array), a ``dims`` that
        does not match the array, a text file without ``fs``/``dt``,
        a text column that rises by the same step on every row but is not named as a time
        axis (a time column read as data would be fitted as a channel), an unknown extension.
    TypeError
        Non-numeric data (strings, structs, complex numbers).
    FileNotFoundError
        No file at ``path``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no file at {str(path)!r}.")
    ext = path.suffix.lower()
    if ext in PICKLE_EXTENSIONS:
        raise ValueError(_pickle_message(path))
    step = sampling_step(dt, fs)
    sample_time = None
    if key is not None and ext in (".npy", ".csv", ".tsv", ".txt"):
        # a key that picks nothing would be dropped without a word, though its user meant some array
        what = "a .npy file, which holds one array" if ext == ".npy" else "a text table, which holds one table"
        raise ValueError(f"`key`={key!r}: {path.name!r} is {what}, so `key` names nothing; leave it out (from the "
                         "command line: --read key=...), or store several arrays in one .npz and pick one by key.")
    if time_column is not None and time_column is not False and ext not in (".csv", ".tsv", ".txt"):
        # it picks a column of a text table; elsewhere it would be dropped without a word
        raise ValueError(f"`time_column`={time_column!r} applies to text tables (.csv, .tsv, .txt); {path.name!r} is "
                         f"a {ext} file. Store the sample times beside the data as `time` (an .npz entry, an HDF5 "
                         "dataset or a MAT variable), which is read as the sample times, or pass fs=... or dt=....")
    if ext == ".npy":
        trials, meta, fmt = _read_npy(path), {}, "npy"
    elif ext == ".npz":
        trials, meta, fmt = *_read_npz(path, key), "npz"
    elif ext in (".csv", ".tsv", ".txt"):
        trials, header, sample_time, used = _read_text(path, ext, time_column)
        if step is None and sample_time is None:
            sampling_step(None, None, required=True, what=f"text file {path.name!r}")
        meta, fmt = ({"channel_names": header} if header else {}), "text"
        if used is not None:
            meta["time_column"] = used
    elif ext in (".h5", ".hdf5"):
        trials, meta, fmt = *_read_hdf5(path, key), "hdf5"
    elif ext == ".mat":
        trials, meta, fmt = _read_mat(path, key)
    else:
        raise ValueError(f"`path` {str(path)!r} has extension {ext!r}; load_array reads {list(ARRAY_EXTENSIONS)}.")
    if step is None and meta.get("dt_error"):
        raise ValueError(meta["dt_error"])
    if step is None and meta.get("dt") is not None:
        step = float(meta["dt"])
    else:
        meta.pop("time_unit", None)      # the call's own step (or none): the file's rate says nothing of it
    if channel_names is None and meta.get("channel_names"):
        channel_names = meta["channel_names"]
    data, order = _arrange(trials, dims)
    stored_time = meta.get("time") if sample_time is None else None
    if stored_time is not None:
        sample_time = _stored_times(stored_time, data, path)
        meta["time_column"] = "time"
    prov = provenance("dsident.data.load_array", path, format=fmt, key=key, dims=order,
                      time_column=meta.get("time_column"), time_unit=_time_unit(meta, fs),
                      dt=step if step is not None else ("the median step of the time column" if sample_time is not None
                                                        else "1.0 (no sampling rate in the file or the call)"))
    try:
        return as_dataset(data, dt=step, channel_names=channel_names, name=name or path.stem, provenance=prov,
                          time=sample_time, min_length=1)
    except ValueError as err:
        if stored_time is None:
            raise
        raise ValueError(f"{path.name!r} stores sample times under `time`, which do not fit its data: {err}") from None


def _stored_times(time: np.ndarray, data: Any, path: Path) -> np.ndarray:
    """The sample times a file stores beside its data (an ``.npz`` entry, an HDF5 dataset or a
    MAT variable named ``time``): one per sample of the time axis."""
    if time.dtype.kind not in "biuf":
        raise TypeError(f"{path.name!r} stores `time` with dtype {time.dtype}; expected the sample times as numbers.")
    time = np.squeeze(time).astype(np.float64)
    lengths = [len(t) for t in data] if isinstance(data, list) else [data.shape[-2]] * (data.shape[0] if data.ndim == 3 else 1)
    if time.ndim != 1 or len(set(lengths)) > 1 or time.shape[0] != lengths[0]:
        raise ValueError(f"{path.name!r} stores `time` of shape {time.shape}, which is not one time per sample of its "
                         f"data (trials of {sorted(set(lengths))} samples); store the sample times as a 1-D `time` of that "
                         "length, or remove the `time` entry and pass fs=... or dt=....")
    return time


def _time_unit(meta: dict, fs: float | None) -> str | None:
    """What the file or the call says the time is in: a time column's unit (``time_ms``),
    seconds for a rate in Hz (``fs`` given, or the file's ``fs`` / ``sampling_rate`` that gave
    the step); None when nothing says (a bare ``dt`` or ``time`` column)."""
    named = time_unit_of_name(meta["time_column"]) if isinstance(meta.get("time_column"), str) else None
    return named or meta.get("time_unit") or ("s" if fs is not None else None)


# --------------------------------------------------------------------------- formats


def _pickle_message(path: Path) -> str:
    return (f"{str(path)!r} can only be read by unpickling, which runs arbitrary code, so dsident refuses it. "
            "Re-save the data as plain numbers, e.g. numpy.save('data.npy', np.asarray(x, dtype=float)) or "
            "numpy.savez('data.npz', x=x), or as NetCDF with dsident.data.save_dataset.")


def _not_a(path: Path, what: str, err: BaseException | None = None) -> ValueError:
    """The error for a file that its extension's reader cannot open at all."""
    why = f" ({type(err).__name__}: {err})" if err is not None else ""
    return ValueError(f"{str(path)!r} is not a readable {what} file{why}; check that it is the file you meant and "
                      "that it was written completely, or give the right extension (or format=...).")


def _check_magic(path: Path, magic: tuple[bytes, ...], what: str) -> None:
    """Refuse a file whose first bytes are not its format's: numpy falls back to unpickling any
    other file, and its message would call a truncated or foreign file a pickle."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    if any(head.startswith(m) for m in magic):
        return
    if head[:1] == b"\x80":                     # the pickle protocol opcode: a pickle saved under this name
        raise ValueError(f"{str(path)!r} is a pickle, not a {what} file. " + _pickle_message(path))
    raise _not_a(path, what, None if head else EOFError("the file is empty"))


def _read_npy(path: Path) -> np.ndarray:
    _check_magic(path, (b"\x93NUMPY",), ".npy")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            raise ValueError(f"{str(path)!r} stores a pickled (object) array. " + _pickle_message(path)) from None
        raise _not_a(path, ".npy", err) from None
    except (OSError, EOFError) as err:
        raise _not_a(path, ".npy", err) from None


def _read_npz(path: Path, key: str | None) -> tuple[Any, dict]:
    _check_magic(path, (b"PK\x03\x04", b"PK\x05\x06"), ".npz")
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:     # BadZipFile: a truncated archive
        raise _not_a(path, ".npz", err) from None
    with archive:
        names = list(archive.files)
        meta = _stored_meta({k: archive[k] for k in _METADATA_KEYS if k in names}, path)
        data_keys = [k for k in names if k not in _METADATA_KEYS]
        key = _pick(key, data_keys, path)
        try:
            return archive[key], meta
        except ValueError as err:
            if "allow_pickle" in str(err) or "Object arrays" in str(err):
                raise ValueError(f"entry {key!r} of {str(path)!r} is a pickled (object) array. "
                                 + _pickle_message(path)) from None
            raise


def _read_text(path: Path, ext: str, time_column: str | int | bool | None
               ) -> tuple[np.ndarray, list[str], Any, str | int | None]:
    """The table, its header, the sample times (or None) and which column gave them (or None)."""
    # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark, which would otherwise
    # stick to the first header name ("\ufefftime" is no time column)
    first, n_comments = _first_line(path)
    if not first.strip():
        raise ValueError(f"{path.name!r} is empty (its first line is blank); expected a table of numbers.")
    delimiter = _delimiter(ext, first)
    header = _header([first], delimiter)
    skip = n_comments + 1 if header else 0     # numpy skips `#` lines by itself, but counts them in a skip
    table = _read_plain_numbers(path, delimiter, skip=skip)
    if table is None:
        table = _read_cell_by_cell(path, delimiter, skip)
    table, header = _drop_trailing_separator(table, header)
    if header and len(header) != table.shape[1]:
        sep = {None: "whitespace", "\t": "a tab"}.get(delimiter, repr(delimiter))
        raise ValueError(f"{path.name!r}: the header line names {len(header)} column(s) {header}, but the data rows "
                         f"hold {table.shape[1]} field(s) separated by {sep}; give every column one name in the header "
                         "(a name holding the separator must be quoted, and a whitespace-separated .txt cannot have "
                         "spaces in its names).")
    if time_column is None:
        time_column = _named_time_column(header)
        if time_column is not None and not _increasing(table[:, header.index(time_column)]):
            _refuse_missing_times(path, table[:, header.index(time_column)], time_column)
            time_column = None  # named like a time axis but not one (a channel called "t"): data
        if time_column is None:
            _refuse_ramps(path, table, header)
    if time_column is None or time_column is False:
        return table, header, None, None
    if isinstance(time_column, str):
        if time_column not in header:
            raise ValueError(f"`time_column`={time_column!r} is not a column of {path.name!r}; columns: {header}.")
        col = header.index(time_column)
    else:
        if isinstance(time_column, bool) or not isinstance(time_column, (int, np.integer)):
            raise TypeError(f"`time_column` must be a column name, a column index or False; got {time_column!r}.")
        col = int(time_column)
        if not -table.shape[1] <= col < table.shape[1]:
            raise ValueError(f"`time_column`={time_column!r} is out of range for {table.shape[1]} columns.")
        col %= table.shape[1]
    if table.shape[1] < 2:
        raise ValueError(f"{path.name!r} has one column, the time column {time_column!r}; no data are left.")
    sample_time = table[:, col]
    if header:  # the name, whichever way the column was chosen: it may carry the unit ("time_ms")
        time_column = header[col]
    table = np.delete(table, col, axis=1)
    if header:
        header = [h for i, h in enumerate(header) if i != col]
    return table, header, sample_time, time_column


def _read_plain_numbers(path: Path, delimiter: str | None, skip: int) -> np.ndarray | None:
    """A table whose every cell is a number, by numpy's compiled reader (``load_array`` of a
    200 000-row CSV 5.7x faster than by the cell-by-cell route: benchmarks/bench_data.py); None for anything else
    (an empty or quoted cell, a word, a ragged row), which :func:`_read_cell_by_cell` reads or
    refuses with the row and column."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)     # "input contained no data": refused below
            table = np.loadtxt(path, delimiter=delimiter, skiprows=skip, dtype=np.float64, ndmin=2,
                               encoding="utf-8-sig")
    except ValueError:
        return None
    if table.size == 0:
        raise ValueError(f"{path.name!r} holds no data rows" + (" below its header line." if skip else "."))
    return table


def _first_line(path: Path) -> tuple[str, int]:
    """The first line of a text table that is not a `#` comment (numpy reads those as comments
    everywhere else), and how many comment lines come before it."""
    # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark, which would otherwise
    # stick to the first header name ("\ufefftime" is no time column)
    with open(path, encoding="utf-8-sig") as fh:
        for n, line in enumerate(fh):
            if not line.lstrip().startswith("#"):
                return line, n
    return "", 0


def _read_cell_by_cell(path: Path, delimiter: str | None, skip: int) -> np.ndarray:
    """A table with missing or quoted cells: empty cells and NaN / NA / N/A are NaN; a ragged row
    or any other word is refused by name."""
    with open(path, encoding="utf-8-sig") as fh:
        # spreadsheet exports quote numbers ("1.5"); genfromtxt would read those as NaN
        lines = [line.replace('"', "") for line in fh]
    try:
        table = np.genfromtxt(lines, delimiter=delimiter, skip_header=skip, dtype=np.float64,
                              missing_values="", filling_values=np.nan, ndmin=2)
    except ValueError as err:
        # numpy's own message ("Some errors were detected !") names neither the file nor what to do
        detail = " ".join(line.strip() for line in str(err).splitlines()[1:]) or str(err)
        raise ValueError(f"{path.name!r} is not a table with the same number of columns on every row "
                         f"({detail}); mark a missing sample with an empty field or NaN, not a missing "
                         "column.") from err
    _refuse_words(path, lines, table, delimiter, skip=skip)
    return table


def _delimiter(ext: str, first: str) -> str | None:
    """The field separator of a text table, from its first line: a tab for .tsv; for .csv and .txt
    a semicolon, comma or tab found there, in that order (a spreadsheet in a locale whose decimal
    mark is a comma writes `;` between fields, so `;` wins over `,`), else `,` for .csv and
    whitespace (None) for .txt. Read with `,`, a `time;V` table is one column named `time;V`."""
    if ext == ".tsv":
        return "\t"
    found = next((d for d in (";", ",", "\t") if d in first), None)
    return found if found is not None else ("," if ext == ".csv" else None)


def _header(lines: list[str], delimiter: str | None) -> list[str]:
    """The first line's fields when any of them is not a number (a header), else []. Quoted names
    may hold the separator (``"Vm, mV"``), as spreadsheets write them."""
    first = lines[0].strip() if lines else ""
    if delimiter:
        fields = next(csv.reader([first], delimiter=delimiter, skipinitialspace=True), [])
    else:
        fields = first.replace('"', "").split()
    fields = [f.replace('"', "").strip() for f in fields]
    return [] if all(_is_number(f) for f in fields) else fields


def _drop_trailing_separator(table: np.ndarray, header: list[str]) -> tuple[np.ndarray, list[str]]:
    """Drop the empty last column that a separator at the end of every line makes (``1,2,``, as
    some exporters write): unnamed and without a single value, it is no channel."""
    while (table.shape[1] > 1 and np.isnan(table[:, -1]).all()
           and (not header or (len(header) == table.shape[1] and header[-1] == ""))):
        table, header = table[:, :-1], header[:-1]
    while header and header[-1] == "" and len(header) > table.shape[1]:
        header = header[:-1]
    return table, header




def time_column_of(path: str | os.PathLike) -> str | None:
    """The header column of a text table that :func:`load_array` reads as sample times, or None.

    A column is a time axis when its header name is one (``time``, ``t``, ``times``,
    ``timestamp``, ``seconds``, ``ms``, with an optional unit: ``time_s``, ``Time (ms)``,
    ``t [s]``); other formats and header-less tables give None.
    """
    path = Path(path)
    if path.suffix.lower() not in (".csv", ".tsv", ".txt") or not path.is_file():
        return None
    first, _ = _first_line(path)
    return _named_time_column(_header([first], _delimiter(path.suffix.lower(), first)))


def _named_time_column(header: list[str]) -> str | None:
    names = [h for h in header if TIME_COLUMN_NAME.match(h.strip())]
    return names[0] if len(names) == 1 else None


def _refuse_missing_times(path: Path, column: np.ndarray, name: str) -> None:
    """Refuse a time column that increases but has empty cells: read as data it would be fitted
    as a channel, and a sample without a time cannot be placed."""
    missing = ~np.isfinite(column)
    known = column[~missing]
    if missing.any() and known.size > 1 and (np.diff(known) > 0).all():
        rows = (np.flatnonzero(missing) + 1).tolist()
        raise ValueError(f"column {name!r} of {path.name!r} holds the sample times but has no time on {len(rows)} data "
                         f"row(s) ({rows[:5]}{', ...' if len(rows) > 5 else ''}; 1 = the first row below the header); "
                         "a sample without a time cannot be placed: drop those rows, or pass time_column=False "
                         "(and fs or dt) to read the column as data.")
    # a clock column that rises on all but a few rows (a repeated or backward timestamp) is a time
    # axis with a glitch, not a channel: read as data it would be fitted as a ramp
    steps = np.diff(known)
    if not missing.any() and steps.size >= 9 and (steps > 0).mean() >= 0.9:
        rows = (np.flatnonzero(steps <= 0) + 2).tolist()
        raise ValueError(f"column {name!r} of {path.name!r} holds the sample times but does not increase on {len(rows)} "
                         f"data row(s) ({rows[:5]}{', ...' if len(rows) > 5 else ''}; 1 = the first row below the "
                         f"header: a time equal to or before the one above it); fix or drop those rows, or pass "
                         "time_column=False (and fs or dt) to read the column as data.")


def _increasing(column: np.ndarray) -> bool:
    return bool(np.isfinite(column).all() and (np.diff(column) > 0).all())


def _refuse_ramps(path: Path, table: np.ndarray, header: list[str]) -> None:
    """Refuse a data column that rises (or falls) by the same step on every row.

    No recorded variable does that; a time or sample-index column does, and read as data it is a
    channel that never returns, which no dynamical model can reproduce (its fit fails quietly).
    """
    if table.shape[0] < 10:  # a few hand-written rows may well step evenly
        return
    steps = np.diff(table, axis=0)
    for c in range(table.shape[1]):
        d = steps[:, c]
        if not np.isfinite(d).all() or d[0] == 0:
            continue
        scale = max(float(np.max(np.abs(table[:, c]))), abs(float(d[0])))
        # the text's rounding: a step written with 6 significant digits differs by ~1e-6 of the values
        if np.max(np.abs(d - np.median(d))) <= 1e-5 * scale:
            name = f"column {c + 1}" + (f" ({header[c]!r})" if header else "")
            raise ValueError(
                f"{path.name!r}: {name} changes by the same step ({float(np.median(d)):.6g}) on every row, like a time "
                "or sample-index column, and would be fitted as a data channel. Name it `time` in the header "
                "line (its values then become the sample times), remove it, or load the file with "
                f"dsident.data.load_array(path, time_column={c}) (or time_column=False to keep it as data).")


#: fields a text table may use to mark a missing sample (compared lower-case, stripped)
_MISSING_WORDS = frozenset({"", "nan", "na", "n/a"})


def _refuse_words(path: Path, lines: list[str], table: np.ndarray, delimiter: str | None, skip: int) -> None:
    """Refuse a text table whose NaN cells came from words rather than missing-sample marks.

    genfromtxt reads any field it cannot parse ("1.2.3", "x", "12 mV") as NaN, which the package
    then masks as a missing sample: a typo would be silently dropped from the fit.
    """
    if not np.isnan(table).any():
        return
    raw = np.genfromtxt(lines, delimiter=delimiter, skip_header=skip, dtype=str, ndmin=2,
                        autostrip=True, filling_values="")
    rows, cols = np.nonzero(np.isnan(table))
    for r, c in zip(rows, cols):
        field = str(raw[r, c]).strip()
        if field.lower() not in _MISSING_WORDS:
            decimal_comma = delimiter != "," and re.fullmatch(r"[-+]?\d*,\d+", field)
            comma = " (a decimal comma: write 0.5, not 0,5)" if decimal_comma else ""
            raise ValueError(f"{path.name!r}: data row {r + 1}, column {c + 1} holds {field!r}, which is not a "
                             f"number{comma}; mark a missing sample with an empty field, NaN or NA, and remove or fix "
                             "any other text (units belong in the header).")


def _read_hdf5(path: Path, key: str | None) -> tuple[Any, dict]:
    h5py = require("h5py", "reading HDF5 files")
    if not h5py.is_hdf5(path):
        raise _not_a(path, "HDF5")
    with h5py.File(path, "r") as fh:
        datasets: list[str] = []
        fh.visititems(lambda n, obj: datasets.append(n) if isinstance(obj, h5py.Dataset) else None)
        candidates = [d for d in datasets if d.split("/")[-1] not in _METADATA_KEYS]
        if key is None:
            parents = sorted({d.rsplit("/", 1)[0] for d in candidates if "/" in d})
            groups = [g for g in parents if sum(d.rsplit("/", 1)[0] == g for d in candidates) >= 2]
            key = _pick(None, candidates, path, groups=groups)
        if key not in fh:
            raise ValueError(f"`key`={key!r} is not in {str(path)!r}; it holds the datasets {candidates}.")
        obj = fh[key]
        meta = _hdf5_meta(fh, obj)
        if isinstance(obj, h5py.Group):
            members = sorted((k for k, v in obj.items() if isinstance(v, h5py.Dataset) and k not in _METADATA_KEYS),
                             key=_natural)
            if not members:
                raise ValueError(f"group {key!r} of {str(path)!r} holds no datasets.")
            return [_numeric(obj[m][()], f"{key}/{m}") for m in members], meta
        return _numeric(obj[()], key), meta


def _hdf5_meta(fh: Any, obj: Any) -> dict:
    """The step, channel names and sample times an HDF5 file stores: attributes of the file,
    datasets at its root (``fs``, ``dt``, ``sampling_rate``, ``channel_names``, ``time``), the same
    in the group that holds the chosen dataset (``ecog/data`` beside ``ecog/time``) or in the
    chosen group of trials, attributes of the chosen dataset; a later source wins."""
    import h5py

    def stored(group: Any) -> dict:
        return {k: v[()] for k, v in group.items() if k in _METADATA_KEYS and isinstance(v, h5py.Dataset)}

    path = Path(fh.filename)
    sources = [dict(fh.attrs), stored(fh)]
    home = obj if isinstance(obj, h5py.Group) else obj.parent
    if home.name != "/":
        sources += [dict(home.attrs), stored(home)]
    meta: dict[str, Any] = {}
    for source in (*sources, dict(obj.attrs)):
        _overlay_meta(meta, _stored_meta(source, path))
    return meta


def _overlay_meta(meta: dict, found: dict) -> None:
    """``found`` over ``meta`` in place: a nearer source's step (or its refusal) replaces the
    step, its refusal and the time unit an outer source gave, as one setting."""
    if "dt" in found or "dt_error" in found:
        for k in ("dt", "dt_error", "time_unit"):
            meta.pop(k, None)
    meta.update(found)


def _stored_meta(values: dict[str, Any], path: Path) -> dict:
    """``dt`` (and the time unit a rate in Hz implies) and channel names from what a file stores
    under ``dt``, ``fs`` or ``sampling_rate`` (the first of them present) and ``channel_names``.
    A stored step that is not one positive finite number is kept as ``dt_error``: it is refused
    only when the call gives no ``fs``/``dt`` of its own."""
    meta: dict[str, Any] = {}
    k = next((k for k in ("dt", "fs", "sampling_rate") if k in values), None)
    if k is not None:
        value = np.asarray(values[k])
        number = float(value.ravel()[0]) if value.size == 1 and value.dtype.kind in "biuf" else None
        if number is None or not np.isfinite(number) or number <= 0:
            meta["dt_error"] = (f"{path.name!r} stores `{k}` = {_short(value)}, which is not one positive finite number; "
                                f"pass the sampling rate yourself: fs=... or dt=... (from the command line: --dt DT).")
        else:
            meta["dt"], meta["time_unit"] = (number, None) if k == "dt" else (1.0 / number, "s")   # Hz: seconds
    if "channel_names" in values:
        meta["channel_names"] = _text_list(values["channel_names"])
    if "time" in values:
        meta["time"] = np.asarray(values["time"])
    return meta


def _short(value: np.ndarray) -> str:
    text = np.array2string(value, threshold=6) if value.ndim else repr(value.item())
    return text + (f" (shape {value.shape})" if value.size > 1 else "")


def _text_list(values: Any) -> list[str]:
    """Names stored as str, bytes (HDF5, numpy ``S`` arrays) or MATLAB char rows, as str."""
    items = values if isinstance(values, (list, tuple)) else np.asarray(values).ravel().tolist()
    return [(v.decode() if isinstance(v, bytes) else str(v)).strip() for v in items]


def _read_mat(path: Path, key: str | None) -> tuple[Any, dict, str]:
    h5py = require("h5py", "reading MAT v7.3 files")
    if h5py.is_hdf5(path):
        return *_read_mat73(path, key), "mat-v7.3"
    from scipy.io import loadmat

    try:
        content = loadmat(path, simplify_cells=True)
    except (ValueError, OSError, EOFError, NotImplementedError, TypeError) as err:
        raise _not_a(path, "MAT", err) from None
    variables = {k: v for k, v in content.items() if not k.startswith("__")}
    meta = _stored_meta(variables, path)
    candidates = [k for k in variables if k not in _METADATA_KEYS]
    parts = _pick(key, candidates, path).replace("/", ".").split(".")
    value: Any = variables
    for depth, part in enumerate(parts):
        elements = _struct_elements(value)
        if elements is not None:        # a struct array, one element per trial: trials(k).data
            fields = sorted(set.intersection(*(set(e) for e in elements)))
            if part not in fields or depth != len(parts) - 1:
                raise ValueError(f"`key`={key!r}: {'.'.join(parts[:depth])!r} of {str(path)!r} is a struct array of "
                                 f"{len(elements)} elements with the fields {fields}; pass "
                                 f"key='{'.'.join(parts[:depth])}.<field>' to read that field of each element as one "
                                 "trial.")
            return _mat_value([e[part] for e in elements], key), meta, "mat-v5"
        if not isinstance(value, dict) or part not in value:
            where = ".".join(parts[:depth]) or "the file"
            have = sorted(value) if isinstance(value, dict) else []
            raise ValueError(f"`key`={key!r}: {part!r} is not in {where} of {str(path)!r}; available: {have}.")
        if depth:          # a struct's own fs / dt / channel_names beside the field (s.data, s.fs) win
            _overlay_meta(meta, _stored_meta(value, path))
        value = value[part]
    return _mat_value(value, key or parts[0]), meta, "mat-v5"


def _struct_elements(value: Any) -> list[dict] | None:
    """The elements of a MATLAB struct array (scipy's simplify_cells gives a list or an object
    array of dicts), in MATLAB's linear order; None for anything else."""
    if isinstance(value, np.ndarray) and value.dtype == object:
        value = list(value.ravel(order="F"))
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    return None


def _mat_value(value: Any, key: str) -> Any:
    elements = _struct_elements(value)
    if elements is not None:
        fields = sorted(set.intersection(*(set(e) for e in elements)))
        raise TypeError(f"MAT variable {key!r} is a struct array of {len(elements)} elements with the fields {fields}; "
                        f"pass key='{key}.<field>' to read that field of each element as one trial.")
    if isinstance(value, dict):
        raise TypeError(f"MAT variable {key!r} is a struct with fields {sorted(value)}; pass key='{key}.<field>'.")
    if isinstance(value, list) or (isinstance(value, np.ndarray) and value.dtype == object):
        # a 2-D cell array: its cells in MATLAB's linear (column-major) order, c{1}, c{2}, ..., as v7.3 reads them
        cells = value.ravel(order="F") if isinstance(value, np.ndarray) else value
        return [_numeric(np.squeeze(np.asarray(v)), f"{key}{{{i + 1}}}") for i, v in enumerate(cells)]
    return _numeric(np.squeeze(np.asarray(value)), key)


def _read_mat73(path: Path, key: str | None) -> tuple[Any, dict]:
    import h5py

    with h5py.File(path, "r") as fh:
        variables = [k for k in fh.keys() if not k.startswith("#")]       # "#refs#" holds cell contents
        stored = {k: fh[k][()] for k in ("dt", "fs", "sampling_rate", "time") if k in fh and isinstance(fh[k], h5py.Dataset)}
        if "channel_names" in fh and isinstance(fh["channel_names"], h5py.Dataset):
            stored["channel_names"] = _mat73_strings(fh, fh["channel_names"])
        meta = _stored_meta(stored, path)
        candidates = [k for k in variables if k not in _METADATA_KEYS]
        target = _pick(key, candidates, path).replace(".", "/")
        if target not in fh:
            raise ValueError(f"`key`={key!r} is not in {str(path)!r}; variables: {candidates}.")
        obj = fh[target]
        if isinstance(obj, h5py.Group):
            raise TypeError(f"MAT variable {target!r} is a struct with fields {sorted(obj)}; "
                            f"pass key='{target.replace('/', '.')}.<field>'.")
        cls = obj.attrs.get("MATLAB_class", b"double")
        cls = cls.decode() if isinstance(cls, bytes) else str(cls)
        if cls == "cell":
            # each cell is an object reference to a column-major matrix
            refs = obj[()].T.ravel()
            return [_numeric(np.squeeze(fh[r][()].T), f"{target}{{{i + 1}}}") for i, r in enumerate(refs)], meta
        if cls in ("char", "struct", "function_handle") or obj.dtype.kind not in "biuf":
            raise TypeError(f"MAT variable {target!r} has MATLAB class {cls!r}; expected a numeric array or a cell "
                            "array of numeric arrays.")
        return _numeric(np.squeeze(obj[()].T), target), meta   # reverse h5py's axis order back to MATLAB's


def _mat73_strings(fh: Any, obj: Any) -> list[str]:
    """A v7.3 cell array of char rows (object references) or a char matrix, as strings."""
    def chars(a: np.ndarray) -> str:
        return "".join(chr(int(c)) for c in np.asarray(a).T.ravel() if c)

    data = obj[()]
    if data.dtype.kind == "O":
        return [chars(fh[r][()]) for r in data.T.ravel()]
    return [chars(row) for row in np.atleast_2d(data.T)] if data.ndim > 1 else [chars(data)]


# --------------------------------------------------------------------------- shared


def _pick(key: str | None, candidates: list[str], path: Path, groups: Sequence[str] = ()) -> str:
    if key is not None:
        root = key.replace("/", ".").split(".")[0]
        if root not in {c.replace("/", ".").split(".")[0] for c in candidates} and key not in candidates:
            raise ValueError(f"`key`={key!r} is not in {str(path)!r}; it holds {candidates}.")
        return key
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ValueError(f"{str(path)!r} holds no data array.")
    also = f", or a group of per-trial arrays {groups}," if groups else ""
    raise ValueError(f"{str(path)!r} holds several arrays {candidates}; choose one{also} with `key=` (from the "
                     "command line: --read key=NAME).")


def _numeric(arr: Any, where: str) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype.kind == "c":
        raise TypeError(f"array {where!r} is complex; dsident needs real-valued data.")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"array {where!r} has dtype {arr.dtype}; expected numbers.")
    return arr.astype(np.float64)


def _arrange(trials: Any, dims: Sequence[str] | None) -> tuple[Any, list[str]]:
    """Put one array, or each ragged trial, into (trial, time, channel) / (time, channel) order."""
    if isinstance(trials, list):
        out, order = [], None
        for i, t in enumerate(trials):
            arr, order = _transpose(t, dims, allow_trial=False, where=f"trial {i}")
            out.append(arr)
        return out, ["trial", *(order or [])]
    arr, order = _transpose(trials, dims, allow_trial=True, where="the array")
    return arr, order


def _transpose(arr: np.ndarray, dims: Sequence[str] | None, *, allow_trial: bool, where: str) -> tuple[np.ndarray, list[str]]:
    if dims is None:
        defaults = {0: None, 1: ("time",), 2: ("time", "channel"), 3: ("trial", "time", "channel")}
        if arr.ndim not in defaults or arr.ndim == 0 or (arr.ndim == 3 and not allow_trial):
            raise ValueError(f"{where} has shape {arr.shape}; expected 1 to {3 if allow_trial else 2} axes "
                             "(pass `dims` to name them).")
        dims = defaults[arr.ndim]
    if isinstance(dims, str):
        dims = dims.replace(",", " ").split()
    dims = [str(d) for d in dims]
    allowed = _DIM_NAMES if allow_trial else _DIM_NAMES[1:]
    if len(dims) != arr.ndim or len(set(dims)) != len(dims) or not set(dims) <= set(allowed) or "time" not in dims:
        raise ValueError(f"`dims`={list(dims)} does not fit {where} of shape {arr.shape}: give one distinct name per "
                         f"axis from {list(allowed)}, including 'time'.")
    wanted = [d for d in _DIM_NAMES if d in dims]
    out = np.transpose(arr, [dims.index(d) for d in wanted])
    if "trial" in dims and "channel" not in dims:
        out = out[..., None]                   # (trial, time) -> one channel, not (time, channel)
    return out, dims


def _is_number(text: str) -> bool:
    if text.lower() in _MISSING_WORDS:
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]
