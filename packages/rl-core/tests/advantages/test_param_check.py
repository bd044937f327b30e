"""check_advantage_params: an estimator's own value and group-size checks, run before training."""

from __future__ import annotations

import pytest

from rl_core import UnknownNameError
from rl_core.advantages import ADVANTAGE_ESTIMATORS, check_advantage_params


@pytest.mark.parametrize("name", sorted(ADVANTAGE_ESTIMATORS))
@pytest.mark.parametrize("group_size", [2, 8])
def test_every_registered_estimator_accepts_its_defaults(name: str, group_size: int) -> None:
    check_advantage_params(name, {}, group_size=group_size)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("grpo", {"epsilon": 0.0}, r"epsilon must be > 0"),
        ("gae", {"gamma": 1.5}, r"gamma must be in \[0, 1\]"),
        ("gae", {"lam": -0.1}, r"lam must be in \[0, 1\]"),
        ("reinforce_plus_plus", {"gamma": 2.0}, r"gamma must be in \[0, 1\]"),
        ("cpgd", {"max_weight": 0.5}, r"max_weight must be >= 1.0"),
        ("gpg", {"f_norm": 0.0}, r"f_norm must be > 0"),
    ],
)
def test_a_value_the_estimator_refuses_is_named_with_the_estimator(
    name: str, params: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=rf"advantage estimator '{name}' refuses .*{message}"):
        check_advantage_params(name, params)


def test_a_group_size_the_estimator_refuses_is_named() -> None:
    with pytest.raises(ValueError, match=r"'grpo_passk' refuses \{\} with groups of 1: .*at least 2 samples per group"):
        check_advantage_params("grpo_passk", {}, group_size=1)
    check_advantage_params("grpo", {}, group_size=1)  # a singleton group keeps its reward


def test_accepted_values_pass() -> None:
    check_advantage_params("gae", {"gamma": 1.0, "lam": 0.0})


def test_an_unknown_estimator_is_an_unknown_name() -> None:
    with pytest.raises(UnknownNameError):
        check_advantage_params("grpoo", {})


def test_a_group_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="group_size must be an int >= 1, got 0"):
        check_advantage_params("grpo", {}, group_size=0)
