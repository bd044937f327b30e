"""A buffer for asynchronous training that bounds how many policy versions old a served sample may be."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo

logger = logging.getLogger(__name__)

_POLICIES = ("drop", "keep")
METRIC_DROPPED = "async/stale_dropped"
METRIC_KEPT = "async/stale_kept"
METRIC_STALENESS_MEAN = "async/staleness_mean"
METRIC_SERVED = "async/served"
METRIC_BUFFERED = "async/buffered"


class BufferEntry(NamedTuple):
    """A buffered sample: its description and the reference to its payload (e.g. a Ray ObjectRef)."""

    info: SampleInfo
    ref: Any


class _Slot(NamedTuple):
    seq: int
    entry: BufferEntry


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CoordinatorInputError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class StalenessBuffer:
    """Holds samples until taken, serving oldest first and bounding their staleness.

    A sample's staleness at a take is `current_version - info.policy_version`. With `policy="drop"`
    a take first removes every sample staler than `max_staleness` (counted in `async/stale_dropped`,
    handed to `on_drop`), then serves the remaining samples oldest first. With
    `policy="keep"` nothing is removed: stale samples are served like the others (oldest first, so
    before fresher ones) and counted in `async/stale_kept`.

    With `group_aware=True` samples sharing `(info.edge, info.group_id)` are served and dropped only
    together; a group's age is that of its oldest member, and a take stops at the first group (oldest
    first) that does not fit in `n`. With `group_size` set as well, a group is served only once it has
    exactly that many members.

    Thread-safe: producers may `put` while a trainer thread calls `take`.
    """

    def __init__(
        self,
        max_staleness: int,
        *,
        policy: str = "drop",
        group_aware: bool = False,
        group_size: int | None = None,
        on_drop: Callable[[list[BufferEntry]], None] | None = None,
    ) -> None:
        self.max_staleness = _check_int("max_staleness", max_staleness, 0)
        if policy not in _POLICIES:
            raise CoordinatorInputError(f"policy must be one of {list(_POLICIES)}, got {policy!r}")
        if group_size is not None:
            _check_int("group_size", group_size, 1)
            if not group_aware:
                raise CoordinatorInputError("group_size needs group_aware=True; set it or leave group_size=None")
        self.policy = policy
        self.group_aware = bool(group_aware)
        self.group_size = group_size
        self._on_drop = on_drop
        self._slots: dict[str, _Slot] = {}
        self._next_seq = 0
        self._last_version = 0
        self._lock = threading.Lock()
        self._dropped = self._kept = self._served = self._staleness_sum = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def put(self, infos: Sequence[SampleInfo], refs: Sequence[Any]) -> None:
        """Add samples: `infos[i]` describes the payload behind `refs[i]`; uids must be new to the buffer."""
        if len(infos) != len(refs):
            raise CoordinatorInputError(f"put got {len(infos)} infos but {len(refs)} refs; pass one ref per info")
        with self._lock:
            fresh: set[str] = set()
            added_per_group: dict[tuple[str, int], int] = {}
            for info in infos:
                if not isinstance(info, SampleInfo):
                    raise CoordinatorInputError(f"put takes SampleInfo descriptions, got {type(info).__name__}")
                if info.uid in self._slots or info.uid in fresh:
                    raise CoordinatorInputError(
                        f"sample uid {info.uid!r} is already in the buffer or twice in this put; uids must be unique"
                    )
                fresh.add(info.uid)
                key = (info.edge, info.group_id)
                added_per_group[key] = added_per_group.get(key, 0) + 1
            if self.group_size is not None:
                self._check_group_sizes(added_per_group)
            for info, ref in zip(infos, refs, strict=True):
                self._slots[info.uid] = _Slot(self._next_seq, BufferEntry(info, ref))
                self._next_seq += 1

    def _check_group_sizes(self, added_per_group: dict[tuple[str, int], int]) -> None:
        present: dict[tuple[str, int], int] = {}
        for slot in self._slots.values():
            key = (slot.entry.info.edge, slot.entry.info.group_id)
            present[key] = present.get(key, 0) + 1
        for key, added in added_per_group.items():
            if present.get(key, 0) + added > (self.group_size or 0):
                raise CoordinatorInputError(
                    f"group {key[1]} of edge {key[0]!r} would have {present.get(key, 0) + added} samples in the "
                    f"buffer, more than group_size={self.group_size}"
                )

    def _units(self) -> list[list[_Slot]]:
        """Serving units (single samples, or whole groups) sorted oldest first."""
        if self.group_aware:
            groups: dict[tuple[str, int], list[_Slot]] = {}
            for slot in self._slots.values():
                groups.setdefault((slot.entry.info.edge, slot.entry.info.group_id), []).append(slot)
            units = list(groups.values())
        else:
            units = [[slot] for slot in self._slots.values()]
        return sorted(units, key=lambda unit: min((s.entry.info.policy_version, s.seq) for s in unit))

    def take(self, n: int, current_version: int) -> list[BufferEntry]:
        """Remove and return up to `n` samples, oldest policy version first, under the staleness policy.

        `current_version` is the trainer's policy version now; it must not go backwards between takes
        and no buffered sample may come from a later version.
        """
        _check_int("n", n, 0)
        _check_int("current_version", current_version, 0)
        with self._lock:
            if current_version < self._last_version:
                raise CoordinatorInputError(
                    f"current_version {current_version} is lower than {self._last_version} from an earlier take; "
                    "policy versions only grow"
                )
            for slot in self._slots.values():
                if slot.entry.info.policy_version > current_version:
                    raise CoordinatorInputError(
                        f"sample {slot.entry.info.uid!r} has policy_version {slot.entry.info.policy_version}, newer "
                        f"than current_version {current_version}; pass the trainer's latest version"
                    )
            to_drop: list[list[_Slot]] = []
            eligible: list[list[_Slot]] = []
            for unit in self._units():
                oldest = min(slot.entry.info.policy_version for slot in unit)
                if self.policy == "drop" and current_version - oldest > self.max_staleness:
                    to_drop.append(unit)
                elif self.group_size is None or len(unit) == self.group_size:
                    eligible.append(unit)
            chosen = self._choose(eligible, n)
            self._last_version = current_version
            dropped = [slot.entry for unit in to_drop for slot in unit]
            served = [slot.entry for unit in chosen for slot in unit]
            for entry in (*dropped, *served):
                del self._slots[entry.info.uid]
            self._count(served, len(dropped), current_version)
        if dropped:
            logger.debug("dropped %d samples staler than %d versions", len(dropped), self.max_staleness)
            if self._on_drop is not None:
                self._on_drop(dropped)
        return served

    def _choose(self, eligible: list[list[_Slot]], n: int) -> list[list[_Slot]]:
        chosen: list[list[_Slot]] = []
        count = 0
        for unit in eligible:
            if count + len(unit) > n:
                if not chosen and n > 0 and len(unit) > n:
                    raise CoordinatorInputError(
                        f"take(n={n}) cannot serve the oldest group, which has {len(unit)} samples and is served "
                        "whole; ask for n >= the group size"
                    )
                break
            chosen.append(unit)
            count += len(unit)
        return chosen

    def _count(self, served: list[BufferEntry], dropped: int, current_version: int) -> None:
        self._dropped += dropped
        self._served += len(served)
        for entry in served:
            staleness = current_version - entry.info.policy_version
            self._staleness_sum += staleness
            if staleness > self.max_staleness:
                self._kept += 1

    def metrics(self, *, reset: bool = False) -> dict[str, float]:
        """Counts since construction or the last reset: dropped, stale-but-served, served, mean staleness served."""
        with self._lock:
            out = {
                METRIC_DROPPED: float(self._dropped),
                METRIC_KEPT: float(self._kept),
                METRIC_SERVED: float(self._served),
                METRIC_STALENESS_MEAN: self._staleness_sum / self._served if self._served else 0.0,
                METRIC_BUFFERED: float(len(self._slots)),
            }
            if reset:
                self._dropped = self._kept = self._served = self._staleness_sum = 0
        return out
