"""Helpers shared by the importers: lazy optional imports, sampling steps, unit labels."""
from __future__ import annotations

import importlib
import numbers
from types import ModuleType
from typing import Any

import numpy as np

from ..._version import __version__

#: optional package -> the dsident extra that installs it
EXTRAS = {"wfdb": "ecg", "pynwb": "nwb", "mne": "eeg", "neo": "neo", "quantities": "neo", "h5py": "h5py"}


def require(module: str, what: str) -> ModuleType:
    """Import an optional package, or raise ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        extra = EXTRAS.get(module.split(".")[0])
        hint = f"pip install 'dsident[{extra}]'" if extra and extra != "h5py" else f"pip install {module}"
        raise ImportError(f"{what} needs the optional package `{module}`, which is not installed ({err}). "
                          f"Install it with: {hint}") from None


def sampling_step(dt: Any, fs: Any, *, required: bool = False, what: str = "the data") -> float | None:
    """``dt`` from ``dt`` or ``fs`` (at most one); None when neither is given and not required."""
    if dt is not None and fs is not None:
        raise ValueError(f"give either `dt` or `fs`, not both; got dt={dt!r}, fs={fs!r}.")
    value, name = (dt, "dt") if dt is not None else (fs, "fs")
    if value is None:
        if required:
            raise ValueError(f"{what} carries no sampling rate; pass `fs` (samples per second) or `dt` (seconds).")
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}.")
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"`{name}` must be a positive finite number; got {name}={value!r}.")
    return value if name == "dt" else 1.0 / value


def provenance(source: str, path: Any = None, **fields: Any) -> dict:
    """The provenance record of an import (JSON-able)."""
    out: dict[str, Any] = {"source": source, "dsident_version": __version__}
    if path is not None:
        out["path"] = str(path)
    out.update({k: v for k, v in fields.items() if v is not None})
    return out


def units_attr(units: list[str]) -> str:
    """``attrs["units"]``: one unit string when all channels share it, else each channel's unit in
    channel order, joined by "; " (``"mV; pA"``; read back by ``plotting._channel_units``)."""
    return units[0] if len(set(units)) == 1 else "; ".join(units)


def check_same_units(names: list[str], units: list[str], argname: str, fix: str) -> None:
    """Raise ValueError when channels meant to be stacked carry different units."""
    distinct = sorted(set(units))
    if len(distinct) > 1:
        by_unit = {u: [n for n, v in zip(names, units) if v == u][:4] for u in distinct}
        raise ValueError(f"unit mismatch in `{argname}`: the selected channels carry different units "
                         f"{by_unit}; {fix}")
