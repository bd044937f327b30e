"""KL as a loss: hand-worked values per aggregation mode, gradients, micro-batch additivity, rejections."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core import ShapeError, UnknownNameError
from rl_core.kl import kl_loss
from rl_core.losses import LossNormalizer

DTYPE = torch.float64
E = math.e

# δ = [[1, -1, 0], [0.5, 0, -3]]; k3 per token = r - 1 - log r with r = exp(-δ).
LOG_PROBS = [[-1.0, -2.0, -0.5], [-1.0, -1.0, -3.0]]
REF_LOG_PROBS = [[-2.0, -1.0, -0.5], [-1.5, -1.0, 0.0]]
MASK = [[1, 1, 0], [1, 0, 0]]
K3_00, K3_01, K3_10 = 1 / E, E - 2, math.exp(-0.5) - 0.5  # the three tokens on the mask


def _inputs(requires_grad: bool = False):
    log_probs = torch.tensor(LOG_PROBS, dtype=DTYPE, requires_grad=requires_grad)
    return log_probs, torch.tensor(REF_LOG_PROBS, dtype=DTYPE), torch.tensor(MASK)


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        ("token-mean", (K3_00 + K3_01 + K3_10) / 3),
        ("seq-mean-token-sum", (K3_00 + K3_01 + K3_10) / 2),
        ("seq-mean-token-mean", ((K3_00 + K3_01) / 2 + K3_10) / 2),
        ("seq-mean-token-sum-norm", (K3_00 + K3_01 + K3_10) / (2 * 3)),
    ],
)
def test_k3_loss_by_hand(aggregation: str, expected: float) -> None:
    loss = kl_loss(*_inputs(), aggregation=aggregation)
    assert loss.dim() == 0
    assert loss.item() == pytest.approx(expected, abs=1e-15)


def test_k1_loss_by_hand() -> None:
    assert kl_loss(*_inputs(), estimator="k1").item() == pytest.approx((1 - 1 + 0.5) / 3, abs=1e-15)


def test_k3_plus_gradient_is_delta_over_the_token_count() -> None:
    log_probs, ref_log_probs, mask = _inputs(requires_grad=True)
    kl_loss(log_probs, ref_log_probs, mask, estimator="k3+").backward()
    expected = torch.tensor([[1 / 3, -1 / 3, 0.0], [0.5 / 3, 0.0, 0.0]], dtype=DTYPE)
    torch.testing.assert_close(log_probs.grad, expected, rtol=0.0, atol=1e-15)


def test_micro_batches_with_a_shared_normalizer_sum_to_the_whole() -> None:
    log_probs, ref_log_probs, mask = _inputs()
    for aggregation in ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        whole = kl_loss(log_probs, ref_log_probs, mask, aggregation=aggregation)
        norm = LossNormalizer.from_mask(mask)
        parts = sum(
            kl_loss(
                log_probs[i : i + 1],
                ref_log_probs[i : i + 1],
                mask[i : i + 1],
                aggregation=aggregation,
                normalizer=norm,
            )
            for i in range(2)
        )
        assert parts.item() == pytest.approx(whole.item(), abs=1e-15), aggregation


def test_rejects_a_mask_of_another_shape() -> None:
    log_probs, ref_log_probs, mask = _inputs()
    with pytest.raises(ShapeError, match=r"response_mask must have shape \(B, T\) with B=2"):
        kl_loss(log_probs, ref_log_probs, mask[:1])


def test_rejects_mismatched_log_probs() -> None:
    log_probs, ref_log_probs, mask = _inputs()
    with pytest.raises(ShapeError, match=r"ref_log_probs must have shape \(B, T\) with T=3"):
        kl_loss(log_probs, ref_log_probs[:, :2], mask)


def test_rejects_an_unknown_estimator() -> None:
    with pytest.raises(UnknownNameError, match="unknown KL estimator 'k5'"):
        kl_loss(*_inputs(), estimator="k5")


def test_rejects_an_unknown_aggregation() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown loss aggregation mode 'token_mean'.*'token-mean'"):
        kl_loss(*_inputs(), aggregation="token_mean")
