"""Data: the canonical container, preprocessing, benchmark systems and I/O.

``as_dataset`` is the one door for user data (validation, NaN mask, ``dt``, channel names);
``to_arrays`` hands its content to numerical code; ``save_dataset``/``load_dataset`` write and
read NetCDF. The submodules ``systems`` (ODE right-hand sides and ``simulate``),
``preprocessing`` (z-score, smoothing, resampling, delay embedding), ``summary`` (what a
dataset holds: ``describe``), ``time_units`` (the unit of ``dt``), ``benchmarks`` (the
shipped sets; public as ``dsident.datasets``) and ``ecg`` (the ECG pipeline and recorded-ECG
loaders) are imported on first use. ``add_slow_channels`` hands a model a slow rhythm (the
ECG's breathing) as two observed channels that the scores leave out.
"""
from __future__ import annotations

import importlib
from typing import Any

from .container import Arrays, as_dataset, to_arrays
from .importers import from_mne, from_neo, from_nwb, from_wfdb, load_any, load_array
from .io import load_dataset, save_dataset
from .slow_channels import add_slow_channels, auxiliary_channels
from .spikes import bin_spikes

_SUBMODULES = {"systems", "preprocessing", "benchmarks", "ecg", "io", "container", "spikes", "importers",
               "tasks", "flipflop", "slow_channels", "summary", "time_units"}

__all__ = ["Arrays", "as_dataset", "to_arrays", "save_dataset", "load_dataset", "bin_spikes", "load_any",
           "load_array", "from_nwb", "from_wfdb", "from_mne", "from_neo", "add_slow_channels", "auxiliary_channels"]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
