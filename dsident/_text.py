"""Short renderings of long lists for messages and notes.

A message that lists every one of 3 000 channel names buries what it says; these keep the first
few and the last, and say how many there are in all.
"""
from __future__ import annotations

from typing import Any, Sequence

#: entries a message lists in full; a longer list shows the first ones and the last
LISTED = 8


def listed(items: Sequence[Any], limit: int = LISTED, what: str = "in all") -> str:
    """``items`` as Python writes a list of strings (``['x', 'y']``), or, past ``limit`` entries,
    the first ``limit - 1``, an ellipsis and the last with the count:
    ``['x0', 'x1', ..., 'x2999'] (3000 in all)``."""
    names = [repr(str(i)) for i in items]
    if len(names) <= limit:
        return "[" + ", ".join(names) + "]"
    return "[" + ", ".join(names[: limit - 1]) + f", ..., {names[-1]}] ({len(names)} {what})"


def and_more(entries: Sequence[str], limit: int, what: str = "channels") -> str:
    """Up to ``limit`` entries joined by commas, then ``and N more <what>`` for the rest."""
    shown = ", ".join(entries[:limit])
    rest = len(entries) - limit
    return shown if rest <= 0 else f"{shown}, and {rest} more {what}"
