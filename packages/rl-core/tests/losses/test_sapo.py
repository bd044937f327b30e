"""SAPO by hand: the sigmoid gate with sign-dependent temperature."""

from __future__ import annotations

import math

import pytest

from rl_core.losses import sapo

from ._batches import per_row, ratio_batch


def _gate(ratio: float, tau: float) -> float:
    return 4.0 / tau / (1.0 + math.exp(-tau * (ratio - 1.0)))


def test_gate_by_hand() -> None:
    ratios, advantages = [1.0, 2.0, 0.5, 1.3], [1.0, -1.0, 0.0, 2.0]
    taus = [1.0, 1.05, 1.05, 1.0]  # tau_pos for A > 0, tau_neg otherwise
    expected = [-a * _gate(r, t) for r, a, t in zip(ratios, advantages, taus, strict=True)]
    assert per_row(sapo, ratio_batch(ratios, advantages)) == pytest.approx(expected, abs=1e-12)
    # At ratio 1 the gate is 4 / tau * 1/2 = 2 / tau.
    assert expected[0] == pytest.approx(-2.0)


def test_custom_temperatures_and_metric() -> None:
    out = sapo(ratio_batch([1.5, 1.5], [1.0, -1.0]), tau_pos=2.0, tau_neg=4.0)
    assert out.loss.item() == pytest.approx((-_gate(1.5, 2.0) + _gate(1.5, 4.0)) / 2, abs=1e-12)
    assert out.metrics == {"ppo_kl": pytest.approx(-math.log(1.5))}


def test_gradient_at_ratio_one_is_reinforce() -> None:
    inputs = ratio_batch([1.0, 1.0], [1.5, -2.0])
    sapo(inputs).loss.backward()
    assert inputs.log_probs.grad is not None
    assert inputs.log_probs.grad.flatten().tolist() == pytest.approx([-1.5 / 2, 2.0 / 2], abs=1e-12)


@pytest.mark.parametrize(("name", "value"), [("tau_pos", 0.0), ("tau_neg", -1.0), ("tau_pos", float("nan"))])
def test_rejects_non_positive_temperatures(name: str, value: float) -> None:
    with pytest.raises(ValueError, match=f"{name} must be > 0, got {value}"):
        sapo(ratio_batch([1.0], [1.0]), **{name: value})
