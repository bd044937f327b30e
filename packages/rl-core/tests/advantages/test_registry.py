"""The estimator registry: every estimator is registered once, lookups list the valid names."""

from __future__ import annotations

import pytest

from rl_core import DuplicateNameError, UnknownNameError
from rl_core.advantages import (
    ADVANTAGE_ESTIMATORS,
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
