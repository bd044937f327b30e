"""Workflows by name: `register_workflow("name")` on a class or factory that builds a `RolloutWorkflow`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rl_core._registry import lookup, registrar
from rl_core.workflows._protocols import RolloutWorkflow

WorkflowFactory = Callable[..., RolloutWorkflow]
"""Builds a workflow from the run's `rollout.workflow_kwargs` as keywords (a class works)."""

WORKFLOWS: dict[str, WorkflowFactory] = {}
"""Rollout workflow factories by name."""

register_workflow: Callable[[str], Callable[[Any], Any]] = registrar(WORKFLOWS, "rollout workflow")


def get_workflow(name: str) -> WorkflowFactory:
    """The factory registered as `name`; `UnknownNameError` lists the registered names."""
    return lookup(WORKFLOWS, name, "rollout workflow")
