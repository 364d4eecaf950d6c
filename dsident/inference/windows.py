"""Training windows and the samplers that turn them into batches for :func:`~dsident.inference.training.train_loop`.

Gradient engines train on fixed-length *windows* of the data. Two samplers are provided:

- :class:`ShuffledWindows` (BPTT): the trials are cut once into consecutive windows
  (:func:`make_windows`); every epoch visits each window once, in a shuffled order.
- :class:`RandomWindows` (teacher forcing): every batch draws windows at random start
  positions inside the trials, a fixed number of batches per epoch, optionally with Gaussian
  noise added to the observations.
- :class:`ConsecutiveWindows` (teacher forcing with ``stateful=True``): the same, but each
  epoch's batches walk ``batch_size`` streams through the data, one window after the other.

A sampler is a callable ``sampler(rng) -> iterable of Batch``: ``rng`` is the epoch's
:class:`numpy.random.Generator` (drawn by the loop from the seed and the epoch number, so a
resumed run sees the batches it would have seen), and the batches are tensors on the training
device.

Shape legend: ``W`` windows, ``B`` batch, ``L`` window length (time), ``N`` obs_dim,
``K`` input_dim.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from ..data.container import sample_gaps, to_arrays

__all__ = ["Windows", "Batch", "make_windows", "split_windows", "to_batch", "ShuffledWindows", "RandomWindows",
           "ConsecutiveWindows"]


@dataclass
class Windows:
    """Fixed-length training windows (numpy, float64).

    Attributes
    ----------
    x : ndarray of shape (W, L, N)
        Observations; NaN = missing (masked, never filled).
    mask : bool ndarray of shape (W, L, N)
        True = observed.
    u : ndarray of shape (W, L, K) or None
        Inputs; steps after the end of a trial hold 0 (they only drive masked steps).
    """

    x: np.ndarray
    mask: np.ndarray
    u: np.ndarray | None

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def subset(self, index: np.ndarray) -> "Windows":
        """The windows at ``index``."""
        return Windows(self.x[index], self.mask[index], None if self.u is None else self.u[index])


@dataclass
class Batch:
    """A batch of windows as tensors on the training device.

    Attributes
    ----------
    x : Tensor of shape (B, L, N)
        Observations with missing entries set to 0 *only* so that arithmetic stays finite;
        every loss must multiply by ``mask``.
    mask : bool Tensor of shape (B, L, N)
    u : Tensor of shape (B, L, K) or None
        ``u[:, t]`` drives the step into time ``t``.
    dt : Tensor of shape (B, L) or None
        Sampling step into each time point (irregular sampling, time units); None: the
        model's ``dt``.
    """

    x: Tensor
    mask: Tensor
    u: Tensor | None
    dt: Tensor | None = None
    #: True when the batch continues the windows of the batch before it (:class:`ConsecutiveWindows`):
    #: window b starts at the sample where the previous batch's window b ended
    continues: bool = False


def _window_length(seq_len: int, longest: int) -> int:
    """``seq_len`` shortened to the longest trial (``longest`` samples), with a UserWarning if it was."""
    if seq_len > longest:
        # said aloud: a window length tuned for long recordings would otherwise be changed unseen
        warnings.warn(f"seq_len={int(seq_len)} is longer than the longest trial ({longest} samples); "
                      f"training windows are {longest} steps.", UserWarning, stacklevel=4)
        return int(longest)
    return int(seq_len)


def make_windows(data: xr.Dataset, seq_len: int | None) -> Windows:
    """Cut every trial into consecutive, non-overlapping windows of ``seq_len`` steps.

    A trial shorter than ``seq_len`` (or every trial when ``seq_len`` is None) gives one window
    as long as the longest trial, padded with missing samples (a ``seq_len`` longer than every
    trial warns). A remainder shorter than
    ``seq_len`` at the end of a trial is kept when it has at least 2 steps (padded likewise).

    Parameters
    ----------
    data : xarray.Dataset
        The canonical container (``x(trial, time, channel)``, optional ``u``, ``length``).
    seq_len : int or None

    Returns
    -------
    Windows
    """
    arrays = to_arrays(data)
    n_trials, n_time, _ = arrays.x.shape
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer))
                                or seq_len < 2):
        raise ValueError(f"`seq_len` must be an integer >= 2 or None; got seq_len={seq_len!r}.")
    length = n_time if seq_len is None else _window_length(seq_len, n_time)
    xs, us = [], []
    for i in range(n_trials):
        n_valid = int(arrays.length[i])
        for start in range(0, n_valid - 1, length):
            stop = min(start + length, n_valid)
            if stop - start < 2:
                continue
            x = np.full((length, arrays.x.shape[2]), np.nan)
            x[: stop - start] = arrays.x[i, start:stop]
            xs.append(x)
            if arrays.u is not None:
                u = np.zeros((length, arrays.u.shape[2]))
                u[: stop - start] = np.nan_to_num(arrays.u[i, start:stop], nan=0.0)
                us.append(u)
    x = np.stack(xs)
    return Windows(x=x, mask=np.isfinite(x), u=np.stack(us) if us else None)


def split_windows(windows: Windows, val_fraction: float, rng: np.random.Generator) -> tuple[Windows, Windows | None]:
    """Random split into training and validation windows (at least one of each when possible)."""
    if isinstance(val_fraction, bool) or not isinstance(val_fraction, (int, float)) or not 0 <= val_fraction < 1:
        raise ValueError(f"`val_fraction` must be a number in [0, 1); got val_fraction={val_fraction!r}.")
    n = len(windows)
    n_val = int(round(val_fraction * n))
    if val_fraction > 0 and n >= 2:
        n_val = min(max(n_val, 1), n - 1)
    else:
        n_val = 0
    if n_val == 0:
        return windows, None
    order = rng.permutation(n)
    return windows.subset(np.sort(order[n_val:])), windows.subset(np.sort(order[:n_val]))


def to_batch(windows: Windows, dtype: torch.dtype, device: torch.device) -> Batch:
    """``windows`` as a :class:`Batch` of ``dtype`` tensors on ``device`` (missing values set to 0)."""
    x = torch.as_tensor(np.nan_to_num(windows.x, nan=0.0), dtype=dtype, device=device)
    mask = torch.as_tensor(windows.mask, device=device)
    u = None if windows.u is None else torch.as_tensor(windows.u, dtype=dtype, device=device)
    return Batch(x=x, mask=mask, u=u)


class ShuffledWindows:
    """Every window once per epoch, in a shuffled order, ``batch_size`` at a time.

    Parameters
    ----------
    windows : Windows
    batch_size : int
        The last batch of an epoch holds the remainder.
    dtype, device
        Of the batches' tensors.
    """

    def __init__(self, windows: Windows, batch_size: int, dtype: torch.dtype, device: torch.device) -> None:
        self.windows, self.batch_size, self.dtype, self.device = windows, int(batch_size), dtype, device

    def __call__(self, rng: np.random.Generator) -> Iterator[Batch]:
        """The batches of one epoch (order drawn from ``rng``; each batch keeps time order of its windows)."""
        order = rng.permutation(len(self.windows))
        for i in range(0, len(self.windows), self.batch_size):
            yield to_batch(self.windows.subset(np.sort(order[i: i + self.batch_size])), self.dtype, self.device)


class RandomWindows:
    """Windows of ``seq_len`` steps at random positions of the trials of a dataset.

    Every window lies inside its trial (a trial shorter than ``seq_len`` gives one window,
    padded with missing samples); all start positions are equally likely.

    Parameters
    ----------
    ds : xarray.Dataset
        The canonical container; an irregular ``sample_time`` gives each batch its ``dt``.
    seq_len : int
        Window length L (shortened to the longest trial, with a UserWarning).
    batch_size, batches_per_epoch : int
    dtype, device
        Of the batches' tensors (the data are held on ``device`` once).
    noise_std : float, default 0
        Standard deviation of Gaussian noise added to the observations of every batch (data
        units); drawn from a generator seeded from the epoch's ``rng``.
    """

    def __init__(self, ds: xr.Dataset, seq_len: int, batch_size: int, batches_per_epoch: int, dtype: torch.dtype,
                 device: torch.device, noise_std: float = 0.0) -> None:
        arrays = to_arrays(ds)
        lengths = arrays.length.astype(int)
        self.seq_len = _window_length(seq_len, int(lengths.max()))
        if self.seq_len < 2:
            raise ValueError(f"training windows need at least 2 steps; the longest trial has {int(lengths.max())}.")
        self.batch_size, self.batches_per_epoch, self.noise_std = int(batch_size), int(batches_per_epoch), noise_std
        # pad every trial with a window of missing samples, so that gathering never runs off the end
        pad = self.seq_len
        x = np.concatenate([arrays.x, np.full((arrays.x.shape[0], pad, arrays.x.shape[2]), np.nan)], axis=1)
        self.mask = torch.as_tensor(np.isfinite(x), device=device)
        self.x = torch.as_tensor(np.nan_to_num(x, nan=0.0), dtype=dtype, device=device)
        self.u = None
        if arrays.u is not None:
            u = np.concatenate([np.nan_to_num(arrays.u, nan=0.0),
                                np.zeros((arrays.u.shape[0], pad, arrays.u.shape[2]))], axis=1)
            self.u = torch.as_tensor(u, dtype=dtype, device=device)
        self.dt = None
        if arrays.time is not None:
            # the step into each sample (the first has none: the nominal dt), then the padding's
            n_trials = arrays.time.shape[0]
            steps = np.concatenate([np.full((n_trials, 1), arrays.dt), sample_gaps(arrays.time, arrays.dt),
                                    np.full((n_trials, pad), arrays.dt)], axis=1)
            self.dt = torch.as_tensor(steps, dtype=dtype, device=device)
        self.n_starts = np.maximum(lengths - self.seq_len, 0) + 1
        # a window starts from its first sample, so it starts only where every channel is observed:
        # a missing one would start its unit at the fill value 0 and score predictions from there
        self.complete = np.isfinite(arrays.x).all(-1)
        self.cum_starts, self.start_table = _start_table(self.complete, self.n_starts, "training windows")
        self.offsets = torch.arange(self.seq_len, device=device)

    def _starts(self, cum: np.ndarray, batch_size: int, rng: np.random.Generator,
                table: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Trial and start index of ``batch_size`` windows, uniform over the allowed start positions
        (``cum``: their cumulative counts over the trials; ``table``: each trial's allowed starts,
        None when every position is allowed)."""
        flat = rng.integers(0, int(cum[-1]), size=batch_size)
        trial = np.searchsorted(cum, flat, side="right")
        local = flat - np.concatenate([[0], cum[:-1]])[trial]
        if table is None:
            return trial, local
        return trial, np.array([table[t][k] for t, k in zip(trial, local)], dtype=np.int64)

    def _gather(self, trial: np.ndarray, start: np.ndarray, continues: bool = False) -> Batch:
        ti = torch.as_tensor(trial, device=self.x.device)[:, None]
        ts = torch.as_tensor(start, device=self.x.device)[:, None] + self.offsets[None]
        return Batch(x=self.x[ti, ts], mask=self.mask[ti, ts], u=None if self.u is None else self.u[ti, ts],
                     dt=None if self.dt is None else self.dt[ti, ts], continues=continues)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """``batch_size`` windows at start positions drawn from ``rng`` (no noise)."""
        return self._gather(*self._starts(self.cum_starts, batch_size, rng, self.start_table))

    def _epoch(self, rng: np.random.Generator) -> Iterator[Batch]:
        for _ in range(self.batches_per_epoch):
            yield self.sample(self.batch_size, rng)

    def __call__(self, rng: np.random.Generator) -> Iterator[Batch]:
        """The ``batches_per_epoch`` batches of one epoch."""
        # the noise seed is drawn first (also without noise), so the windows do not depend on noise_std
        noise_gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        for batch in self._epoch(rng):
            if self.noise_std > 0:
                noise = torch.randn(batch.x.shape, generator=noise_gen, dtype=batch.x.dtype).to(batch.x.device)
                batch.x = batch.x + self.noise_std * noise
            yield batch


class ConsecutiveWindows(RandomWindows):
    """Windows that continue one another: ``batch_size`` streams through the data per epoch.

    Each epoch draws ``batch_size`` start positions; batch ``k`` holds, for every stream, the
    window starting ``k · (seq_len − 1)`` samples after the stream's start, so that a window
    begins at the sample where the same stream's window in the batch before ended (batches after
    the first have ``continues=True``). An engine can then start each window from the state its
    predecessor ended in (stateful truncated BPTT): the gradient still spans one window, but the
    state, including units the data do not force, has seen everything since the stream's start.

    Parameters are those of :class:`RandomWindows`. A stream spans
    ``batches_per_epoch · (seq_len − 1) + 1`` samples, which must fit in one trial.
    """

    def __init__(self, ds: xr.Dataset, seq_len: int, batch_size: int, batches_per_epoch: int, dtype: torch.dtype,
                 device: torch.device, noise_std: float = 0.0) -> None:
        super().__init__(ds, seq_len, batch_size, batches_per_epoch, dtype, device, noise_std)
        lengths = self.n_starts + self.seq_len - 1
        self.span = self.batches_per_epoch * (self.seq_len - 1) + 1
        if self.span > int(lengths.max()):
            raise ValueError(f"consecutive windows need one trial of batches_per_epoch·(seq_len − 1) + 1 = {self.span} "
                             f"samples (batches_per_epoch={self.batches_per_epoch}, seq_len={self.seq_len}); the "
                             f"longest has {int(lengths.max())}. Lower `batches_per_epoch` or `seq_len`.")
        self.cum_stream_starts, self.stream_table = _start_table(self.complete, np.maximum(lengths - self.span + 1, 0),
                                                                 "training streams")

    def _epoch(self, rng: np.random.Generator) -> Iterator[Batch]:
        trial, start = self._starts(self.cum_stream_starts, self.batch_size, rng, self.stream_table)
        for k in range(self.batches_per_epoch):
            yield self._gather(trial, start + k * (self.seq_len - 1), continues=k > 0)


def _start_table(complete: np.ndarray, counts: np.ndarray, what: str) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """Cumulative counts of the allowed start positions per trial, and each trial's allowed
    starts (None when all ``counts[i]`` first positions are allowed, so that fully observed data
    draw exactly the windows they always drew). A start is allowed where every channel is
    observed (``complete``: (trial, time)); a trial with no such start keeps all its positions,
    with a warning, so that no trial drops out of the fit."""
    counts = np.asarray(counts, dtype=np.int64)
    table, partial = [], []
    for i, n in enumerate(counts):
        ok = np.flatnonzero(complete[i, :n])
        if ok.size == 0 and n > 0:
            partial.append(i)
            ok = np.arange(n)
        table.append(ok)
    if partial:
        warnings.warn(f"trial(s) {partial[:5]}{' ...' if len(partial) > 5 else ''} have no sample with every channel "
                      f"observed where {what} could start: their windows start on partly missing samples, whose "
                      "missing units start at 0.", UserWarning, stacklevel=3)
    if all(t.size == n for t, n in zip(table, counts)):
        return np.cumsum(counts), None
    return np.cumsum([t.size for t in table]), table
