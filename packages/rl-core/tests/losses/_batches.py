"""Builders of small `PolicyLossInputs` for the loss tests: from literal lists, or drawn by hypothesis."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from rl_core.losses import PolicyLoss, PolicyLossInputs

DTYPE = torch.float64


def tensor(values: list[list[float]]) -> torch.Tensor:
    """A float64 tensor from nested lists."""
    return torch.tensor(values, dtype=DTYPE)


def batch(
    log_probs: list[list[float]],
    old_log_probs: list[list[float]],
    advantages: list[list[float]],
    mask: list[list[int]] | None = None,
    *,
    weights: list[list[float]] | None = None,
    rollout_log_probs: list[list[float]] | None = None,
    requires_grad: bool = True,
) -> PolicyLossInputs:
    """A `PolicyLossInputs` from literal lists, in float64; `log_probs` is a leaf that requires grad."""
    current = tensor(log_probs).requires_grad_(requires_grad)
    full = [[1] * len(row) for row in log_probs]
    return PolicyLossInputs(
        log_probs=current,
        old_log_probs=tensor(old_log_probs),
        advantages=tensor(advantages),
        response_mask=torch.tensor(full if mask is None else mask),
        rollout_is_weights=None if weights is None else tensor(weights),
        rollout_log_probs=None if rollout_log_probs is None else tensor(rollout_log_probs),
    )


def ratio_batch(ratios: list[float], advantages: list[float]) -> PolicyLossInputs:
    """One sequence per entry, one token each, with `old_log_probs = 0` and `log_probs = log(ratio)`."""
    return batch([[math.log(r)] for r in ratios], [[0.0]] * len(ratios), [[a] for a in advantages])


def per_row(loss_fn: PolicyLoss, inputs: PolicyLossInputs, **params: object) -> list[float]:
    """The loss of each single-token row of `inputs` on its own (the per-token loss of a `ratio_batch`)."""
    values = []
    for row in range(inputs.log_probs.shape[0]):
        one = PolicyLossInputs(
            log_probs=inputs.log_probs[row : row + 1],
            old_log_probs=inputs.old_log_probs[row : row + 1],
            advantages=inputs.advantages[row : row + 1],
            response_mask=inputs.response_mask[row : row + 1],
        )
        values.append(loss_fn(one, **params).loss.item())
    return values


_LOG_PROB = st.floats(min_value=-4.0, max_value=-0.01, allow_nan=False, allow_subnormal=False)
_DRIFT = st.floats(min_value=-0.6, max_value=0.6, allow_nan=False, allow_subnormal=False)
_ADVANTAGE = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_subnormal=False)
_WEIGHT = st.floats(min_value=0.2, max_value=3.0, allow_nan=False, allow_subnormal=False)


@st.composite
def random_inputs(
    draw: st.DrawFn,
    *,
    max_batch: int = 4,
    max_len: int = 5,
    sequence_advantages: bool = False,
    with_weights: bool = False,
    with_rollout: bool = False,
) -> PolicyLossInputs:
    """A batch with a ragged (possibly holed, possibly empty-row) mask holding at least one response token."""
    size, length = draw(st.integers(1, max_batch)), draw(st.integers(1, max_len))
    mask = [[draw(st.integers(0, 1)) for _ in range(length)] for _ in range(size)]
    row, col = draw(st.integers(0, size - 1)), draw(st.integers(0, length - 1))
    mask[row][col] = 1
    old = [[draw(_LOG_PROB) for _ in range(length)] for _ in range(size)]
    current = [[o + draw(_DRIFT) for o in line] for line in old]
    if sequence_advantages:
        advantages = [[value] * length for value in (draw(_ADVANTAGE) for _ in range(size))]
    else:
        advantages = [[draw(_ADVANTAGE) for _ in range(length)] for _ in range(size)]
    weights = [[draw(_WEIGHT) for _ in range(length)] for _ in range(size)] if with_weights else None
    rollout = [[o + draw(_DRIFT) for o in line] for line in old] if with_rollout else None
    return batch(current, old, advantages, mask, weights=weights, rollout_log_probs=rollout)


def assert_close(actual: torch.Tensor | None, expected: list[list[float]], atol: float = 1e-12) -> None:
    """Assert a `(B, T)` tensor equals the nested list to `atol` (and is not None, for `.grad`)."""
    assert actual is not None
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=actual.dtype), atol=atol, rtol=0)
