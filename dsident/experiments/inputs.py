"""Turn a DATA argument (shipped set name or file path) into the canonical dataset.

``dsident fit DATA`` and the benchmark accept

- a shipped set name (``dsident.datasets.load``): ``lorenz63``, ``bursting_neuron``, ``ecg``, ...;
- a NetCDF file (``.nc``) holding the canonical layout (or any ``x`` variable);
- a plain array: ``.npy`` (loaded without pickle), ``.npz`` (first array), ``.csv``/``.txt``
  (one column per channel, ``#`` comments), shape (time, channel) or (trial, time, channel),
  with the sampling step given by ``dt``.

When the recorded-data importers (``dsident.data.load_array`` and friends) are present they
are used for their formats; this module only decides which loader a path needs.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import xarray as xr

from .._text import listed


def is_path_like(spec: str) -> bool:
    """True when ``spec`` names a file rather than a shipped dataset (set names have no suffix)."""
    return bool(Path(str(spec)).suffix) or "/" in str(spec) or Path(str(spec)).exists()


def shipped_names() -> list[str]:
    """Names of the shipped datasets."""
    from .. import datasets

    return sorted(datasets.DATASETS)


def load_data(spec: Any, *, split: str = "train", dt: float | None = None,
              length: int | None = None, read: dict[str, Any] | None = None) -> xr.Dataset:
    """Load ``spec`` as the canonical dataset, optionally cut to its first ``length`` samples.

    Parameters
    ----------
    spec : str, pathlib.Path or xarray.Dataset
        Shipped set name, file path, or an in-memory dataset (passed through ``as_dataset``).
    split : {"train", "test"}
        Split of a shipped set; ignored for files.
    dt : float, optional
        Sampling step of a plain array file (required for .npy/.csv unless the array is unitless).
    length : int, optional
        Keep only the first ``length`` time steps of every trial.
    read : dict, optional
        Options for a file's reader (:func:`dsident.data.load_any`): ``key`` of an HDF5 / MAT /
        NPZ array, ``series`` or ``bin_size`` of an NWB file, ``picks`` of an MNE recording,
        ``time_column`` of a text table, ... (``dsident fit --read KEY=VALUE``). Refused for a
        shipped set or an in-memory dataset, which have no reader.

    Returns
    -------
    xarray.Dataset
        ``x(trial, time, channel)`` with attrs ``dt``, ``name``.
    """
    from ..data import as_dataset

    is_file = isinstance(spec, (str, Path)) and is_path_like(str(spec))
    if read and not is_file:
        raise ValueError(f"reader options (--read) {sorted(read)} apply to a data file, but the data are "
                         f"{'a shipped set' if isinstance(spec, str) else 'a dataset in memory'} ({str(spec)[:60]!r}).")
    if isinstance(spec, xr.Dataset):
        ds = as_dataset(spec, dt=dt)
    elif is_file:
        ds = _load_file(Path(spec), dt, read)
    elif isinstance(spec, str):
        from .. import datasets

        ds = datasets.load(spec, split=split)
    else:
        raise TypeError(f"`data` must be a dataset name, a file path or an xarray.Dataset; "
                        f"got {type(spec).__name__}.")
    if length is not None:
        if int(length) < 2:
            raise ValueError(f"`length` must be an integer ≥ 2 (time steps); got {length!r}.")
        ds = cut(ds, int(length))
    return ds


def cut(ds: xr.Dataset, length: int) -> xr.Dataset:
    """First ``length`` time steps of every trial (keeps attrs; updates ``length``)."""
    out = ds.isel(time=slice(0, int(length)))
    if "length" in out:
        out["length"] = np.minimum(out["length"], out.sizes["time"])
    out.attrs = dict(ds.attrs)
    return out


#: plain array formats; of them only a .npz can store its sampling step (a `dt` or `fs` entry)
PLAIN_SUFFIXES = (".npy", ".npz", ".csv", ".tsv", ".txt")


def carries_step(path: Path) -> bool:
    """False for a plain array file without its sampling step (any other format carries one or
    a default its reader documents; a text table with a time column, its sample times)."""
    from ..data.importers.arrays import time_column_of

    suffix = path.suffix.lower()
    if suffix not in PLAIN_SUFFIXES:
        return True
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as archive:
            return bool({"dt", "fs"} & set(archive.files))
    return suffix != ".npy" and time_column_of(path) is not None


def check_grid_datasets(datasets: Iterable[Any]) -> None:
    """Refuse, before a benchmark or sweep starts, a data file that does not exist or cannot
    tell its sampling step: grid points take no `dt`, so every point would fail on it."""
    for name in dict.fromkeys(str(d) for d in datasets):
        if not is_path_like(name):
            continue
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"data file {name!r} does not exist; give a shipped set name "
                             f"({', '.join(shipped_names())}) or an existing file.")
        if not carries_step(path):
            raise ValueError(f"data file {name!r} carries no sampling step, and a benchmark or sweep point takes "
                             "no `dt`; store it with the data (dsident.data.save_dataset(dsident.as_dataset(x, "
                             "dt=...), 'data.nc'), numpy.savez('data.npz', x=x, dt=...), or a text table's column of sample "
                             "times named `time` in its header line), or fit the file alone "
                             "with `dsident fit FILE --dt DT`.")


def check_grid_files(configs: Iterable[Mapping[str, Any]]) -> None:
    """Read every data file of a grid's points once as its points will (``read`` options, the
    held-out split of ``test_fraction``, ``test_data``, ``zscore``) and refuse, before anything is fitted,
    one that fails: a wrong ``--read`` key or a share that leaves a trial too short would
    otherwise fail every point of the grid, one by one."""
    import json
    import warnings

    from ..data.summary import counts_note
    from .config import observation_name

    def key_of(cfg: Mapping[str, Any]) -> str:
        return json.dumps({k: cfg.get(k) for k in ("dataset", "read", "test_fraction", "test_data", "zscore")},
                          sort_keys=True, default=str)

    configs = list(configs)
    # the files some point fits afresh with the Gaussian default: warned, as `dsident fit` warns, when
    # they hold counts
    gaussian = {key_of(cfg) for cfg in configs if not cfg.get("init") and observation_name(cfg) == "gaussian"}
    seen = set()
    for cfg in configs:
        if not is_path_like(str(cfg.get("dataset"))):
            continue
        key = key_of(cfg)
        if key in seen:
            continue
        seen.add(key)
        what = f"data file {cfg['dataset']!r}" + (f" with --read {cfg['read']}" if cfg.get("read") else "")
        try:
            if cfg.get("test_fraction") is not None:
                train, _ = held_out_split(cfg)
            else:
                train = load_data(cfg["dataset"], split="train", read=cfg.get("read"))
            if cfg.get("zscore") is True:       # a constant channel cannot be z-scored, in any point
                zscore_for_fit(train)
            if cfg.get("test_data"):
                load_data(cfg["test_data"], split="test", read=read_options_for(cfg, cfg["test_data"]))
        except (ValueError, TypeError, KeyError, OSError) as err:
            raise ValueError(f"{what}: {err} Nothing was fitted.") from None
        note = counts_note(train) if key in gaussian else None
        if note is not None:            # a continuous likelihood for spike counts fits, but models the wrong thing
            warnings.warn(f"{what}: {note}", UserWarning, stacklevel=2)


def _load_file(path: Path, dt: float | None, read: dict[str, Any] | None = None) -> xr.Dataset:
    """Read a data file by its extension with :func:`dsident.data.load_any` (NetCDF, arrays,
    HDF5/MAT, NWB, MNE and Neo formats); ``dt`` is the step of plain arrays or the NWB bin width,
    ``read`` the reader's own options (``key``, ``series``, ``picks``, ...) and, for every format,
    ``channels``: the channels kept, by name or position (:func:`select_channels`)."""
    read = dict(read or {})
    channels = read.pop("channels", None)
    ds = _read_file(path, dt, read)
    return ds if channels is None else select_channels(ds, channels)


def select_channels(ds: xr.Dataset, channels: Any) -> xr.Dataset:
    """``ds`` with only ``channels``, in the order given: names, or positions (0-based) for
    channels without names; a list or one comma-separated string (``--read channels=V,I``).
    How a recording's constant or unwanted channels are dropped without re-saving the file; a
    fit keeps the option in its ``config.json``, so ``evaluate`` and ``analyze`` read its test
    data the same way."""
    wanted = [c.strip() for c in channels.split(",")] if isinstance(channels, str) else list(np.atleast_1d(channels))
    names = [str(c) for c in ds["channel"].values]
    picked = []
    for c in wanted:
        if str(c) in names:
            picked.append(names.index(str(c)))
        elif isinstance(c, (int, np.integer)) or (isinstance(c, str) and c.lstrip("-").isdigit()):
            k = int(c)
            if not -len(names) <= k < len(names):
                raise ValueError(f"--read channels: position {k} is outside the data's {len(names)} channel(s) "
                                 f"{listed(names)}.")
            picked.append(k % len(names))
        else:
            raise ValueError(f"--read channels: {c!r} is not a channel of the data; they are {listed(names)} "
                             "(names, or 0-based positions).")
    if not picked or len(set(picked)) != len(picked):
        raise ValueError(f"--read channels must name each kept channel once; got {wanted!r}.")
    return ds.isel(channel=picked)


def _read_file(path: Path, dt: float | None, read: dict[str, Any]) -> xr.Dataset:
    """:func:`_load_file` without the channel selection."""
    from ..data import as_dataset, load_any

    if not path.exists():
        header = path.with_name(path.name + ".hea")
        if header.is_file():        # a PhysioNet record named as wfdb names it, without its extension
            raise ValueError(f"data file {str(path)!r} does not exist, but the WFDB record header {str(header)!r} "
                             "does: give the header (or its .dat) as the data file.")
        raise ValueError(f"data file {str(path)!r} does not exist; give a shipped set name "
                         f"({', '.join(shipped_names()) or 'see dsident.datasets'}) or an existing file.")
    suffix = path.suffix.lower()
    if dt is None and not carries_step(path):
        # a guessed step would silently rescale every time constant a continuous-time model learns
        raise ValueError(f"plain array file {str(path)!r} carries no sampling step: pass `dt` (--dt), or, for a "
                         "text table, give it a column of sample times named `time` in a header line.")
    if suffix in (".nc", ".nc4", ".netcdf"):
        from ..data.io import load_dataset

        if read:        # read as it is, below: an option would be dropped without a word
            raise ValueError(f"--read {sorted(read)}: {path.name!r} is a NetCDF file, which is read as it is and "
                             "takes no reader options; leave --read out.")

        raw = load_dataset(path, validate=False)
        if "x" not in raw:
            if len(raw.data_vars) != 1:
                raise ValueError(f"NetCDF file {str(path)!r} has no variable 'x' and several variables "
                                 f"{list(raw.data_vars)}; rename the observations to 'x'.")
            raw = raw.rename({next(iter(raw.data_vars)): "x"})
        return as_dataset(raw, dt=dt, name=raw.attrs.get("name", path.stem))
    options = {**(read or {}), **({} if dt is None else {"dt": dt})}
    from ..data.importers.dispatch import UnknownReaderOptions

    try:
        return load_any(path, **options)
    except UnknownReaderOptions as err:
        # the reader's own words name a Python argument; say which flag it came from
        raise ValueError(f"--read {err.unknown}: the reader of {path.name!r} does not take "
                         f"{'it' if len(err.unknown) == 1 else 'them'} ({err}); see dsident.data.load_any for each "
                         "format's options.") from None


def zscore_for_fit(train: xr.Dataset) -> tuple[xr.Dataset, dict[str, Any]]:
    """``train`` z-scored per channel, and the constants to reuse on every later dataset.

    Returns
    -------
    (xarray.Dataset, dict)
        The standardised data and ``{"channel": [...], "mean": [...], "std": [...]}`` (the
        data's units), stored in a fit's ``config.json`` under ``zscore``.

    Raises
    ------
    ValueError
        A constant channel (std 0), named (see :func:`dsident.data.zscore`).
    """
    from ..data.preprocessing import preprocessing_steps, zscore

    out = zscore(train)
    step = preprocessing_steps(out)[-1]
    return out, {key: step[key] for key in ("channel", "mean", "std")}


#: keys of a run configuration's ``slow_channels`` table (``scale`` is filled in by the fit, and so
#: are ``chosen`` and ``burst_period`` for ``cutoff = "auto"``, so a saved table can be given again)
SLOW_CHANNEL_KEYS = ("cutoff", "channel", "order", "scale", "edges", "chosen", "burst_period")


def check_slow_channels(spec: Any) -> None:
    """Validate a configuration's ``slow_channels`` table (:func:`dsident.data.add_slow_channels`'s
    keyword arguments, ``cutoff`` a frequency or ``"auto"``); raises ValueError naming what is wrong."""
    if not isinstance(spec, dict) or "cutoff" not in spec:
        raise ValueError("`slow_channels` must be a table with at least `cutoff` (Hz of the data's time unit, or "
                         f"\"auto\"), e.g. {{cutoff = 0.6, channel = 0}}; got slow_channels={spec!r}.")
    unknown = sorted(set(spec) - set(SLOW_CHANNEL_KEYS))
    if unknown:
        raise ValueError(f"unknown `slow_channels` key(s) {unknown}; expected some of {list(SLOW_CHANNEL_KEYS)}.")
    cutoff = spec["cutoff"]
    if cutoff != "auto" and (isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or not cutoff > 0):
        raise ValueError(f"`slow_channels.cutoff` (--slow-channels) must be a positive frequency or \"auto\"; "
                         f"got {cutoff!r}.")
    from ..data.slow_channels import EDGE_MODES

    if spec.get("edges", EDGE_MODES[0]) not in EDGE_MODES:
        raise ValueError(f"`slow_channels.edges` must be one of {list(EDGE_MODES)}; got {spec['edges']!r}.")


def auto_slow_cutoff(train: xr.Dataset, channel: int | str = 0) -> dict[str, Any]:
    """``cutoff = "auto"`` resolved on the training data: the bursts of ``channel`` in the first
    trial (:func:`dsident.analysis.bursts.find_bursts`) and the cutoff
    (:func:`dsident.analysis.bursts.burst_cutoff`), as ``{"cutoff", "chosen": "auto",
    "burst_period"}``. Raises ValueError when the channel does not burst, naming what was looked
    for and how many spikes were found."""
    from ..analysis.bursts import (MIN_BURSTS, MIN_ISI_RATIO, MIN_SPIKES_PER_BURST, burst_cutoff, find_bursts,
                                   find_spikes)
    from ..data import to_arrays
    from ..data.slow_channels import channel_position

    names = [str(c) for c in train["channel"].values]
    k = channel_position(names, channel, argname="slow_channels.channel")
    arrays = to_arrays(train)
    dt = float(train.attrs.get("dt", 1.0))
    series = arrays.x[0, : arrays.length[0], k]
    bursts = find_bursts(series, dt)
    if bursts is None:
        n_spikes = sum(p.size for p in find_spikes(series))
        raise ValueError(f"--slow-channels auto (`slow_channels.cutoff = \"auto\"`) reads the cutoff from the bursts "
                         f"of channel {names[k]!r}, and its training data do not burst ({n_spikes} spikes found; a "
                         f"burster needs at least {MIN_BURSTS} bursts "
                         f"of {MIN_SPIKES_PER_BURST}+ spikes, the gaps between them {MIN_ISI_RATIO:g}x the intervals "
                         "within; `dsident inspect` shows what it finds): give the cutoff in cycles per time unit, "
                         "e.g. --slow-channels 0.4.")
    return {"cutoff": burst_cutoff(bursts), "chosen": "auto", "burst_period": bursts.period}


def slow_channels_for_fit(train: xr.Dataset, spec: dict[str, Any], *,
                          before: xr.Dataset | None = None) -> tuple[xr.Dataset, dict[str, Any]]:
    """``train`` with the slow channels of ``spec`` (:func:`dsident.data.add_slow_channels`), and
    ``spec`` completed with the training data's ``scale`` (and, for ``cutoff = "auto"``, the
    cutoff :func:`auto_slow_cutoff` reads from its bursts), which every later dataset reuses
    (:func:`in_fit_units`); stored in the fit's config under ``slow_channels``. ``before``: the
    recording just before ``train``, filtered across (see ``add_slow_channels``)."""
    from ..data.slow_channels import add_slow_channels

    check_slow_channels(spec)
    chosen = auto_slow_cutoff(train, spec.get("channel", 0)) if spec["cutoff"] == "auto" else \
        {k: spec[k] for k in ("chosen", "burst_period") if k in spec}
    options = {k: spec[k] for k in ("channel", "order", "edges") if k in spec}
    cutoff = chosen.get("cutoff", spec["cutoff"])
    out, settings = add_slow_channels(train, cutoff, scale=spec.get("scale"), before=before, **options)
    return out, {**settings, **chosen}


#: keys of a ``delay_embedding`` table (``--delay-embed``); ``chosen`` ("auto") is what a fit's
#: config.json adds to delays it chose, so a saved table can be given again as it is
EMBEDDING_KEYS = ("delays", "channel", "max_lag", "max_dim", "fnn_threshold", "chosen")

#: false-nearest-neighbour share at which ``delay_embedding = "auto"`` stops adding dimensions
from ..data.preprocessing import RECORDING_FNN_THRESHOLD as EMBEDDING_FNN_THRESHOLD  # noqa: E402


def check_delay_embedding(spec: Any) -> dict[str, Any]:
    """The ``delay_embedding`` run key as a table: ``"auto"`` or a list of delays (samples) is
    short for ``{"delays": ...}``; refuse unknown keys and values that are not delays, naming them.

    ``delays``: ``"auto"`` (the delay at the first minimum of the average mutual information, the
    dimension by false nearest neighbours: :func:`dsident.data.preprocessing.auto_embed`, with
    ``max_lag``, ``max_dim`` and ``fnn_threshold``) or distinct non-negative whole numbers of
    samples; ``channel``: the channel to embed (required when the data have several; the others
    are left out)."""
    table = {"delays": spec} if isinstance(spec, (str, list, tuple)) else spec
    if not isinstance(table, dict):
        raise ValueError(f"`delay_embedding` (--delay-embed) must be \"auto\", a list of delays in samples or a "
                         f"table with `delays`; got {spec!r}.")
    unknown = sorted(set(table) - set(EMBEDDING_KEYS))
    if unknown or "delays" not in table:
        raise ValueError(f"`delay_embedding` needs `delays` and takes only {list(EMBEDDING_KEYS)}; got keys "
                         f"{sorted(table)}.")
    delays = table["delays"]
    if delays != "auto":
        ok = (isinstance(delays, (list, tuple)) and len(delays) >= 2
              and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in delays)
              and len(set(int(d) for d in delays)) == len(delays))
        if not ok:
            raise ValueError(f"`delay_embedding.delays` must be \"auto\" or two or more distinct whole numbers of "
                             f"samples >= 0 (e.g. [0, 20, 68]); got {delays!r}.")
        table = {**table, "delays": [int(d) for d in delays]}
    for key, low in (("max_lag", 1), ("max_dim", 2)):
        value = table.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low):
            raise ValueError(f"`delay_embedding.{key}` must be a whole number >= {low}; got {value!r}.")
    threshold = table.get("fnn_threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not 0 < threshold < 1):
        raise ValueError(f"`delay_embedding.fnn_threshold` must be a share in (0, 1); got {threshold!r}.")
    return dict(table)


def _embedding_source(ds: xr.Dataset, channel: Any) -> xr.Dataset:
    """``ds`` with the channel to embed named ``channel`` (a one-channel recording's only channel
    is taken whatever its name); refuses data without it."""
    names = [str(c) for c in ds["channel"].values]
    if channel is None:
        if len(names) != 1:
            raise ValueError(f"`delay_embedding` embeds one channel; the data have {len(names)} {listed(names)}: "
                             "name it (`delay_embedding.channel`, or --delay-embed with a config table).")
        return ds
    if str(channel) in names:
        return ds
    if len(names) == 1:
        return ds.assign_coords(channel=[str(channel)])
    raise ValueError(f"`delay_embedding.channel` {channel!r} is not a channel of the data; available {listed(names)}.")


def embedding_for_fit(train: xr.Dataset, spec: Any) -> tuple[xr.Dataset, dict[str, Any]]:
    """``train`` delay-embedded (:func:`dsident.data.delay_embed`), and ``spec`` resolved: the
    channel and the delays (for ``"auto"``, those :func:`dsident.data.preprocessing.auto_embed`
    chooses on ``train``, with its delay and dimension), which every later dataset reuses
    (:func:`in_fit_units`); stored in the fit's config under ``delay_embedding``."""
    from ..data import to_arrays
    from ..data.preprocessing import choose_embedding, delay_embed

    spec = check_delay_embedding(spec)
    train = _embedding_source(train, spec.get("channel"))
    channel = str(spec.get("channel") or train["channel"].values[0])
    resolved = {**spec, "channel": channel}
    if spec["delays"] == "auto":     # chosen on the first trial, as dsident.data.auto_embed does
        options = {"max_lag": spec.get("max_lag", 100), "max_dim": spec.get("max_dim", 10),
                   "fnn_threshold": spec.get("fnn_threshold", EMBEDDING_FNN_THRESHOLD)}
        arrays = to_arrays(train)
        k = [str(c) for c in train["channel"].values].index(channel)
        choice = choose_embedding(arrays.x[0, : arrays.length[0], k], **options)
        resolved = {**resolved, **options, "chosen": "auto", "delays": choice["delays"]}
    return delay_embed(train, resolved["delays"], channels=[channel]), resolved


def channels_for_fit(train: xr.Dataset, cfg: Mapping[str, Any]) -> tuple[xr.Dataset, dict[str, Any]]:
    """``train`` with the channels the fit of ``cfg`` sees: delay-embedded
    (:func:`embedding_for_fit`), then with its slow channels (:func:`slow_channels_for_fit`);
    and ``cfg`` with both resolved (the delays chosen, the slow channels' ``scale``), which every
    later dataset reuses (:func:`in_fit_units`). A resolved configuration (a saved fit's, for
    ``--init``) gives the same delays and scale again. ``dsident fit`` and every grid point."""
    cfg = dict(cfg)
    if cfg.get("delay_embedding") is not None:
        train, cfg["delay_embedding"] = embedding_for_fit(train, cfg["delay_embedding"])
    if cfg.get("slow_channels") is not None:
        train, cfg["slow_channels"] = slow_channels_for_fit(train, cfg["slow_channels"])
    return train, cfg


def _embedded(ds: xr.Dataset, cfg: Mapping[str, Any]) -> xr.Dataset:
    """``ds`` delay-embedded as the fit's data were (``cfg["delay_embedding"]``, resolved);
    unchanged without one."""
    spec = cfg.get("delay_embedding")
    if not isinstance(spec, dict):
        return ds
    if not isinstance(spec.get("delays"), list):
        raise ValueError("`delay_embedding` has no resolved `delays`: they are chosen on the training data by the "
                         "fit (embedding_for_fit); evaluate with the configuration a fit saved.")
    from ..data.preprocessing import delay_embed

    return delay_embed(_embedding_source(ds, spec["channel"]), spec["delays"], channels=[spec["channel"]])


def zscored_as_fit(ds: xr.Dataset, cfg: dict[str, Any]) -> xr.Dataset:
    """``ds`` z-scored with the fit's constants (``cfg["zscore"]``); unchanged without them."""
    scaling = cfg.get("zscore")
    if not isinstance(scaling, dict):
        return ds
    from ..data.preprocessing import zscore

    channels = [str(c) for c in ds["channel"].values]
    if len(channels) != len(scaling["channel"]):
        raise ValueError(f"the data have {len(channels)} channels {listed(channels)} but the model was fitted on "
                         f"{len(scaling['channel'])} {listed(scaling['channel'])}.")
    return zscore(ds, mean=scaling["mean"], std=scaling["std"])


def in_fit_units(ds: xr.Dataset, cfg: dict[str, Any], *, before: xr.Dataset | None = None) -> xr.Dataset:
    """``ds`` in the units and channels the fit of ``cfg`` saw: z-scored with the training data's
    constants when it was fitted with ``zscore`` (``cfg["zscore"]``), delay-embedded with the
    fit's delays (``cfg["delay_embedding"]``), and with the fit's slow channels added
    (``cfg["slow_channels"]``, with the training data's ``scale``); unchanged otherwise.

    ``before`` (raw units, like ``ds``): the recording just before ``ds``; the slow channels are
    filtered across it, so that ``ds``'s first samples carry no edge effect
    (:func:`dsident.data.add_slow_channels`). :func:`load_test` finds it for a test set.

    Raises
    ------
    ValueError
        ``ds`` has other channels than the training data, or ``slow_channels`` has no ``scale``
        (a configuration that was never fitted).
    """
    ds = _embedded(zscored_as_fit(ds, cfg), cfg)
    slow = cfg.get("slow_channels")
    if isinstance(slow, dict):
        if "scale" not in slow:
            raise ValueError("`slow_channels` has no `scale`: the training data's scale is set by the fit "
                             "(slow_channels_for_fit); evaluate with the configuration a fit saved.")
        prior = None if before is None else _embedded(zscored_as_fit(before, cfg), cfg)
        ds, _ = slow_channels_for_fit(ds, slow, before=prior)
    return ds


def split_bounds(ds: xr.Dataset) -> tuple[int, int] | None:
    """``(start, stop)`` sample indices of a split in its recording (``attrs["split"]``, as the
    shipped sets and :func:`dsident.data.ecg.split_contiguous` write it); None when unknown."""
    import json

    raw = ds.attrs.get("split")
    try:
        info = json.loads(raw) if isinstance(raw, str) else raw
        return int(info["start"]), int(info["stop"])
    except (TypeError, ValueError, KeyError):
        return None


def continues(test: xr.Dataset, train: xr.Dataset) -> bool:
    """True when ``test`` is the stretch of the recording right after ``train`` (their
    ``attrs["split"]`` bounds meet) with the same channels and trials."""
    a, b = split_bounds(train), split_bounds(test)
    return (a is not None and b is not None and a[1] == b[0]
            and [str(c) for c in train["channel"].values] == [str(c) for c in test["channel"].values]
            and train.sizes["trial"] == test.sizes["trial"])


def read_options_for(cfg: Mapping[str, Any], spec: Any) -> dict[str, Any] | None:
    """The fit's reader options (``cfg["read"]``, ``--read``) for the file ``spec``: the fitted
    file itself or another of the same format (the same extension), as ``--dt`` carries over;
    None for a shipped set, a dataset in memory or a file of another format."""
    fitted = cfg.get("dataset")
    if not cfg.get("read") or not isinstance(fitted, (str, Path)) or not isinstance(spec, (str, Path)):
        return None
    suffix = file_format_of(fitted)
    return dict(cfg["read"]) if suffix != "" and file_format_of(spec) == suffix else None


def file_format_of(spec: str | Path) -> str:
    """The lower-case extension that tells ``spec``'s reader: ``.hea`` for a WFDB record named by
    its header or by its ``.dat`` signal file (the header beside it), which read alike."""
    from ..data.importers.physionet import wfdb_record_of

    return ".hea" if wfdb_record_of(str(spec)) is not None else Path(str(spec)).suffix.lower()


def held_out_split(cfg: Mapping[str, Any], *, argname: str = "test_fraction") -> tuple[xr.Dataset, xr.Dataset]:
    """The data file of a run (``cfg["dataset"]``, read with ``cfg["read"]``) split in time: every
    trial without its last ``cfg["test_fraction"]``, and those held-out ends (raw units).

    ``argname`` names the setting in the error of a fraction that leaves a part too short."""
    from ..data.preprocessing import split_in_time

    data = load_data(cfg["dataset"], split="train", dt=cfg.get("dt"), read=cfg.get("read"))
    return split_in_time(data, cfg["test_fraction"], argname=argname)


def run_test(cfg: Mapping[str, Any], *, length: int | None = None,
             held: tuple[xr.Dataset, xr.Dataset] | None = None) -> xr.Dataset:
    """The test data of a run configuration, in its fit's units and channels: the held-out end of
    every trial of its data file (``test_fraction``; ``held``, the pair :func:`held_out_split`
    returns, when the caller has it), else ``test_data``, else the dataset itself (a shipped
    set's test split). Grid points, their starts, the benchmark's figures and the analysis of
    its best points all score on this.

    Parameters
    ----------
    cfg : mapping
        A run configuration (``dataset``, and ``test_fraction`` / ``test_data`` / ``read`` /
        ``slow_channels`` / ``zscore`` where set).
    length : int, optional
        Keep the first ``length`` samples of every trial.
    held : (xarray.Dataset, xarray.Dataset), optional
        The split of the data file, when already read.

    Returns
    -------
    xarray.Dataset
        ``x(trial, time, channel)`` as the model saw its training data.
    """
    if cfg.get("test_fraction") is not None:
        before, tails = held if held is not None else held_out_split(cfg)
        test = in_fit_units(tails, dict(cfg), before=before)
        return test if length is None else cut(test, int(length))
    spec = cfg.get("test_data") or cfg["dataset"]
    return load_test(spec, dict(cfg), length=length, dt=cfg.get("dt"), read=read_options_for(cfg, spec))


def load_test(spec: Any, cfg: dict[str, Any], *, length: int | None = None, dt: float | None = None,
              before: xr.Dataset | None = None, channels: list[str] | None = None,
              read: dict[str, Any] | None = None) -> xr.Dataset:
    """The test data ``spec`` in the fit's units and channels (:func:`in_fit_units`), cut to its
    first ``length`` samples.

    With slow channels, the filter runs across the start of the test stretch whenever the
    recording before it is known: ``before`` if given (e.g. the training part of a recording
    whose end was held out), else the fit's training data (``cfg["dataset"]``, whole split)
    when the test set continues it (:func:`continues`: the shipped sets' test splits do).
    The channels are computed on the whole test series and then cut, so the first ``length``
    samples are the same whatever ``length`` is. Without a known preceding stretch the test
    series is filtered alone: with ``edges="predict"`` (the default) its start is extended by a
    forecast of the slow band, run backwards; with ``edges="plain"`` its first samples carry the
    filter's edge effect, and a UserWarning says so.

    Parameters
    ----------
    spec : str, pathlib.Path or xarray.Dataset
        As :func:`load_data`; a shipped set's ``"test"`` split.
    cfg : dict
        A fitted run's configuration (``zscore``, ``slow_channels``, ``dataset``).
    length : int, optional
        Keep the first ``length`` samples of every trial.
    dt : float, optional
        Sampling step of plain array files.
    before : xarray.Dataset, optional
        The recording just before the test data, in raw units.
    channels : list of str, optional
        The channels the model was fitted on (an estimator's ``channel_names_``, slow channels
        included); the test data must have as many, less the slow channels the fit adds.
    read : dict, optional
        Reader options for the test file (:func:`load_data`); the fit's own data file, when it
        is read for the slow channels' filter, takes the fit's (``cfg["read"]``).

    Returns
    -------
    xarray.Dataset
        ``x(trial, time, channel)`` as the model saw its training data.

    Raises
    ------
    ValueError
        The test data's channels do not fit ``channels`` or the fit's slow-channel source.
    """
    test = load_data(spec, split="test", dt=dt, read=read)
    _check_test_channels(test, spec, cfg, channels)
    source = cfg.get("dataset")
    if (before is None and isinstance(cfg.get("slow_channels"), dict) and isinstance(source, (str, Path))
            and (not is_path_like(str(source)) or Path(source).is_file())):
        train = load_data(source, split="train", dt=dt, read=cfg.get("read"))
        before = train if continues(test, train) else None
    if before is None and isinstance(cfg.get("slow_channels"), dict) and cfg["slow_channels"].get("edges") == "plain":
        import warnings

        warnings.warn("the test data's slow channels are filtered without the recording before them (no "
                      "`before`, and the test data do not carry split bounds that continue the training data's), "
                      "so their first samples, where the free run starts, carry the filter's edge effect; pass "
                      "`before=` (`dsident evaluate --before DATA`: the preceding stretch) or fit with "
                      "slow_channels.edges = \"predict\" to avoid it.", UserWarning,
                      stacklevel=2)
    out = in_fit_units(test, cfg, before=before)
    return out if length is None else cut(out, int(length))


def _check_test_channels(test: xr.Dataset, spec: Any, cfg: dict[str, Any], channels: list[str] | None) -> None:
    """Refuse test data whose channels cannot be the fit's, naming both sides."""
    got = [str(c) for c in test["channel"].values]
    slow = cfg.get("slow_channels") if isinstance(cfg.get("slow_channels"), dict) else None
    what = f"test data {str(spec)!r}" if isinstance(spec, (str, Path)) else "the test data"
    embedding = cfg.get("delay_embedding")
    if isinstance(embedding, dict):
        try:        # the fit's channels are the embedding's: the test data need its source channel
            _embedding_source(test, embedding.get("channel"))
        except ValueError as err:
            raise ValueError(f"{what}: the fit delay-embeds one channel, and {err}") from None
        return
    if channels is not None:
        expected = [str(c) for c in channels][:-2] if slow else [str(c) for c in channels]
        if len(got) != len(expected):
            extra = " (and adds its two slow channels itself)" if slow else ""
            raise ValueError(f"{what} have {len(got)} channel(s) {listed(got)}, but the model was fitted on "
                             f"{len(expected)}: {listed(expected)}{extra}; give test data with the fit's channels.")
    source = slow.get("channel") if slow else None
    if isinstance(source, str) and source not in got:
        raise ValueError(f"the fit adds slow channels from its training data's channel {source!r}, which {what} "
                         f"lack (channels {listed(got)}); give the test data the fit's channel names.")


def to_data_units(values: np.ndarray, cfg: dict[str, Any]) -> np.ndarray:
    """Observations of shape (..., channel) in the model's units mapped back to the data's
    units (undoes the fit's ``zscore``; unchanged without one). The slow channels a fit adds
    after the data's (``cfg["slow_channels"]``) have no data units and stay as they are."""
    scaling = cfg.get("zscore")
    if not isinstance(scaling, dict):
        return values
    out = np.array(values, dtype=float)
    embedding = cfg.get("delay_embedding")
    if isinstance(embedding, dict) and isinstance(embedding.get("delays"), list):
        # every embedded column is its source channel, in that channel's units
        names = [str(c) for c in scaling["channel"]]
        k = names.index(embedding["channel"]) if embedding["channel"] in names else 0
        m = len(embedding["delays"])
        out[..., :m] = out[..., :m] * float(scaling["std"][k]) + float(scaling["mean"][k])
        return out
    n = len(scaling["mean"])
    out[..., :n] = out[..., :n] * np.asarray(scaling["std"]) + np.asarray(scaling["mean"])
    return out
