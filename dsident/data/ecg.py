"""ECG: one pipeline from a single ECG channel to a delay-embedded benchmark dataset.

Sources:

- :func:`synthetic_ecg`: ECGSYN (McSharry et al. 2003, IEEE TBME 50:289) from
  :mod:`dsident.data.systems`; the observed signal is its ``z`` variable.
- :func:`from_array`: any recorded 1-D ECG with its sampling rate.
- :func:`load_wfdb`: a PhysioNet WFDB record (needs the optional ``wfdb`` package:
  ``pip install dsident[ecg]``).

:func:`ecg_pipeline` then resamples (default 700 Hz), z-scores, smooths with a Gaussian
(σ = 6 samples at 700 Hz) and delay-embeds into 5 dimensions with the published non-uniform
delays (0, 20, 68, 55, 10) samples, or with automatically chosen ones (``delays="auto"``: first
AMI minimum and false nearest neighbours), and :func:`split_contiguous` cuts train/test.
Every step is recorded in ``attrs["preprocessing"]``.
"""
from __future__ import annotations

import importlib.util
import json
import os
from typing import Any, Sequence

import numpy as np
import xarray as xr

from . import preprocessing as pp
from .container import as_dataset
from .systems import get_system, simulate

__all__ = ["PUBLISHED_DELAYS", "ecg_pipeline", "from_array", "load_wfdb", "synthetic_ecg", "split_contiguous"]

#: Delays (samples at 700 Hz) of the 5-D ECG embedding used in the published benchmark.
PUBLISHED_DELAYS = (0, 20, 68, 55, 10)


def from_array(signal: Any, sampling_rate: float, *, name: str = "ecg", channel_name: str = "ecg",
               provenance: dict | None = None) -> xr.Dataset:
    """Wrap a recorded 1-D ECG as a canonical dataset (``dt = 1 / sampling_rate`` seconds).

    Parameters
    ----------
    signal : array-like of shape (time,)
        One ECG lead (any unit; NaN = missing sample).
    sampling_rate : float
        Samples per second (Hz).
    """
    if isinstance(sampling_rate, bool) or not isinstance(sampling_rate, (int, float, np.number)) \
            or not np.isfinite(sampling_rate) or sampling_rate <= 0:
        raise ValueError(f"`sampling_rate` must be a positive number of samples per second (Hz); got {sampling_rate!r}.")
    arr = np.asarray(signal)
    if arr.ndim != 1:
        raise ValueError(f"`signal` must be one ECG lead of shape (time,); got shape {arr.shape}. "
                         "Select a lead first, e.g. signal[:, 0].")
    prov = {"source": "array", "sampling_rate_hz": float(sampling_rate), **(provenance or {}), "time_unit": "s"}
    return as_dataset(arr, dt=1.0 / float(sampling_rate), channel_names=[channel_name], name=name, provenance=prov)


def load_wfdb(record: str | os.PathLike, *, channel: int | str = 0, sampfrom: int = 0, sampto: int | None = None,
              name: str | None = None) -> xr.Dataset:
    """Read one lead of a WFDB record (PhysioNet format) from disk.

    Parameters
    ----------
    record : str or path-like
        Record path without extension (``.../100`` for ``100.hea`` + ``100.dat``).
    channel : int or str, default 0
        Lead index or signal name (e.g. ``"MLII"``).
    sampfrom, sampto : int, optional
        Sample range to read.

    Returns
    -------
    xarray.Dataset
        One trial, one channel, in physical units (``attrs["units"]``), ``dt = 1/fs`` seconds.

    Raises
    ------
    ImportError
        When the optional ``wfdb`` package is not installed.

    See Also
    --------
    dsident.data.from_wfdb : every lead of a record (what ``load_any`` and the CLI read).
    """
    if importlib.util.find_spec("wfdb") is None:
        raise ImportError("reading WFDB records needs the optional package `wfdb`: pip install 'dsident[ecg]' "
                          "(or pip install wfdb). Plain arrays work without it: dsident.data.ecg.from_array.")
    from .importers.physionet import from_wfdb

    lead = from_wfdb(record, channels=[channel], sampfrom=sampfrom, sampto=sampto)
    fs, lead_name = json.loads(lead.attrs["provenance"])["fs"], str(lead["channel"].values[0])
    ds = from_array(lead["x"].values[0, :, 0], fs, name=name or lead.attrs["name"], channel_name=lead_name,
                    provenance={"source": "wfdb", "record": str(record), "channel": lead_name,
                                "sampling_rate_hz": fs, "sampfrom": sampfrom, "sampto": sampto})
    ds.attrs["units"] = lead.attrs["units"]
    return ds


def synthetic_ecg(duration: float, *, sampling_rate: float = 350.0, seed: int = 0, transient: float = 5.0,
                  rr_duration: float | None = None, **ecgsyn_params: Any) -> xr.Dataset:
    """Simulate ECGSYN and return its ``z`` variable as a one-channel dataset.

    Parameters
    ----------
    duration : float
        Seconds of signal returned (after ``transient`` seconds are discarded).
    sampling_rate : float, default 350
        Hz at which the ODE solution is sampled.
    seed : int
        Seed of the RR-interval process (heart-rate variability).
    rr_duration : float, optional
        Length (s) of the generated RR-interval process; default ``duration + transient + 10``.
        The process depends on it, so pass the stored value to regenerate part of a signal.
    **ecgsyn_params
        Overrides for :func:`dsident.data.systems.get_system` ``("ecgsyn", ...)``.
    """
    if rr_duration is None:
        rr_duration = float(duration + transient + 10.0)
    system = get_system("ecgsyn", duration=float(rr_duration), seed=seed, **ecgsyn_params)
    n_steps = int(round(duration * sampling_rate))
    z = simulate(system, n_steps, 1.0 / sampling_rate, transient=transient)[:, 2]
    provenance = {"source": "ECGSYN (McSharry et al. 2003), dsident.data.systems", "params": system.params,
                  "solver": system.solver, "sampling_rate_hz": sampling_rate, "transient_s": transient,
                  "observed": "z"}
    return from_array(z, sampling_rate, name="ecgsyn", provenance=provenance)


def ecg_pipeline(data: Any, *, sampling_rate: float = 700.0, smooth_sigma: float = 6.0,
                 delays: Sequence[int] | str = PUBLISHED_DELAYS, max_lag: int = 200, max_dim: int = 8,
                 resample_method: str = "polyphase") -> xr.Dataset:
    """Resample → z-score → Gaussian smoothing → delay embedding of one ECG channel.

    Parameters
    ----------
    data : canonical dataset with one channel
        From :func:`from_array`, :func:`load_wfdb` or :func:`synthetic_ecg`; ``dt`` in seconds.
    sampling_rate : float, default 700
        Target rate (Hz); skipped when the data already have it.
    smooth_sigma : float, default 6
        Gaussian σ in samples at the target rate (0 skips smoothing).
    delays : sequence of int or "auto"
        Embedding delays in samples at the target rate; ``"auto"`` chooses a uniform embedding
        (:func:`dsident.data.preprocessing.auto_embed`) and records it.
    max_lag, max_dim : int
        Search ranges for ``delays="auto"``.

    Returns
    -------
    xarray.Dataset
        The embedded series, ``len(delays)`` channels, ``dt = 1 / sampling_rate`` s.
    """
    ds = as_dataset(data)
    if ds.sizes["channel"] != 1:
        raise ValueError(f"the ECG pipeline takes one lead; `data` has channels {list(ds['channel'].values)}.")
    target_dt = 1.0 / float(sampling_rate)
    if not np.isclose(ds.attrs["dt"], target_dt, rtol=1e-9):
        ds = pp.resample(ds, target_dt, method=resample_method)
    ds = pp.zscore(ds)
    if smooth_sigma:
        ds = pp.gaussian_smooth(ds, smooth_sigma)
    if isinstance(delays, str):
        if delays != "auto":
            raise ValueError(f"`delays` must be a sequence of integers or 'auto'; got {delays!r}.")
        return pp.auto_embed(ds, max_lag=max_lag, max_dim=max_dim)
    return pp.delay_embed(ds, delays)


def split_contiguous(data: xr.Dataset, n_train: int, n_test: int | None = None) -> tuple[xr.Dataset, xr.Dataset]:
    """Cut the first trial into a train part (first ``n_train`` samples) and the test part after it.

    Returns
    -------
    train, test : xarray.Dataset
        ``attrs["split"]`` says which samples each holds.
    """
    ds = as_dataset(data)
    n = int(ds["length"].values[0])
    n_test = n - n_train if n_test is None else n_test
    if n_train < 2 or n_test < 2 or n_train + n_test > n:
        raise ValueError(f"cannot split {n} samples into n_train={n_train} and n_test={n_test}.")
    out = []
    for start, count, label in ((0, n_train, "train"), (n_train, n_test, "test")):
        part = as_dataset(ds["x"].values[0, start: start + count], dt=ds.attrs["dt"],
                          channel_names=[str(c) for c in ds["channel"].values], name=ds.attrs.get("name"))
        part.attrs = {**ds.attrs, "split": json.dumps({"split": label, "start": start, "stop": start + count})}
        out.append(part)
    return out[0], out[1]
