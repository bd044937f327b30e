"""The mini-batches a role splits the step's batch into (micro-batches are the engine's: rl-engines'
test_micro_batches)."""

from __future__ import annotations

import pytest
import torch

from rl_runtime.roles import RoleError
from rl_runtime.roles._common import mini_batch_rows, split_mini_batches


def test_mini_batches_are_equal_contiguous_ranges() -> None:
    assert mini_batch_rows(6, 3) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(RoleError, match="mini_batches_per_step=4"):
        mini_batch_rows(6, 4)


def test_split_keeps_row_order_in_every_tensor() -> None:
    batch = {"uid": torch.arange(6), "values": torch.arange(12.0).reshape(6, 2)}
    minis = split_mini_batches(batch, 3)
    assert [mini["uid"].tolist() for mini in minis] == [[0, 1], [2, 3], [4, 5]]
    assert torch.equal(torch.cat([mini["values"] for mini in minis]), batch["values"])
