"""verl's FLOPs formula and MFU, worked out by hand for the tiny Qwen2."""

from __future__ import annotations

import pytest
from _training_helpers import qwen_config

from rl_engines.training import TrainConfigError, estimate_train_flops, mfu, peak_flops


def test_flops_of_the_tiny_qwen2_by_hand() -> None:
    # hidden 32, 4 heads of dim 8, 2 kv heads, intermediate 64, vocab 128, 2 layers.
    attention = 32 * (4 * 8 + 2 * 2 * 8 + 4 * 8)  # q, k, v, o projections
    mlp = 32 * 64 * 3
    dense = (attention + mlp) * 2 + 128 * 32 * 2
    assert dense == 26624
    expected = 6 * dense * (3 + 5) + 12 * (3 * 3 + 5 * 5) * 8 * 4 * 2
    assert estimate_train_flops(qwen_config(), [3, 5]) == expected == 1_304_064


def test_attention_term_grows_with_the_square_of_the_length() -> None:
    config = qwen_config()
    one_long, two_short = estimate_train_flops(config, [8]), estimate_train_flops(config, [4, 4])
    assert one_long - two_short == 12 * (64 - 32) * 8 * 4 * 2


def test_mfu_and_peaks() -> None:
    assert mfu(989e12, 2.0, 989e12, num_devices=2) == pytest.approx(0.25)
    assert peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert peak_flops("NVIDIA H200") == 989e12
    assert peak_flops("NVIDIA H20") == 148e12
    assert peak_flops("Some CPU") is None
    with pytest.raises(TrainConfigError, match="mfu needs seconds > 0"):
        mfu(1.0, 0.0, 989e12)
