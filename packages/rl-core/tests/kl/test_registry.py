"""The KL estimator registry: every name and alias, lookups that list the valid names, no re-registration."""

from __future__ import annotations

import pytest

from rl_core import DuplicateNameError, UnknownNameError
from rl_core.kl import (
    KL_ESTIMATORS,
    abs_kl,
    abs_plus,
    get_kl_estimator,
    k1,
    k1_plus,
    k2,
    k2_plus,
    k3,
    k3_plus,
    register_kl_estimator,
)

EXPECTED = {
    "k1": k1,
    "kl": k1,
    "abs": abs_kl,
    "k2": k2,
    "mse": k2,
    "k3": k3,
    "low_var_kl": k3,
    "k1+": k1_plus,
    "kl+": k1_plus,
    "abs+": abs_plus,
    "k2+": k2_plus,
    "mse+": k2_plus,
    "k3+": k3_plus,
    "low_var_kl+": k3_plus,
}


def test_every_estimator_and_alias_is_registered() -> None:
    assert KL_ESTIMATORS == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lookup_returns_the_registered_function(name: str) -> None:
    assert get_kl_estimator(name) is EXPECTED[name]


def test_unknown_name_lists_the_valid_names_and_the_nearest() -> None:
    with pytest.raises(
        UnknownNameError, match=r"unknown KL estimator 'low_var'.*'low_var_kl'.*valid names: abs, abs\+"
    ):
        get_kl_estimator("low_var")


def test_verls_unimplemented_full_is_unknown() -> None:
    with pytest.raises(UnknownNameError, match="unknown KL estimator 'full'"):
        get_kl_estimator("full")


def test_registering_a_taken_name_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match="KL estimator 'k3' is already registered"):
        register_kl_estimator("k3")(k1)
