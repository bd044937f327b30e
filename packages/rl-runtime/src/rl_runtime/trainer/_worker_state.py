"""What each DAG worker builds at start (its data shard and the prompts encoded once, engines, roles) and does between
steps (checkpoints, validation). Runs inside the worker process."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
import torch.distributed as dist

from rl_coordinator.loading import RowSource, ShardedLoader
from rl_core.graph import NodeRole
from rl_core.kl import AdaptiveKLController, FixedKLController, KLController
from rl_core.schema import POLICY_VERSION
from rl_core.workflows import load_workflow
from rl_engines.judge import GenerativeJudge
from rl_engines.reward_model import RewardModelPlacement, RewardModelScorer, RewardScorer
from rl_engines.rollout import InferenceEngine
from rl_engines.sync import WeightPublisher
from rl_runtime.config import BatchPlan, KLMode, RunConfig
from rl_runtime.nodes import NodeResources, PromptTable, Task, TaskFactory
from rl_runtime.nodes._continuous import continuous_generation, flush_into_buffer
from rl_runtime.nodes._resources import WeightSubscriber, bound_estimator
from rl_runtime.nodes._staleness_buffer import RolloutBuffer
from rl_runtime.nodes._train import catch_up_weights, receive_rollout_weights, sync_rollout_weights
from rl_runtime.planning import WorkerAssignment
from rl_runtime.planning._config import ProcessGroupConfig
from rl_runtime.planning._process_groups import init_distributed
from rl_runtime.planning._rendezvous import Exchange
from rl_runtime.roles import ActorRole
from rl_runtime.trainer._data import open_files
from rl_runtime.trainer._embodied import build_env_side, evaluate_episodes
from rl_runtime.trainer._engines import (
    actor_hf_config,
    build_actor,
    build_critic,
    build_reference,
    device_name,
    make_rollout_engine,
    rollout_dtype,
    uses_reference,
)
from rl_runtime.trainer._errors import CheckpointStateError, TrainerError
from rl_runtime.trainer._judge import build_judge
from rl_runtime.trainer._remote_reward_model import RemoteRewardModel
from rl_runtime.trainer._split import ENGINE_ROLES
from rl_runtime.trainer._validation import evaluate_shard
from rl_runtime.trainer._weight_link import SENDER_RANK, WeightReceiver, WeightSender, join_weight_group
from rl_runtime.trainer._weight_transport import publisher_into
from rl_runtime.workers import WorkerResources

logger = logging.getLogger(__name__)

ACTOR_DIR = "actor"
CRITIC_DIR = "critic"
_RANK_STATE = "rank_{rank}.pt"
STALENESS_BUFFER_KEY = "staleness_buffer"
"""A rollout rank's `RolloutBuffer` (asynchronous training) in its rank state: buffered samples and counts."""


def _kl_controller(config: RunConfig) -> KLController | None:
    kl = config.algorithm.kl
    if kl.mode is not KLMode.IN_REWARD:
        return None
    if kl.target is None:
        return FixedKLController(kl.coef)
    return AdaptiveKLController(kl.coef, kl.target, kl.horizon)


ExtrasFactory = Callable[[WorkerAssignment], Mapping[str, object]]
"""Builds, inside a worker process and from its place, what that worker's `NodeResources.extras` holds."""


@attrs.frozen
class SlotEngines:
    """Which engines a worker builds: those its sub-graph's node roles use (all of them when colocated)."""

    rollout: bool
    actor: bool
    reference: bool
    critic: bool

    @classmethod
    def colocated(cls, config: RunConfig) -> SlotEngines:
        """Every engine the run has, on every slot."""
        return cls(rollout=True, actor=True, reference=uses_reference(config), critic=config.critic is not None)

    @classmethod
    def for_roles(cls, roles: Collection[NodeRole], config: RunConfig) -> SlotEngines:
        """The engines of a sub-graph with node `roles`; reference and critic only when the run has them."""
        return cls(
            rollout=bool(ENGINE_ROLES & set(roles)),
            actor=NodeRole.ACTOR in roles,
            reference=NodeRole.REFERENCE in roles and uses_reference(config),
            critic=NodeRole.CRITIC in roles and config.critic is not None,
        )


@attrs.frozen
class RunResourcesFactory:
    """Builds a worker's NodeResources and hooks (a `WorkerResources`) from the run config (pickled to every worker).

    Colocated, every worker builds every engine and the training roles shard over all of them. Under split
    placement (`split`), a worker builds only the engines of its sub-graph (`SlotEngines`): the training slots form
    the torch.distributed world the actor shards over, and publish each update to the rollout slots through a weight
    group (`rl_runtime.trainer` weight link) whose address travels through `weight_exchange`.
    """

    config: RunConfig
    task_factory: TaskFactory
    total_steps: int
    plan: BatchPlan
    """The run's batch plan (its data-parallel sizes are the placement's)."""
    exchange: Exchange | None = None
    """Where the training world's rank 0 publishes the torch.distributed address; None for one training rank."""
    split: bool = False
    weight_exchange: Exchange | None = None
    """Split placement: where the sending training slot publishes the weight group's address."""
    extras: ExtrasFactory | None = None
    """Builds `NodeResources.extras` in the worker (what a user's own operations need); None leaves it empty."""
    reward_models: tuple[Any, ...] = ()
    """`reward_model.placement: slot`: the reward-model slots' Ray actor handles (`RewardSlots.handles`)."""

    def __call__(self, assignment: WorkerAssignment) -> WorkerResources[NodeResources]:
        config, dp = self.config, assignment.dp
        if self.split:
            engines = SlotEngines.for_roles(assignment.subgraph.roles, config)
        else:
            engines = SlotEngines.colocated(config)
        # The prompts first: a row that cannot be encoded stops the run before any engine is built.
        task = self.task_factory()
        loader, prompt_table = self._prompts(engines, task, dp.rank, dp.size)
        torch.manual_seed(config.trainer.seed)
        trains = engines.actor or engines.critic or engines.reference
        # Launched by torchrun, the ranks met before the worker was built, and the launch leaves the group.
        group, owns_group = None, not dist.is_initialized()
        if trains and dp.size > 1:
            if not owns_group:
                if dist.get_world_size() != dp.size:
                    raise TrainerError(
                        f"this process is in a torch.distributed world of {dist.get_world_size()} ranks, but its "
                        f"training sub-graph has {dp.size}; launch one torchrun rank per slot"
                    )
            elif self.exchange is None:
                raise TrainerError(f"{dp.size} data-parallel training ranks need an exchange to meet through; got None")
            else:
                backend = "nccl" if device_name(config) == "cuda" else "gloo"
                init_distributed(dp.rank, dp.size, self.exchange, ProcessGroupConfig(backend=backend))
            group = dist.group.WORLD
        actor = build_actor(config, self.total_steps) if engines.actor else None
        rollout, weight_sync, receiver = self._rollout_side(engines, actor, dp.rank, dp.size)
        if weight_sync is not None:
            if actor is not None:
                actor.connect_weight_sync(weight_sync)  # the actor's engine publishes its own weights through it
            else:
                weight_sync.close()  # no actor here to publish from: `publish_weights` below refuses
        env, embedder = build_env_side(config) if engines.rollout else (None, None)
        resources = NodeResources(
            config=config,
            plan=self.plan,
            task=task,
            prompts=loader,
            prompt_table=prompt_table,
            rollout=rollout,
            actor=actor,
            reference=build_reference(config) if engines.reference else None,
            critic=build_critic(config, self.total_steps) if engines.critic else None,
            group=group,
            kl_controller=_kl_controller(config),
            advantage_estimator=bound_estimator(config),
            weight_receiver=receiver,
            env=env,
            embedder=embedder,
            workflow=load_workflow(config.rollout.workflow, config.rollout.workflow_kwargs)
            if engines.rollout
            else None,
            extras={} if self.extras is None else dict(self.extras(assignment)),
            reward_model=self._reward_model(assignment),
            judge=self._judge(assignment, rollout),
        )
        publish_weights(resources, version=0)
        val_source = None
        if engines.rollout and config.data.val_files:
            val_source = open_files(config.data.val_files, "data.val_files")
        hooks = RunHooks(resources, assignment.rank, dp.rank, dp.size, val_source, owns_group=owns_group)
        return WorkerResources(resources, hooks)

    def _prompts(
        self, engines: SlotEngines, task: Task, dp_rank: int, dp_size: int
    ) -> tuple[ShardedLoader | None, PromptTable | None]:
        """On a rollout worker: its loader of `data.train_files`, and (unless embodied: the env's rollout reads
        (task, trial) rows, not prompts) every row's prompt encoded by `task` once, by dataset index. A row the task
        refuses, or longer than `data.max_prompt_length`, raises here, before any step, naming the row."""
        config = self.config
        if not engines.rollout:
            return None, None
        loader = ShardedLoader(
            open_files(config.data.train_files, "data.train_files"),
            dp_rank=dp_rank,
            dp_size=dp_size,
            batch_size=self.plan.prompts_per_rollout_rank,
            seed=config.data.seed,
            shuffle=config.data.shuffle,
        )
        if config.env is not None:
            return loader, None
        return loader, PromptTable.encode(task, loader.source, config.data.max_prompt_length)

    def _scores_rewards(self, assignment: WorkerAssignment) -> bool:
        """Whether this worker runs the reward node (colocated: every worker; split: the rollout side)."""
        return not self.split or bool({NodeRole.REWARD, *ENGINE_ROLES} & set(assignment.subgraph.roles))

    def _reward_model(self, assignment: WorkerAssignment) -> RewardScorer | None:
        """The reward model, in every worker that runs the reward node: loaded here, or with `placement: slot` a
        client of reward-model slot `dp rank % reward_model.slots`."""
        section = self.config.reward_model
        if section is None or not self._scores_rewards(assignment):
            return None
        if section.placement is RewardModelPlacement.SLOT:
            if not self.reward_models:
                raise TrainerError(
                    "reward_model.placement=slot but no reward-model slot was started for this worker; the Ray "
                    "launcher starts them (trainer.launcher=ray), or set reward_model.placement=colocate"
                )
            handle = self.reward_models[assignment.dp.rank % len(self.reward_models)]
            return RemoteRewardModel(handle, section, self.config.trainer.step_timeout_s)
        return RewardModelScorer.from_config(section, device_name(self.config))

    def _judge(self, assignment: WorkerAssignment, rollout: InferenceEngine | None) -> GenerativeJudge | None:
        """The generative judge, in every worker that runs the reward node, on this worker's rollout engine or a
        server."""
        section = self.config.judge
        if section is None or not self._scores_rewards(assignment):
            return None
        return build_judge(section, self.config.actor.model, rollout)

    def _rollout_side(
        self, engines: SlotEngines, actor: ActorRole | None, dp_rank: int, dp_size: int
    ) -> tuple[InferenceEngine | None, WeightPublisher | None, WeightSubscriber | None]:
        """(rollout engine, weight publisher, weight receiver) of this worker; see the class doc. The weights reach
        the engine over the transport `rollout.weight_sync` chose."""
        config = self.config
        if not self.split:
            assert actor is not None, "a colocated worker builds every engine"
            rollout = make_rollout_engine(config, actor.hf_config, dp_rank, dp_size)
            return rollout, publisher_into(config, rollout, dp_rank), None
        assert self.weight_exchange is not None, "split placement needs a weight exchange"
        rollout_ranks = self.plan.rollout_dp
        timeout_s = config.trainer.step_timeout_s
        dtype = rollout_dtype(config)
        if engines.rollout:
            rollout = make_rollout_engine(config, actor_hf_config(config), dp_rank, rollout_ranks)
            group = join_weight_group(self.weight_exchange, 1 + dp_rank, rollout_ranks, timeout_s)
            sync = publisher_into(config, rollout, dp_rank, keep_requests=continuous_generation(config))
            return rollout, None, WeightReceiver(group, sync)
        group = join_weight_group(self.weight_exchange, SENDER_RANK, rollout_ranks, timeout_s) if dp_rank == 0 else None
        return None, WeightSender(group, dtype), None


def publish_weights(res: NodeResources, version: int) -> None:
    """Bring the rollout engines to the actor's weights as `version`: sync (colocated or training slot) or receive
    (a split placement's rollout slot)."""
    if res.weight_receiver is not None:
        receive_rollout_weights(res, version)
    else:
        sync_rollout_weights(res, version)


class RunHooks:
    """Checkpoints, validation and clean-up of one worker's NodeResources (rl_runtime.workers.WorkerHooks)."""

    def __init__(
        self,
        resources: NodeResources,
        rank: int,
        dp_rank: int,
        dp_size: int,
        val_source: RowSource | None,
        *,
        owns_group: bool = True,
    ) -> None:
        self.resources = resources
        self.rank, self.dp_rank, self.dp_size = rank, dp_rank, dp_size
        self.val_source = val_source
        self.owns_group = owns_group
        """Whether `close` leaves torch.distributed: the worker joined it (under torchrun, the launch did)."""

    def save_checkpoint(self, path: str) -> None:
        """Engines (DCP, every rank) plus this rank's loader position, policy version, KL and RNG states, and on a
        rollout rank of asynchronous training its staleness buffer."""
        res, folder = self.resources, Path(path)
        flush_into_buffer(res)  # continuous generation: nothing stays in flight across a checkpoint
        if res.actor is not None:
            res.actor.save_checkpoint(folder / ACTOR_DIR)
        if res.critic is not None:
            res.critic.save_checkpoint(folder / CRITIC_DIR)
        state = {
            "loader": None if res.prompts is None else res.prompts.state_dict(),
            POLICY_VERSION: res.policy_version,
            "kl_controller": None if res.kl_controller is None else res.kl_controller.state_dict(),
            STALENESS_BUFFER_KEY: None if res.staleness_buffer is None else res.staleness_buffer.state_dict(),
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
                f"{state_path} is missing: the state of worker rank {self.rank} was deleted, or the checkpoint was "
                "written by a run with fewer slots; restore the file or resume with the same placement.slots"
            )
        if res.actor is not None:
            res.actor.load_checkpoint(folder / ACTOR_DIR)
        if res.critic is not None:
            res.critic.load_checkpoint(folder / CRITIC_DIR)
        try:
            state = torch.load(state_path, weights_only=False)
        except Exception as error:  # torch raises several kinds for a damaged file; name the file whichever
            raise CheckpointStateError(f"{state_path} is unreadable ({error!r}); the checkpoint is damaged") from None
        if res.prompts is not None:
            res.prompts.load_state_dict(state["loader"])
        if res.kl_controller is not None and state["kl_controller"] is not None:
            res.kl_controller.load_state_dict(state["kl_controller"])
        buffered = state.get(STALENESS_BUFFER_KEY)  # absent from checkpoints written before the buffer existed
        if buffered is not None:
            res.staleness_buffer = RolloutBuffer.from_state(buffered, res.config.algorithm.max_staleness)
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        publish_weights(res, version=state[POLICY_VERSION])
        logger.info("rank %d resumed from %s at policy version %d", self.rank, folder, res.policy_version)

    def catch_up_weights(self, version: int) -> dict[str, float]:
        """Rollout slot of an asynchronous split run: receive weight versions until the engine holds `version`.
        Metrics: the last version's, and the wait as `timing_s/catch_up_weights`."""
        # Only Ray runs split placement; the pipelined driver's module imports Ray, which a torchrun rank must not.
        from rl_runtime.workers._driver_async import CATCH_UP_TIMING

        start = time.perf_counter()
        metrics = catch_up_weights(self.resources, version)
        metrics[CATCH_UP_TIMING] = time.perf_counter() - start
        return metrics

    def evaluate(self, step: int) -> dict[str, float]:
        """This worker's validation sums (empty without held-out files, and on a split placement's training slots)."""
        if self.val_source is None:
            return {}
        if self.resources.env is not None:
            return evaluate_episodes(self.resources, self.val_source, self.dp_rank, self.dp_size)
        return evaluate_shard(self.resources, self.val_source, self.dp_rank, self.dp_size)

    def close(self) -> None:
        """Shut the rollout engine and the weight sync down and leave torch.distributed if the worker joined it."""
        res = self.resources
        if res.actor is not None:
            res.actor.close_weight_sync()
        if res.weight_receiver is not None:
            res.weight_receiver.close()
        if res.rollout is not None and hasattr(res.rollout, "shutdown"):  # a VLA policy holds no server to stop
            res.rollout.shutdown()
        if res.env is not None:
            res.env.close()
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
