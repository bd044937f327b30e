"""What a worker's resources factory builds: the object its operations see as `ctx.resources`, and its hooks.

    @attrs.frozen
    class MyResources:
        reward_fn: RewardFn

    def build(assignment: WorkerAssignment) -> WorkerResources[MyResources]:
        return WorkerResources(MyResources(load_reward_fn()), hooks=None)

    @register_operation("compute_reward")
    def compute_reward(ctx: NodeContext[MyResources], inputs: Mapping[str, StepData]) -> StepData:
        reward_fn = ctx.resources.reward_fn
        ...

The built-in operations read `rl_runtime.nodes.NodeResources`, which the trainer's factory builds (with an
`extras` mapping for what a user's own operations need besides).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs

from rl_runtime.planning import WorkerAssignment
from rl_runtime.workers._errors import WorkerStartError

ResourcesT = TypeVar("ResourcesT", covariant=True)
"""The type of what a worker's operations see as `ctx.resources`."""


@runtime_checkable
class WorkerHooks(Protocol):
    """What a worker does between steps with the resources it built: checkpoints, evaluation, clean-up.

    Every method is called on every worker at once (they may be collectives).
    """

    def save_checkpoint(self, path: str) -> None:
        """Write this worker's part of a checkpoint under folder `path`."""
        ...

    def load_checkpoint(self, path: str) -> None:
        """Restore this worker's part of the checkpoint in folder `path`."""
        ...

    def evaluate(self, step: int) -> dict[str, float]:
        """This worker's share of a validation pass after `step` steps, as metrics the driver reduces."""
        ...

    def close(self) -> None:
        """Release engines and process groups."""
        ...


@attrs.frozen
class WorkerResources(Generic[ResourcesT]):
    """One worker's resources, built once in the worker process by its resources factory."""

    nodes: ResourcesT
    """What every operation of the worker sees as `ctx.resources` (engines, reward functions, loaders, settings)."""
    hooks: WorkerHooks | None = attrs.field(default=None, validator=lambda _, __, value: _check_hooks(value))
    """Checkpoints, evaluation and clean-up between steps; None for a worker that does none of them."""


def _check_hooks(hooks: object) -> None:
    if hooks is not None and not isinstance(hooks, WorkerHooks):
        raise WorkerStartError(
            f"WorkerResources.hooks must implement rl_runtime.workers.WorkerHooks (save_checkpoint, load_checkpoint, "
            f"evaluate, close) or be None; got a {type(hooks).__name__}"
        )


def unpack_resources(built: object, rank: int) -> WorkerResources[Any]:
    """`built`, what a resources factory returned on worker `rank`, checked to be a WorkerResources."""
    if not isinstance(built, WorkerResources):
        raise WorkerStartError(
            f"the resources factory of worker rank {rank} returned a {type(built).__name__}; return a "
            "rl_runtime.workers.WorkerResources(nodes=<what the operations see as ctx.resources>, hooks=...)"
        )
    return built


ResourcesFactory = Callable[[WorkerAssignment], WorkerResources[Any]]
"""Builds a worker's resources (engines, reward functions, loaders) inside the worker process, from its place."""
