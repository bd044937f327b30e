"""Values a component refuses when it runs are refused when the config loads, asked of the component itself, with
the field, the value and the fix; the boundary values the component accepts still load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rl_core.graph import get_pipeline
from rl_runtime.config import ConfigError, RunConfig, config_from_dict
from rl_runtime.metrics import missing_sink_extra
from rl_runtime.metrics._sink import SINK_EXTRAS

IN_REWARD = "algorithm.kl={mode: in_reward, coef: 0.1, target: 0.1, horizon: %d}"


def _config(data: dict[str, Any], overrides: list[str]) -> RunConfig:
    return config_from_dict(RunConfig, data, overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["algorithm.adv_params={epsilon: 0.0}"],
            r"algorithm.adv_params: expected parameters advantage estimator 'grpo' accepts, found \{'epsilon': 0.0\} "
            r".*epsilon must be > 0, got 0.0; change the value or remove it to keep the estimator's default",
        ),
        (
            ["algorithm.adv_estimator=gae", "algorithm.adv_params={gamma: 1.5}"],
            r"algorithm.adv_params: expected parameters advantage estimator 'gae' accepts.*gamma must be in \[0, 1\]",
        ),
        (
            ["algorithm.adv_estimator=cpgd", "algorithm.adv_params={max_weight: 0.5}"],
            r"algorithm.adv_params: .*'cpgd'.*max_weight must be >= 1.0.*; change the value or remove it",
        ),
        (
            ["algorithm.adv_estimator=grpo_passk", "batch.samples_per_prompt=1"],
            r"batch.samples_per_prompt: expected a group size advantage estimator 'grpo_passk' accepts, found 1; "
            r".*at least 2 samples per group.*raise batch.samples_per_prompt or pick another algorithm.adv_estimator",
        ),
        (
            ["rollout.engine_kwargs={max_batch_size: 0}"],
            r"rollout.engine_kwargs.max_batch_size: expected a value the hf engine accepts, found 0; "
            r"rollout.engine_kwargs.max_batch_size must be >= 1, got 0",
        ),
        (
            ["rollout.engine_kwargs={max_batch: 4}"],
            r"rollout.engine_kwargs: expected settings of the hf engine: .*max_batch_size.*, found max_batch; "
            r"remove or rename them",
        ),
        (
            ["actor.optimizer=null"],
            r"actor.optimizer: expected optimizer settings: the actor is trained .*found null; remove "
            r"actor.optimizer: null to train with the default AdamW",
        ),
        (
            ["placement.device=cpu", "actor.offload.fsdp_cpu_offload=true"],
            r"actor.offload.fsdp_cpu_offload: expected false with placement.device='cpu': the offload moves FSDP2 "
            r"shards from a CUDA device to the CPU, found true; .*run on CUDA \(placement.device=cuda\)",
        ),
        (
            ["actor.model.attn_implementation=spda"],
            r"actor.model.attn_implementation: expected an attention implementation transformers knows \(eager, .*\) "
            r"or a Hub kernel \(org/repo\), found 'spda' \(str\); did you mean 'sdpa'\?",
        ),
        (
            ["rollout.temperature=0"],
            r"rollout.temperature: expected a finite number > 0, found 0.0 \(float\); set one > 0 .*greedy decoding "
            r"is for validation: val_temperature=0",
        ),
    ],
)
def test_a_value_the_component_refuses_is_refused_at_load(
    minimal_data: dict[str, Any], overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(minimal_data, overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        ["algorithm.adv_estimator=gae", "algorithm.adv_params={gamma: 1.0, lam: 0.0}"],
        ["algorithm.adv_estimator=grpo_passk", "batch.samples_per_prompt=2"],
        ["rollout.engine_kwargs={max_batch_size: 1, prefill_cache_size: 0, dtype: bfloat16, context_len: 2}"],
        ["reference={model: {path: /models/ref}, optimizer: null}"],  # the frozen reference needs none
        ["placement.device=cuda", "actor.offload.fsdp_cpu_offload=true"],  # checked where the run goes, not here
        ["rollout.temperature=0.01", "rollout.val_temperature=0"],
    ],
)
def test_the_boundary_values_the_component_accepts_still_load(
    minimal_data: dict[str, Any], overrides: list[str]
) -> None:
    _config(minimal_data, overrides)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "env.num_envs=0",
            r"env.num_envs: expected a value every env runs with, found 0 \(int\); env.num_envs must be >= 1, got 0; "
            r"set env.num_envs to a positive int",
        ),
        ("env.num_workers=-1", r"env.num_workers: .*found -1 \(int\); env.num_workers must be >= 0 .*set it to 0"),
        ("env.max_steps=0", r"env.max_steps: .*found 0 \(int\); env.max_steps must be >= 1"),
    ],
)
def test_an_env_count_make_env_refuses_is_refused_at_load(
    full_embodied_data: dict[str, Any], override: str, message: str
) -> None:
    # The driver's env probe builds one in-process env, so these reached the rollout workers before.
    with pytest.raises(ConfigError, match=message):
        _config(full_embodied_data, [override])
    _config(full_embodied_data, [override.split("=")[0] + ("=0" if "workers" in override else "=1")])


ADVANTAGES_FIRST = {
    "rollout_actor": [],
    "function_reward": ["rollout_actor"],
    "calculate_advantages": ["function_reward"],
    "reference_log_prob": ["calculate_advantages"],
    "actor_old_log_prob": ["reference_log_prob"],
    "actor_train": ["actor_old_log_prob"],
}
"""grpo's nodes in a pipeline file with the reference log-probs after the advantages."""


@pytest.mark.parametrize(
    ("pipeline", "extra"),
    [
        ("grpo", []),
        ("ppo", ["algorithm.adv_estimator=gae", "critic={model: {path: /models/critic}}"]),
        ("dapo", ["algorithm.dynamic_sampling={epsilon: 0.0}"]),
        ("remax", ["algorithm.adv_estimator=remax"]),
    ],
)
def test_in_reward_kl_loads_with_every_language_builtin(
    minimal_data: dict[str, Any], pipeline: str, extra: list[str]
) -> None:
    config = _config(minimal_data, [f"pipeline={pipeline}", *extra, "algorithm.kl={mode: in_reward, coef: 0.001}"])
    assert config.pipeline == pipeline  # the config keeps the name; the runtime runs its in-reward variant
    _config(minimal_data, [f"pipeline={pipeline}", *extra, IN_REWARD % 500])  # and the adaptive controller


def test_in_reward_kl_loads_with_the_embodied_builtin(full_embodied_data: dict[str, Any]) -> None:
    _config(full_embodied_data, ["algorithm.kl={mode: in_reward, coef: 0.001}"])


def test_in_reward_kl_is_refused_with_a_pipeline_file_that_computes_the_reference_after_the_advantages(
    minimal_data: dict[str, Any], tmp_path: Path
) -> None:
    graph = get_pipeline("grpo").to_dict()
    for node in graph["nodes"]:
        node["dependencies"] = ADVANTAGES_FIRST[node["id"]]
    path = tmp_path / "advantages_first.yaml"
    path.write_text(yaml.safe_dump(graph))
    with pytest.raises(
        ConfigError,
        match=rf"algorithm.kl.mode: expected 'none' or 'as_loss' with pipeline '{path}': the in-reward penalty needs "
        r"the reference log-probs before the advantages, but its 'calculate_advantages' node runs before any "
        r"compute_ref_log_prob node, found 'in_reward'; set algorithm.kl.mode=as_loss .*or use a pipeline with an "
        r"in-reward variant \(dapo, embodied_srpo, grpo, ppo, remax\), a pipeline file whose compute_ref_log_prob "
        r"node runs before compute_advantage, or register the pipeline's in-reward variant with "
        r"rl_core.graph.register_kl_in_reward_pipeline",
    ):
        _config(minimal_data, [f"pipeline={path}", "algorithm.kl={mode: in_reward, coef: 0.1}"])
    _config(minimal_data, [f"pipeline={path}", "algorithm.kl={mode: as_loss, coef: 0.1}"])


def test_an_adaptive_kl_horizon_the_controller_refuses_is_refused_at_load(minimal_data: dict[str, Any]) -> None:
    # 8 samples a step (8 prompts x 1): the controller needs horizon > 0.2 x 8.
    with pytest.raises(
        ConfigError,
        match=r"algorithm.kl.horizon: expected a horizon the adaptive KL controller accepts for an update of 8 "
        r"samples \(a step's batch.prompts_per_step x batch.samples_per_prompt\), found 1; the controller says: "
        r"n_steps must be < horizon / 0.2 = 5, got 8.*raise algorithm.kl.horizon",
    ):
        _config(minimal_data, [IN_REWARD % 1])
    _config(minimal_data, [IN_REWARD % 2])  # 8 x 0.2 = 1.6 < 2
    # The controllers of all ranks step together on the whole step's samples, on any placement: 24 need > 4.8.
    for placement in (["placement.slots=4"], ["placement.slots=4", "placement.colocate=false"]):
        with pytest.raises(ConfigError, match=r"algorithm.kl.horizon: .*an update of 24 samples"):
            _config(minimal_data, [*placement, "batch.prompts_per_step=24", IN_REWARD % 4])
        _config(minimal_data, [*placement, "batch.prompts_per_step=24", IN_REWARD % 5])


def test_a_log_sink_whose_package_is_missing_is_refused_at_load(
    minimal_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sinks import their packages when the run builds them, after the workers start.
    monkeypatch.setitem(SINK_EXTRAS, "wandb", ("rl_no_such_package", "wandb"))
    with pytest.raises(
        ConfigError,
        match=r"trainer.log_sinks.1: expected a log sink whose package is installed, found 'wandb' \(str\); the "
        r"'wandb' log sink needs the 'rl_no_such_package' package, which is not installed; install it with "
        r"`pip install 'rl-runtime\[wandb\]'` or drop 'wandb' from trainer.log_sinks",
    ):
        _config(minimal_data, ["trainer.log_sinks=[console, wandb]"])
    assert missing_sink_extra("console") is None and missing_sink_extra("tensorboard") is None
    _config(minimal_data, ["trainer.log_sinks=[console, jsonl, tensorboard]"])
