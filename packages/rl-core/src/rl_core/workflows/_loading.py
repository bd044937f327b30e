"""Resolving `rollout.workflow`: a registered name, `pkg.mod:Name` or `path/to/file.py:Name`, built with kwargs.

The same three forms as reward functions (`rl_recipes.rewards.load_reward_function`); the runtime calls
`load_workflow` when it checks the config (so a bad spec fails at load time) and again inside each rollout
worker (so the workflow object never has to pickle).
"""
# pyright: reportUnnecessaryIsInstance=false
# (the checks guard values from user code and YAML, whatever their annotations say)

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from rl_core._errors import RLCoreError, UnknownNameError
from rl_core._spec import import_from_spec
from rl_core.workflows._protocols import RolloutWorkflow
from rl_core.workflows._registry import WorkflowFactory, get_workflow

_SPEC_FORMS = "a registered name, a dotted path 'pkg.mod:Name', or a file path 'path/to/file.py:Name'"


class WorkflowLoadError(RLCoreError, ValueError):
    """A workflow spec does not resolve to a usable workflow; the message names the spec and the fix."""


def resolve_workflow(spec: str) -> WorkflowFactory:
    """The class or factory `spec` names (see the module doc); `WorkflowLoadError` when it names nothing usable."""
    if not isinstance(spec, str) or not spec:
        raise WorkflowLoadError(f"workflow spec must be a non-empty string, got {spec!r}; give {_SPEC_FORMS}")
    if ":" not in spec:
        try:
            return get_workflow(spec)
        except UnknownNameError as exc:
            raise WorkflowLoadError(f"workflow spec {spec!r}: {exc}; or give {_SPEC_FORMS}") from None
    factory: WorkflowFactory = import_from_spec(
        spec, what="workflow", forms=_SPEC_FORMS, error=WorkflowLoadError, placeholder="Name"
    )
    if not callable(factory):
        raise WorkflowLoadError(
            f"workflow spec {spec!r} names a {type(factory).__name__}; point it at a class or function that builds "
            "a RolloutWorkflow"
        )
    return factory


def load_workflow(spec: str, kwargs: Mapping[str, Any] | None = None) -> RolloutWorkflow:
    """Build the workflow `spec` names with `kwargs` as keywords; every problem raises `WorkflowLoadError`."""
    factory = resolve_workflow(spec)
    try:
        workflow = factory(**dict(kwargs or {}))
    except TypeError as exc:
        raise WorkflowLoadError(
            f"workflow spec {spec!r}: building it with rollout.workflow_kwargs={dict(kwargs or {})!r} failed: {exc}; "
            "give the keywords its constructor takes"
        ) from exc
    arun = getattr(workflow, "arun_episode", None)
    if arun is None or not inspect.iscoroutinefunction(arun):
        raise WorkflowLoadError(
            f"workflow spec {spec!r} built a {type(workflow).__name__} without an 'async def arun_episode(engine, "
            "data)'; a RolloutWorkflow needs that coroutine method"
        )
    return workflow
