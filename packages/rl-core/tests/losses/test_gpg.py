"""GPG's loss by hand: plain REINFORCE, blind to old_log_probs."""

from __future__ import annotations

import pytest

from rl_core.losses import gpg

from ._batches import assert_close, batch


def test_reinforce_by_hand() -> None:
    inputs = batch([[-0.5, -2.0], [-1.0, -3.0]], [[9.0, 9.0], [9.0, 9.0]], [[1.0, -2.0], [0.5, 7.0]], [[1, 1], [1, 0]])
    out = gpg(inputs)
    assert out.loss.item() == pytest.approx((0.5 - 4.0 + 0.5) / 3, abs=1e-12)
    assert out.metrics == {}
    out.loss.backward()
    assert_close(inputs.log_probs.grad, [[-1 / 3, 2 / 3], [-0.5 / 3, 0.0]])


def test_seq_mean_token_sum() -> None:
    inputs = batch([[-0.5, -2.0], [-1.0, -3.0]], [[0.0, 0.0], [0.0, 0.0]], [[1.0, -2.0], [0.5, 7.0]], [[1, 1], [1, 0]])
    assert gpg(inputs, aggregation="seq-mean-token-sum").loss.item() == pytest.approx((0.5 - 4.0 + 0.5) / 2)
