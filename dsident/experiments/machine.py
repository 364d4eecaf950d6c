"""Which machine fitted a grid point: CPU model, cores, torch threads, GPU and versions.

Fit times differ by machine (the quick job took 174–256 s on earlier 2-core machines and
450 s on another), and float round-off differs by CPU too (the same quick job's teacher-forced
D_stsp 0.83 on one, 1.18 on another), so a recorded fit time or score means little without the
machine it came from. :func:`machine_info` is recorded in every point's ``result.json``
(``machine``; ``results.nc`` and ``sweep.nc`` keep its :func:`machine_label` per point), and
:func:`describe_machines` turns those labels into the line the
benchmark and sweep tables print under their fit-time column (a Dask or SLURM grid may span
several machines: each is listed with its number of points).
"""
from __future__ import annotations

import os
import platform
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._threads import usable_cores
from .._version import __version__

#: where Linux describes its processors
CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: str | None = None) -> str:
    """The processor's model name, e.g. ``"AMD EPYC 7763 64-Core Processor"``.

    Parameters
    ----------
    cpuinfo : str, optional
        The text of ``/proc/cpuinfo`` (read from the machine when omitted).

    Returns
    -------
    str
        The first ``model name`` (x86) or ``Model``/``Hardware`` (ARM boards) entry of
        ``cpuinfo``; elsewhere (macOS, Windows, or no such entry) :func:`platform.processor`,
        then :func:`platform.machine`, then ``"unknown"``.
    """
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for key in ("model name", "Model", "Hardware"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip() == key and value.strip():
                return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown"


def machine_info() -> dict[str, Any]:
    """What a recorded fit time depends on, for this process.

    Returns
    -------
    dict
        ``cpu`` (:func:`cpu_model`), ``logical_cores`` (``os.cpu_count()``), ``usable_cores``
        (the cores this process may run on, which a container or ``taskset`` can narrow),
        ``torch_threads`` (intra-op threads of this process, set per grid point by
        ``--threads``), ``gpu`` (the CUDA device's name, or None), and the ``python``,
        ``torch``, ``dsident`` versions and the ``platform`` string.
    """
    import torch

    usable = usable_cores()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu_model(), "logical_cores": os.cpu_count(), "usable_cores": usable,
            "torch_threads": torch.get_num_threads(), "gpu": gpu, "python": platform.python_version(),
            "torch": torch.__version__, "dsident": __version__, "platform": platform.platform()}


def machine_label(info: Mapping[str, Any]) -> str:
    """One short phrase for a :func:`machine_info` record.

    E.g. ``"AMD EPYC 7763 (2 cores usable of 2, 1 torch thread), torch 2.13.0+cpu"``, with
    ``", GPU NVIDIA H100"`` when a GPU was present.
    """
    threads = info.get("torch_threads")
    text = (f"{info.get('cpu', 'unknown CPU')} ({info.get('usable_cores', '?')} cores usable of "
            f"{info.get('logical_cores', '?')}, {threads} torch thread{'' if threads == 1 else 's'})")
    if info.get("gpu"):
        text += f", GPU {info['gpu']}"
    return text + f", torch {info.get('torch', '?')}"


def record_machine(record: Mapping[str, Any]) -> str:
    """:func:`machine_label` of a grid-point record, or ``"not recorded"`` for a point fitted
    before dsident recorded the machine (its ``result.json`` has no ``machine``)."""
    info = record.get("machine")
    return machine_label(info) if isinstance(info, Mapping) else "not recorded"


def describe_machines(labels: Sequence[str]) -> str | None:
    """The line a results table prints about where its points were fitted.

    Parameters
    ----------
    labels : sequence of str
        One :func:`record_machine` label per grid point (``results.nc``'s ``machine``).

    Returns
    -------
    str or None
        ``"fitted on: <label> (n points)"``, one entry per distinct machine, most points first;
        None for no points.
    """
    if len(labels) == 0:
        return None
    counts = Counter(str(label) for label in labels)
    parts = [f"{label} ({n} point{'' if n == 1 else 's'})" for label, n in counts.most_common()]
    return "fitted on: " + "; ".join(parts)
