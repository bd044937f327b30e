"""The run config's model-based reward sections: the reward_model section as rl-engines' RewardModelConfig, its
refusals named by dotted path, and the rule-reward weight's checks."""

from __future__ import annotations

from typing import Any

import pytest

from rl_engines.reward_model import RewardModelConfig, TokenizerMode
from rl_runtime.config import ConfigError, RunConfig, config_from_dict


def test_the_reward_model_section_loads(minimal_data: dict[str, Any]) -> None:
    overrides = ["reward_model={path: /rm, tokenizer: retokenize, weight: 0.5}", "algorithm.rule_reward_weight=0"]
    config = config_from_dict(RunConfig, minimal_data, overrides)
    assert config.reward_model == RewardModelConfig(path="/rm", tokenizer=TokenizerMode.RETOKENIZE, weight=0.5)
    assert config.algorithm.rule_reward_weight == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["reward_model={path: /rm, placement: slot}"],
            r"reward_model.placement: expected 'colocate', found 'slot'.*not built yet.*use 'colocate'",
        ),
        (["reward_model={path: /rm, tokenizer: retokenise}"], r"reward_model.tokenizer: .*did you mean 'retokenize'"),
        (["reward_model={path: /rm, batch_size: 0}"], r"reward_model.batch_size: expected an int >= 1, found 0"),
        (["reward_model={tokenizer: same}"], r"reward_model.path: expected a str, found nothing"),
        (["judge={engine: server}"], r"judge.base_url: expected an http://host:port address with engine=server"),
        (["judge={verdict: grade}"], r"judge.verdict: expected one of 'yes_no', 'number'"),
        (
            ["algorithm.rule_reward_weight=0"],
            r"algorithm.rule_reward_weight: expected > 0 without a reward_model or judge section",
        ),
        (["algorithm.rule_reward_weight=-1"], r"algorithm.rule_reward_weight: expected a finite number >= 0"),
    ],
)
def test_bad_reward_settings_are_named(minimal_data: dict[str, Any], overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(RunConfig, minimal_data, overrides)
