"""CONTRIBUTING.md's node-operation and task examples run as written against the real runtime types."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import rl_runtime.nodes  # noqa: F401  (registers the built-in operations the example pipeline binds)
from rl_core.graph import PIPELINES, get_pipeline
from rl_core.schema import ADVANTAGES, RESPONSE_MASK, UID
from rl_runtime.nodes import ResponseSample, Task
from rl_runtime.planning import DataParallelInfo
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
    saved = dict(NODE_OPERATIONS), dict(PIPELINES)
    yield
    for registry, before in zip((NODE_OPERATIONS, PIPELINES), saved, strict=True):
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
    ctx = NodeContext(graph["clip"], rank=0, dp=DataParallelInfo(0, 1), step=0, resources={})
    out = bound["clip"](ctx, {"calculate_advantages": StepData(batch)})
    assert out.batch[ADVANTAGES].tolist() == [[2.0, -1.0], [-2.0, 0.5]]
    assert out.metrics == {"adv/clipped_tokens": 2.0}
    assert out.batch[UID].tolist() == [0, 1]


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
