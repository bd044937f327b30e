"""The critic's objective: the clipped value loss with verl's metrics, its checks."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch

from rl_core import UnknownNameError
from rl_core.losses import LossNormalizer, clipped_value_loss
from rl_core.objectives import ValueObjective
from rl_core.schema import RESPONSE_MASK, RETURNS, VALUES


class _Outputs(NamedTuple):
    values: torch.Tensor | None


def test_the_objective_is_the_clipped_value_loss_with_verls_metrics() -> None:
    gen = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    batch = {VALUES: torch.randn(2, 3, generator=gen), RETURNS: torch.randn(2, 3, generator=gen), RESPONSE_MASK: mask}
    predicted = torch.randn(2, 3, generator=gen).requires_grad_()
    normalizer = LossNormalizer(8.0, 4.0, 3.0)
    loss, metrics = ValueObjective(0.2, "seq-mean-token-mean")(_Outputs(predicted), batch, normalizer)
    expected = clipped_value_loss(
        predicted,
        batch[VALUES],
        batch[RETURNS],
        mask,
        clip_range=0.2,
        aggregation="seq-mean-token-mean",
        normalizer=normalizer,
    )
    torch.testing.assert_close(loss, expected.loss)
    assert metrics["critic/vf_clipfrac"] == expected.clipfrac and loss.requires_grad
    torch.testing.assert_close(metrics["critic/vpred_mean"], predicted.detach()[mask.bool()].mean())


def test_the_value_objective_refuses_bad_settings_and_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match=r"ValueObjective\.clip_range: expected a number > 0"):
        ValueObjective(0.0)
    with pytest.raises(UnknownNameError, match=r"unknown loss aggregation mode 'sum'"):
        ValueObjective(math.inf, "sum")
    mask = torch.ones(1, 2)
    with pytest.raises(KeyError, match=r"needs batch fields \['returns'\]"):
        ValueObjective()(_Outputs(torch.zeros(1, 2)), {VALUES: torch.zeros(1, 2), RESPONSE_MASK: mask}, None)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match=r"needs the forward's values"):
        ValueObjective()(
            _Outputs(None), {VALUES: mask, RETURNS: mask, RESPONSE_MASK: mask}, LossNormalizer.from_mask(mask)
        )
