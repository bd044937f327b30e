"""The run-config schema's checks across fields and sections, resume and pipeline values, configs built in code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rl_runtime.config import ConfigError, DataConfig, RolloutConfig, RunConfig, TrainerConfig, config_from_dict


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["pipeline=ppo"], r"critic: expected a critic section: pipeline 'ppo' trains a value model, found null"),
        (["critic.model.path=/m"], r"critic: expected null: pipeline 'grpo' has no critic"),
        (["rollout.max_new_tokens=600"], r"rollout.max_new_tokens: expected <= data.max_response_length=512"),
        (
            ["actor.schedule.kind=cosine", "actor.schedule.warmup_steps=10", "trainer.total_steps=10"],
            r"actor.schedule.warmup_steps: expected < trainer.total_steps=10",
        ),
        (["placement.colocate=false"], r"placement.slots: expected >= 2 with placement.colocate=false"),
        (["algorithm.kl.target=0.1"], r"algorithm.kl.target: expected null unless kl.mode is 'in_reward'"),
        (
            ["algorithm.rollout_correction={mode: tis, lower: 0.5}"],
            r"algorithm.rollout_correction.lower: expected null for mode 'tis'.*set mode=mis",
        ),
        (
            ["algorithm.rollout_correction={mode: mis, upper: 2.0, lower: 3.0}"],
            r"algorithm.rollout_correction.lower: expected a number in \(0, upper=2.0\]",
        ),
        (["algorithm.rollout_correction={mode: is}"], r"algorithm.rollout_correction.mode: .*'is'.*did you mean"),
        (["algorithm.rollout_correction={level: tokens}"], r"algorithm.rollout_correction.level: .*'tokens'"),
        (["algorithm.max_staleness=-1"], r"algorithm.max_staleness: expected an int >= 0, found -1"),
        (
            ["algorithm.max_staleness=1"],
            r"algorithm.max_staleness: expected 0 with placement.colocate=true .*found 1.*set placement.colocate=false",
        ),
        (
            ["placement.slots=2", "placement.colocate=false", "algorithm.async_generation=continuous"],
            r"algorithm.max_staleness: expected >= 1 with algorithm.async_generation=continuous .*the lag continuous "
            r"generation has by itself.*found 0.*set algorithm.max_staleness=1 or more",
        ),
        (
            [
                "placement.slots=2",
                "placement.colocate=false",
                "algorithm.max_staleness=1",
                "algorithm.async_generation=continuous",
                "rollout.workflow=multi_turn",
            ],
            r"rollout.workflow: expected single_turn with algorithm.async_generation=continuous",
        ),
        (["algorithm.async_generation=streaming"], r"algorithm.async_generation: .*'streaming'"),
        (
            [
                "pipeline=embodied_srpo",
                "placement.slots=2",
                "placement.colocate=false",
                "algorithm.max_staleness=1",
                "algorithm.async_generation=continuous",
            ],
            r"algorithm.async_generation: expected step with pipeline 'embodied_srpo' .*found continuous",
        ),
        (
            ["pipeline=embodied_srpo", "placement.slots=2", "placement.colocate=false", "algorithm.max_staleness=1"],
            r"algorithm.max_staleness: expected 0: pipeline 'embodied_srpo' acts in an environment.*found 1",
        ),
        (
            ["algorithm.policy_loss=decoupled_ppo", "algorithm.rollout_correction={mode: tis}"],
            r"algorithm.rollout_correction: expected null with algorithm.policy_loss=decoupled_ppo .*"
            r"remove algorithm.rollout_correction",
        ),
        (
            ["algorithm.adv_estimator=remax"],
            r"pipeline: expected a pipeline with a compute_greedy_baseline node.*found 'grpo'.*set pipeline=remax",
        ),
        (["rollout.val_samples_per_prompt=4"], r"rollout.val_temperature: expected > 0 with val_samples_per_prompt=4"),
        (
            ["placement.slots=3", "placement.slots_per_node=2"],
            r"placement.slots: expected a multiple of slots_per_node=2",
        ),
        (["trainer.resume=atuo"], r"trainer.resume: .*found 'atuo' \(str\); did you mean 'auto'\?"),
        (["actor.model.hf_config={model_type: qwen2}"], r"actor.model: expected exactly one of path .* and hf_config"),
        (
            ["actor.model={hf_config: {hidden_size: 8}}"],
            r"actor.model.hf_config: expected a transformers PretrainedConfig or a mapping with a 'model_type'",
        ),
        (
            ["actor.model={hf_config: {model_type: qwen3_moe2}}"],
            r"actor.model.hf_config.model_type: expected a model type transformers knows .*found 'qwen3_moe2'.*"
            r"did you mean 'qwen3_moe'\?",
        ),
        (
            ["actor.model={hf_config: {model_type: llama, hidden_size: 16}}"],
            r"actor.model.hf_config: expected fields transformers accepts for model_type 'llama'.*"
            r"transformers says: .*not a multiple of the number of attention heads",
        ),
        (
            ["placement.slots=4", "batch.prompts_per_step=6"],
            r"batch.prompts_per_step: expected a multiple of the rollout dp=4",
        ),
        (["data.train_files=[]"], r"data.train_files: expected at least one training data file"),
        (
            ["actor.data_parallel=ddp", "actor.precision.compute_dtype=bfloat16"],
            r"actor.precision.compute_dtype: expected null or 'float32' with data_parallel='ddp' .*found 'bfloat16'.*"
            r"or set data_parallel: fsdp",
        ),
        (
            ["actor.data_parallel=ddp", "actor.offload.fsdp_cpu_offload=true"],
            r"actor.offload.fsdp_cpu_offload: expected false with data_parallel='ddp'",
        ),
        (["actor.data_parallel=zero"], r"actor.data_parallel: expected one of \['fsdp', 'ddp'\], found 'zero'"),
        (["actor.optimizer.lr=0"], r"actor.optimizer.lr: expected a finite number > 0, found 0.0 \(float\)"),
        (
            ["actor.micro_batch.max_tokens_per_micro_batch=100"],
            r"actor.micro_batch.max_tokens_per_micro_batch: expected at least one full sequence",
        ),
        (
            ["actor.device=cpu"],
            r"actor.device: expected 'auto': the run places every engine on placement.device, found 'cpu'.*"
            r"set placement.device",
        ),
        (["actor.model.value_head=true"], r"actor.model.value_head: expected false: only the critic has a value head"),
        (
            ["reference.model.path=/r", "reference.optimizer.lr=1e-3"],
            r"reference.optimizer: expected null or unset: the reference policy is frozen",
        ),
        (
            ["pipeline=ppo", "critic.model.path=/c", "critic.micro_batch.max_tokens_per_micro_batch=64"],
            r"critic.micro_batch.max_tokens_per_micro_batch: expected at least one full sequence: .* = 1024",
        ),
        (
            ["rollout.engine=server", "rollout.engine_kwargs.update_timeout_s=0"],
            r"rollout.engine_kwargs.update_timeout_s: expected a value the server engine accepts, found 0; "
            r"rollout.engine_kwargs.update_timeout_s must be > 0, got 0",
        ),
        (
            ["rollout.engine=server", "rollout.engine_kwargs.update_timeout=5"],
            r"rollout.engine_kwargs: expected settings of the server engine: .*update_timeout_s.*found update_timeout",
        ),
        (
            ["rollout.engine=sglang"],
            r"rollout.engine: expected an engine the trainer can build \(rl_engines.rollout.ROLLOUT_ENGINES: 'hf', "
            r"'server', 'vllm'\), found 'sglang' \(str\); rl_engines.sglang.SGLangEngine needs CUDA builds of sglang",
        ),
    ],
)
def test_cross_field_checks(minimal_data: dict[str, Any], overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(RunConfig, minimal_data, overrides)


@pytest.mark.parametrize("resume", ["never", "./atuo", "/ckpt/step_3", "checkpoints"])
def test_resume_takes_keywords_and_paths(minimal_data: dict[str, Any], resume: str) -> None:
    assert config_from_dict(RunConfig, minimal_data, [f"trainer.resume={resume}"]).trainer.resume == resume


def test_pipeline_may_be_a_pipeline_file(minimal_data: dict[str, Any]) -> None:
    assert config_from_dict(RunConfig, minimal_data, ["pipeline=pipelines/mine.yaml"]).pipeline == "pipelines/mine.yaml"


def test_configs_built_in_code_are_validated_too() -> None:
    with pytest.raises(ConfigError, match=r"engine: expected an engine the trainer can build .*found .sglang."):
        RolloutConfig(engine="sglang")
    with pytest.raises(ConfigError, match=r"log_sinks: expected a list of log sink names, found \['console'\]"):
        TrainerConfig(log_sinks=["console"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"actor: expected a mapping \(TrainEngineConfig\), found '/m' \(str\)"):
        RunConfig(data=DataConfig(train_files=(Path("a.jsonl"),)), actor="/m")  # type: ignore[arg-type]


def test_a_cosine_schedule_takes_the_runs_length(minimal_data: dict[str, Any]) -> None:
    config = config_from_dict(RunConfig, minimal_data, ["actor.schedule.kind=cosine", "actor.schedule.warmup_steps=2"])
    assert config.actor.schedule.total_steps is None  # filled in from the run's steps when the engine is built


def test_an_embodied_run_takes_an_openvla_actor_at_load(full_embodied_data: dict[str, Any], tmp_path: Path) -> None:
    # The Trainer's embodied rollout encodes instructions for an OpenVLA-OFT actor (OpenVLAPrompt) and its driver
    # checks read the checkpoint's OpenVLASpec: the folder's kind is no longer refused at load.
    (tmp_path / "config.json").write_text('{"model_type": "openvla"}')
    config = config_from_dict(RunConfig, full_embodied_data, [f"actor.model.path={tmp_path}"])
    assert config.pipeline == "embodied_srpo" and config.actor.model.path is not None
