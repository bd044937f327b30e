"""Small-tensor sums and gathers on real gloo process groups: recursive doubling at world 2 and 4, the library's
collectives at world 3 and for a large tensor; every rank gets bitwise the same sum."""

from __future__ import annotations

import pytest
import torch
from _collectives_workers import RECURSIVE_DOUBLING_MAX_BYTES, collectives_scenario, rank_values
from _training_helpers import run_distributed

pytestmark = pytest.mark.slow

SUM_TOLERANCE = 1e-5


@pytest.mark.parametrize("world", [2, 3, 4])
def test_sums_and_gathers_agree_with_a_local_reference(world: int, tmp_path) -> None:
    run_distributed(collectives_scenario, tmp_path, world=world)
    ranks = [torch.load(tmp_path / f"collectives_rank{rank}.pt") for rank in range(world)]
    expected_small = torch.stack([rank_values(rank).double() for rank in range(world)]).sum(0)
    large_shape = (RECURSIVE_DOUBLING_MAX_BYTES // 4 + 1,)
    expected_large = torch.stack([rank_values(rank, large_shape)[:16].double() for rank in range(world)]).sum(0)
    for saved in ranks:
        torch.testing.assert_close(saved["small"].double(), expected_small, rtol=SUM_TOLERANCE, atol=SUM_TOLERANCE)
        torch.testing.assert_close(saved["large_head"].double(), expected_large, rtol=SUM_TOLERANCE, atol=1e-3)
        assert saved["counts"].tolist() == [world * (world + 1) // 2, 10 * world * (world - 1) // 2]
        assert saved["gathered"].tolist() == [[float(rank), -float(rank)] for rank in range(world)]
        for name in ("small", "large_head"):
            assert torch.equal(saved[name], ranks[0][name]), f"{name} differs between ranks"
