"""AReaL's decoupled PPO by hand: proximal clip, behaviour weight, the cap; and its reduction to PPO-clip."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.losses import AGGREGATIONS, LossNormalizer, PolicyLossInputs, decoupled_ppo, ppo

from ._batches import batch, random_inputs

# (ratio pi_theta / pi_prox, weight pi_prox / pi_behav, advantage, per-token loss); clip 0.2, dual clip 3, cap 5.
CASES = [
    (1.1, 2.0, 1.0, -2.2),  # inside the clip range: -A * r * w
    (1.5, 0.5, 1.0, -0.6),  # clipped at 1.2, then weighted: -1.2 * 0.5
    (0.5, 1.0, -1.0, 0.8),  # clipped at 0.8 with A < 0, weight 1
    (4.0, 1.5, -1.0, 4.5),  # dual clip at 3, weighted: 3 * 1.5
    (1.1, 6.0, 1.0, 0.0),  # weight 6 > cap 5: the token leaves the gradient (weight 0)
]


def _cases(cases: list[tuple[float, float, float, float]]) -> PolicyLossInputs:
    """One token a row: old (proximal) log-prob 0, current log(r), behaviour -log(w)."""
    return batch(
        [[math.log(r)] for r, _, _, _ in cases],
        [[0.0]] * len(cases),
        [[a] for _, _, a, _ in cases],
        rollout_log_probs=[[-math.log(w)] for _, w, _, _ in cases],
    )


def test_loss_gradient_and_metrics_by_hand() -> None:
    inputs = _cases(CASES)
    out = decoupled_ppo(inputs)
    # token-mean: the capped token still counts in the normaliser (AReaL divides by the loss mask's count).
    assert out.loss.item() == pytest.approx((-2.2 - 0.6 + 0.8 + 4.5 + 0.0) / 5, abs=1e-12)
    out.loss.backward()
    # Only the first token is unclipped and uncapped: d(-A r w)/d log_probs = -A r w = -2.2, over 5 tokens.
    assert inputs.log_probs.grad is not None
    assert inputs.log_probs.grad.flatten().tolist() == pytest.approx([-2.2 / 5, 0.0, 0.0, 0.0, 0.0], abs=1e-12)
    metrics = {key: value.item() for key, value in out.metrics.items()}
    assert metrics["rollout_is_mean"] == pytest.approx((2.0 + 0.5 + 1.0 + 1.5 + 0.0) / 5)
    assert metrics["rollout_is_masked_fraction"] == pytest.approx(1 / 5)
    assert metrics["rollout_is_max"] == pytest.approx(6.0)
    assert metrics["rollout_is_min"] == pytest.approx(0.5)
    assert metrics["rollout_is_ratio_fraction_high"] == pytest.approx(1 / 5)
    assert metrics["rollout_is_ratio_fraction_low"] == 0.0
    assert metrics["behav_kl"] == pytest.approx(math.log(2.0 * 0.5 * 1.0 * 1.5 * 6.0) / 5, abs=1e-12)
    assert metrics["pg_clipfrac"] == pytest.approx(2 / 5)  # rows 1 and 2 (row 3 is held by the dual clip)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(1 / 5)


def test_cap_can_be_moved_or_turned_off() -> None:
    assert decoupled_ppo(_cases(CASES), behav_imp_weight_cap=None).loss.item() == pytest.approx(
        (-2.2 - 0.6 + 0.8 + 4.5 - 1.1 * 6.0) / 5, abs=1e-12
    )
    # A cap of 1.8 also drops the weight-2 token.
    assert decoupled_ppo(_cases(CASES), behav_imp_weight_cap=1.8).loss.item() == pytest.approx(
        (-0.6 + 0.8 + 4.5) / 5, abs=1e-12
    )


def test_masked_tokens_and_a_clip_higher_range() -> None:
    inputs = batch(
        [[math.log(1.25), 9.0]], [[0.0, 0.0]], [[1.0, -3.0]], [[1, 0]], rollout_log_probs=[[-math.log(2.0), 50.0]]
    )
    out = decoupled_ppo(inputs, clip_ratio_low=0.2, clip_ratio_high=0.28)
    assert out.loss.item() == pytest.approx(-1.25 * 2.0, abs=1e-12)
    assert out.metrics["rollout_is_mean"].item() == pytest.approx(2.0)


def _loss_and_grad(loss_fn: object, inputs: PolicyLossInputs, **params: object) -> tuple[float, torch.Tensor]:
    leaf = inputs.log_probs.detach().clone().requires_grad_(True)
    fresh = PolicyLossInputs(
        log_probs=leaf,
        old_log_probs=inputs.old_log_probs,
        advantages=inputs.advantages,
        response_mask=inputs.response_mask,
        rollout_is_weights=inputs.rollout_is_weights,
        rollout_log_probs=inputs.rollout_log_probs,
    )
    out = loss_fn(fresh, **params)  # type: ignore[operator]
    out.loss.backward()
    assert leaf.grad is not None
    return out.loss.item(), leaf.grad


@settings(max_examples=40, deadline=None)
@given(
    inputs=random_inputs(),
    mode=st.sampled_from(sorted(AGGREGATIONS)),
    high=st.sampled_from([0.2, 0.28]),
    dual=st.sampled_from([None, 3.0]),
)
def test_reduces_to_ppo_clip_when_proximal_equals_behaviour(
    inputs: PolicyLossInputs, mode: str, high: float, dual: float | None
) -> None:
    same = PolicyLossInputs(
        log_probs=inputs.log_probs,
        old_log_probs=inputs.old_log_probs,
        advantages=inputs.advantages,
        response_mask=inputs.response_mask,
        rollout_log_probs=inputs.old_log_probs.clone(),
    )
    norm = LossNormalizer.from_mask(inputs.mask)
    params = {"aggregation": mode, "normalizer": norm, "clip_ratio_high": high, "clip_ratio_c": dual}
    loss, grad = _loss_and_grad(decoupled_ppo, same, **params)
    expected_loss, expected_grad = _loss_and_grad(ppo, same, **params)
    assert loss == expected_loss
    assert torch.equal(grad, expected_grad)


@settings(max_examples=40, deadline=None)
@given(inputs=random_inputs(with_rollout=True), mode=st.sampled_from(sorted(AGGREGATIONS)))
def test_uncapped_equals_ppo_weighted_by_proximal_over_behaviour(inputs: PolicyLossInputs, mode: str) -> None:
    # The drift of random_inputs keeps every weight below e^0.6 < 5: nothing is capped.
    assert inputs.rollout_log_probs is not None
    weights = torch.where(inputs.mask, torch.exp(inputs.old_log_probs - inputs.rollout_log_probs), 0.0)
    weighted = PolicyLossInputs(
        log_probs=inputs.log_probs,
        old_log_probs=inputs.old_log_probs,
        advantages=inputs.advantages,
        response_mask=inputs.response_mask,
        rollout_is_weights=weights,
    )
    loss, grad = _loss_and_grad(decoupled_ppo, inputs, aggregation=mode)
    expected_loss, expected_grad = _loss_and_grad(ppo, weighted, aggregation=mode)
    assert loss == pytest.approx(expected_loss, rel=1e-12, abs=1e-12)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-12, atol=1e-12)


def test_rejections_name_the_argument_and_the_fix() -> None:
    plain = batch([[0.0]], [[0.0]], [[1.0]])
    with pytest.raises(ValueError, match=r"decoupled_ppo needs rollout_log_probs .* build PolicyLossInputs with them"):
        decoupled_ppo(plain)
    with_rollout = batch([[0.0]], [[0.0]], [[1.0]], rollout_log_probs=[[0.0]])
    with pytest.raises(ValueError, match=r"behav_imp_weight_cap must be > 1 .* got 1.0"):
        decoupled_ppo(with_rollout, behav_imp_weight_cap=1.0)
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        decoupled_ppo(with_rollout, clip_ratio_c=0.5)
