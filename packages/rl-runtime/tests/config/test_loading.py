"""Loading YAML files with overrides, malformed files, dumping back, and the packaged example config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_runtime.config import (
    BatchPlan,
    ConfigError,
    RunConfig,
    config_from_dict,
    dump_config,
    dump_config_yaml,
    load_config,
)
from rl_runtime.config._loading import default_config_path, read_config_file


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_merges_file_and_overrides(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "data:\n  train_files: [t.jsonl]\nactor:\n  model: {path: /m}\n  optimizer:\n    lr: 1e-6\n  schedule:\n"
        "    warmup_steps: 2\n",
    )
    config = load_config(RunConfig, path, ["actor.optimizer.lr=3e-6"])
    assert config.actor.optimizer.lr == 3e-6 and config.actor.schedule.warmup_steps == 2
    assert config.data.train_files == (Path("t.jsonl"),)


def test_load_without_a_file_uses_defaults_and_overrides() -> None:
    config = load_config(RunConfig, None, ["data.train_files=[t.jsonl]", "actor.model.path=/m"])
    assert config.actor.model.path == "/m" and config.pipeline == "grpo"


def test_errors_name_the_file_and_the_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, "data:\n  train_files: [t.jsonl]\n  sead: 1\nactor:\n  model: {path: /m}\n")
    with pytest.raises(
        ConfigError, match=rf"in {re.escape(str(path))} with overrides \['data.seed=2'\]: data.sead: .*'seed'"
    ) as caught:
        load_config(RunConfig, path, ["data.seed=2"])
    assert caught.value.source == f"{path} with overrides ['data.seed=2']"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("data:\n  train_files: [a\nactor: {}\n", r"expected ',' or '\]', but got ':' at line 3, column 6"),
        ("data:\n  seed: 1\n seed: 2\n", r"at line 3, column 2"),
        ("data:\n\tseed: 1\n", r"found character '\\t' that cannot start any token at line 2, column 1"),
        ("data:\n  seed: 1\n  seed: 2\n", r"duplicate key 'seed' \(first set on line 2\) at line 3, column 3"),
    ],
)
def test_malformed_yaml_names_the_file_and_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(
        ConfigError, match=rf"in {re.escape(str(path))}: <config>: expected well-formed YAML, found .*{message}"
    ):
        load_config(RunConfig, path, [])


def test_a_top_level_list_or_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"expected a mapping of sections at the top level, found \[1, 2\] \(list\)"):
        read_config_file(_write(tmp_path, "[1, 2]\n"))
    with pytest.raises(
        ConfigError, match=r"nope.yaml: <config>: expected a readable YAML file, found FileNotFoundError"
    ):
        load_config(RunConfig, tmp_path / "nope.yaml", [])


def test_an_empty_file_is_an_empty_mapping(tmp_path: Path) -> None:
    assert read_config_file(_write(tmp_path, "# only a comment\n")) == {}


def test_yaml_round_trip_of_every_field(full_data: dict[str, Any], tmp_path: Path) -> None:
    config = config_from_dict(RunConfig, full_data)
    text = dump_config_yaml(config)
    assert load_config(RunConfig, _write(tmp_path, text), []) == config
    assert yaml.safe_load(text) == dump_config(config)


def test_dump_config_refuses_a_non_config() -> None:
    with pytest.raises(TypeError, match=r"dump_config takes a config object .*, got int"):
        dump_config(3)


def test_the_packaged_grpo_tiny_config_loads_and_plans(tmp_path: Path) -> None:
    path = default_config_path("grpo_tiny")
    first_line = path.read_text(encoding="utf-8").splitlines()[0]
    assert first_line == '# rl_runtime.config.load_config(RunConfig, default_config_path("grpo_tiny"))'
    config = load_config(RunConfig, path, [])
    assert config.pipeline == "grpo" and config.algorithm.adv_estimator == "grpo" and config.critic is None
    assert config.actor.model.hf_config is not None and config.actor.model.hf_config["model_type"] == "qwen2"
    assert config.placement.slots == 2 and config.trainer.total_steps == 2
    plan = BatchPlan.from_config(config, rollout_dp=config.placement.slots, train_dp=config.placement.slots)
    assert (plan.samples_per_step, plan.optimizer_steps_per_step) == (16, 2)
    # The example spells out every setting: dumping it changes no value.
    assert dump_config(config) == read_config_file(path)
    assert load_config(RunConfig, _write(tmp_path, dump_config_yaml(config)), []) == config


def test_unknown_packaged_config_lists_the_available_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"expected a packaged config \(.*grpo_tiny.*\), found 'grpo_tny'; did you mean 'grpo_tiny'\?"
    ):
        default_config_path("grpo_tny")
