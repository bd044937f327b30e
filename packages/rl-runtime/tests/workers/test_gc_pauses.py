"""A worker freezes the objects of its build out of full garbage collections and measures its collections."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from rl_runtime.workers._gc_pauses import GcPauses, freeze_build_objects

LONG_LIVED = 20_000
"""Objects the test keeps alive across the freeze: enough that a full collection has something to walk."""


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The test process leaves every object collectable again afterwards."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


def test_freezing_moves_live_objects_out_of_collections_and_leaves_new_garbage_collectable(unfrozen: None) -> None:
    kept = [[index] for index in range(LONG_LIVED)]
    frozen = freeze_build_objects()
    assert frozen == gc.get_freeze_count() >= LONG_LIVED
    assert sum(len(item) for item in kept) == LONG_LIVED  # frozen objects stay usable
    collected = {id(obj) for generation in range(3) for obj in gc.get_objects(generation=generation)}
    assert not any(id(item) in collected for item in kept)  # in the permanent generation: no collection walks them
    cycle: list[object] = []
    cycle.append(cycle)  # made after the freeze: garbage a collection still finds
    del cycle
    assert gc.collect() >= 1


def test_gc_pauses_adds_up_the_collections_since_the_last_take() -> None:
    pauses = GcPauses()
    try:
        pauses.take()
        gc.collect(0)  # the youngest generation: counted like any, and cheap in a process that imported torch
        gc.collect(0)
        spent = pauses.take()
        assert spent > 0.0
        assert pauses.take() == 0.0  # taken: nothing since
    finally:
        pauses.close()
    pauses.close()  # idempotent
    gc.collect(0)
    assert pauses.take() == 0.0  # unregistered: collections are no longer counted
