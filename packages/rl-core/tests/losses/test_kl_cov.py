"""KL-Cov by hand: the top-covariance tokens get the |log-ratio| penalty."""

from __future__ import annotations

import math

import pytest

from rl_core.losses import kl_cov

from ._batches import assert_close, batch

# Means over the 4 tokens: A 0.375, log_probs 0 -> cov = [1.625, 0.875, 0, 0] (ranked 0, 1, then ties).
LOG_PROBS = [[1.0, -1.0, 0.0, 0.0]]
OLD = [[0.9, -0.8, 0.0, 0.0]]  # log-ratios 0.1, -0.2, 0, 0
ADVANTAGES = [[2.0, -0.5, 0.0, 0.0]]
SURROGATE = [-2.0 * math.exp(0.1), 0.5 * math.exp(-0.2), 0.0, 0.0]


def test_top_token_is_penalised() -> None:
    inputs = batch(LOG_PROBS, OLD, ADVANTAGES)
    out = kl_cov(inputs, kl_cov_ratio=0.25, ppo_kl_coef=1.0)
    assert out.loss.item() == pytest.approx((SURROGATE[0] + 0.1 + sum(SURROGATE[1:])) / 4, abs=1e-12)
    assert out.metrics["ppo_kl"].item() == pytest.approx((-0.1 + 0.2) / 4, abs=1e-12)
    assert out.metrics["ppo_kl_abs"].item() == pytest.approx((0.1 + 0.2) / 4, abs=1e-12)
    out.loss.backward()
    # d/d log_probs of -A e^lr + |lr|: -A e^lr + sign(lr) on the penalised token.
    assert_close(inputs.log_probs.grad, [[(SURROGATE[0] + 1.0) / 4, SURROGATE[1] / 4, 0.0, 0.0]])


def test_ratio_sets_how_many_are_penalised() -> None:
    out = kl_cov(batch(LOG_PROBS, OLD, ADVANTAGES), kl_cov_ratio=0.5, ppo_kl_coef=0.5)
    assert out.loss.item() == pytest.approx((sum(SURROGATE) + 0.5 * (0.1 + 0.2)) / 4, abs=1e-12)


def test_at_least_one_token_is_penalised() -> None:
    # int(4 * 2e-4) = 0, raised to 1: the top token with the default coefficient 0.1.
    out = kl_cov(batch(LOG_PROBS, OLD, ADVANTAGES))
    assert out.loss.item() == pytest.approx((sum(SURROGATE) + 0.1 * 0.1) / 4, abs=1e-12)


def test_masked_tokens_are_never_selected() -> None:
    # Token 0 masked: over tokens 1-3, A mean -1/6, log_probs mean -1/3; cov of token 1 is the largest.
    inputs = batch(LOG_PROBS, OLD, ADVANTAGES, [[0, 1, 1, 1]])
    out = kl_cov(inputs, kl_cov_ratio=0.25, ppo_kl_coef=1.0)
    assert out.loss.item() == pytest.approx((SURROGATE[1] + 0.2) / 3, abs=1e-12)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kl_cov_ratio": 0.0}, r"kl_cov_ratio must be in \(0, 1\], got 0.0"),
        ({"kl_cov_ratio": 1.5}, r"kl_cov_ratio must be in \(0, 1\], got 1.5"),
        ({"ppo_kl_coef": -0.1}, "ppo_kl_coef must be >= 0, got -0.1"),
    ],
)
def test_rejects_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kl_cov(batch(LOG_PROBS, OLD, ADVANTAGES), **params)
