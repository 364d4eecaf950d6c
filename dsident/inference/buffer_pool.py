"""Reusable CPU buffers for the fused rollout's window-sized arrays.

A teacher-forcing update of the shallow PLRNN stores every step's hidden pre-activation, an
(L, B, H) array (80 MB for a batch of 256 windows of 200 steps with 400 hidden units), and its
backward pass needs one more of that size. Arrays that large come from the operating system on
every allocation, and the first write to each fresh 4 KiB page is a page fault: measured here,
about 80 ms per 80 MB array, more than the arithmetic that fills it. Handing the same buffers
from one update to the next removes that cost. ``benchmarks/bench_fused_rollout.py --batch-size
256`` measures the effect.

Only CPU tensors are pooled; CUDA's caching allocator already reuses device memory.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

import torch
from torch import Tensor

__all__ = ["BufferPool", "POOL"]


class BufferPool:
    """Free buffers by (shape, dtype), at most ``max_bytes`` of them held.

    :meth:`take` hands out a free buffer of the shape (or a new one); its contents are
    arbitrary, as with :func:`torch.empty`. :meth:`give` takes one back when the caller is done
    with it; :meth:`give_when_freed` does so once an owner object is garbage-collected (for
    buffers that an autograd node keeps until its graph is released).
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        self.max_bytes = int(max_bytes)
        self._free: dict[tuple[tuple[int, ...], torch.dtype], list[Tensor]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def held_bytes(self) -> int:
        """Bytes of the free buffers now held."""
        return self._bytes

    def take(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Tensor:
        """A buffer of ``shape`` and ``dtype`` on ``device`` (uninitialised)."""
        if torch.device(device).type == "cpu":
            with self._lock:
                free = self._free.get((tuple(shape), dtype))
                if free:
                    buf = free.pop()
                    self._bytes -= _nbytes(buf)
                    return buf
        return torch.empty(shape, dtype=dtype, device=device)

    def give(self, buf: Tensor) -> None:
        """Take ``buf`` back for a later :meth:`take` (no one may use it afterwards)."""
        size, key = _nbytes(buf), (tuple(buf.shape), buf.dtype)
        if buf.device.type != "cpu" or not buf.is_contiguous() or buf._base is not None or size > self.max_bytes:
            return
        with self._lock:
            if self._bytes + size > self.max_bytes:
                # the shapes of a fit rarely change; buffers of other shapes go first
                for other in [k for k in self._free if k != key]:
                    self._bytes -= sum(_nbytes(b) for b in self._free.pop(other))
            if self._bytes + size <= self.max_bytes:
                self._free.setdefault(key, []).append(buf)
                self._bytes += size

    def give_when_freed(self, owner: Any, buf: Tensor) -> None:
        """:meth:`give` ``buf`` once ``owner`` is garbage-collected."""
        weakref.finalize(owner, self.give, buf)

    def clear(self) -> None:
        """Drop every free buffer (their memory returns to the allocator)."""
        with self._lock:
            self._free.clear()
            self._bytes = 0


def _nbytes(buf: Tensor) -> int:
    return buf.numel() * buf.element_size()


#: The pool the fused rollout draws from (``POOL.clear()`` releases what it holds).
POOL = BufferPool()
