"""Dotted overrides: YAML values, nested paths, list indices, and unknown paths naming the nearest valid one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_runtime.config import ConfigError, RunConfig, config_from_dict
from rl_runtime.config._overrides import apply_overrides, parse_override


@pytest.mark.parametrize(
    ("override", "segments", "value"),
    [
        ("actor.optimizer.lr=1e-6", ["actor", "optimizer", "lr"], 1e-6),
        ("a.b=[1,2]", ["a", "b"], [1, 2]),
        ("x=null", ["x"], None),
        ('s="007"', ["s"], "007"),
        ("s=007", ["s"], 7),
        ("f=true", ["f"], True),
        ("m={k: v, n: 2}", ["m"], {"k": "v", "n": 2}),
        ("s=", ["s"], ""),
        ("s=a=b", ["s"], "a=b"),
        (" spaced.key = 3 ", ["spaced", "key"], 3),
    ],
)
def test_values_are_parsed_as_yaml(override: str, segments: list[str], value: object) -> None:
    assert parse_override(override) == (segments, value)


@pytest.mark.parametrize("override", ["actor.optimizer.lr", "=3", "a..b=1", "a.=1"])
def test_malformed_overrides_are_refused(override: str) -> None:
    with pytest.raises(ConfigError, match=r"expected an override of the form dotted.path=value"):
        parse_override(override)


def test_an_unparsable_value_names_the_override() -> None:
    with pytest.raises(ConfigError, match=r"in override 'a=\[1, 2': .*expected well-formed YAML"):
        parse_override("a=[1, 2")


def test_overrides_reach_nested_sections_and_create_missing_ones(minimal_data: dict[str, Any]) -> None:
    overrides = [
        "actor.optimizer.lr=2e-6",
        "actor.optimizer.betas=[0.9, 0.95]",
        "algorithm.kl.coef=0.01",
        "algorithm.adv_params.epsilon=1e-8",
        "trainer.output_dir=/tmp/x",
        "rollout.engine_kwargs.max_batch_size=2",  # a setting of the default "hf" engine
    ]
    config = config_from_dict(RunConfig, minimal_data, overrides)
    assert config.actor.optimizer.lr == 2e-6 and config.actor.optimizer.betas == (0.9, 0.95)
    assert config.algorithm.kl.coef == 0.01 and config.algorithm.adv_params == {"epsilon": 1e-8}
    assert config.trainer.output_dir == Path("/tmp/x") and config.rollout.engine_kwargs == {"max_batch_size": 2}
    assert config.actor.model.path == "/models/policy"  # untouched siblings survive


def test_later_overrides_win_and_the_input_is_not_mutated(minimal_data: dict[str, Any]) -> None:
    before = repr(minimal_data)
    merged = apply_overrides(minimal_data, ["data.seed=1", "data.seed=2"], RunConfig)
    assert merged["data"] == {"train_files": ["train.jsonl"], "seed": 2}
    assert repr(minimal_data) == before


def test_a_mapping_value_replaces_the_whole_section(minimal_data: dict[str, Any]) -> None:
    minimal_data["actor"]["optimizer"] = {"lr": 5e-6, "weight_decay": 0.5}
    config = config_from_dict(RunConfig, minimal_data, ["actor.optimizer={lr: 1e-5}"])
    assert (config.actor.optimizer.lr, config.actor.optimizer.weight_decay) == (1e-5, 0.01)


def test_a_null_section_can_be_filled_and_a_section_set_to_null(minimal_data: dict[str, Any]) -> None:
    minimal_data["critic"] = None
    overrides = ["pipeline=ppo", "critic.model.path=/models/critic"]
    config = config_from_dict(RunConfig, minimal_data, overrides)
    assert config.critic is not None and config.critic.model.path == "/models/critic"
    back = config_from_dict(RunConfig, minimal_data, [*overrides, "pipeline=grpo", "critic=null"])
    assert back.critic is None


def test_list_indices_replace_and_append(minimal_data: dict[str, Any]) -> None:
    config = config_from_dict(RunConfig, minimal_data, ["data.train_files.0=a.jsonl", "data.train_files.1=b.jsonl"])
    assert config.data.train_files == (Path("a.jsonl"), Path("b.jsonl"))
    with pytest.raises(ConfigError, match=r"data.train_files.3: expected an index up to 1 \(the next one appends\)"):
        apply_overrides(minimal_data, ["data.train_files.3=c.jsonl"], RunConfig)
    with pytest.raises(ConfigError, match=r"data.train_files.first: expected a list index under data.train_files"):
        apply_overrides(minimal_data, ["data.train_files.first=c.jsonl"], RunConfig)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "trainr.seed=1",
            r"trainr: expected a key of the config \(data, actor, .*\), found unknown key 'trainr'; "
            r"did you mean 'trainer'\?",
        ),
        ("actor.optimzer.lr=1", r"actor.optimzer: expected a key of actor \(.*\).*did you mean 'actor.optimizer'\?"),
        (
            "actor.optimizer.lrr=1e-6",
            r"actor.optimizer.lrr: expected a key of actor.optimizer \(lr, .*\).*did you mean 'actor.optimizer.lr'\?",
        ),
        ("algorithm.kl.estmator=k1", r"algorithm.kl.estmator: .*did you mean 'algorithm.kl.estimator'\?"),
        ("critic.model.pth=/m", r"critic.model.pth: .*did you mean 'critic.model.path'\?"),
        ("actor.optimizer.zzz=1", r"actor.optimizer.zzz: .*found unknown key 'zzz'; valid keys: lr, betas"),
        (
            "actor.optimizer.lr.x=1",
            r"actor.optimizer.lr.x: expected a path to a setting, found actor.optimizer.lr is a float",
        ),
    ],
)
def test_unknown_paths_name_the_nearest_valid_path(minimal_data: dict[str, Any], override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        apply_overrides(minimal_data, [override], RunConfig)
    assert caught.value.source == f"override {override!r}"


def test_setting_inside_a_scalar_already_in_the_data_is_refused(minimal_data: dict[str, Any]) -> None:
    minimal_data["rollout"] = {"engine_kwargs": {"tp": 2}}
    with pytest.raises(ConfigError, match=r"rollout.engine_kwargs.tp: .*found rollout.engine_kwargs.tp holds 2"):
        apply_overrides(minimal_data, ["rollout.engine_kwargs.tp.size=2"], RunConfig)


def test_overridden_values_are_type_checked_with_the_override_in_the_source(minimal_data: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"in overrides \['data.seed=abc'\]: data.seed: expected an int"):
        config_from_dict(RunConfig, minimal_data, ["data.seed=abc"])
