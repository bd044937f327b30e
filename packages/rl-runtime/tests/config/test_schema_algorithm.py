"""`algorithm.recompute_old_log_prob`: its values from YAML and overrides, and the message for a bad one."""

from __future__ import annotations

from typing import Any

import pytest

from rl_runtime.config import ConfigError, RecomputeOldLogProb, RunConfig, config_from_dict, dump_config
from rl_runtime.config._overrides import apply_overrides


def _with_recompute(minimal_data: dict[str, Any], value: object) -> RunConfig:
    return config_from_dict(RunConfig, {**minimal_data, "algorithm": {"recompute_old_log_prob": value}})


def test_recompute_old_log_prob_defaults_to_auto(minimal_data: dict[str, Any]) -> None:
    assert config_from_dict(RunConfig, minimal_data).algorithm.recompute_old_log_prob is RecomputeOldLogProb.AUTO


@pytest.mark.parametrize("value", ["auto", "always"])
def test_recompute_old_log_prob_takes_each_mode_and_dumps_it_back(minimal_data: dict[str, Any], value: str) -> None:
    config = _with_recompute(minimal_data, value)
    assert config.algorithm.recompute_old_log_prob is RecomputeOldLogProb(value)
    assert dump_config(config)["algorithm"]["recompute_old_log_prob"] == value


def test_recompute_old_log_prob_from_an_override(minimal_data: dict[str, Any]) -> None:
    data = apply_overrides(minimal_data, ["algorithm.recompute_old_log_prob=always"], RunConfig)
    assert config_from_dict(RunConfig, data).algorithm.recompute_old_log_prob is RecomputeOldLogProb.ALWAYS


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, r"algorithm.recompute_old_log_prob: expected one of 'auto', 'always', found True \(bool\)"),
        ("alway", r"found 'alway' \(str\); did you mean 'always'\?"),
        ("never", r"algorithm.recompute_old_log_prob: expected one of 'auto', 'always', found 'never'"),
    ],
)
def test_recompute_old_log_prob_rejects_other_values(minimal_data: dict[str, Any], value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _with_recompute(minimal_data, value)
