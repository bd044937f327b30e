"""The per-chunk statistics and the hand-derived gradient, checked against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rl_core.logprobs._chunk_math import (
    Workspace,
    chunk_backward,
    chunk_forward,
    compute_dtype,
    new_buffer,
)

# One row with p = (1/6, 2/6, 3/6): logits log(1), log(2), log(3) (softmax ignores the log(6) shift).
PROBS = (1 / 6, 2 / 6, 3 / 6)
ENTROPY = -sum(p * math.log(p) for p in PROBS)


def _row(scale: float = 1.0) -> torch.Tensor:
    return torch.tensor([[scale * math.log(1.0), scale * math.log(2.0), scale * math.log(3.0)]], dtype=torch.float64)


def _workspace(logits: torch.Tensor) -> Workspace:
    first, second = (new_buffer(logits.shape[0], logits.shape[1], logits.dtype, logits.device) for _ in range(2))
    return first, second


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_forward_statistics_match_hand_values(temperature: float) -> None:
    # Logits scaled by the temperature give the same distribution after dividing by it.
    logits = _row(temperature)
    log_prob, entropy = chunk_forward(logits, torch.tensor([2]), temperature, _workspace(logits), with_entropy=True)
    assert log_prob.item() == pytest.approx(math.log(0.5))
    assert entropy is not None
    assert entropy.item() == pytest.approx(ENTROPY)


def test_forward_without_entropy_returns_none() -> None:
    logits = _row()
    log_prob, entropy = chunk_forward(logits, torch.tensor([0]), 1.0, _workspace(logits), with_entropy=False)
    assert entropy is None
    assert log_prob.item() == pytest.approx(math.log(1 / 6))


def _backward(grad_log_prob: float | None, grad_entropy: float | None, temperature: float = 1.0) -> list[float]:
    logits = _row(temperature)
    _, entropy = chunk_forward(logits, torch.tensor([2]), temperature, _workspace(logits), with_entropy=True)
    grad = chunk_backward(
        logits,
        torch.tensor([2]),
        entropy,
        None if grad_log_prob is None else torch.tensor([grad_log_prob], dtype=torch.float64),
        None if grad_entropy is None else torch.tensor([grad_entropy], dtype=torch.float64),
        temperature,
        _workspace(logits),
    )
    return grad[0].tolist()


def test_log_prob_gradient_is_onehot_minus_p() -> None:
    assert _backward(1.0, None) == pytest.approx([-1 / 6, -2 / 6, 1 - 3 / 6])


def test_entropy_gradient_is_minus_p_times_log_p_plus_entropy() -> None:
    expected = [-p * (math.log(p) + ENTROPY) for p in PROBS]
    assert _backward(None, 1.0) == pytest.approx(expected)


def test_both_gradients_add_and_scale_by_upstream() -> None:
    expected = [
        3.0 * ((1.0 if j == 2 else 0.0) - p) + (-0.5) * (-p * (math.log(p) + ENTROPY)) for j, p in enumerate(PROBS)
    ]
    assert _backward(3.0, -0.5) == pytest.approx(expected)


def test_temperature_divides_the_gradient() -> None:
    # d/dlogits = d/dz / temperature, with the same distribution as at temperature 1.
    assert _backward(1.0, 1.0, temperature=2.0) == pytest.approx([g / 2.0 for g in _backward(1.0, 1.0)])


def test_no_upstream_gradient_gives_zeros() -> None:
    assert _backward(None, None) == [0.0, 0.0, 0.0]


def test_masked_vocabulary_entries_contribute_nothing() -> None:
    # p = (1/2, 1/2, 0): entropy log 2; the -inf entry must not turn 0 * -inf into nan.
    logits = torch.tensor([[0.0, 0.0, -math.inf]], dtype=torch.float64)
    labels = torch.tensor([0])
    log_prob, entropy = chunk_forward(logits, labels, 1.0, _workspace(logits), with_entropy=True)
    assert entropy is not None
    assert entropy.item() == pytest.approx(math.log(2.0))
    assert log_prob.item() == pytest.approx(math.log(0.5))
    one = torch.ones(1, dtype=torch.float64)
    grad = chunk_backward(logits, labels, entropy, one, one, 1.0, _workspace(logits))
    # Entropy part: -p_j (log p_j + H) = -1/2 (-log 2 + log 2) = 0; log-prob part: onehot - p.
    assert grad[0].tolist() == pytest.approx([0.5, -0.5, 0.0])


def test_label_on_a_masked_entry_has_log_prob_minus_inf() -> None:
    logits = torch.tensor([[0.0, -math.inf]], dtype=torch.float64)
    log_prob, entropy = chunk_forward(logits, torch.tensor([1]), 1.0, _workspace(logits), with_entropy=True)
    assert log_prob.item() == -math.inf
    assert entropy is not None and entropy.item() == 0.0


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.float32),
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
    ],
)
def test_compute_dtype_upcasts_half_precision(dtype: torch.dtype, expected: torch.dtype) -> None:
    assert compute_dtype(dtype) == expected
    buffer = new_buffer(3, 5, dtype, torch.device("cpu"))
    assert buffer.dtype == expected and buffer.shape == (3, 5)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_logits_are_untouched_unless_scratch(dtype: torch.dtype, temperature: float) -> None:
    logits = torch.tensor([[0.5, -1.0, 2.0]], dtype=dtype)
    before = logits.clone()
    _, entropy = chunk_forward(logits, torch.tensor([1]), temperature, _workspace(logits), with_entropy=True)
    chunk_backward(logits, torch.tensor([1]), entropy, torch.ones(1), torch.ones(1), temperature, _workspace(logits))
    assert torch.equal(logits, before)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_scratch_logits_in_the_workspace_give_the_same_results(temperature: float) -> None:
    # The from-hidden path projects straight into workspace[0] and lets the chunk math overwrite it.
    logits, labels, ones = _row(), torch.tensor([1]), torch.ones(1, dtype=torch.float64)
    log_prob, entropy = chunk_forward(logits, labels, temperature, _workspace(logits), with_entropy=True)
    grad = chunk_backward(logits, labels, entropy, ones, ones, temperature, _workspace(logits)).clone()
    workspace = _workspace(logits)
    in_workspace = workspace[0].copy_(logits)
    scratch_log_prob, scratch_entropy = chunk_forward(
        in_workspace, labels, temperature, workspace, with_entropy=True, scratch=True
    )
    in_workspace = workspace[0].copy_(logits)
    scratch_grad = chunk_backward(in_workspace, labels, entropy, ones, ones, temperature, workspace, scratch=True)
    torch.testing.assert_close((scratch_log_prob, scratch_entropy, scratch_grad), (log_prob, entropy, grad))
