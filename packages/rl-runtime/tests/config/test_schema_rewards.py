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
    ("overrides", "policy", "split"),
    [
        (["placement.slots=2"], 1, False),
        (["placement.slots=4", "reward_model.slots=2", "placement.colocate=false"], 2, True),
        (["placement.slots=4", "placement.slots_per_node=2", "reward_model.slots=2"], 2, False),
    ],
)
def test_a_reward_model_slot_comes_out_of_the_policy_slots(
    minimal_data: dict[str, Any], overrides: list[str], policy: int, split: bool
) -> None:
    from rl_runtime.config._schema_rewards import policy_slots, reward_model_slots
    from rl_runtime.trainer._split import scheduler_config

    config = config_from_dict(RunConfig, minimal_data, ["reward_model={path: /rm, placement: slot}", *overrides])
    assert reward_model_slots(config) + policy_slots(config) == config.placement.slots
    assert policy_slots(config) == policy
    settings = scheduler_config(config)
    assert settings.num_nodes * settings.slots_per_node == policy and settings.colocate is not split


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["reward_model={path: /rm, placement: slot}"],  # placement.slots=1 leaves the policy none
            r"reward_model.slots: expected <= placement.slots - 1 = 0: placement.slots=1 counts every slot.*"
            r"found 1.*set placement.slots=2",
        ),
        (
            ["reward_model={path: /rm, placement: slot}", "placement.slots=2", "placement.colocate=false"],
            r"reward_model.slots: expected <= placement.slots - 2 = 0.*split.*set placement.slots=3",
        ),
        (
            ["reward_model={path: /rm, placement: slot}", "placement.slots=4", "placement.slots_per_node=2"],
            r"reward_model.slots: expected a multiple of placement.slots_per_node=2.*set reward_model.slots=2",
        ),
        (
            ["reward_model={path: /rm, placement: slot}", "placement.slots=2", "trainer.launcher=torchrun"],
            r"reward_model.placement: expected 'colocate' with trainer.launcher=torchrun.*found 'slot'",
        ),
        (["reward_model={path: /rm, placement: slot, slots: 0}"], r"reward_model.slots: expected an int >= 1"),
        (["reward_model={path: /rm, slots: 2}"], r"reward_model.slots: expected 1 with reward_model.placement=colo"),
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
