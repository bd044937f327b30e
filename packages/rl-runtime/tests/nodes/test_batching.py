"""Mini-batch rows on one rank (micro-batches are the engine's: rl-engines' test_micro_batches)."""

from __future__ import annotations

import pytest

from rl_runtime.nodes import mini_batch_rows
from rl_runtime.workers import StepDataError


def test_mini_batches_are_equal_contiguous_ranges() -> None:
    assert mini_batch_rows(6, 3) == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(StepDataError, match="mini_batches_per_step=4"):
        mini_batch_rows(6, 4)
