"""NetCDF files for canonical datasets: :func:`save_dataset` and :func:`load_dataset`.

Two formats:

- ``"netcdf4"`` (default): NetCDF-4/HDF5 with zlib compression, written through ``h5netcdf``
  (needs ``h5py``) or ``netCDF4``, whichever is installed. Without either, the file falls back
  to NetCDF-3.
- ``"netcdf3"``: NetCDF-3 (64-bit offsets) through scipy, uncompressed. scipy is a hard
  dependency, so these files open everywhere; the shipped benchmark files use it.

A round trip is lossless for float64 data; ``dtype="float32"`` halves the file size and is what
the shipped benchmark files use (loading converts back to float64, the container's dtype).
"""
from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from .container import as_dataset

__all__ = ["save_dataset", "load_dataset", "netcdf_engine"]


def netcdf_engine() -> str:
    """The xarray NetCDF engine used for writing: ``"h5netcdf"``, ``"netcdf4"`` or ``"scipy"``."""
    if importlib.util.find_spec("h5netcdf") and importlib.util.find_spec("h5py"):
        return "h5netcdf"
    if importlib.util.find_spec("netCDF4"):
        return "netcdf4"
    return "scipy"


def save_dataset(ds: xr.Dataset, path: str | os.PathLike, *, dtype: str | None = None,
                 compress: bool = True, format: str = "netcdf4") -> Path:
    """Write a dataset to a NetCDF file, atomically.

    Parameters
    ----------
    ds : xarray.Dataset
        Usually a canonical dataset (:func:`~dsident.data.as_dataset`); any Dataset works.
    path : str or path-like
        Target file (``.nc``). Written to a temporary file in the same folder first and moved
        into place, so a failure never leaves a half-written file.
    dtype : {"float32", "float64"} or None
        Store floating-point variables and coordinates in this precision (None: as they are).
        :func:`load_dataset` rebuilds the ``time`` coordinate of a canonical dataset from ``dt``.
    compress : bool, default True
        zlib compression with byte shuffling (NetCDF-4 only).
    format : {"netcdf4", "netcdf3"}
        File format (see the module docstring).

    Returns
    -------
    pathlib.Path
        The written path.

    Notes
    -----
    NetCDF attributes hold strings and numbers only: dict and list attributes are stored as
    JSON strings and bools as 0/1.
    """
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"`ds` must be an xarray.Dataset; got {type(ds).__name__}.")
    if dtype not in (None, "float32", "float64"):
        raise ValueError(f"`dtype` must be None, 'float32' or 'float64'; got {dtype!r}.")
    if format not in ("netcdf4", "netcdf3"):
        raise ValueError(f"`format` must be 'netcdf4' or 'netcdf3'; got {format!r}.")
    path = Path(path)
    if not path.parent.exists():
        raise FileNotFoundError(f"folder {str(path.parent)!r} of `path` does not exist.")
    out = ds.copy()
    out.attrs = {k: _attr_value(v) for k, v in ds.attrs.items()}
    for var in out.variables.values():
        var.attrs = {k: _attr_value(v) for k, v in var.attrs.items()}
    engine = netcdf_engine() if format == "netcdf4" else "scipy"
    encoding: dict[str, dict[str, Any]] = {}
    for key, var in out.variables.items():
        enc: dict[str, Any] = {}
        if dtype is not None and var.dtype.kind == "f":
            enc["dtype"] = dtype
        if compress and engine != "scipy" and var.ndim > 0 and key in out.data_vars:
            enc.update(zlib=True, complevel=4, shuffle=True)
        encoding[str(key)] = enc
    fd, tmp = tempfile.mkstemp(suffix=".nc.tmp", dir=path.parent)
    os.close(fd)
    try:
        out.to_netcdf(tmp, engine=engine, encoding=encoding,
                      format="NETCDF3_64BIT" if engine == "scipy" else "NETCDF4")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)           # mkstemp makes 0600; give the usual file mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def load_dataset(path: str | os.PathLike, *, validate: bool = True) -> xr.Dataset:
    """Read a NetCDF file written by :func:`save_dataset` into memory.

    Parameters
    ----------
    path : str or path-like
        The file.
    validate : bool, default True
        Pass the result through :func:`~dsident.data.as_dataset` (checks and the canonical
        layout) when it has an ``x`` variable.

    Returns
    -------
    xarray.Dataset
        Fully loaded (the file is closed); floating-point variables as float64.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no NetCDF file at {str(path)!r}.")
    try:
        handle = xr.open_dataset(path, engine=_read_engine(path))
    except (ValueError, OSError) as err:
        reason = str(err).splitlines()[0].split(". ")[0]
        raise ValueError(f"{str(path)!r} is not a readable NetCDF file (xarray: {reason}); "
                         "write one with dsident.data.save_dataset, or give the data as .npy/.csv with dt.") from err
    with handle:
        ds = handle.load()
    for key in list(ds.data_vars):
        if ds[key].dtype.kind == "f" and ds[key].dtype != np.float64:
            # numpy cast, not DataArray.astype: the latter goes through apply_ufunc, which imports
            # dask when installed (a second on first use)
            ds[key] = ds[key].copy(data=ds[key].values.astype(np.float64))
    for key in ds.data_vars:
        ds[key].encoding = {}
    if validate and "x" in ds:
        ds = as_dataset(ds)
    return ds


def _read_engine(path: Path) -> str | None:
    with open(path, "rb") as fh:
        magic = fh.read(8)
    if magic.startswith(b"\x89HDF"):
        if importlib.util.find_spec("h5netcdf") and importlib.util.find_spec("h5py"):
            return "h5netcdf"
        if importlib.util.find_spec("netCDF4"):
            return "netcdf4"
        raise ImportError(f"{str(path)!r} is a NetCDF-4 (HDF5) file; reading it needs `h5py` (with h5netcdf) "
                          "or `netCDF4`: pip install h5py")
    return None


def _attr_value(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    return value
