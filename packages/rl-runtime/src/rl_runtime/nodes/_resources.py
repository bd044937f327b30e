"""What the built-in node operations work with on one worker: engines, roles, the task, the data shard, settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import attrs
import torch.distributed as dist

from rl_coordinator.loading import ShardedLoader
from rl_core.advantages import BoundEstimator
from rl_core.kl import KLController
from rl_core.workflows import RolloutWorkflow
from rl_engines.judge import GenerativeJudge
from rl_engines.reward_model import RewardScorer
from rl_engines.rollout import InferenceEngine
from rl_engines.sync import SyncReport
from rl_runtime.config import BatchPlan, RunConfig
from rl_runtime.nodes._prompt_table import PromptTable
from rl_runtime.nodes._task import Task
from rl_runtime.roles import ActorRole, CriticRole, ReferenceRole
from rl_runtime.workers import StepDataError

if TYPE_CHECKING:
    from rl_core.envs import VectorEnv, VideoEmbedder
    from rl_runtime.nodes._continuous import GenerationPool
    from rl_runtime.nodes._staleness_buffer import RolloutBuffer


class WeightSubscriber(Protocol):
    """How a rollout slot of a split placement receives the weights the training slots publish."""

    def receive(self) -> SyncReport:
        """Block until the next published version is in this worker's rollout engine, verified; what arrived."""
        ...

    def close(self) -> None:
        """Release groups and threads."""
        ...


def bound_estimator(config: RunConfig) -> BoundEstimator:
    """`config.algorithm`'s advantage estimator bound to its `adv_params`."""
    return BoundEstimator(config.algorithm.adv_estimator, config.algorithm.adv_params)


@attrs.define
class NodeResources:
    """One worker's engines and settings; built once per worker by the trainer's resources factory. Every built-in
    operation takes a `NodeContext[NodeResources]` and reads it as `ctx.resources`.

    Colocated, every worker holds every engine. Under split placement a worker holds only what its sub-graph's
    nodes use: the rollout slots the rollout engine, the prompt loader and its `prompt_table`, and a
    `weight_receiver`; the training slots
    the actor (its engine connected to a sender to the rollout slots), reference and critic. The others are None.
    Where the actor's weights go is its engine's connection (`ActorRole.connect_weight_sync`), made when the worker
    is built: this worker's own rollout engine's `rl_engines.sync.WeightSync` (colocated), or the sender to the
    rollout slots (split placement).

    `policy_version` is the version of the weights the rollout engine holds (on a training slot: the version the
    actor last published); the actor update bumps it after every weight sync, so each sample records the policy
    that produced it.
    """

    config: RunConfig
    plan: BatchPlan
    task: Task
    prompts: ShardedLoader | None
    rollout: InferenceEngine | None
    actor: ActorRole | None
    reference: ReferenceRole | None = None
    critic: CriticRole | None = None
    group: dist.ProcessGroup | None = None
    """The data-parallel group of the training roles; None when the worker runs alone."""
    kl_controller: KLController | None = None
    """The in-reward KL coefficient (`rl_core.kl.FixedKLController` or `AdaptiveKLController`); None unless
    `algorithm.kl.mode=in_reward`."""
    policy_version: int = 0
    weight_receiver: WeightSubscriber | None = None
    """Split placement, rollout slots: where the actor's updates arrive."""
    env: VectorEnv | None = None
    """Embodied pipelines, rollout side: the batched environment the policy acts in (built from `env`)."""
    embedder: VideoEmbedder | None = None
    """Embodied pipelines, rollout side: the video embedder of the SRPO progress reward (`env.embedder`)."""
    workflow: RolloutWorkflow | None = None
    """Rollout side: the `rollout.workflow` built in this worker (`rl_core.workflows.load_workflow`); None runs the
    single-turn path."""
    reward_model: RewardScorer | None = None
    """The run config's `reward_model`, in the workers that run the reward node (colocated: every worker; split
    placement: the rollout slots): loaded there, or with `reward_model.placement: slot` a client of the reward
    model's own slot; None without one."""
    judge: GenerativeJudge | None = None
    """The run config's `judge`, built where the reward model is (its engine: this worker's rollout engine or a
    server); None without one."""
    extras: Mapping[str, object] = attrs.field(factory=dict)
    """What a user's own operations need besides (a reward model, a tool server, ...), by name: built in the worker
    by the trainer's `extras_factory` (`RunResourcesFactory.extras`); an operation reads
    `ctx.resources.extras["name"]` and checks its type. Empty by default; the built-in operations never read it."""
    staleness_buffer: RolloutBuffer | None = None
    """Asynchronous training, rollout side: the groups waiting for a training step (`staleness_buffer` node); made
    at its first step, saved in the rank's checkpoint."""
    generation_pool: GenerationPool | None = None
    """Continuous generation (`algorithm.async_generation=continuous`), rollout side: the requests in flight across
    steps; flushed into `staleness_buffer` at a checkpoint."""
    advantage_estimator: BoundEstimator | None = None
    """`algorithm.adv_estimator` with its `adv_params`, bound once rather than in every step, as the actor role builds
    its objective once: the trainer's resources factory passes it; None binds it at the first
    `require_advantage_estimator`."""
    prompt_table: PromptTable | None = None
    """Rollout side, text prompts: every row of `prompts`' source encoded by the task once, when the worker was built
    (`PromptTable.encode`); the generate operations take each step's prompts from it by the loader's dataset indices.
    None on a worker that does not sample text (training slots, embodied runs)."""

    def require_actor(self, node_id: str) -> ActorRole:
        """The actor role; a StepDataError naming `node_id` when this worker holds none."""
        if self.actor is None:
            raise StepDataError(
                f"node {node_id!r} needs the actor, which this worker does not hold; under split placement the actor "
                "runs on the training slots: give the node the actor's role in the pipeline"
            )
        return self.actor

    def require_advantage_estimator(self) -> BoundEstimator:
        """The `algorithm.adv_estimator` estimator with its `adv_params` (`advantage_estimator`, bound here the first
        time if unset)."""
        if self.advantage_estimator is None:
            self.advantage_estimator = bound_estimator(self.config)
        return self.advantage_estimator

    def require_env(self, node_id: str) -> VectorEnv:
        """The environment; a StepDataError naming `node_id` when this worker holds none."""
        if self.env is None:
            raise StepDataError(
                f"node {node_id!r} acts in an environment, which this worker does not hold; set the run config's env "
                "section, and under split placement keep the node in the rollout part of the pipeline"
            )
        return self.env

    @property
    def distributed(self) -> bool:
        """Whether the training roles span several processes (collectives needed)."""
        return self.group is not None and dist.get_world_size(self.group) > 1
