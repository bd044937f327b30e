"""`batch.balance_across_ranks`: its values from YAML and overrides, and the message for a bad one."""

from __future__ import annotations

from typing import Any

import pytest

from rl_runtime.config import ConfigError, RankBalancing, RunConfig, config_from_dict, dump_config


def _with_balance(minimal_data: dict[str, Any], value: object) -> RunConfig:
    return config_from_dict(RunConfig, {**minimal_data, "batch": {"balance_across_ranks": value}})


def test_balance_across_ranks_defaults_to_none(minimal_data: dict[str, Any]) -> None:
    assert config_from_dict(RunConfig, minimal_data).batch.balance_across_ranks is RankBalancing.NONE


@pytest.mark.parametrize("value", ["none", "samples", "groups"])
def test_balance_across_ranks_takes_each_mode_and_dumps_it_back(minimal_data: dict[str, Any], value: str) -> None:
    config = _with_balance(minimal_data, value)
    assert config.batch.balance_across_ranks is RankBalancing(value)
    assert dump_config(config)["batch"]["balance_across_ranks"] == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, r"batch.balance_across_ranks: expected one of 'none', 'samples', 'groups', found True \(bool\)"),
        ("group", r"found 'group' \(str\); did you mean 'groups'\?"),
    ],
)
def test_balance_across_ranks_rejects_other_values(minimal_data: dict[str, Any], value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _with_balance(minimal_data, value)
