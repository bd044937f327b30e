"""The built-in pipelines (GRPO, PPO, DAPO, ReMax) in a registry a user extends with one function.

    @register_pipeline("my_algo")
    def my_algo() -> TaskGraph:
        return Pipeline("my_algo").add_node(...).build()

Node order and roles follow siiRL's built-in pipeline definitions. Operation names are the
`BUILTIN_OPERATIONS` a runtime binds to executors; no node imports anything. Only a pipeline whose every
operation the runtime binds is registered, so every registered name runs. `embodied_srpo` rolls a VLA out in
an environment (`rl_core.envs`) with its own rollout, sampling and reward operations.
"""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Callable

from rl_core._registry import lookup, registrar
from rl_core.graph._node import NodeRole
from rl_core.graph._pipeline import Pipeline
from rl_core.graph._task_graph import TaskGraph

PipelineFactory = Callable[[], TaskGraph]

PIPELINES: dict[str, PipelineFactory] = {}
"""Pipeline name -> function returning a fresh TaskGraph."""

register_pipeline = registrar(PIPELINES, "pipeline")

OP_GENERATE = "generate"
OP_COMPUTE_REWARD = "compute_reward"
OP_COMPUTE_VALUE = "compute_value"
OP_COMPUTE_ADVANTAGE = "compute_advantage"
OP_COMPUTE_GREEDY_BASELINE = "compute_greedy_baseline"
OP_DYNAMIC_SAMPLING = "dynamic_sampling"
OP_EMBODIED_ROLLOUT = "embodied_rollout"
OP_EMBODIED_SAMPLING = "embodied_sampling"
OP_EMBODIED_REWARD = "embodied_reward"
OP_COMPUTE_OLD_LOG_PROB = "compute_old_log_prob"
OP_COMPUTE_REF_LOG_PROB = "compute_ref_log_prob"
OP_TRAIN_ACTOR = "train_actor"
OP_TRAIN_CRITIC = "train_critic"

BUILTIN_OPERATIONS = frozenset(
    {
        OP_GENERATE,
        OP_COMPUTE_REWARD,
        OP_COMPUTE_VALUE,
        OP_COMPUTE_ADVANTAGE,
        OP_COMPUTE_GREEDY_BASELINE,
        OP_DYNAMIC_SAMPLING,
        OP_EMBODIED_ROLLOUT,
        OP_EMBODIED_SAMPLING,
        OP_EMBODIED_REWARD,
        OP_COMPUTE_OLD_LOG_PROB,
        OP_COMPUTE_REF_LOG_PROB,
        OP_TRAIN_ACTOR,
        OP_TRAIN_CRITIC,
    }
)
"""Every operation name the registered built-in pipelines use; a runtime must bind each one."""

EMBODIED_OPERATIONS = frozenset({OP_EMBODIED_ROLLOUT, OP_EMBODIED_SAMPLING, OP_EMBODIED_REWARD})
"""The operations that act in an environment or read its episodes; a pipeline using one needs an environment."""


def get_pipeline(name: str) -> TaskGraph:
    """Build the registered pipeline `name`; raises `UnknownNameError` listing the registered names."""
    factory = lookup(PIPELINES, name, "pipeline")
    graph = factory()
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"pipeline {name!r} returned a {type(graph).__name__}; a pipeline function returns a TaskGraph")
    return graph


def _rollout(pipeline_id: str, description: str) -> Pipeline:
    return Pipeline(pipeline_id, description).add_node("rollout_actor", OP_GENERATE, role=NodeRole.ROLLOUT)


def _policy_update(pipeline: Pipeline, after: str) -> Pipeline:
    """The tail every built-in shares: advantages, old and reference log-probs, then the actor update."""
    return (
        pipeline.add_node(
            "calculate_advantages",
            OP_COMPUTE_ADVANTAGE,
            role=NodeRole.ADVANTAGE,
            dependencies=[after],
        )
        .add_node(
            "actor_old_log_prob",
            OP_COMPUTE_OLD_LOG_PROB,
            role=NodeRole.ACTOR,
            dependencies=["calculate_advantages"],
        )
        .add_node(
            "reference_log_prob",
            OP_COMPUTE_REF_LOG_PROB,
            role=NodeRole.REFERENCE,
            dependencies=["actor_old_log_prob"],
        )
        .add_node(
            "actor_train",
            OP_TRAIN_ACTOR,
            role=NodeRole.ACTOR,
            dependencies=["reference_log_prob"],
        )
    )


def _rewarded_update(
    pipeline_id: str, description: str, before_advantages: tuple[str, str, NodeRole] | None = None
) -> Pipeline:
    """The chain the language-model built-ins share: rollout, function reward, optionally one node between the
    reward and the advantages (`before_advantages`: its id, operation and role), then `_policy_update`."""
    pipeline = _rollout(pipeline_id, description).add_node(
        "function_reward",
        OP_COMPUTE_REWARD,
        role=NodeRole.REWARD,
        dependencies=["rollout_actor"],
    )
    last = "function_reward"
    if before_advantages is not None:
        node_id, operation, role = before_advantages
        pipeline.add_node(node_id, operation, role=role, dependencies=[last])
        last = node_id
    return _policy_update(pipeline, after=last)


@register_pipeline("grpo")
def grpo_pipeline() -> TaskGraph:
    """GRPO: rollout, reward, group-relative advantages, old and reference log-probs, actor update."""
    return _rewarded_update("grpo", "GRPO: group-relative advantages, no critic").build()


@register_pipeline("ppo")
def ppo_pipeline() -> TaskGraph:
    """PPO: GRPO's flow plus a critic that estimates values before the advantages and trains last."""
    return (
        _rewarded_update(
            "ppo",
            "PPO: critic values and GAE advantages",
            before_advantages=("compute_value", OP_COMPUTE_VALUE, NodeRole.CRITIC),
        )
        .add_node(
            "critic_train",
            OP_TRAIN_CRITIC,
            role=NodeRole.CRITIC,
            dependencies=["actor_train"],
        )
        .build()
    )


@register_pipeline("dapo")
def dapo_pipeline() -> TaskGraph:
    """DAPO: GRPO with dynamic sampling, which drops groups whose rewards do not vary, before advantages."""
    return _rewarded_update(
        "dapo",
        "DAPO: GRPO with dynamic sampling of informative groups",
        before_advantages=("dynamic_sampling", OP_DYNAMIC_SAMPLING, NodeRole.DYNAMIC_SAMPLING),
    ).build()


@register_pipeline("remax")
def remax_pipeline() -> TaskGraph:
    """ReMax: GRPO's flow plus a greedy response to each prompt, whose score is the baseline of its samples."""
    return _rewarded_update(
        "remax",
        "ReMax: the greedy response's reward as each prompt's baseline",
        before_advantages=("greedy_baseline", OP_COMPUTE_GREEDY_BASELINE, NodeRole.ROLLOUT),
    ).build()


@register_pipeline("embodied_srpo")
def embodied_srpo_pipeline() -> TaskGraph:
    """Embodied SRPO: environment rollout, accuracy-band filtering before the reward, the world-model progress
    reward (or the binary success, the GRPO baseline), then GRPO's advantages and update on the action tokens.

    Its pure pieces are `rl_core.shaping.accuracy_band_mask` and `rl_core.shaping.srpo_progress_reward`.
    """
    pipeline = (
        Pipeline("embodied_srpo", "Embodied SRPO: filter rollouts, then world-model reward and GRPO update")
        .add_node("rollout_actor", OP_EMBODIED_ROLLOUT, role=NodeRole.ROLLOUT)
        .add_node(
            "dynamic_sampling",
            OP_EMBODIED_SAMPLING,
            role=NodeRole.DYNAMIC_SAMPLING,
            dependencies=["rollout_actor"],
        )
        .add_node(
            "compute_reward",
            OP_EMBODIED_REWARD,
            role=NodeRole.REWARD,
            dependencies=["dynamic_sampling"],
        )
    )
    return _policy_update(pipeline, after="compute_reward").build()
