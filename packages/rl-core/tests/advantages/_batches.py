"""Builders of small `AdvantageInputs` for the estimator tests: from literal lists, or drawn by hypothesis."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from rl_core.advantages import AdvantageInputs

DTYPE = torch.float64


def batch(
    rewards: list[list[float]],
    mask: list[list[int]],
    group_ids: list[int],
    *,
    values: list[list[float]] | None = None,
    baseline_rewards: list[float] | None = None,
) -> AdvantageInputs:
    """An `AdvantageInputs` from literal lists, in float64."""
    return AdvantageInputs(
        token_level_rewards=torch.tensor(rewards, dtype=DTYPE),
        response_mask=torch.tensor(mask),
        group_ids=torch.tensor(group_ids),
        values=None if values is None else torch.tensor(values, dtype=DTYPE),
        baseline_rewards=None if baseline_rewards is None else torch.tensor(baseline_rewards, dtype=DTYPE),
    )


def outcome_batch(scores: list[float], group_ids: list[int], length: int = 3) -> AdvantageInputs:
    """Full-mask responses of `length` tokens whose whole reward sits on the last token."""
    rewards = [[0.0] * (length - 1) + [score] for score in scores]
    return batch(rewards, [[1] * length for _ in scores], group_ids)


_REWARD = st.floats(min_value=-5.0, max_value=5.0, allow_nan=False, allow_subnormal=False)


@st.composite
def random_batches(
    draw: st.DrawFn,
    *,
    min_group_size: int = 1,
    max_group_size: int = 4,
    max_groups: int = 3,
    max_len: int = 5,
    full_mask: bool = False,
    discrete_rewards: bool = False,
) -> AdvantageInputs:
    """A shuffled batch of prompt groups with ragged (possibly holed) masks, values and greedy baselines."""
    sizes = draw(st.lists(st.integers(min_group_size, max_group_size), min_size=1, max_size=max_groups))
    # Non-contiguous ids, so nothing may assume ids are 0..G-1.
    ids = [7 * group + 3 for group, size in enumerate(sizes) for _ in range(size)]
    order = draw(st.permutations(range(len(ids))))
    ids = [ids[i] for i in order]
    size, length = len(ids), draw(st.integers(1, max_len))
    reward = st.sampled_from([0.0, 1.0]) if discrete_rewards else _REWARD
    rewards = [[draw(reward) for _ in range(length)] for _ in range(size)]
    mask_bit = st.just(1) if full_mask else st.integers(0, 1)
    mask = [[draw(mask_bit) for _ in range(length)] for _ in range(size)]
    values = [[draw(_REWARD) for _ in range(length)] for _ in range(size)]
    baselines = [draw(_REWARD) for _ in range(size)]
    return batch(rewards, mask, ids, values=values, baseline_rewards=baselines)


def per_sequence(advantages: torch.Tensor) -> list[float]:
    """The per-sequence value of a full-mask outcome advantage (every token carries it)."""
    return advantages[:, 0].tolist()
