"""What each DAG worker builds at start (engines, roles, its data shard) and does between steps (checkpoints,
validation). Runs inside the worker process."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed as dist

from rl_coordinator.loading import RowSource, ShardedLoader
from rl_core.kl import AdaptiveKLController, FixedKLController
from rl_runtime.config import BatchPlan, KLMode, RunConfig
from rl_runtime.nodes import RUN_RESOURCES_KEY, NodeResources, TaskFactory, sync_rollout_weights
from rl_runtime.planning import Exchange, ProcessGroupConfig, WorkerAssignment, init_distributed
from rl_runtime.trainer._data import open_files
from rl_runtime.trainer._engines import build_actor, build_critic, build_reference, build_rollout, device_name
from rl_runtime.trainer._errors import CheckpointStateError
from rl_runtime.trainer._validation import evaluate_shard
from rl_runtime.workers import HOOKS_KEY

logger = logging.getLogger(__name__)

ACTOR_DIR = "actor"
CRITIC_DIR = "critic"
_RANK_STATE = "rank_{rank}.pt"


def _kl_controller(config: RunConfig) -> Any:
    kl = config.algorithm.kl
    if kl.mode is not KLMode.IN_REWARD:
        return None
    if kl.target is None:
        return FixedKLController(kl.coef)
    return AdaptiveKLController(kl.coef, kl.target, kl.horizon)


@attrs.frozen
class RunResourcesFactory:
    """Builds a worker's NodeResources and hooks from the run config (pickled to every worker)."""

    config: RunConfig
    task_factory: TaskFactory
    total_steps: int
    world_size: int
    exchange: Exchange | None = None
    """Where rank 0 publishes the torch.distributed address; None for a single worker."""

    def __call__(self, assignment: WorkerAssignment) -> Mapping[str, Any]:
        config = self.config
        torch.manual_seed(config.trainer.seed)
        group = None
        if self.world_size > 1:
            backend = "nccl" if device_name(config) == "cuda" else "gloo"
            init_distributed(assignment.rank, self.world_size, self.exchange, ProcessGroupConfig(backend=backend))
            group = dist.group.WORLD
        dp = assignment.dp
        plan = BatchPlan.from_config(config, rollout_dp=dp.size, train_dp=dp.size)
        actor = build_actor(config, self.total_steps)
        rollout, weight_sync = build_rollout(config, actor)
        loader = ShardedLoader(
            open_files(config.data.train_files, "data.train_files"),
            dp_rank=dp.rank,
            dp_size=dp.size,
            batch_size=plan.prompts_per_rollout_rank,
            seed=config.data.seed,
            shuffle=config.data.shuffle,
        )
        resources = NodeResources(
            config=config,
            plan=plan,
            task=self.task_factory(),
            prompts=loader,
            rollout=rollout,
            actor=actor,
            weight_sync=weight_sync,
            reference=build_reference(config),
            critic=build_critic(config, self.total_steps),
            group=group,
            kl_controller=_kl_controller(config),
        )
        sync_rollout_weights(resources, version=0)
        val_source = open_files(config.data.val_files, "data.val_files") if config.data.val_files else None
        hooks = RunHooks(resources, assignment.rank, dp.rank, dp.size, val_source)
        return {RUN_RESOURCES_KEY: resources, HOOKS_KEY: hooks}


class RunHooks:
    """Checkpoints, validation and clean-up of one worker's NodeResources (rl_runtime.workers.WorkerHooks)."""

    def __init__(
        self, resources: NodeResources, rank: int, dp_rank: int, dp_size: int, val_source: RowSource | None
    ) -> None:
        self.resources = resources
        self.rank, self.dp_rank, self.dp_size = rank, dp_rank, dp_size
        self.val_source = val_source

    def save_checkpoint(self, path: str) -> None:
        """Engines (DCP, every rank) plus this rank's loader position, policy version, KL and RNG states."""
        res, folder = self.resources, Path(path)
        res.actor.engine.save_checkpoint(folder / ACTOR_DIR)
        if res.critic is not None:
            res.critic.engine.save_checkpoint(folder / CRITIC_DIR)
        state = {
            "loader": res.prompts.state_dict(),
            "policy_version": res.policy_version,
            "kl_controller": None if res.kl_controller is None else res.kl_controller.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "python_rng": random.getstate(),
        }
        target = folder / _RANK_STATE.format(rank=self.rank)
        temporary = target.with_suffix(".tmp")
        torch.save(state, temporary)
        os.replace(temporary, target)

    def load_checkpoint(self, path: str) -> None:
        """Restore what `save_checkpoint` wrote, then give the rollout engine the restored weights."""
        res, folder = self.resources, Path(path)
        state_path = folder / _RANK_STATE.format(rank=self.rank)
        if not state_path.is_file():
            raise CheckpointStateError(
                f"{folder} has no state for worker rank {self.rank} ({state_path.name}); it was written by a run with "
                "fewer slots: resume with the same placement.slots"
            )
        res.actor.engine.load_checkpoint(folder / ACTOR_DIR)
        if res.critic is not None:
            res.critic.engine.load_checkpoint(folder / CRITIC_DIR)
        state = torch.load(state_path, weights_only=False)
        res.prompts.load_state_dict(state["loader"])
        if res.kl_controller is not None and state["kl_controller"] is not None:
            res.kl_controller.load_state_dict(state["kl_controller"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        sync_rollout_weights(res, version=state["policy_version"])
        logger.info("rank %d resumed from %s at policy version %d", self.rank, folder, res.policy_version)

    def evaluate(self, step: int) -> dict[str, float]:
        """This worker's validation sums (empty without held-out files)."""
        if self.val_source is None:
            return {}
        return evaluate_shard(self.resources, self.val_source, self.dp_rank, self.dp_size)

    def close(self) -> None:
        """Shut the rollout engine and the sync down and leave torch.distributed."""
        self.resources.weight_sync.close()
        self.resources.rollout.shutdown()
        if dist.is_initialized():
            dist.destroy_process_group()
