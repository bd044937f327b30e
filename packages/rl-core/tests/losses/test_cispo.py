"""CISPO by hand: a clipped, stop-gradient importance weight on a REINFORCE term."""

from __future__ import annotations

import math

import pytest

from rl_core.losses import cispo

from ._batches import batch


def test_loss_and_gradient_by_hand() -> None:
    # Ratios 1.5 (clipped to 1.2), 0.5 (clipped to 0.8), 1.1 (kept); log_probs are log(ratio) - 1.
    ratios, advantages = [1.5, 0.5, 1.1], [1.0, -2.0, 0.5]
    old = [-1.0, -1.0, -1.0]
    log_probs = [math.log(r) + o for r, o in zip(ratios, old, strict=True)]
    inputs = batch([log_probs], [old], [advantages])
    out = cispo(inputs)
    weights = [1.2, 0.8, 1.1]
    expected = [-w * a * lp for w, a, lp in zip(weights, advantages, log_probs, strict=True)]
    assert out.loss.item() == pytest.approx(sum(expected) / 3, abs=1e-12)
    out.loss.backward()
    assert inputs.log_probs.grad is not None
    # The weight is detached: even a clipped token keeps the gradient -w * A.
    gradient = [-w * a / 3 for w, a in zip(weights, advantages, strict=True)]
    assert inputs.log_probs.grad.flatten().tolist() == pytest.approx(gradient, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(2 / 3)
    assert out.metrics["ppo_kl"].item() == pytest.approx(-sum(math.log(r) for r in ratios) / 3, abs=1e-12)


def test_asymmetric_clip() -> None:
    # The paper clips only above: a large clip_ratio_low leaves small ratios alone.
    log_probs = [math.log(0.1) - 1.0, math.log(3.0) - 1.0]
    inputs = batch([log_probs], [[-1.0, -1.0]], [[1.0, 1.0]])
    out = cispo(inputs, clip_ratio_low=10.0, clip_ratio_high=0.3)
    assert out.loss.item() == pytest.approx((-0.1 * log_probs[0] - 1.3 * log_probs[1]) / 2, abs=1e-12)


def test_rejects_negative_clip_ratio() -> None:
    with pytest.raises(ValueError, match=r"clip_ratio must be >= 0, got -0.2"):
        cispo(batch([[0.0]], [[0.0]], [[1.0]]), clip_ratio=-0.2)
