"""GMPO by hand: the sign-aware log-ratio clip, the geometric mean per sequence, aggregation and IS weights."""

from __future__ import annotations

import math

import pytest

from rl_core.losses import geo_mean

from ._batches import assert_close, batch

# Row 0: A = +1, log-ratios 0.2 and 0.6 -> clipped at 0.4 on the upside: mean 0.3, loss -e^0.3.
# Row 1: A = -1, log-ratio -0.6 -> for A < 0 the downside is clipped at -0.4: loss +e^-0.4.
INPUTS = {
    "log_probs": [[0.2, 0.6], [-0.6, 5.0]],
    "old_log_probs": [[0.0, 0.0], [0.0, 0.0]],
    "advantages": [[1.0, 1.0], [-1.0, -1.0]],
    "mask": [[1, 1], [1, 0]],
}
ROW0, ROW1 = -math.exp(0.3), math.exp(-0.4)


def test_sequence_losses_by_hand() -> None:
    out = geo_mean(batch(**INPUTS), aggregation="seq-mean-token-mean")
    assert out.loss.item() == pytest.approx((ROW0 + ROW1) / 2, abs=1e-12)
    # Each token carries its sequence's loss: token-mean weighs row 0 twice.
    assert geo_mean(batch(**INPUTS)).loss.item() == pytest.approx((2 * ROW0 + ROW1) / 3, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(1 / 3)
    assert out.metrics["pg_clipfrac_lower"].item() == pytest.approx(1 / 3)
    assert out.metrics["ppo_kl"].item() == pytest.approx(-(0.2 + 0.6 - 0.6) / 3, abs=1e-12)


def test_clip_only_binds_on_the_improving_side() -> None:
    # A > 0 with log-ratio -0.6: the clip would raise it to -0.4, so the pessimistic -0.6 stays.
    out = geo_mean(batch([[-0.6]], [[0.0]], [[2.0]]))
    assert out.loss.item() == pytest.approx(-2.0 * math.exp(-0.6), abs=1e-12)


def test_asymmetric_clip_and_token_advantages_are_averaged() -> None:
    # Mean advantage (1 + 3) / 2 = 2; log-ratios 0.5, 0.5 clipped at 0.3.
    out = geo_mean(batch([[0.5, 0.5]], [[0.0, 0.0]], [[1.0, 3.0]]), clip_ratio_low=0.1, clip_ratio_high=0.3)
    assert out.loss.item() == pytest.approx(-2.0 * math.exp(0.3), abs=1e-12)


def test_gradient_flows_through_the_unclipped_tokens() -> None:
    inputs = batch(**INPUTS)
    geo_mean(inputs, aggregation="seq-mean-token-mean").loss.backward()
    # Row 0: d(-e^{(lr0 + 0.4)/2})/d lr0 = -e^0.3 / 2, over 2 sequences; token 1 clipped. Row 1 clipped.
    assert_close(inputs.log_probs.grad, [[ROW0 / 2 / 2, 0.0], [0.0, 0.0]])


def test_rollout_weights_enter_as_their_geometric_mean() -> None:
    inputs = batch(**INPUTS, weights=[[1.0, 4.0], [0.5, 100.0]])
    out = geo_mean(inputs, aggregation="seq-mean-token-mean")
    assert out.loss.item() == pytest.approx((2.0 * ROW0 + 0.5 * ROW1) / 2, rel=1e-9)


def test_rejects_negative_clip_ratio() -> None:
    with pytest.raises(ValueError, match=r"clip_ratio must be >= 0, got -0.4"):
        geo_mean(batch(**INPUTS), clip_ratio=-0.4)
