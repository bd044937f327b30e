"""Stage timers that add wall-clock seconds to `timing_s/<name>` in a step's metrics dict."""

from __future__ import annotations

import threading
import time
from collections.abc import MutableMapping
from types import TracebackType

from rl_runtime.metrics._errors import MetricsError
from rl_runtime.metrics._perf import TIMING_PREFIX

_open = threading.local()
"""Per thread: the (metrics dict id, key) pairs a timer is currently inside, so a nested timer of the same
name on the same dict does not count its time twice. A dict is alive while a timer on it is open, so its id
cannot be reused meanwhile."""


def _open_keys() -> set[tuple[int, str]]:
    keys: set[tuple[int, str]] | None = getattr(_open, "keys", None)
    if keys is None:
        keys = _open.keys = set()
    return keys


class Timer:
    """Adds the seconds spent inside `with` to `metrics["timing_s/<name>"]` (accumulating, as verl's timer).

    Timers of different names nest freely (`step` around `gen`); a timer nested inside an open timer of the
    same name and dict is not counted again. Time is recorded even when the block raises. `last` holds the
    seconds of the latest completed block.
    """

    def __init__(self, name: str, metrics: MutableMapping[str, float]) -> None:
        if not isinstance(name, str) or not name or name.startswith(TIMING_PREFIX):
            raise MetricsError(f"a timer name must be a non-empty stage name without {TIMING_PREFIX!r}, got {name!r}")
        self.name = name
        self.key = TIMING_PREFIX + name
        self.metrics = metrics
        self.last = 0.0
        self._starts: list[tuple[float, bool]] = []

    def __enter__(self) -> Timer:
        marker = (id(self.metrics), self.key)
        outermost = marker not in _open_keys()
        if outermost:
            _open_keys().add(marker)
        self._starts.append((time.perf_counter(), outermost))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        start, outermost = self._starts.pop()
        self.last = time.perf_counter() - start
        if outermost:
            _open_keys().discard((id(self.metrics), self.key))
            self.metrics[self.key] = self.metrics.get(self.key, 0.0) + self.last


def timed(name: str, metrics: MutableMapping[str, float]) -> Timer:
    """A `Timer` recording `timing_s/<name>` into `metrics`: `with timed("gen", metrics): ...`."""
    return Timer(name, metrics)
