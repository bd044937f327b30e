"""The policy-loss registry: every loss is registered once, lookups list the valid names."""

from __future__ import annotations

import pytest

from rl_core import DuplicateNameError, UnknownNameError
from rl_core.losses import (
    ADVANTAGE_MULTIPLE_LOSSES,
    POLICY_LOSSES,
    cispo,
    clip_cov,
    cpgd,
    decoupled_ppo,
    geo_mean,
    get_policy_loss,
    gpg,
    gspo,
    is_advantage_multiple,
    kl_cov,
    ppo,
    register_policy_loss,
    sapo,
)

EXPECTED = {
    "ppo": ppo,
    "decoupled_ppo": decoupled_ppo,
    "gspo": gspo,
    "cispo": cispo,
    "sapo": sapo,
    "gpg": gpg,
    "clip_cov": clip_cov,
    "kl_cov": kl_cov,
    "geo_mean": geo_mean,
    "cpgd": cpgd,
}


def test_every_loss_is_registered_under_its_name() -> None:
    assert POLICY_LOSSES == EXPECTED
    for name, fn in EXPECTED.items():
        assert get_policy_loss(name) is fn


def test_unknown_name_lists_the_valid_ones_and_the_nearest() -> None:
    valid = ", ".join(sorted(EXPECTED))
    with pytest.raises(UnknownNameError, match=rf"unknown policy loss 'vanilla'; valid names: {valid}$"):
        get_policy_loss("vanilla")
    with pytest.raises(UnknownNameError, match=r"unknown policy loss 'gpso' \(did you mean 'gspo'\?\)"):
        get_policy_loss("gpso")


def test_registering_a_name_twice_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match="policy loss 'ppo' is already registered"):
        register_policy_loss("ppo")(gpg)
    assert POLICY_LOSSES["ppo"] is ppo


def test_only_losses_registered_as_advantage_multiples_say_so() -> None:
    # ppo's clipped surrogate (and decoupled PPO's, times a detached weight) is 0 with a zero gradient where A = 0.
    assert {name for name in EXPECTED if is_advantage_multiple(name)} == {"ppo", "decoupled_ppo"}
    assert {"ppo", "decoupled_ppo"} == ADVANTAGE_MULTIPLE_LOSSES
    assert not is_advantage_multiple("not-a-loss")
    name = "_test_scaled_ppo"
    try:
        register_policy_loss(name, advantage_multiple=True)(ppo)
        assert POLICY_LOSSES[name] is ppo and is_advantage_multiple(name)
    finally:
        POLICY_LOSSES.pop(name, None)
        ADVANTAGE_MULTIPLE_LOSSES.discard(name)
