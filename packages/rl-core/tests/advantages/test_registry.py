"""The estimator registry: every estimator is registered once, lookups list the valid names."""

from __future__ import annotations

import pytest
import torch

from rl_core import DuplicateNameError, UnknownNameError
from rl_core.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageInputs,
    BoundEstimator,
    cpgd,
    gae,
    get_advantage_estimator,
    gpg,
    grpo,
    grpo_passk,
    opo,
    register_advantage_estimator,
    reinforce_plus_plus,
    reinforce_plus_plus_baseline,
    remax,
    rloo,
)
from rl_core.schema import GROUP_ID, RESPONSE_MASK, TOKEN_LEVEL_REWARDS

EXPECTED = {
    "cpgd": cpgd,
    "gae": gae,
    "gpg": gpg,
    "grpo": grpo,
    "grpo_passk": grpo_passk,
    "opo": opo,
    "reinforce_plus_plus": reinforce_plus_plus,
    "reinforce_plus_plus_baseline": reinforce_plus_plus_baseline,
    "remax": remax,
    "rloo": rloo,
}


def test_every_estimator_is_registered_under_its_name() -> None:
    assert ADVANTAGE_ESTIMATORS == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lookup_returns_the_registered_function(name: str) -> None:
    assert get_advantage_estimator(name) is EXPECTED[name]


def test_unknown_name_lists_the_valid_names_and_the_nearest() -> None:
    valid = ", ".join(sorted(EXPECTED))
    with pytest.raises(UnknownNameError, match=f"unknown advantage estimator 'grpo_pass'.*'grpo_passk'.*{valid}"):
        get_advantage_estimator("grpo_pass")


def test_unknown_name_without_a_near_match_still_lists_the_valid_names() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown advantage estimator 'zzz'; valid names: cpgd, gae"):
        get_advantage_estimator("zzz")


def test_registering_a_taken_name_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match="advantage estimator 'gae' is already registered"):
        register_advantage_estimator("gae")(rloo)
    assert ADVANTAGE_ESTIMATORS["gae"] is gae


def test_a_bound_estimator_reads_the_schema_keyed_batch_with_its_own_parameters() -> None:
    gen = torch.Generator().manual_seed(0)
    mask = torch.ones(4, 3, dtype=torch.int64)
    rewards = torch.zeros(4, 3)
    rewards[:, -1] = torch.rand(4, generator=gen)
    batch = {TOKEN_LEVEL_REWARDS: rewards, RESPONSE_MASK: mask, GROUP_ID: torch.tensor([0, 0, 1, 1])}
    params = {"norm_by_std": False}
    bound = BoundEstimator("grpo", params)
    params["norm_by_std"] = True  # the estimator keeps its own copy
    inputs = AdvantageInputs(rewards, mask, batch[GROUP_ID])
    expected = grpo(inputs, norm_by_std=False)
    assert bound.fn is grpo and dict(bound.params) == {"norm_by_std": False}
    torch.testing.assert_close(bound(batch).advantages, expected.advantages)
    with pytest.raises(KeyError, match=r"advantage estimation needs batch fields \['group_id'\]"):
        bound({TOKEN_LEVEL_REWARDS: rewards, RESPONSE_MASK: mask})
    with pytest.raises(UnknownNameError, match=r"unknown advantage estimator 'grop'"):
        BoundEstimator("grop")
