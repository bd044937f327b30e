"""Rollout IS correction by hand (TIS/MIS, token/sequence), its rejections, and the wrapper over every loss."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core import ShapeError, UnknownNameError
from rl_core.losses import (
    POLICY_LOSSES,
    LossNormalizer,
    PolicyLossInputs,
    RolloutCorrection,
    gpg,
    ppo,
    rollout_correction,
    with_rollout_correction,
)

from ._batches import assert_close, batch, tensor

LOG = math.log


def _correct(ratios: list[list[float]], mask: list[list[int]] | None = None, **settings: object) -> RolloutCorrection:
    """Correction of a batch whose trainer/engine ratios are `ratios` (old = log ratio, rollout = 0)."""
    old = tensor([[LOG(r) for r in row] for row in ratios])
    full = [[1] * len(row) for row in ratios]
    return rollout_correction(old, torch.zeros_like(old), torch.tensor(full if mask is None else mask), **settings)


def test_token_tis_truncates_above() -> None:
    out = _correct([[0.5, 3.0, 1.0], [2.5, 7.0, 1.5]], [[1, 1, 1], [1, 0, 1]])
    assert_close(out.weights, [[0.5, 2.0, 1.0], [2.0, 0.0, 1.5]])
    assert torch.equal(out.response_mask, torch.tensor([[1, 1, 1], [1, 0, 1]]))
    assert out.metrics["rollout_is_truncated_fraction"].item() == pytest.approx(2 / 5)
    assert out.metrics["rollout_is_mean"].item() == pytest.approx((0.5 + 2 + 1 + 2 + 1.5) / 5)
    assert not out.weights.requires_grad


def test_sequence_tis_uses_the_product_of_token_ratios() -> None:
    # Row 0: 2 * 2 = 4 -> truncated to 3; row 1: 0.5 * 1 (the masked 100 is ignored); row 2 is empty.
    out = _correct([[2.0, 2.0], [0.5, 100.0], [5.0, 5.0]], [[1, 1], [1, 0], [0, 0]], level="sequence", upper=3.0)
    assert_close(out.weights, [[3.0, 3.0], [0.5, 0.0], [0.0, 0.0]])
    # One of the two non-empty sequences was truncated.
    assert out.metrics["rollout_is_truncated_fraction"].item() == pytest.approx(1 / 2)
    assert out.metrics["rollout_is_mean"].item() == pytest.approx((3 + 3 + 0.5) / 3)


def test_verl_weight_statistics_over_the_level_units() -> None:
    # Token level: the unbounded ratios 0.5, 3, 1, 2.5, 1.5 (7 is masked out); upper 2, lower defaults to 1/2.
    out = _correct([[0.5, 3.0, 1.0], [2.5, 7.0, 1.5]], [[1, 1, 1], [1, 0, 1]])
    ratios = torch.tensor([0.5, 3.0, 1.0, 2.5, 1.5], dtype=torch.float64)
    expected = {
        "rollout_is_std": ratios.std(correction=0).item(),
        "rollout_is_min": 0.5,
        "rollout_is_max": 3.0,
        "rollout_is_eff_sample_size": 1 / ((ratios / ratios.mean()) ** 2).mean().item(),
        "rollout_is_ratio_fraction_high": 2 / 5,
        "rollout_is_ratio_fraction_low": 0.0,
    }
    for name, value in expected.items():
        assert out.metrics[name].item() == pytest.approx(value), name
    # Sequence level: one ratio per non-empty sequence (4 and 0.5; the empty row counts for nothing).
    seq = _correct([[2.0, 2.0], [0.5, 100.0], [5.0, 5.0]], [[1, 1], [1, 0], [0, 0]], level="sequence", upper=3.0)
    assert seq.metrics["rollout_is_max"].item() == pytest.approx(4.0)
    assert seq.metrics["rollout_is_min"].item() == pytest.approx(0.5)
    assert seq.metrics["rollout_is_ratio_fraction_high"].item() == pytest.approx(1 / 2)
    assert seq.metrics["rollout_is_ratio_fraction_low"].item() == pytest.approx(0.0)  # 0.5 >= 1/3
    # Nothing under the mask: every statistic is 0.
    empty = _correct([[2.0]], [[0]])
    assert all(value.item() == 0.0 for value in empty.metrics.values())


def test_token_mis_masks_ratios_outside_the_bounds() -> None:
    # Default bounds [1 / 2, 2]: 0.25 and 3 fall out; the bounds themselves stay.
    out = _correct([[0.25, 1.5, 3.0], [0.5, 2.0, 1.0]], [[1, 1, 1], [1, 1, 0]], mode="mis")
    assert_close(out.weights, [[0.0, 1.5, 0.0], [0.5, 2.0, 0.0]])
    assert out.response_mask.tolist() == [[0, 1, 0], [1, 1, 0]]
    assert out.metrics["rollout_is_masked_fraction"].item() == pytest.approx(2 / 5)
    assert out.metrics["rollout_is_mean"].item() == pytest.approx((1.5 + 0.5 + 2.0) / 5)


def test_sequence_mis_masks_whole_sequences() -> None:
    out = _correct([[2.0, 2.0], [1.1, 0.9]], mode="mis", level="sequence", upper=3.0, lower=0.5)
    assert_close(out.weights, [[0.0, 0.0], [0.99, 0.99]])
    assert out.response_mask.tolist() == [[0, 0], [1, 1]]
    assert out.metrics["rollout_is_masked_fraction"].item() == pytest.approx(1 / 2)


def test_mask_dtype_is_kept() -> None:
    old = tensor([[LOG(5.0), 0.0]])
    for dtype in (torch.bool, torch.int64, torch.float32):
        out = rollout_correction(old, torch.zeros_like(old), torch.ones(1, 2, dtype=dtype), mode="mis")
        assert out.response_mask.dtype == dtype
        # Python compares False/True equal to 0/1 and 0.0/1.0, so one literal serves every dtype.
        assert out.response_mask.tolist() == [[0, 1]]


def test_log_ratio_is_clamped_at_20_and_junk_under_the_mask_is_ignored() -> None:
    old = tensor([[30.0, math.nan], [-30.0, math.inf]])
    out = rollout_correction(old, torch.zeros_like(old), torch.tensor([[1, 0], [1, 0]]), mode="mis", upper=1e12)
    # exp(20) ~ 4.85e8 lies inside [1e-12, 1e12] and is kept; exp(-20) ~ 2.1e-9 too.
    assert_close(out.weights, [[math.exp(20.0), 0.0], [math.exp(-20.0), 0.0]], atol=1e-3)
    assert bool(out.weights.isfinite().all())


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"mode": "icepop"}, "mode must be one of tis, mis, got 'icepop'"),
        ({"level": "geometric"}, "level must be one of token, sequence, got 'geometric'"),
        ({"upper": 0.0}, "upper must be > 0, got 0.0"),
        ({"upper": math.nan}, "upper must be > 0, got nan"),
        ({"lower": 0.5}, "lower applies to mode='mis' only; truncated IS clamps weights above at upper"),
        ({"mode": "mis", "lower": 3.0}, r"lower must be in \(0, upper=2.0\], got 3.0"),
        ({"mode": "mis", "lower": 0.0}, r"lower must be in \(0, upper=2.0\], got 0.0"),
    ],
)
def test_rejects_bad_settings(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _correct([[1.0]], **settings)
    with pytest.raises(ValueError, match=message):
        with_rollout_correction("ppo", **settings)  # type: ignore[arg-type]


def test_rejects_bad_tensors() -> None:
    good = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(ShapeError, match=r"rollout_log_probs must have shape \(B, T\) with T=3"):
        rollout_correction(good, torch.zeros(2, 4, dtype=torch.float64), torch.ones(2, 3))
    with pytest.raises(ShapeError, match="old_log_probs must have a floating dtype"):
        rollout_correction(torch.zeros(2, 3, dtype=torch.int64), good, torch.ones(2, 3))
    with pytest.raises(ShapeError, match=r"response_mask must hold only 0/1 \(or bool\) values"):
        rollout_correction(good, good, torch.full((2, 3), 3))


def _inputs_with_rollout() -> PolicyLossInputs:
    # Trainer/engine ratios 0.25 (out of [0.5, 2]), 1.5, 3.0 (out), 1.2.
    old = [[-1.0 + LOG(0.25), -1.0 + LOG(1.5)], [-1.0 + LOG(3.0), -1.0 + LOG(1.2)]]
    return batch(
        [[-0.9, -1.2], [-1.1, -0.7]], old, [[1.0, -1.0], [0.5, 2.0]], rollout_log_probs=[[-1.0, -1.0], [-1.0, -1.0]]
    )


@pytest.mark.parametrize(
    ("mode", "level"), [("tis", "token"), ("mis", "token"), ("tis", "sequence"), ("mis", "sequence")]
)
def test_wrapper_equals_the_loss_on_corrected_inputs(mode: str, level: str) -> None:
    inputs = _inputs_with_rollout()
    correction = rollout_correction(
        inputs.old_log_probs, inputs.rollout_log_probs, inputs.response_mask, mode=mode, level=level, upper=2.0
    )
    manual = PolicyLossInputs(
        log_probs=inputs.log_probs,
        old_log_probs=inputs.old_log_probs,
        advantages=inputs.advantages,
        response_mask=correction.response_mask,
        rollout_is_weights=correction.weights,
    )
    # A global normaliser, since sequence-level MIS rejects both sequences of this batch.
    norm = LossNormalizer(6.0, 3.0, 2.0)
    wrapped = with_rollout_correction("ppo", mode=mode, level=level)
    out = wrapped(inputs, aggregation="seq-mean-token-mean", normalizer=norm, clip_ratio_high=0.28)
    expected = ppo(manual, aggregation="seq-mean-token-mean", normalizer=norm, clip_ratio_high=0.28)
    assert torch.equal(out.loss, expected.loss)
    assert out.metrics == {**expected.metrics, **correction.metrics}


def test_token_mis_with_gpg_by_hand() -> None:
    inputs = _inputs_with_rollout()
    out = with_rollout_correction(gpg, mode="mis")(inputs)
    # Kept: (0, 1) with weight 1.5 and (1, 1) with weight 1.2; token-mean over the 2 kept tokens.
    assert out.loss.item() == pytest.approx((-1.5 * -1.0 * -1.2 - 1.2 * 2.0 * -0.7) / 2, abs=1e-12)
    out.loss.backward()
    assert_close(inputs.log_probs.grad, [[0.0, 1.5 / 2], [0.0, -1.2 * 2.0 / 2]])


def test_wrapper_keeps_a_given_normaliser_and_is_zero_when_all_is_rejected() -> None:
    inputs = _inputs_with_rollout()
    norm = LossNormalizer(10.0, 5.0, 4.0)
    out = with_rollout_correction("gpg")(inputs, normalizer=norm)
    weights = [[0.25, 1.5], [2.0, 1.2]]
    terms = [
        -w * a * lp
        for wr, ar, lr in zip(weights, [[1.0, -1.0], [0.5, 2.0]], [[-0.9, -1.2], [-1.1, -0.7]], strict=True)
        for w, a, lp in zip(wr, ar, lr, strict=True)
    ]
    assert out.loss.item() == pytest.approx(sum(terms) / 10, abs=1e-12)
    rejected = with_rollout_correction("ppo", mode="mis", upper=1.01, lower=1.0)(inputs)
    assert rejected.loss.item() == 0.0
    assert rejected.metrics["rollout_is_masked_fraction"].item() == 1.0


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_wraps_every_registered_loss(name: str) -> None:
    inputs = _inputs_with_rollout()
    wrapped = with_rollout_correction(name, mode="mis", level="token")
    assert wrapped.__name__ == f"{name}_with_mis"
    out = wrapped(inputs)
    assert out.loss.dim() == 0
    assert bool(out.loss.isfinite())
    assert "rollout_is_masked_fraction" in out.metrics
    out.loss.backward()
    # The two rejected tokens get no gradient.
    grad = inputs.log_probs.grad
    assert grad is not None
    assert grad[0, 0].item() == 0.0
    assert grad[1, 0].item() == 0.0


def test_wrapper_rejections() -> None:
    with pytest.raises(UnknownNameError, match="unknown policy loss 'vanila'"):
        with_rollout_correction("vanila")
    plain = batch([[0.0]], [[0.0]], [[1.0]])
    with pytest.raises(ValueError, match="a rollout-corrected loss needs rollout_log_probs"):
        with_rollout_correction("ppo")(plain)
    weighted = batch([[0.0]], [[0.0]], [[1.0]], weights=[[1.0]], rollout_log_probs=[[0.0]])
    with pytest.raises(ValueError, match="inputs already carry rollout_is_weights; correcting again"):
        with_rollout_correction("ppo")(weighted)
