"""What the built-in node operations work with on one worker: engines, roles, the task, the data shard, settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch.distributed as dist

from rl_coordinator.loading import ShardedLoader
from rl_engines.rollout import InferenceEngine
from rl_engines.sync import WeightSync
from rl_engines.training import ActorRole, CriticRole, ReferenceRole
from rl_runtime.config import BatchPlan, RunConfig
from rl_runtime.nodes._task import Task
from rl_runtime.workers import NodeContext, StepDataError

RUN_RESOURCES_KEY = "run"
"""The key of the NodeResources in a worker's resources mapping."""


@attrs.define
class NodeResources:
    """One worker's engines and settings; built once per worker by the trainer's resources factory.

    `policy_version` is the version of the weights the rollout engine holds; the actor update bumps it after
    every weight sync, so each sample records the policy that produced it.
    """

    config: RunConfig
    plan: BatchPlan
    task: Task
    prompts: ShardedLoader
    rollout: InferenceEngine
    actor: ActorRole
    weight_sync: WeightSync
    reference: ReferenceRole | None = None
    critic: CriticRole | None = None
    group: dist.ProcessGroup | None = None
    """The data-parallel group of the training roles; None when the worker runs alone."""
    kl_controller: Any = None
    """The in-reward KL controller (rl_core.kl Fixed/AdaptiveKLController), or None."""
    policy_version: int = 0

    @property
    def distributed(self) -> bool:
        """Whether the training roles span several processes (collectives needed)."""
        return self.group is not None and dist.get_world_size(self.group) > 1


def resources_of(ctx: NodeContext) -> NodeResources:
    """The NodeResources of the worker running `ctx`; a clear error when the worker was built without them."""
    resources: Mapping[str, Any] = ctx.resources
    found = resources.get(RUN_RESOURCES_KEY)
    if not isinstance(found, NodeResources):
        raise StepDataError(
            f"operation {ctx.node.operation!r} of node {ctx.node.id!r} needs NodeResources under "
            f"resources[{RUN_RESOURCES_KEY!r}]; build the workers with rl_runtime.trainer's resources factory"
        )
    return found
