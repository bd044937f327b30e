"""The built-in pipelines (GRPO, PPO, DAPO, ReMax) in a registry a user extends with one function.

    @register_pipeline("my_algo")
    def my_algo() -> TaskGraph:
        return Pipeline("my_algo").add_node(...).build()

Node order and roles follow siiRL's built-in pipeline definitions. Operation names are the
`BUILTIN_OPERATIONS` a runtime binds to executors; no node imports anything. Only a pipeline whose every
operation the runtime binds is registered, so every registered name runs. `embodied_srpo` rolls a VLA out in
an environment (`rl_core.envs`) with its own rollout, sampling and reward operations.

Each built-in also has a variant for a run that puts the KL to the reference in the reward
(`algorithm.kl.mode=in_reward`, verl's `use_kl_in_reward`), in `KL_IN_REWARD_PIPELINES` under the same name: the same
nodes with the old and reference log-probs computed before the advantages, verl's order, because the penalty
`rewards - beta * KL(old log-probs, reference log-probs)` must be in the rewards the advantage estimator reads.
`get_pipeline(name, kl_in_reward=True)` picks it. It is a variant rather than the order of every run because the order
of every other run is load-bearing: the `rebalance` node (`batch.balance_across_ranks`) follows the advantages, so
the log-prob forwards after it run on the balanced shards; moving them first for every run would unbalance them.
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

KL_IN_REWARD_PIPELINES: dict[str, PipelineFactory] = {}
"""Pipeline name -> function returning its variant for `algorithm.kl.mode=in_reward`: the reference log-probs (and
the old ones) before the advantages. A pipeline without one runs as registered under every KL mode."""

register_kl_in_reward_pipeline = registrar(KL_IN_REWARD_PIPELINES, "kl_in_reward pipeline variant")

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


def get_pipeline(name: str, *, kl_in_reward: bool = False) -> TaskGraph:
    """Build the registered pipeline `name`, or with `kl_in_reward` its `KL_IN_REWARD_PIPELINES` variant where it has
    one; raises `UnknownNameError` listing the registered names."""
    factory = lookup(PIPELINES, name, "pipeline")
    if kl_in_reward:
        factory = KL_IN_REWARD_PIPELINES.get(name, factory)
    graph = factory()
    if not isinstance(graph, TaskGraph):
        raise TypeError(f"pipeline {name!r} returned a {type(graph).__name__}; a pipeline function returns a TaskGraph")
    return graph


_KL_IN_REWARD_NOTE = " (kl.mode=in_reward: old and reference log-probs before the advantages)"
"""Appended to a built-in's description in its `KL_IN_REWARD_PIPELINES` variant."""


def _rollout(pipeline_id: str, description: str) -> Pipeline:
    return Pipeline(pipeline_id, description).add_node("rollout_actor", OP_GENERATE, role=NodeRole.ROLLOUT)


_POLICY_FORWARDS = (
    ("actor_old_log_prob", OP_COMPUTE_OLD_LOG_PROB, NodeRole.ACTOR),
    ("reference_log_prob", OP_COMPUTE_REF_LOG_PROB, NodeRole.REFERENCE),
)
_ADVANTAGES = ("calculate_advantages", OP_COMPUTE_ADVANTAGE, NodeRole.ADVANTAGE)


def _policy_update(pipeline: Pipeline, after: str, *, log_probs_first: bool = False) -> Pipeline:
    """The tail every built-in shares: advantages, old and reference log-probs, then the actor update; with
    `log_probs_first` (the `kl.mode=in_reward` variants) the old and reference log-probs, then the advantages."""
    chain = [*_POLICY_FORWARDS, _ADVANTAGES] if log_probs_first else [_ADVANTAGES, *_POLICY_FORWARDS]
    for node_id, operation, role in [*chain, ("actor_train", OP_TRAIN_ACTOR, NodeRole.ACTOR)]:
        pipeline.add_node(node_id, operation, role=role, dependencies=[after])
        after = node_id
    return pipeline


def _rewarded_update(
    pipeline_id: str,
    description: str,
    before_advantages: tuple[str, str, NodeRole] | None = None,
    *,
    log_probs_first: bool = False,
) -> Pipeline:
    """The chain the language-model built-ins share: rollout, function reward, optionally one node between the
    reward and the advantages (`before_advantages`: its id, operation and role), then `_policy_update`."""
    if log_probs_first:
        description = f"{description}{_KL_IN_REWARD_NOTE}"
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
    return _policy_update(pipeline, after=last, log_probs_first=log_probs_first)


def _grpo(*, log_probs_first: bool) -> TaskGraph:
    return _rewarded_update(
        "grpo", "GRPO: group-relative advantages, no critic", log_probs_first=log_probs_first
    ).build()


@register_pipeline("grpo")
def grpo_pipeline() -> TaskGraph:
    """GRPO: rollout, reward, group-relative advantages, old and reference log-probs, actor update."""
    return _grpo(log_probs_first=False)


@register_kl_in_reward_pipeline("grpo")
def grpo_kl_in_reward_pipeline() -> TaskGraph:
    """GRPO for `kl.mode=in_reward`: rollout, reward, old and reference log-probs, advantages, actor update."""
    return _grpo(log_probs_first=True)


def _ppo(*, log_probs_first: bool) -> TaskGraph:
    return (
        _rewarded_update(
            "ppo",
            "PPO: critic values and GAE advantages",
            before_advantages=("compute_value", OP_COMPUTE_VALUE, NodeRole.CRITIC),
            log_probs_first=log_probs_first,
        )
        .add_node(
            "critic_train",
            OP_TRAIN_CRITIC,
            role=NodeRole.CRITIC,
            dependencies=["actor_train"],
        )
        .build()
    )


@register_pipeline("ppo")
def ppo_pipeline() -> TaskGraph:
    """PPO: GRPO's flow plus a critic that estimates values before the advantages and trains last."""
    return _ppo(log_probs_first=False)


@register_kl_in_reward_pipeline("ppo")
def ppo_kl_in_reward_pipeline() -> TaskGraph:
    """PPO for `kl.mode=in_reward` (InstructGPT's, verl's order): rollout, reward, values, old and reference
    log-probs, GAE on the penalised rewards, actor update, critic update."""
    return _ppo(log_probs_first=True)


def _dapo(*, log_probs_first: bool) -> TaskGraph:
    return _rewarded_update(
        "dapo",
        "DAPO: GRPO with dynamic sampling of informative groups",
        before_advantages=("dynamic_sampling", OP_DYNAMIC_SAMPLING, NodeRole.DYNAMIC_SAMPLING),
        log_probs_first=log_probs_first,
    ).build()


@register_pipeline("dapo")
def dapo_pipeline() -> TaskGraph:
    """DAPO: GRPO with dynamic sampling, which drops groups whose rewards do not vary, before advantages."""
    return _dapo(log_probs_first=False)


@register_kl_in_reward_pipeline("dapo")
def dapo_kl_in_reward_pipeline() -> TaskGraph:
    """DAPO for `kl.mode=in_reward`: dynamic sampling still drops groups before any log-prob forward."""
    return _dapo(log_probs_first=True)


def _remax(*, log_probs_first: bool) -> TaskGraph:
    return _rewarded_update(
        "remax",
        "ReMax: the greedy response's reward as each prompt's baseline",
        before_advantages=("greedy_baseline", OP_COMPUTE_GREEDY_BASELINE, NodeRole.ROLLOUT),
        log_probs_first=log_probs_first,
    ).build()


@register_pipeline("remax")
def remax_pipeline() -> TaskGraph:
    """ReMax: GRPO's flow plus a greedy response to each prompt, whose score is the baseline of its samples."""
    return _remax(log_probs_first=False)


@register_kl_in_reward_pipeline("remax")
def remax_kl_in_reward_pipeline() -> TaskGraph:
    """ReMax for `kl.mode=in_reward`: the greedy baseline, then old and reference log-probs, then advantages."""
    return _remax(log_probs_first=True)


def _embodied_srpo(*, log_probs_first: bool) -> TaskGraph:
    description = "Embodied SRPO: filter rollouts, then world-model reward and GRPO update"
    if log_probs_first:
        description = f"{description}{_KL_IN_REWARD_NOTE}"
    pipeline = (
        Pipeline("embodied_srpo", description)
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
    return _policy_update(pipeline, after="compute_reward", log_probs_first=log_probs_first).build()


@register_pipeline("embodied_srpo")
def embodied_srpo_pipeline() -> TaskGraph:
    """Embodied SRPO: environment rollout, accuracy-band filtering before the reward, the world-model progress
    reward (or the binary success, the GRPO baseline), then GRPO's advantages and update on the action tokens.

    Its pure pieces are `rl_core.shaping.accuracy_band_mask` and `rl_core.shaping.srpo_progress_reward`.
    """
    return _embodied_srpo(log_probs_first=False)


@register_kl_in_reward_pipeline("embodied_srpo")
def embodied_srpo_kl_in_reward_pipeline() -> TaskGraph:
    """Embodied SRPO for `kl.mode=in_reward`: the old and reference log-probs of the action tokens before the
    advantages."""
    return _embodied_srpo(log_probs_first=True)
