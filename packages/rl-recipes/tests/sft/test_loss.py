"""The response NLL: minus the log-probs under the response mask, over the step's global token count."""

from __future__ import annotations

import math

import torch

from rl_core.losses import LossNormalizer
from rl_engines.training import ForwardOutput
from rl_recipes.sft import response_nll_loss


def test_token_mean_nll_over_the_global_count() -> None:
    log_probs = torch.tensor([[0.0, -1.0, -2.0], [-9.0, -0.5, math.nan]], requires_grad=True)
    mask = torch.tensor([[0, 1, 1], [0, 1, 0]])
    outputs = ForwardOutput(log_probs, None, None)
    # Masked positions never count, a NaN under the mask included: (1 + 2 + 0.5) / 3.
    local = response_nll_loss(outputs, {"response_mask": mask}, LossNormalizer(3, 2, 3))
    assert torch.isclose(local.loss, torch.tensor(3.5 / 3))
    # Under a global count of 7 tokens (other micro-batches / ranks hold 4 more) the share shrinks.
    share = response_nll_loss(outputs, {"response_mask": mask}, LossNormalizer(7, 4, 3))
    assert torch.isclose(share.loss, torch.tensor(3.5 / 7))
    share.loss.backward()
    expected = torch.tensor([[0.0, -1 / 7, -1 / 7], [0.0, -1 / 7, 0.0]])
    assert torch.allclose(log_probs.grad, expected)


def test_rejects_outputs_without_log_probs() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"needs log-probs: run it with ForwardSpec\(log_probs=True\)"):
        response_nll_loss(ForwardOutput(None, None, None), {"response_mask": torch.ones(1, 2)}, LossNormalizer(2, 1, 2))
