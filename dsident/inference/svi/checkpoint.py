"""Best/last checkpoints of an SVI fit: atomic writes, safe reads.

A checkpoint directory holds ``last.pt`` (the state after the most recent save, used by
``resume=True``) and ``best.pt`` (the state with the best validation ELBO so far). Both are
``torch.save`` files of plain containers (dicts, lists, numbers, strings, tensors) and are
read back with ``torch.load(..., weights_only=True)``, which refuses arbitrary pickled
objects: loading a checkpoint never runs code from the file.

A file is written to a temporary name in the same directory, flushed to disk, then renamed
over the old one, so an interrupted write never leaves a half-written checkpoint.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

#: marks a file as an SVI checkpoint of this format.
FORMAT = "dsident-svi-checkpoint/1"
LAST, BEST = "last.pt", "best.pt"


def checkpoint_dir(path: str | os.PathLike) -> Path:
    """The checkpoint directory, created if missing (``ValueError`` if ``path`` is a file)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"`checkpoint` must be a directory path; got checkpoint={str(path)!r}, which is a file.")
    p.mkdir(parents=True, exist_ok=True)
    return p


def save_atomic(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` to ``path`` through a temporary file and an atomic rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save({"format": FORMAT, **state}, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_atomic` (tensors are loaded on the CPU)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a dsident SVI checkpoint (expected format {FORMAT!r}).")
    return state


def to_cpu(obj: Any) -> Any:
    """A copy of a nested container with every tensor detached and moved to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj
