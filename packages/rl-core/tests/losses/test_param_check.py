"""check_policy_loss_params: a loss's own value checks, run before training."""

from __future__ import annotations

import pytest

from rl_core import UnknownNameError
from rl_core.losses import POLICY_LOSSES, check_policy_loss_params


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_every_registered_loss_accepts_its_defaults(name: str) -> None:
    check_policy_loss_params(name, {})


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("decoupled_ppo", {"behav_imp_weight_cap": 1.0}, r"behav_imp_weight_cap must be > 1"),
        ("ppo", {"clip_ratio_c": 0.9}, r"clip_ratio_c must be > 1"),
        ("ppo", {"clip_ratio": -0.1}, r"clip_ratio must be >= 0"),
    ],
)
def test_a_value_the_loss_refuses_is_named_with_the_loss(name: str, params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=rf"policy loss '{name}' refuses .*{message}"):
        check_policy_loss_params(name, params)


def test_accepted_values_pass() -> None:
    check_policy_loss_params("decoupled_ppo", {"behav_imp_weight_cap": 2.0, "clip_ratio": 0.1})


def test_an_unknown_loss_is_an_unknown_name() -> None:
    with pytest.raises(UnknownNameError):
        check_policy_loss_params("ppoo", {})
