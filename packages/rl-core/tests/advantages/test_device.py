"""Every estimator gives the same numbers on a CUDA device as on the CPU."""

from __future__ import annotations

import pytest
import torch

from rl_core.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs

from ._batches import batch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _on(inputs: AdvantageInputs, device: str) -> AdvantageInputs:
    assert inputs.values is not None and inputs.baseline_rewards is not None
    return AdvantageInputs(
        token_level_rewards=inputs.token_level_rewards.to(device),
        response_mask=inputs.response_mask.to(device),
        group_ids=inputs.group_ids.to(device),
        values=inputs.values.to(device),
        baseline_rewards=inputs.baseline_rewards.to(device),
    )


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
def test_cuda_matches_cpu(name: str) -> None:
    inputs = batch(
        [[0.0, 1.0, 0.5], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 3.0, 0.0]],
        [[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 0, 1], [0, 1, 1]],
        [7, 7, 2, 2, 2],
        values=[[0.5, 0.1, 0.0], [0.2, 0.0, 0.0], [0.3, 0.3, 0.3], [1.0, 2.0, 3.0], [0.0, 0.5, 0.5]],
        baseline_rewards=[0.5, 1.0, 0.0, 2.0, 1.5],
    )
    estimator = ADVANTAGE_ESTIMATORS[name]
    on_cpu = estimator(inputs)
    on_cuda = estimator(_on(inputs, "cuda"))
    assert on_cuda.advantages.device.type == "cuda"
    torch.testing.assert_close(on_cuda.advantages.cpu(), on_cpu.advantages)
    torch.testing.assert_close(on_cuda.returns.cpu(), on_cpu.returns)
