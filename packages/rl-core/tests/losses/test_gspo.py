"""GSPO by hand: the geometric-mean sequence ratio, its clip, the straight-through token gradient, the cap."""

from __future__ import annotations

import math

import pytest

from rl_core.losses import gspo

from ._batches import assert_close, batch

CLIP = {"clip_ratio_low": 0.1, "clip_ratio_high": 0.1}


def test_sequence_ratio_is_the_geometric_mean_of_token_ratios() -> None:
    # Row 0: log-ratios 0.1, 0.3 -> s = e^0.2 ~ 1.221 > 1.1, A = +1: clipped to -1.1 on both tokens.
    # Row 1: log-ratios 0.05, -0.05 and a masked 9.0 -> s = 1: -A = 0.5 on both response tokens.
    inputs = batch(
        [[0.1, 0.3, 0.0], [0.05, -0.05, 9.0]],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [[1.0, 1.0, 1.0], [-0.5, -0.5, -0.5]],
        [[1, 1, 0], [1, 1, 0]],
    )
    out = gspo(inputs, **CLIP)
    assert out.loss.item() == pytest.approx((-1.1 - 1.1 + 0.5 + 0.5) / 4, abs=1e-12)
    assert out.metrics["pg_clipfrac"].item() == pytest.approx(0.5)
    assert out.metrics["ppo_kl"].item() == pytest.approx(-(0.1 + 0.3 + 0.05 - 0.05) / 4, abs=1e-12)


def test_negative_advantage_above_the_range_is_not_clipped() -> None:
    inputs = batch([[0.1, 0.3]], [[0.0, 0.0]], [[-1.0, -1.0]])
    assert gspo(inputs, **CLIP).loss.item() == pytest.approx(math.exp(0.2), abs=1e-12)


def test_token_gradient_is_straight_through_the_sequence_ratio() -> None:
    # s = e^0.2 inside a wide range; d(-A s_t)/d log_probs_t = -A s, per token, independent of the others.
    inputs = batch([[0.1, 0.3], [0.1, 0.3]], [[0.0, 0.0], [0.0, 0.0]], [[2.0, 2.0], [1.0, 1.0]], [[1, 1], [1, 0]])
    gspo(inputs, clip_ratio_low=0.5, clip_ratio_high=0.5).loss.backward()
    s0, s1 = math.exp(0.2), math.exp(0.1)
    assert_close(inputs.log_probs.grad, [[-2 * s0 / 3, -2 * s0 / 3], [-s1 / 3, 0.0]])


def test_clipped_sequences_get_no_gradient() -> None:
    inputs = batch([[0.1, 0.3]], [[0.0, 0.0]], [[1.0, 1.0]])
    gspo(inputs, **CLIP).loss.backward()
    assert inputs.log_probs.grad is not None
    assert inputs.log_probs.grad.tolist() == [[0.0, 0.0]]


def test_combined_log_ratio_is_capped_at_10() -> None:
    inputs = batch([[15.0]], [[0.0]], [[-1.0]])
    assert gspo(inputs).loss.item() == pytest.approx(math.exp(10.0), rel=1e-12)


def test_default_clip_range_is_the_papers() -> None:
    # s = e^0.2 with A = +1 -> clipped at 1 + 4e-4; with A = -1 and s = e^-0.2 -> clipped at 1 - 3e-4.
    assert gspo(batch([[0.2]], [[0.0]], [[1.0]])).loss.item() == pytest.approx(-(1 + 4e-4), abs=1e-12)
    assert gspo(batch([[-0.2]], [[0.0]], [[-1.0]])).loss.item() == pytest.approx(1 - 3e-4, abs=1e-12)


def test_rejects_negative_clip_ratios() -> None:
    with pytest.raises(ValueError, match=r"clip_ratio_low must be >= 0, got -0.1"):
        gspo(batch([[0.0]], [[0.0]], [[1.0]]), clip_ratio_low=-0.1)
    with pytest.raises(ValueError, match=r"clip_ratio_high must be >= 0, got nan"):
        gspo(batch([[0.0]], [[0.0]], [[1.0]]), clip_ratio_high=float("nan"))
