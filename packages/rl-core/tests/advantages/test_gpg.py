"""GPG: the alpha rescaling by hand, and rejections."""

from __future__ import annotations

import pytest
import torch

from rl_core.advantages import gpg

from ._batches import outcome_batch, per_sequence


def test_gpg_by_hand() -> None:
    # B = 5, two non-zero scores -> alpha = 5/2. Group 0: 1, 0, 0 (mean 1/3); group 4: 2, 0 (mean 1).
    out = gpg(outcome_batch([1.0, 0.0, 2.0, 0.0, 0.0], [0, 0, 4, 0, 4]))
    alpha = 5 / 2
    expected = [alpha * 2 / 3, alpha * -1 / 3, alpha * 1.0, alpha * -1 / 3, alpha * -1.0]
    assert per_sequence(out.advantages) == pytest.approx(expected, abs=1e-12)
    assert torch.equal(out.advantages, out.returns)


def test_gpg_divides_by_f_norm_and_keeps_singletons() -> None:
    # One non-zero score of 4 in a batch of 2 -> alpha = 2; singleton groups have mean 0.
    out = gpg(outcome_batch([4.0, 0.0], [0, 1]), f_norm=4.0)
    assert per_sequence(out.advantages) == [2.0, 0.0]


def test_gpg_all_zero_rewards_give_zero() -> None:
    assert per_sequence(gpg(outcome_batch([0.0, 0.0], [0, 0])).advantages) == [0.0, 0.0]


@pytest.mark.parametrize("f_norm", [0.0, -2.0])
def test_gpg_rejects_non_positive_f_norm(f_norm: float) -> None:
    with pytest.raises(ValueError, match=f"f_norm must be > 0, got {f_norm}"):
        gpg(outcome_batch([1.0, 0.0], [0, 0]), f_norm=f_norm)
