"""The cyclic garbage collector in a DAG worker: the objects of its build frozen out of full collections, and the
time each step spends in collections measured.

A worker holds a few hundred thousand long-lived Python objects once it has built its resources (torch,
transformers, Ray, the model's modules and engines). Every full (generation 2) collection walks all of them, and
Python runs one whenever a step's allocations have promoted more than a quarter as many objects as the long-lived
ones, which happens while a young worker's heap still grows: a stall of a few hundred milliseconds in an early step
(measured in bench/README.md, "async"). `freeze_build_objects` moves every object alive after the build to the
permanent generation (`gc.freeze`, a constant-time list splice), which collections skip; objects made later are
collected as before. The price: a cycle among the frozen objects (the build's own uncollected garbage included) is
never reclaimed by the cycle collector (non-cyclic objects still are, by reference counting), bounded by what the
build made. There is no collection before the freeze: it would cost every worker start a full collection, which is
what the freeze avoids.

`GcPauses` adds up the time this process spends inside collections (`gc.callbacks`), reported per step as
`timing_s/gc` so a stall is visible in the metrics.
"""

from __future__ import annotations

import gc
import time
from typing import Any

GC_TIMING = "timing_s/gc"
"""Seconds a worker's step spent in the garbage collector (all generations)."""


def freeze_build_objects() -> int:
    """Freeze every object alive in this process out of later collections (see the module doc); the number frozen.
    Call it in a worker's own process, after it has built its resources."""
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """Adds up the seconds this process spends in garbage collections, from `gc.callbacks`; `take` returns the sum
    since the last `take`. `close` unregisters it."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._total = 0.0
        gc.callbacks.append(self._on_collection)

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self._total += time.perf_counter() - self._started
            self._started = None

    def take(self) -> float:
        """Seconds spent in collections since the last call (or since it was made)."""
        total, self._total = self._total, 0.0
        return total

    def close(self) -> None:
        """Stop measuring (unregister the callback); idempotent."""
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
