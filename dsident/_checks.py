"""Checks of argument kinds shared by the numpy-only parts (metrics) and the torch parts.

Kept free of torch, so that importing the metrics does not import it.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def check_bool(name: str, value: Any) -> bool:
    """``value`` as a bool; TypeError naming ``name`` unless it is True or False. A switch read as
    text ("no", "false") would otherwise count as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False; got {name}={value!r}.")
    return bool(value)
