"""Properties every registered estimator keeps: zeros off the mask, and blindness to what lies under it."""

from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rl_core.advantages import ADVANTAGE_ESTIMATORS, AdvantageInputs

from ._batches import random_batches

# Junk planted under the zero mask: it must never reach an output, NaN and inf included.
_JUNK = st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30, -7.0])


def _run(name: str, inputs: AdvantageInputs) -> tuple[torch.Tensor, torch.Tensor]:
    out = ADVANTAGE_ESTIMATORS[name](inputs)
    return out.advantages, out.returns


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
@settings(max_examples=50, deadline=None)
@given(inputs=random_batches(min_group_size=2), junk=_JUNK)
def test_masked_tokens_are_zero_and_masked_inputs_never_matter(name: str, inputs: AdvantageInputs, junk: float) -> None:
    # The whitened estimators need two response tokens.
    assume(int(inputs.mask.sum()) >= 2)
    advantages, returns = _run(name, inputs)
    off = ~inputs.mask
    assert advantages.shape == returns.shape == inputs.mask.shape
    assert bool((advantages[off] == 0).all())
    assert bool((returns[off] == 0).all())
    assert bool(advantages.isfinite().all())
    assert inputs.values is not None
    poisoned = AdvantageInputs(
        token_level_rewards=inputs.token_level_rewards.masked_fill(off, junk),
        response_mask=inputs.response_mask,
        group_ids=inputs.group_ids,
        values=inputs.values.masked_fill(off, junk),
        baseline_rewards=inputs.baseline_rewards,
    )
    poisoned_advantages, poisoned_returns = _run(name, poisoned)
    assert torch.equal(poisoned_advantages, advantages)
    assert torch.equal(poisoned_returns, returns)
