"""Reused memory for the snapshots a producer's puts take of their tensors until the sender puts them in Ray.

A snapshot copied into fresh memory pays a page fault per 4 KiB page on first touch, which cost several times
the copy itself (bench/README.md has the figures), and a producer snapshots every batch it puts. The arena is
a ring of touched memory: snapshots are carved from it in put order and given back once their bundle is in the
object store, so a steady producer reuses the same pages. A snapshot that does not fit (the ring is full of
batches still waiting to be sent) gets fresh memory.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import torch

ALIGN_BYTES = 64
"""Snapshots start on a cache-line boundary (the ring is a torch allocation, 64-byte aligned), so copies in and out
of them run at full width."""


class Slot:
    """A region of the arena held by one snapshot; give it back with `StagingArena.release`."""

    __slots__ = ("end", "released", "start")

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end, self.released = start, end, False


class StagingArena:
    """A ring of `capacity` bytes, allocated at first use; thread-safe (callers take, the sender releases).

    Args:
        capacity: bytes of the ring; a snapshot larger than it always gets fresh memory.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._bytes: torch.Tensor | None = None
        self._memory: memoryview | None = None
        self._live: deque[Slot] = deque()
        self._head = 0
        self._lock = threading.Lock()

    @property
    def held_bytes(self) -> int:
        """Bytes of the ring held by snapshots not yet released (with their alignment padding)."""
        with self._lock:
            return sum(slot.end - slot.start for slot in self._live if not slot.released)

    def snapshot(self, raw: torch.Tensor) -> tuple[Any, Slot | None]:
        """A copy of `raw` (a flat uint8 CPU tensor) as a buffer, and the slot to release (None: fresh memory)."""
        nbytes = raw.numel()
        if not nbytes:
            return raw.numpy().copy(), None
        with self._lock:
            slot = self._reserve(nbytes)
        if slot is None:
            return raw.numpy().copy(), None
        assert self._memory is not None and self._bytes is not None
        try:
            self._bytes[slot.start : slot.start + nbytes].copy_(raw)
        except BaseException:
            self.release([slot])
            raise
        return self._memory[slot.start : slot.start + nbytes], slot

    def release(self, slots: list[Slot]) -> None:
        """Give slots back; a slot already given back is ignored."""
        with self._lock:
            for slot in slots:
                slot.released = True
            while self._live and self._live[0].released:
                self._live.popleft()

    def _reserve(self, nbytes: int) -> Slot | None:
        size = -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES
        if size > self.capacity:
            return None
        if self._bytes is None:  # uninitialised: a page is touched when a snapshot first uses it
            self._bytes = torch.empty(self.capacity, dtype=torch.uint8)
            # numpy's stubs declare ndarray's buffer protocol (__buffer__) for Python >= 3.12 only.
            self._memory = memoryview(self._bytes.numpy())  # pyright: ignore[reportArgumentType]
        start = self._free_start(size)
        if start is None:
            return None
        slot = Slot(start, start + size)
        self._live.append(slot)
        self._head = slot.end
        return slot

    def _free_start(self, size: int) -> int | None:
        """Where a region of `size` bytes fits after the newest live slot, or None. The newest slot never ends
        exactly where the oldest starts, so the head is past the tail exactly when the live slots do not wrap."""
        if not self._live:
            self._head = 0
            return 0
        tail = self._live[0].start
        if self._head > tail:  # live bytes are [tail, head): free are [head, capacity) and [0, tail)
            if self.capacity - self._head >= size:
                return self._head
            return 0 if tail > size else None
        return self._head if tail - self._head > size else None


NO_STAGING = StagingArena(0)
"""An arena nothing fits in, never allocated: every snapshot taken with it is a fresh copy."""
