"""Which pending samples a step takes (filters, whole groups) and how the taken samples split across ranks."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, NamedTuple

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._requests import SampleFilter, StepSpec
from rl_core.balancing import BalancingError, balance_across_ranks


class PendingSample(NamedTuple):
    """A sample waiting on an edge: its description and where its payload lives."""

    info: SampleInfo
    ref: Any
    position: int | None


class Pick(NamedTuple):
    """Indices into the pending queue: the samples a step takes (in step order) and those a filter dropped."""

    taken: list[int]
    dropped: list[int]


def _passes(members: Sequence[int], queue: Sequence[PendingSample], sample_filter: SampleFilter | None) -> bool:
    return sample_filter is None or all(sample_filter(queue[i].info) for i in members)


def candidate_groups(queue: Sequence[PendingSample], spec: StepSpec) -> Iterator[list[int]]:
    """The selection units of the queue, lazily, in the order a step considers them.

    Without group_aware each sample is a unit, in arrival order. With group_size, a group is a unit once it
    has group_size members (extra samples of the same id start a new group), in order of completion. With
    group_aware and no group_size, a unit is every pending sample of a group id, in order of first arrival
    (this needs the whole queue scanned first). Lazy, so a step stops reading the queue once it is full.
    """
    if not spec.group_aware:
        yield from ([i] for i in range(len(queue)))
        return
    open_groups: dict[int, list[int]] = {}
    if spec.group_size is None:
        for i, pending in enumerate(queue):
            open_groups.setdefault(pending.info.group_id, []).append(i)
        yield from open_groups.values()
        return
    for i, pending in enumerate(queue):
        members = open_groups.setdefault(pending.info.group_id, [])
        members.append(i)
        if len(members) == spec.group_size:
            del open_groups[pending.info.group_id]
            yield members


def select(queue: Sequence[PendingSample], spec: StepSpec, sample_filter: SampleFilter | None) -> Pick | None:
    """The first `spec.batch_size` samples (whole units) that pass the filter, or None while there are too few.

    Units the filter rejects ahead of the cut are dropped; a unit rejects when any member does. A unit that
    would overshoot the batch (only possible with group_aware and no group_size) is left for a later step.
    """
    if sample_filter is None and not spec.group_aware:
        # The common case, without a per-sample Python loop: the head of the queue.
        return Pick(taken=list(range(spec.batch_size)), dropped=[]) if len(queue) >= spec.batch_size else None
    taken: list[int] = []
    dropped: list[int] = []
    for unit in candidate_groups(queue, spec):
        if not _passes(unit, queue, sample_filter):
            dropped.extend(unit)
            continue
        if len(taken) + len(unit) > spec.batch_size:
            continue
        taken.extend(unit)
        if len(taken) == spec.batch_size:
            return Pick(taken=taken, dropped=dropped)
    return None


def remove_picked(queue: list[PendingSample], pick: Pick) -> list[PendingSample]:
    """Remove the taken and dropped samples from `queue` in place; return them, taken ones first in step order.

    Only the scanned head of the queue (up to the last picked index) is rebuilt, so the cost does not grow
    with the samples waiting behind it.
    """
    gone = set(pick.taken) | set(pick.dropped)
    end = max(gone) + 1
    removed = [queue[i] for i in pick.taken] + [queue[i] for i in pick.dropped]
    if len(gone) == end:  # a plain prefix (no filter or groups skipped anything)
        del queue[:end]
    else:
        queue[:end] = [s for i, s in enumerate(queue[:end]) if i not in gone]
    return removed


def count_selectable(queue: Sequence[PendingSample], spec: StepSpec, sample_filter: SampleFilter | None) -> int:
    """How many pending samples a step could take now (whole units passing the filter)."""
    return sum(len(unit) for unit in candidate_groups(queue, spec) if _passes(unit, queue, sample_filter))


def batch_units(payload_keys: Sequence[Hashable], per_rank: int) -> list[tuple[Hashable, int]] | None:
    """A unit id per sample: its batch (payload key) cut into runs of u = gcd(every batch size, per_rank) samples.

    Every unit has u samples and u divides per_rank, so the units split evenly across the ranks whatever the
    batch sizes. None when u is 1 (units would be single samples).
    """
    u = math.gcd(per_rank, *Counter(payload_keys).values())
    if u == 1:
        return None
    seen: Counter[Hashable] = Counter()
    units = []
    for key in payload_keys:
        units.append((key, seen[key] // u))
        seen[key] += 1
    return units


def split_across_ranks(
    infos: Sequence[SampleInfo], spec: StepSpec, payload_keys: Sequence[Hashable] | None = None
) -> list[list[int]]:
    """One list of indices into `infos` per rank: balanced by workload, or contiguous in step order.

    With balance and group_aware, each group stays on one rank. With balance and keep_batches (and not
    group_aware), the step's batches (samples sharing a payload key, their producer batch's ref) are cut into
    equal units (`batch_units`) that are balanced whole, then single samples are exchanged between ranks while
    that lowers the heaviest load (`soft_groups`): about the balance of sample-by-sample, with each rank
    reading few batches. Otherwise samples are balanced one by one. A step the balancer refuses raises
    CoordinatorInputError with its message.
    """
    if not spec.balance:
        per_rank = spec.per_rank
        return [list(range(rank * per_rank, (rank + 1) * per_rank)) for rank in range(spec.dp_size)]
    group_ids: Sequence[Hashable] | None = None
    soft = False
    if spec.group_aware:
        group_ids = [info.group_id for info in infos]
    elif spec.keep_batches and payload_keys is not None:
        group_ids = batch_units(payload_keys, spec.per_rank)
        soft = group_ids is not None
    try:
        return balance_across_ranks(
            [info.total_tokens for info in infos],
            spec.dp_size,
            method=spec.method,
            workload=spec.workload,
            equal_size=True,
            group_ids=group_ids,
            soft_groups=soft,
        )
    except BalancingError as exc:
        raise CoordinatorInputError(str(exc)) from exc
