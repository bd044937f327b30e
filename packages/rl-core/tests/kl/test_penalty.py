"""KL in the reward: hand-worked penalties and metric, masking, no gradient, rejections."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core import ShapeError, UnknownNameError
from rl_core.kl import REWARD_KL_COEF_METRIC, REWARD_KL_METRIC, apply_kl_penalty, get_kl_estimator

DTYPE = torch.float64

SCORES = [[0.0, 0.0, 1.0], [0.0, 2.0, 5.0]]
LOG_PROBS = [[-1.0, -2.0, -0.5], [-1.0, -1.0, -3.0]]
REF_LOG_PROBS = [[-2.0, -1.0, -0.5], [-1.5, -1.0, 0.0]]
MASK = [[1, 1, 1], [1, 1, 0]]


def _inputs(mask=MASK, ref=REF_LOG_PROBS):
    return (
        torch.tensor(SCORES, dtype=DTYPE),
        torch.tensor(LOG_PROBS, dtype=DTYPE),
        torch.tensor(ref, dtype=DTYPE),
        torch.tensor(mask),
    )


def test_k1_penalty_by_hand() -> None:
    # δ = [[1, -1, 0], [0.5, 0, -3 (off the mask)]]; rewards = scores - 0.1 δ on the mask.
    out = apply_kl_penalty(*_inputs(), kl_coef=0.1)
    assert out.kl.tolist() == [[1.0, -1.0, 0.0], [0.5, 0.0, 0.0]]
    expected = torch.tensor([[-0.1, 0.1, 1.0], [-0.05, 2.0, 5.0]], dtype=DTYPE)
    torch.testing.assert_close(out.token_level_rewards, expected, rtol=0.0, atol=1e-15)
    # Sequence means: (1 - 1 + 0) / 3 = 0 and (0.5 + 0) / 2 = 0.25; batch mean 0.125.
    assert out.metrics == {REWARD_KL_METRIC: pytest.approx(0.125, abs=1e-15), REWARD_KL_COEF_METRIC: 0.1}


def test_k2_penalty_by_hand() -> None:
    # δ²/2 = [[0.5, 0.5, 0], [0.125, 0, (4.5 off the mask)]].
    out = apply_kl_penalty(*_inputs(), kl_coef=2.0, estimator="k2")
    assert out.kl.tolist() == [[0.5, 0.5, 0.0], [0.125, 0.0, 0.0]]
    assert out.token_level_rewards.tolist() == [[-1.0, -1.0, 1.0], [-0.25, 2.0, 5.0]]
    assert out.metrics[REWARD_KL_METRIC] == pytest.approx((1 / 3 + 0.0625) / 2, abs=1e-15)


def test_zero_coefficient_leaves_scores_alone() -> None:
    out = apply_kl_penalty(*_inputs(), kl_coef=0.0)
    assert torch.equal(out.token_level_rewards, torch.tensor(SCORES, dtype=DTYPE))
    assert out.metrics[REWARD_KL_COEF_METRIC] == 0.0


def test_sequences_without_response_tokens_do_not_dilute_the_metric() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    empty = torch.zeros(1, 3, dtype=mask.dtype)
    out = apply_kl_penalty(
        torch.cat([scores, scores[:1]]),
        torch.cat([log_probs, log_probs[:1]]),
        torch.cat([ref_log_probs, ref_log_probs[:1]]),
        torch.cat([mask, empty]),
        kl_coef=0.1,
    )
    assert out.metrics[REWARD_KL_METRIC] == pytest.approx(0.125, abs=1e-15)
    assert out.token_level_rewards[2].tolist() == SCORES[0]


def test_all_empty_batch_has_zero_metric() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, torch.zeros_like(mask), kl_coef=0.1)
    assert out.metrics[REWARD_KL_METRIC] == 0.0
    assert torch.equal(out.token_level_rewards, scores)


def test_nan_off_the_mask_never_leaks() -> None:
    ref = [[-2.0, -1.0, -0.5], [-1.5, -1.0, math.nan]]
    out = apply_kl_penalty(*_inputs(ref=ref), kl_coef=0.1)
    assert not bool(out.token_level_rewards.isnan().any())
    assert out.metrics[REWARD_KL_METRIC] == pytest.approx(0.125, abs=1e-15)


def test_mask_dtypes_agree() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    results = [
        apply_kl_penalty(scores, log_probs, ref_log_probs, m, kl_coef=0.3, estimator="k3")
        for m in (mask, mask.bool(), mask.to(DTYPE))
    ]
    for other in results[1:]:
        assert torch.equal(other.token_level_rewards, results[0].token_level_rewards)
        assert other.metrics == results[0].metrics


def test_no_gradient_reaches_the_rewards() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    out = apply_kl_penalty(scores, log_probs.requires_grad_(True), ref_log_probs, mask, kl_coef=0.1)
    assert not out.token_level_rewards.requires_grad
    assert not out.kl.requires_grad


@st.composite
def _batches(draw):
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    n = rows * cols
    floats = st.floats(min_value=-8.0, max_value=0.0)
    scores = draw(st.lists(st.floats(-3.0, 3.0), min_size=n, max_size=n))
    log_probs = draw(st.lists(floats, min_size=n, max_size=n))
    ref_log_probs = draw(st.lists(floats, min_size=n, max_size=n))
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    scores_t, log_probs_t, ref_t = (
        torch.tensor(x, dtype=DTYPE).reshape(rows, cols) for x in (scores, log_probs, ref_log_probs)
    )
    return scores_t, log_probs_t, ref_t, torch.tensor(mask).reshape(rows, cols)


@settings(max_examples=80, deadline=None)
@given(_batches(), st.floats(0.0, 2.0), st.sampled_from(["k1", "abs", "k2", "k3", "k3+"]))
def test_penalty_is_coef_times_kl_under_the_mask_only(batch, kl_coef: float, estimator: str) -> None:
    scores, log_probs, ref_log_probs, mask = batch
    out = apply_kl_penalty(scores, log_probs, ref_log_probs, mask, kl_coef=kl_coef, estimator=estimator)
    estimates = get_kl_estimator(estimator)(log_probs, ref_log_probs)
    sequence_means = []
    for b in range(scores.shape[0]):
        count = 0
        total = 0.0
        for t in range(scores.shape[1]):
            if mask[b, t]:
                kl = estimates[b, t].item()
                assert out.kl[b, t].item() == kl
                assert out.token_level_rewards[b, t].item() == pytest.approx(scores[b, t].item() - kl_coef * kl)
                count += 1
                total += kl
            else:
                assert out.kl[b, t].item() == 0.0
                assert out.token_level_rewards[b, t].item() == scores[b, t].item()
        if count:
            sequence_means.append(total / count)
    expected = sum(sequence_means) / len(sequence_means) if sequence_means else 0.0
    assert out.metrics[REWARD_KL_METRIC] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("position", "name"),
    [(0, "token_level_scores"), (1, "log_probs"), (2, "ref_log_probs"), (3, "response_mask")],
)
def test_rejects_a_mismatched_shape_naming_the_argument(position: int, name: str) -> None:
    args = list(_inputs())
    if position == 0:
        # The first argument binds the shape, so give it fewer columns and blame the next one.
        args[0] = args[0][:, :2]
        name = "log_probs"
    else:
        args[position] = args[position][:, :2]
    with pytest.raises(ShapeError, match=rf"{name} must have shape \(B, T\) with T="):
        apply_kl_penalty(*args, kl_coef=0.1)


def test_rejects_integer_scores() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    with pytest.raises(ShapeError, match="token_level_scores must have a floating dtype"):
        apply_kl_penalty(scores.long(), log_probs, ref_log_probs, mask, kl_coef=0.1)


def test_rejects_a_mask_that_is_not_zero_one() -> None:
    scores, log_probs, ref_log_probs, mask = _inputs()
    with pytest.raises(ShapeError, match="response_mask must hold only 0/1"):
        apply_kl_penalty(scores, log_probs, ref_log_probs, mask * 2, kl_coef=0.1)


@pytest.mark.parametrize("kl_coef", [-0.1, math.nan, math.inf, True, "0.1"])
def test_rejects_a_bad_coefficient(kl_coef) -> None:
    with pytest.raises(ValueError, match="kl_coef must be a finite number >= 0"):
        apply_kl_penalty(*_inputs(), kl_coef=kl_coef)


def test_rejects_an_unknown_estimator() -> None:
    with pytest.raises(UnknownNameError, match="unknown KL estimator 'k4'"):
        apply_kl_penalty(*_inputs(), kl_coef=0.1, estimator="k4")
