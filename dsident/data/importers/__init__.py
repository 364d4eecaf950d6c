"""Importers: recorded data files and objects into the canonical dataset.

=================== ============================================= ==========================
function            reads                                         optional extra
=================== ============================================= ==========================
``load_array``      npy / npz (no pickle), csv with a sampling    (none; h5py is a
                    rate, HDF5, MAT v5 and v7.3                   dependency)
``from_nwb``        NWB TimeSeries (physical units), Units        ``nwb`` (pynwb)
                    spike times (binned), trials table
``from_wfdb``       PhysioNet WFDB records (every lead; invalid   ``ecg`` (wfdb)
                    samples → NaN)
``from_mne``        MNE Raw / Epochs or files (BAD spans → NaN)   ``eeg`` (mne)
``from_neo``        Neo Block / Segments or vendor files          ``neo`` (neo)
``load_any``        any of the above, chosen by file extension
=================== ============================================= ==========================

Optional packages are imported on first use; a missing one raises ``ImportError`` naming the
extra to install. Every importer records the source file and settings in
``attrs["provenance"]`` and the channel units in ``attrs["units"]``.
"""
from __future__ import annotations

from .arrays import load_array
from .dispatch import load_any
from .eeg import from_mne
from .ephys import from_neo
from .nwb import from_nwb
from .physionet import from_wfdb

__all__ = ["load_array", "from_nwb", "from_wfdb", "from_mne", "from_neo", "load_any"]
