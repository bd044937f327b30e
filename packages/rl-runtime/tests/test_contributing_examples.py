"""CONTRIBUTING.md's node-operation, rollout-engine and task examples run as written against the real types."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen2Config

import rl_runtime.nodes  # noqa: F401  (registers the built-in operations the example pipeline binds)
from rl_core.advantages import ADVANTAGE_ESTIMATORS
from rl_core.graph import PIPELINES, get_pipeline
from rl_core.losses import POLICY_LOSSES
from rl_core.schema import ADVANTAGES, RESPONSE_MASK, UID
from rl_engines.rollout import ROLLOUT_ENGINES, HFEngine, RolloutEngineSpec, build_rollout_engine
from rl_runtime.config import ConfigError, RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, ResponseSample, Task
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import NODE_OPERATIONS, NodeContext, StepData, bind_operations

CONTRIBUTING = Path(__file__).resolve().parents[3] / "CONTRIBUTING.md"
_EXAMPLE = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\n```python\n(?P<code>.*?)\n```", re.DOTALL)


def run_example(name: str) -> dict[str, Any]:
    """Execute the python block marked `<!-- example: name -->` in CONTRIBUTING.md; its namespace."""
    examples = {match["name"]: match["code"] for match in _EXAMPLE.finditer(CONTRIBUTING.read_text())}
    assert name in examples, f"CONTRIBUTING.md has no block marked <!-- example: {name} -->; found {sorted(examples)}"
    namespace: dict[str, Any] = {}
    exec(compile(examples[name], f"CONTRIBUTING.md:{name}", "exec"), namespace)
    return namespace


@pytest.fixture
def registries() -> Iterator[None]:
    """Registrations the examples make are removed afterwards, so other tests see the built-in registries."""
    registries = (NODE_OPERATIONS, PIPELINES, ADVANTAGE_ESTIMATORS, POLICY_LOSSES, ROLLOUT_ENGINES)
    saved = tuple(dict(registry) for registry in registries)
    yield
    for registry, before in zip(registries, saved, strict=True):
        registry.clear()
        registry.update(before)


@pytest.mark.usefixtures("registries")
def test_node_operation_example_binds_and_clips() -> None:
    namespace = run_example("node-operation")
    graph = get_pipeline("grpo_clipped")
    bound = bind_operations(graph)
    assert bound["clip"] is namespace["clip_advantages"]
    assert list(bound) == [
        "rollout_actor",
        "function_reward",
        "calculate_advantages",
        "clip",
        "actor_old_log_prob",
        "reference_log_prob",
        "actor_train",
    ]

    batch = {
        UID: torch.tensor([0, 1]),
        ADVANTAGES: torch.tensor([[3.0, -1.0], [-4.0, 0.5]]),
        RESPONSE_MASK: torch.tensor([[1, 1], [1, 0]]),
    }
    resources = _node_resources(extras={"advantage_limit": 3.5})
    ctx = NodeContext(graph["clip"], rank=0, dp=DataParallelInfo(0, 1), step=0, resources=resources)
    out = bound["clip"](ctx, {"calculate_advantages": StepData(batch)})
    assert out.batch[ADVANTAGES].tolist() == [[2.0, -1.0], [-2.0, 0.5]]
    assert out.metrics == {"adv/clipped_tokens": 2.0}
    assert out.batch[UID].tolist() == [0, 1]

    # without a `limit` param the node falls back to the worker's extra, then to 5.0
    unparameterised = dataclasses.replace(graph["clip"], params={})
    ctx = NodeContext(unparameterised, rank=0, dp=DataParallelInfo(0, 1), step=0, resources=resources)
    out = bound["clip"](ctx, {"calculate_advantages": StepData(batch)})
    assert out.batch[ADVANTAGES].tolist() == [[3.0, -1.0], [-3.5, 0.5]]
    assert out.metrics == {"adv/clipped_tokens": 1.0}
    ctx = NodeContext(unparameterised, rank=0, dp=DataParallelInfo(0, 1), step=0, resources=_node_resources({}))
    out = bound["clip"](ctx, {"calculate_advantages": StepData(batch)})
    assert out.batch[ADVANTAGES].tolist() == [[3.0, -1.0], [-4.0, 0.5]]
    assert out.metrics == {"adv/clipped_tokens": 0.0}


def _node_resources(extras: dict[str, object]) -> NodeResources:
    """A worker's resources holding only `extras`: all the example operation reads."""
    return NodeResources(config=None, plan=None, task=None, prompts=None, rollout=None, actor=None, extras=extras)  # type: ignore[arg-type]


def _engine_spec(**engine_kwargs: Any) -> RolloutEngineSpec:
    hf_config = Qwen2Config(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        vocab_size=64, max_position_embeddings=32,
    )  # fmt: skip
    return RolloutEngineSpec(hf_config, dtype="float32", device="cpu", seed=5, engine_kwargs=engine_kwargs)


@pytest.mark.usefixtures("registries")
def test_rollout_engine_example_registers_and_builds() -> None:
    namespace = run_example("rollout-engine")
    assert ROLLOUT_ENGINES["hf_plain"] is namespace["build_hf_plain"]
    engine = build_rollout_engine("hf_plain", _engine_spec(max_batch_size=4))
    try:
        assert isinstance(engine, HFEngine)
        assert (engine.config.fast_decode, engine.config.max_batch_size, engine.config.seed) == (False, 4, 5)
    finally:
        engine.shutdown()
    engine = build_rollout_engine("hf_plain", _engine_spec(fast_decode=True))
    try:
        assert engine.config.fast_decode is True  # rollout.engine_kwargs take precedence
    finally:
        engine.shutdown()


def test_task_example_encodes_and_scores() -> None:
    namespace = run_example("task")
    factory = namespace["EchoLengthTaskFactory"]()
    task = factory()
    assert isinstance(task, Task)

    prompt = task.encode({"ids": [5, 6, 7]}, "train.jsonl:0")
    assert prompt.prompt_ids == (5, 6, 7)
    with pytest.raises(ValueError, match=r"train.jsonl:1: field 'ids' must be a non-empty list"):
        task.encode({"ids": []}, "train.jsonl:1")

    samples = [
        ResponseSample(0, prompt.prompt_ids, (1, 2, 3), "stop", prompt.extras),
        ResponseSample(1, prompt.prompt_ids, (1,), "length", prompt.extras),
    ]
    result = task.score(samples)
    assert result.scores == (1.0, 0.0)
    assert result.metrics == {"task/exact_length_rate": 0.5}
    assert task.decode([1, 2]) == "1 2"


@pytest.mark.usefixtures("registries")
def test_run_config_names_the_examples() -> None:
    for name in ("estimator", "policy-loss", "node-operation", "rollout-engine"):
        run_example(name)
    data = {
        "data": {"train_files": ["train.jsonl"]},
        "actor": {"model": {"path": "/models/policy"}},
        "pipeline": "grpo_clipped",
        "rollout": {"engine": "hf_plain"},
        "algorithm": {
            "adv_estimator": "group_max_baseline",
            "adv_params": {"scale": 2.0},
            "policy_loss": "clipped_reinforce",
            "policy_loss_params": {"max_advantage": 5.0},
        },
    }
    config = config_from_dict(RunConfig, data)
    assert (config.pipeline, config.algorithm.adv_estimator, config.algorithm.policy_loss, config.rollout.engine) == (
        "grpo_clipped",
        "group_max_baseline",
        "clipped_reinforce",
        "hf_plain",
    )
    with pytest.raises(
        ConfigError, match=r"adv_params\.gamma: expected a parameter of advantage estimator 'group_max_baseline'"
    ):
        config_from_dict(RunConfig, data, ["algorithm.adv_params={gamma: 0.9}"])
