"""StagingArena: snapshots carved from a ring in put order, reused once released, fresh memory when it is full."""

from __future__ import annotations

import itertools
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_coordinator.coordinator._staging import ALIGN_BYTES, StagingArena

CAPACITY = 8 * ALIGN_BYTES


def raw(nbytes: int, fill: int) -> torch.Tensor:
    return torch.full((nbytes,), fill, dtype=torch.uint8)


def test_snapshots_copy_and_slots_follow_one_another_aligned() -> None:
    arena = StagingArena(CAPACITY)
    first, slot1 = arena.snapshot(raw(10, 1))
    second, slot2 = arena.snapshot(raw(ALIGN_BYTES + 1, 2))
    assert (slot1.start, slot1.end) == (0, ALIGN_BYTES)
    assert (slot2.start, slot2.end) == (ALIGN_BYTES, 3 * ALIGN_BYTES)
    assert bytes(first) == b"\x01" * 10 and bytes(second) == b"\x02" * (ALIGN_BYTES + 1)
    assert arena.held_bytes == 3 * ALIGN_BYTES


def test_a_full_ring_gives_fresh_memory_and_released_space_is_reused_after_wrapping() -> None:
    arena = StagingArena(CAPACITY)
    slots = [arena.snapshot(raw(2 * ALIGN_BYTES, i))[1] for i in range(4)]
    assert [s.start for s in slots] == [0, 2 * ALIGN_BYTES, 4 * ALIGN_BYTES, 6 * ALIGN_BYTES]
    fresh, none = arena.snapshot(raw(ALIGN_BYTES, 9))
    assert none is None and bytes(fresh) == b"\x09" * ALIGN_BYTES
    arena.release([slots[1]])  # out of order: nothing is reusable until the oldest goes
    assert arena.snapshot(raw(ALIGN_BYTES, 9))[1] is None
    arena.release([slots[0]])
    wrapped = arena.snapshot(raw(2 * ALIGN_BYTES, 5))[1]
    assert wrapped is not None and wrapped.start == 0  # the end of the ring is full: back to its start
    after = arena.snapshot(raw(ALIGN_BYTES, 6))[1]
    assert after is not None and after.start == 2 * ALIGN_BYTES
    assert arena.snapshot(raw(ALIGN_BYTES, 6))[1] is None  # it would end where the oldest live slot starts
    arena.release([*slots[2:], wrapped, after, wrapped])  # a second release of a slot is ignored
    assert arena.held_bytes == 0
    assert arena.snapshot(raw(CAPACITY, 7))[1].start == 0  # an empty ring starts over


def test_empty_and_oversized_snapshots_take_fresh_memory() -> None:
    arena = StagingArena(CAPACITY)
    assert arena.snapshot(raw(0, 0))[1] is None
    big, slot = arena.snapshot(raw(CAPACITY + 1, 3))
    assert slot is None and len(bytes(big)) == CAPACITY + 1
    assert arena.held_bytes == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3 * ALIGN_BYTES), st.booleans()), min_size=1, max_size=40))
def test_live_snapshots_never_overlap_and_keep_their_bytes(steps: list[tuple[int, bool]]) -> None:
    arena = StagingArena(CAPACITY)
    live: list[tuple[object, object, int, int]] = []
    for i, (nbytes, release_oldest) in enumerate(steps):
        if release_oldest and live:
            arena.release([live.pop(0)[1]])
        buffer, slot = arena.snapshot(raw(nbytes, i % 256))
        if slot is not None:
            live.append((buffer, slot, nbytes, i % 256))
        regions = sorted((s.start, s.end) for _, s, _, _ in live)
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(regions))
        assert all(0 <= start < end <= CAPACITY for start, end in regions)
        assert all(bytes(b) == bytes([fill]) * n for b, _, n, fill in live)


def test_threads_snapshot_while_another_releases() -> None:
    arena = StagingArena(64 * ALIGN_BYTES)
    taken: list[object] = []
    lock = threading.Lock()

    def take(fill: int) -> None:
        for _ in range(200):
            buffer, slot = arena.snapshot(raw(ALIGN_BYTES, fill))
            assert bytes(buffer) == bytes([fill]) * ALIGN_BYTES
            if slot is not None:
                with lock:
                    taken.append(slot)
                arena.release([slot])

    threads = [threading.Thread(target=take, args=(f,)) for f in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert taken and arena.held_bytes == 0


@pytest.mark.parametrize("capacity", [ALIGN_BYTES, CAPACITY])
def test_a_snapshot_of_the_whole_capacity_fits_an_empty_ring(capacity: int) -> None:
    arena = StagingArena(capacity)
    assert arena.snapshot(raw(capacity, 1))[1] is not None


def test_snapshots_start_on_a_cache_line() -> None:
    arena = StagingArena(CAPACITY)
    for nbytes in (1, ALIGN_BYTES + 3, 7):
        buffer, _ = arena.snapshot(raw(nbytes, 1))
        assert torch.frombuffer(buffer, dtype=torch.uint8).data_ptr() % ALIGN_BYTES == 0
