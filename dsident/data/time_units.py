"""The time unit of a dataset: what its ``dt``, periods and Lyapunov exponents are measured in.

A dataset names its time unit in ``attrs["provenance"]["time_unit"]`` ("ms", "s", ...): the
shipped sets from their systems, the importers from what the file says (a text table's time
column ``time_ms`` or ``Time (s)``, a sampling rate in Hz, NWB / MNE / Neo timestamps in
seconds). A dataset that does not say (or says "a.u.", the Lorenz-63 convention) has no known
unit, and labels read "time unit". The unit only labels numbers; nothing is converted.
"""
from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["TIME_COLUMN_NAME", "time_unit", "time_unit_of_name", "time_label", "frequency_label", "per_time"]

_UNIT = r"(?:s|sec|seconds?|ms|msec|milliseconds?|us|\u00b5s|\u03bcs|usec|microseconds?|min|h)"
#: header names read as a time axis: "time", "t", "Time (s)", "time_ms", "timestamp", "seconds", ...
#: (a unit needs a separator or brackets, so channels such as "ts" or "th" stay data); the groups
#: name the unit: ``bracketed`` / ``separated``, or ``base`` when the name is a unit ("seconds")
TIME_COLUMN_NAME = re.compile(r"^(?P<base>t|times?|timestamps?|seconds?|secs?|ms|msec|millis(?:econds?)?)"
                              rf"(?:[\s_-]*[(\[]\s*(?P<bracketed>{_UNIT})\s*[)\]]|[\s_-]+(?P<separated>{_UNIT}))?$",
                              re.IGNORECASE)
#: unit spellings in a column name -> the unit recorded ("t", "time", "timestamp" name none)
_SPELLINGS = {"s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
              "ms": "ms", "msec": "ms", "millis": "ms", "millisecond": "ms", "milliseconds": "ms",
              "us": "us", "\u00b5s": "us", "\u03bcs": "us", "usec": "us", "microsecond": "us", "microseconds": "us",
              "min": "min", "h": "h"}
#: what a dataset without a known unit says (the Lorenz-63 system's "a.u.")
_UNKNOWN = ("", "a.u.", "time unit")


def time_unit_of_name(name: str) -> str | None:
    """The unit a time column's header name states, or None (a bare ``time``, or a name that
    :data:`TIME_COLUMN_NAME` does not read as a time axis).

    >>> time_unit_of_name("Time (ms)"), time_unit_of_name("time_s"), time_unit_of_name("seconds")
    ('ms', 's', 's')
    >>> time_unit_of_name("time") is None
    True
    """
    match = TIME_COLUMN_NAME.match(str(name).strip())
    if not match:
        return None
    spelled = match.group("bracketed") or match.group("separated") or match.group("base")
    return _SPELLINGS.get(spelled.lower())


def time_unit(data: Any) -> str | None:
    """The time unit a dataset names (``attrs["provenance"]["time_unit"]``), or None when unknown.

    Parameters
    ----------
    data : xarray.Dataset, or anything with ``attrs``
    """
    attrs = getattr(data, "attrs", None) or {}
    prov = attrs.get("provenance")
    if isinstance(prov, str):
        try:
            prov = json.loads(prov)
        except ValueError:
            prov = None
    unit = prov.get("time_unit") if isinstance(prov, dict) else None
    unit = str(unit).strip() if unit is not None else ""
    return None if unit in _UNKNOWN else unit


def time_label(data: Any) -> str:
    """An axis label for time: ``"time (ms)"``, or ``"time"`` when the unit is unknown."""
    unit = time_unit(data)
    return f"time ({unit})" if unit else "time"


def frequency_label(data: Any) -> str:
    """An axis label for frequency: ``"frequency (Hz)"`` for seconds, ``"frequency (1 / ms)"``,
    or ``"frequency (1 / time unit)"`` when the unit is unknown."""
    unit = time_unit(data)
    return "frequency (Hz)" if unit == "s" else f"frequency (1 / {unit or 'time unit'})"


def per_time(data: Any) -> str:
    """How a rate is read: ``"per ms"``, or ``"per time unit"`` when the unit is unknown."""
    return f"per {time_unit(data) or 'time unit'}"
