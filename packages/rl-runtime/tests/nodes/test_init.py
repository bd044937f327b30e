"""The public names of rl_runtime.nodes are pinned, and importing it registers every built-in operation."""

from __future__ import annotations

import pytest

import rl_runtime.nodes as nodes
from rl_core.graph import BUILTIN_OPERATIONS, PIPELINES, get_pipeline
from rl_runtime.workers import NODE_OPERATIONS


def test_public_api_is_pinned() -> None:
    assert sorted(nodes.__all__) == sorted(
        [
            "ActionPolicy", "Episode", "InstructionEncoder", "NodeResources", "PromptItem", "PromptTable",
            "ResponseSample", "ScoreResult", "Task", "TaskFactory", "run_episodes", "single_input", "with_fields",
        ]
    )  # fmt: skip


def test_every_builtin_pipeline_operation_is_registered() -> None:
    assert set(BUILTIN_OPERATIONS) <= set(NODE_OPERATIONS)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_registered_pipeline_has_all_its_operations_bound(name: str) -> None:
    graph = get_pipeline(name)
    unbound = {node.operation for node in graph.nodes.values()} - set(NODE_OPERATIONS)
    assert unbound == set(), f"pipeline {name!r} is registered but no operation is bound for {sorted(unbound)}"
