"""The n-bit flip-flop family: the gnODE paper's continuous-memory tasks (seed ``000_gnode.md`` 3.1).

Each input channel receives brief pulses; the matching output channel must hold the value of
the most recent pulse in that channel until the next one. Variants differ in the pulse values:

=============  ===============================================================  ===================
amplitude      pulse values                                                     expected attractor
=============  ===============================================================  ===================
``fixed``      +1 or -1 (Sussillo & Barak 2013)                                 2^n stable points
``variable``   U[-1, 1]                                                         a cube of points
``rectangle``  channel 1 U[-2, 2], channel 2 U[-1, 1] (n_bits = 2)             a filled rectangle
``disk``       both channels together, radius U(1, 2), uniform angle (n = 2)    an annulus
``ring``       both channels together, radius 2, uniform angle (n_bits = 2)     a ring
=============  ===============================================================  ===================

Timing follows the paper: 1 s trials of 100 bins of 10 ms, pulses 20 ms (2 bins) wide, the
total number of pulses per trial ``~ Poisson(12)`` (``Poisson(6)`` for ``disk``), onsets drawn
without replacement.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from .container import as_dataset

__all__ = ["make_flipflop", "FLIPFLOP_AMPLITUDES"]

FLIPFLOP_AMPLITUDES = ("fixed", "variable", "rectangle", "disk", "ring")
_JOINT = ("disk", "ring")        # both channels pulse together


def _pulse_values(amplitude: str, n_bits: int, n_pulses: int, rng: np.random.Generator) -> np.ndarray:
    """Pulse values (n_pulses, n_bits) for the joint variants, (n_pulses,) otherwise."""
    if amplitude == "fixed":
        return rng.choice([-1.0, 1.0], size=n_pulses)
    if amplitude == "variable":
        return rng.uniform(-1.0, 1.0, size=n_pulses)
    if amplitude == "rectangle":
        return rng.uniform(-1.0, 1.0, size=n_pulses)     # scaled per channel by the caller
    radius = rng.uniform(1.0, 2.0, size=n_pulses) if amplitude == "disk" else np.full(n_pulses, 2.0)
    angle = rng.uniform(0.0, 2.0 * np.pi, size=n_pulses)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)


def make_flipflop(n_trials: int = 600, *, n_bits: int = 3, n_steps: int = 100, dt: float = 0.01,
                  amplitude: str = "fixed", pulse_rate: float | None = None, pulse_width: int = 2,
                  initial_target: Any = None, seed: int | np.random.Generator | None = None) -> xr.Dataset:
    """Generate n-bit flip-flop trials: pulse inputs ``u`` and held-value targets ``x``.

    Parameters
    ----------
    n_trials : int
        Number of trials (the paper: 600, of which 500 train and 100 validation).
    n_bits : int
        Number of channels (2 for ``rectangle``, ``disk`` and ``ring``).
    n_steps : int
        Bins per trial (100).
    dt : float
        Bin width in seconds (0.01).
    amplitude : {"fixed", "variable", "rectangle", "disk", "ring"}
        Pulse-value distribution (see the module docstring).
    pulse_rate : float, optional
        Mean number of pulses per trial (Poisson); 12 (6 for ``disk``) by default.
    pulse_width : int
        Pulse length in bins (2 bins = 20 ms).
    initial_target : array of shape (n_bits,), optional
        Target before the first pulse: +1 for ``fixed``, ``(2, 0)`` for ``ring``, zeros otherwise.
    seed : int or numpy.random.Generator, optional

    Returns
    -------
    xarray.Dataset
        ``x(trial, time, channel)`` the targets, ``u(trial, time, input)`` the pulses, ``dt``
        in seconds; ``attrs["provenance"]`` records every setting and the seed.
    """
    if amplitude not in FLIPFLOP_AMPLITUDES:
        raise ValueError(f"`amplitude` must be one of {list(FLIPFLOP_AMPLITUDES)}; got {amplitude!r}.")
    for name, value, minimum in (("n_trials", n_trials, 1), ("n_bits", n_bits, 1), ("n_steps", n_steps, 2),
                                 ("pulse_width", pulse_width, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"`{name}` must be an integer >= {minimum}; got {name}={value!r}.")
    if amplitude in ("rectangle", "disk", "ring") and n_bits != 2:
        raise ValueError(f"amplitude={amplitude!r} is a 2-channel task; got n_bits={n_bits}.")
    if pulse_width >= n_steps:
        raise ValueError(f"`pulse_width` must be smaller than n_steps={n_steps}; got {pulse_width}.")
    rate = (6.0 if amplitude == "disk" else 12.0) if pulse_rate is None else float(pulse_rate)
    if not np.isfinite(rate) or rate < 0:
        raise ValueError(f"`pulse_rate` must be a non-negative number of pulses per trial; got {pulse_rate!r}.")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if initial_target is None:
        start = np.ones(n_bits) if amplitude == "fixed" else np.zeros(n_bits)
        if amplitude == "ring":
            start = np.array([2.0, 0.0])
    else:
        start = np.asarray(initial_target, dtype=float).reshape(-1)
        if start.shape != (n_bits,):
            raise ValueError(f"`initial_target` must have shape ({n_bits},); got {start.shape}.")

    n_onsets = n_steps - pulse_width + 1          # a pulse must fit inside the trial
    u = np.zeros((n_trials, n_steps, n_bits))
    x = np.zeros((n_trials, n_steps, n_bits))
    for trial in range(n_trials):
        n_pulses = min(int(rng.poisson(rate)), n_onsets)
        onsets = np.sort(rng.choice(n_onsets, size=n_pulses, replace=False))
        values = _pulse_values(amplitude, n_bits, n_pulses, rng)
        target = start.copy()
        events: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for i, onset in enumerate(onsets):
            if amplitude in _JOINT:
                channels, vals = np.arange(2), values[i]
            else:
                channel = int(rng.integers(n_bits))
                val = values[i] * (2.0 if amplitude == "rectangle" and channel == 0 else 1.0)
                channels, vals = np.array([channel]), np.array([val])
            u[trial, onset:onset + pulse_width][:, channels] = vals    # a view: basic, then advanced indexing
            events[int(onset)] = (channels, vals)
        for t in range(n_steps):
            if t in events:
                channels, vals = events[t]
                target[channels] = vals
            x[trial, t] = target
    provenance = {"generator": "dsident.data.flipflop.make_flipflop", "n_trials": n_trials, "n_bits": n_bits,
                  "n_steps": n_steps, "dt": dt, "amplitude": amplitude, "pulse_rate": rate,
                  "pulse_width": pulse_width, "initial_target": start.tolist(),
                  "seed": seed if isinstance(seed, (int, np.integer)) or seed is None else "Generator"}
    return as_dataset(x, dt=dt, u=u, channel_names=[f"bit{i}" for i in range(n_bits)],
                      input_names=[f"pulse{i}" for i in range(n_bits)], name=f"flipflop-{amplitude}-{n_bits}bit",
                      provenance=provenance)
