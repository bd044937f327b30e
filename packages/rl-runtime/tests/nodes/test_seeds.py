"""Per-sample seeds and ids: deterministic, distinct, inside their ranges."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rl_runtime.nodes._seeds import sample_seed, sample_uid


@given(st.lists(st.integers(min_value=0, max_value=2**40), min_size=1, max_size=5))
def test_seed_is_deterministic_and_a_non_negative_int64(parts: list[int]) -> None:
    seed = sample_seed(*parts)
    assert seed == sample_seed(*parts)
    assert 0 <= seed < 2**63


def test_neighbouring_parts_give_distinct_seeds() -> None:
    seeds = {sample_seed(0, step, rank, 0, index) for step in range(8) for rank in range(4) for index in range(64)}
    assert len(seeds) == 8 * 4 * 64


def test_uids_are_unique_across_steps_ranks_draws_and_samples() -> None:
    uids = [sample_uid(s, r, d, i) for s in range(3) for r in range(3) for d in range(3) for i in range(3)]
    assert len(set(uids)) == len(uids)
    assert sample_uid(0, 0, 0, 5) == 5


def test_uid_layout_limits_are_enforced() -> None:
    with pytest.raises(ValueError, match="at most 4096 ranks"):
        sample_uid(0, 4096, 0, 0)
