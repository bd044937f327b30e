"""Mini-batch rows and micro-batch planning on one rank, and the one-upstream rule."""

from __future__ import annotations

import pytest
import torch

from rl_runtime.nodes import micro_batches, mini_batch_rows
from rl_runtime.workers import StepDataError


def test_mini_batches_are_equal_contiguous_ranges() -> None:
    assert mini_batch_rows(6, 3) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(StepDataError, match="mini_batches_per_step=4"):
        mini_batch_rows(6, 4)


class FakeEngine:
    """Test double: only the property `micro_batches` reads."""

    def __init__(self, lockstep: bool) -> None:
        self.micro_batches_in_lockstep = lockstep


def test_micro_batches_cover_every_row_once_under_the_budget() -> None:
    mask = torch.tensor([[1] * 6 + [0] * 2, [1] * 8, [1] * 3 + [0] * 5, [1] * 5 + [0] * 3])
    plan = micro_batches(mask, max_tokens=11, group=None, engine=FakeEngine(lockstep=True))
    assert sorted(i for rows in plan for i in rows) == [0, 1, 2, 3]
    tokens = mask.sum(dim=-1).tolist()
    assert all(sum(tokens[i] for i in rows) <= 11 for rows in plan)
    assert len(plan) == 2  # 22 tokens need two micro-batches of at most 11


def test_an_engine_whose_ranks_plan_alone_needs_no_collective() -> None:
    mask = torch.ones(4, 5, dtype=torch.int64)
    not_a_group = object()  # a collective over it would fail: torch.distributed is not even initialised here
    plan = micro_batches(mask, max_tokens=10, group=not_a_group, engine=FakeEngine(lockstep=False))  # type: ignore[arg-type]
    assert plan == micro_batches(mask, max_tokens=10, group=None, engine=FakeEngine(lockstep=True))
    assert len(plan) == 2
