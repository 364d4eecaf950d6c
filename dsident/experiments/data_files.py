"""What a grid point's data files held when it ran: :func:`data_digests`.

A re-run of a benchmark or sweep skips the points already done, by their configuration. A data
file edited in place (a recording re-exported with more samples, a channel fixed) keeps its
name, so the configuration alone would keep results fitted to the old file. Each point records
the content digest of every file it reads; a finished point whose files have changed since is
fitted again (:func:`dsident.experiments.runner.run_grid`), and a recording's cached floor is
named by the digests too.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

__all__ = ["DATA_FILE_KEYS", "data_digests", "changed_files"]

#: the run configuration's keys that may name a data file
DATA_FILE_KEYS = ("dataset", "test_data")

# (path, size, mtime_ns) -> digest: a grid hashes each file once, not once per point
_SEEN: dict[tuple[str, int, int], str] = {}


def data_digests(cfg: Mapping[str, Any]) -> dict[str, str]:
    """``{name as given: "sha1:<hex>"}`` for each data file ``cfg`` reads (shipped set names and
    folders are left out). A WFDB header counts with the signal files it names, which hold the
    samples (and a multi-segment record with its segments')."""
    from ..data.importers.physionet import wfdb_files, wfdb_record_of
    from .inputs import is_path_like

    out: dict[str, str] = {}
    for key in DATA_FILE_KEYS:
        spec = cfg.get(key)
        if spec is None or not is_path_like(str(spec)) or not Path(str(spec)).is_file():
            continue
        path = Path(str(spec))
        parts = [path]
        if wfdb_record_of(path) is not None:          # the header and the signal files it names
            parts = wfdb_files(path)
        out[str(spec)] = "sha1:" + "+".join(_digest(p) for p in parts)
    return out


def changed_files(recorded: Mapping[str, str] | None, cfg: Mapping[str, Any]) -> list[str]:
    """The data files whose digest differs from ``recorded`` (a point's ``data_files``). A file
    not found now (moved, or a relative path read from another folder) changes nothing: a re-run
    could only fail on it and overwrite a finished result. Nor does a record without digests
    (written before they were kept)."""
    if not recorded:
        return []
    now = data_digests(cfg)
    return [name for name, digest in recorded.items() if name in now and now[name] != digest]


def _digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SEEN:
        h = hashlib.sha1()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _SEEN[key] = h.hexdigest()[:16]
    return _SEEN[key]
