"""CPGD by hand, and against the official code's log-prob clamp (same gradient, value shifted by -A * old)."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.losses import cpgd

from ._batches import assert_close, batch

UP, DOWN = math.log(1.2), math.log(0.8)


def test_one_sided_log_ratio_clip_by_hand() -> None:
    # (log-ratio, A): clipped above for A > 0, below for A < 0, otherwise the plain -A * log r.
    log_ratios = [0.5, -0.5, -0.5, 0.5]
    advantages = [1.0, 1.0, -1.0, -1.0]
    inputs = batch([log_ratios], [[0.0] * 4], [advantages])
    out = cpgd(inputs)
    expected = [-UP, 0.5, DOWN, 0.5]
    assert out.loss.item() == pytest.approx(sum(expected) / 4, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(0.5)
    assert out.metrics["ppo_kl"].item() == pytest.approx(0.0, abs=1e-12)
    out.loss.backward()
    assert_close(inputs.log_probs.grad, [[0.0, -1 / 4, 0.0, 1 / 4]])


def test_asymmetric_bounds() -> None:
    inputs = batch([[0.5, -0.5]], [[0.0, 0.0]], [[1.0, -1.0]])
    out = cpgd(inputs, clip_ratio_low=0.1, clip_ratio_high=0.3)
    assert out.loss.item() == pytest.approx((-math.log(1.3) + math.log(0.9)) / 2, abs=1e-12)


def test_zero_at_the_old_policy() -> None:
    inputs = batch([[-1.0, -2.0]], [[-1.0, -2.0]], [[1.5, -0.5]])
    assert cpgd(inputs).loss.item() == 0.0


def test_matches_the_official_log_prob_clamp_up_to_a_constant() -> None:
    torch.manual_seed(0)
    old = -torch.rand(3, 5, dtype=torch.float64) * 3
    current = (old + 0.4 * torch.randn(3, 5, dtype=torch.float64)).requires_grad_(True)
    advantages = torch.randn(3, 5, dtype=torch.float64)
    ours = cpgd(batch(current.tolist(), old.tolist(), advantages.tolist(), requires_grad=False)).loss
    # ModalMinds/MM-EUREKA `--use_cpg_loss`, written out token by token.
    official_terms = []
    for i in range(3):
        for t in range(5):
            if advantages[i, t] > 0:
                clipped = torch.clamp(current[i, t], max=UP + old[i, t])
            else:
                clipped = torch.clamp(current[i, t], min=DOWN + old[i, t])
            official_terms.append(-clipped * advantages[i, t])
    official = torch.stack(official_terms).sum() / 15
    shift = (-advantages * old).sum() / 15
    assert ours.item() == pytest.approx((official - shift).item(), abs=1e-12)
    inputs = batch(current.tolist(), old.tolist(), advantages.tolist())
    cpgd(inputs).loss.backward()
    official.backward()
    assert current.grad is not None
    assert_close(inputs.log_probs.grad, current.grad.tolist())


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"clip_ratio": 1.0}, r"clip_ratio must be < 1 for cpgd \(its bound is log\(1 - clip_ratio\)\), got 1.0"),
        ({"clip_ratio_low": 1.5}, r"clip_ratio_low must be < 1 for cpgd .*got 1.5"),
        ({"clip_ratio_high": -0.1}, "clip_ratio_high must be >= 0, got -0.1"),
    ],
)
def test_rejects_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cpgd(batch([[0.0]], [[0.0]], [[1.0]]), **params)
