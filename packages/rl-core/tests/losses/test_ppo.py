"""PPO by hand: inside/outside the clip range, clip-higher, dual clip, the +-20 clamp, metrics and rejections."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.losses import ppo

from ._batches import batch, per_row, ratio_batch

# (ratio, advantage, per-token loss) with the symmetric clip range 0.2 and dual clip 3.
SYMMETRIC = [
    (1.1, 1.0, -1.1),  # inside the range: -A * r
    (1.5, 1.0, -1.2),  # above 1 + 0.2 with A > 0: clipped
    (0.5, 1.0, -0.5),  # below 1 - 0.2 with A > 0: max(-0.5, -0.8) keeps the unclipped, pessimistic value
    (0.5, -1.0, 0.8),  # below 1 - 0.2 with A < 0: clipped
    (1.5, -1.0, 1.5),  # above with A < 0: unclipped
    (4.0, -1.0, 3.0),  # A < 0 and -A * r > 3: held by the dual clip at -A * 3
    (4.0, 2.0, -2.4),  # A > 0: the dual clip never applies
]


def test_symmetric_clip_and_dual_clip_by_hand() -> None:
    ratios, advantages, expected = zip(*SYMMETRIC, strict=True)
    assert per_row(ppo, ratio_batch(list(ratios), list(advantages))) == pytest.approx(expected, abs=1e-12)


def test_clip_higher_is_asymmetric() -> None:
    # DAPO: low 0.2, high 0.28.
    inputs = ratio_batch([1.25, 1.5, 0.7, 0.75], [1.0, 1.0, -1.0, 1.0])
    values = per_row(ppo, inputs, clip_ratio_low=0.2, clip_ratio_high=0.28)
    assert values == pytest.approx([-1.25, -1.28, 0.8, -0.75], abs=1e-12)


def test_dual_clip_can_be_turned_off_or_moved() -> None:
    inputs = ratio_batch([4.0, 4.0], [-1.0, -2.0])
    assert per_row(ppo, inputs, clip_ratio_c=None) == pytest.approx([4.0, 8.0])
    assert per_row(ppo, inputs, clip_ratio_c=2.0) == pytest.approx([2.0, 4.0])


def test_metrics_and_token_mean_by_hand() -> None:
    ratios, advantages, expected = zip(*SYMMETRIC, strict=True)
    out = ppo(ratio_batch(list(ratios), list(advantages)))
    assert out.loss.item() == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    # Clipped tokens (clipped loss strictly larger): rows 1, 3 and 6; dual-clipped: row 5.
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(3 / 7)
    assert out.metrics["pg_clipfrac_lower"].item() == pytest.approx(1 / 7)
    assert out.metrics["ppo_kl"].item() == pytest.approx(-sum(math.log(r) for r in ratios) / 7, abs=1e-12)


def test_clipped_tokens_get_no_gradient() -> None:
    inputs = ratio_batch([1.1, 1.5, 0.5, 4.0], [1.0, 1.0, -1.0, -1.0])
    ppo(inputs).loss.backward()
    assert inputs.log_probs.grad is not None
    # d(-A r)/d log_probs = -A r, over 4 tokens; rows 1-3 are clipped (row 3 by the dual clip).
    assert inputs.log_probs.grad.flatten().tolist() == pytest.approx([-1.1 / 4, 0.0, 0.0, 0.0], abs=1e-12)


def test_log_ratio_is_clamped_at_20() -> None:
    inputs = batch([[50.0], [-50.0]], [[0.0], [0.0]], [[-1.0], [1.0]])
    values = per_row(ppo, inputs, clip_ratio_c=None)
    assert values == pytest.approx([math.exp(20.0), -math.exp(-20.0)], rel=1e-12)
    assert ppo(inputs).metrics["ppo_kl"].item() == pytest.approx(0.0)


def test_masked_tokens_are_ignored_by_loss_and_metrics() -> None:
    inputs = batch([[math.log(1.5), 7.0]], [[0.0, 0.0]], [[1.0, -5.0]], [[1, 0]])
    out = ppo(inputs)
    assert out.loss.item() == pytest.approx(-1.2)
    assert out.metrics["pg_clipfrac"].item() == 1.0
    assert out.metrics["pg_clipfrac_lower"].item() == 0.0


def test_rollout_is_weights_multiply_the_per_token_loss() -> None:
    inputs = batch([[math.log(1.1), math.log(1.5)]], [[0.0, 0.0]], [[1.0, 1.0]], weights=[[2.0, 0.5]])
    assert ppo(inputs).loss.item() == pytest.approx((2.0 * -1.1 + 0.5 * -1.2) / 2, abs=1e-12)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"clip_ratio_c": 1.0}, r"clip_ratio_c must be > 1 \(a bound above the unclipped ratio 1\), got 1.0"),
        ({"clip_ratio_c": float("nan")}, "clip_ratio_c must be > 1 .* got nan"),
        ({"clip_ratio": -0.1}, "clip_ratio must be >= 0, got -0.1"),
        ({"clip_ratio_low": float("nan")}, "clip_ratio_low must be >= 0, got nan"),
        ({"clip_ratio_high": -1.0}, "clip_ratio_high must be >= 0, got -1.0"),
    ],
)
def test_rejects_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ppo(ratio_batch([1.0], [1.0]), **params)


def test_unknown_aggregation_lists_the_modes() -> None:
    with pytest.raises(KeyError, match=r"unknown loss aggregation mode 'mean'.*valid names: seq-mean-token-mean"):
        ppo(ratio_batch([1.0], [1.0]), aggregation="mean")


def test_loss_is_a_scalar_with_detached_metrics() -> None:
    out = ppo(ratio_batch([1.3, 0.9], [1.0, -1.0]))
    assert out.loss.dim() == 0
    assert out.loss.requires_grad
    assert all(value.dim() == 0 and not value.requires_grad for value in out.metrics.values())
    assert isinstance(out.metrics["ppo_kl"], torch.Tensor)
