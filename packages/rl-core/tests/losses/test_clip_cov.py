"""Clip-Cov by hand: which tokens are candidates, how many are dropped, and the seeded draw."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.losses import LossNormalizer, PolicyLossInputs, clip_cov

from ._batches import assert_close, batch

# On-policy, so PPO clips nothing and the per-token loss is -A. Means over the 4 tokens: A 0.375, log_probs 0.
# cov = (A - 0.375) * log_probs = [1.625, 0.875, 0, 0]: only token 0 lies inside (1, 5).
ONE_CANDIDATE = ([[1.0, -1.0, 0.0, 0.0]], [[2.0, -0.5, 0.0, 0.0]])


def _on_policy(log_probs: list[list[float]], advantages: list[list[float]]) -> PolicyLossInputs:
    return batch(log_probs, log_probs, advantages)


def test_single_candidate_is_dropped() -> None:
    inputs = _on_policy(*ONE_CANDIDATE)
    out = clip_cov(inputs)
    # Token 0 dropped; the others keep -A: (0 + 0.5 + 0 + 0) / 4.
    assert out.loss.item() == pytest.approx(0.125, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(0.25)
    out.loss.backward()
    assert_close(inputs.log_probs.grad, [[0.0, 0.5 / 4, 0.0, 0.0]])


def test_bounds_select_the_candidates() -> None:
    # With (0.5, 5) both tokens 0 and 1 are candidates; a ratio of 1/2 of 4 tokens drops both.
    out = clip_cov(_on_policy(*ONE_CANDIDATE), clip_cov_lb=0.5, clip_cov_ratio=0.5)
    assert out.loss.item() == pytest.approx(0.0, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(0.5)
    # Nothing inside (2, 5): nothing dropped, loss is token-mean of -A.
    out = clip_cov(_on_policy(*ONE_CANDIDATE), clip_cov_lb=2.0)
    assert out.loss.item() == pytest.approx((-2.0 + 0.5) / 4, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == 0.0


def test_ppo_clipped_tokens_are_not_candidates() -> None:
    # Token 0 of ONE_CANDIDATE now has ratio e^0.5 > 1.2 with A > 0: PPO clips it, so nothing is dropped.
    inputs = batch([[1.0, -1.0, 0.0, 0.0]], [[0.5, -1.0, 0.0, 0.0]], [[2.0, -0.5, 0.0, 0.0]])
    out = clip_cov(inputs)
    assert out.metrics["pg_clipfrac"].item() == 0.0
    assert out.loss.item() == pytest.approx((-2.0 * 1.2 + 0.5) / 4, abs=1e-12)
    assert out.metrics["ppo_kl"].item() == pytest.approx(-0.5 / 4)


def test_random_draw_drops_the_requested_count_and_follows_the_generator() -> None:
    # Tokens 0 and 1 have cov 2 each (both candidates); one of the two is dropped.
    inputs = _on_policy([[1.0, -1.0, 0.0, 0.0]], [[2.0, -2.0, 0.0, 0.0]])
    seen = set()
    for seed in range(12):
        out = clip_cov(inputs, generator=torch.Generator().manual_seed(seed))
        seen.add(out.loss.item())
        assert out.metrics["pg_clipfrac"].item() == pytest.approx(0.25)
        again = clip_cov(inputs, generator=torch.Generator().manual_seed(seed))
        assert torch.equal(again.loss, out.loss)
    # Dropping token 0 leaves (0 + 2) / 4, dropping token 1 leaves (-2 + 0) / 4.
    assert seen == {0.5, -0.5}


def test_default_draw_uses_the_global_cpu_generator() -> None:
    inputs = _on_policy([[1.0, -1.0, 0.0, 0.0]], [[2.0, -2.0, 0.0, 0.0]])
    torch.manual_seed(3)
    first = clip_cov(inputs).loss
    torch.manual_seed(3)
    assert torch.equal(clip_cov(inputs).loss, first)


def test_empty_micro_batch_with_a_global_normaliser() -> None:
    inputs = batch([[math.nan, 0.0]], [[0.0, 0.0]], [[1.0, 1.0]], [[0, 0]])
    out = clip_cov(inputs, normalizer=LossNormalizer(4.0, 2.0, 2.0))
    assert out.loss.item() == 0.0
    assert out.metrics["pg_clipfrac"].item() == 0.0


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"clip_cov_ratio": 0.0}, "clip_cov_ratio must be > 0, got 0.0"),
        ({"clip_cov_ratio": float("nan")}, "clip_cov_ratio must be > 0, got nan"),
        ({"clip_cov_lb": 5.0, "clip_cov_ub": 5.0}, "clip_cov_lb must be < clip_cov_ub, got 5.0 and 5.0"),
        ({"clip_ratio_low": -1.0}, "clip_ratio_low must be >= 0, got -1.0"),
    ],
)
def test_rejects_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clip_cov(_on_policy(*ONE_CANDIDATE), **params)
