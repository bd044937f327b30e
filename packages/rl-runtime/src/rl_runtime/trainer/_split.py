"""Placing a pipeline on the slots: whole on every slot (colocated), or cut into a rollout and a training sub-graph
on slots of their own (split placement).

Split placement cuts the pipeline with rl-core's one splitter, `split_graph(graph, SplitRule.ROLLOUT)`: the rollout
sub-graph `<id>/rollout` is every generate / reward / dynamic-sampling node that depends only on nodes of its own
kind, the training sub-graph `<id>/train` is everything after (log-probs, values, advantages, updates), and every
edge between them is a cross dependency the workers route through the DataCoordinator. A filter that keeps a varying
number of samples (`COUNT_CHANGING_OPERATIONS`: embodied SRPO's accuracy band) runs on the training slots, with
everything after it: a coordinator edge's consumer reads the plan's count each step, so the edge carries every
episode and the training slots filter them, as a colocated slot does. Here the rollout sub-graph
gains a `receive_weights` node at its end, so a rollout rank finishes a step only once it holds the weights of
that step's actor update, and the next step samples from them. With `algorithm.max_staleness` > 0 the samples leave
the rollout sub-graph through a `staleness_buffer` node (`rl_runtime.nodes._staleness_buffer`), which admits them
to training under the staleness bound. The rollout sub-graph takes the lowest ranks; the
slots are shared with the configured apportion strategy and placed with node cohesion and load balancing, as the
TaskScheduler does.
"""

from __future__ import annotations

import dataclasses

from rl_core.graph import (
    CrossDependency,
    GraphError,
    Node,
    NodeRole,
    SplitResult,
    SplitRule,
    TaskGraph,
    estimate_weight,
    split_graph,
)
from rl_runtime.config import RunConfig
from rl_runtime.config._schema_rewards import policy_slots
from rl_runtime.nodes._continuous import CONTINUOUS_GENERATE_OPERATION, continuous_generation
from rl_runtime.nodes._staleness_buffer import REGENERATE_PARAM, STALENESS_BUFFER_OPERATION
from rl_runtime.nodes._train import RECEIVE_WEIGHTS_OPERATION, TRAIN_ACTOR_OPERATION
from rl_runtime.planning import Placement, SchedulerConfig, TaskScheduler
from rl_runtime.planning._placement import SubgraphPlacement
from rl_runtime.planning._scheduler import place_subgraphs
from rl_runtime.trainer._errors import TrainerError

ENGINE_ROLES = frozenset({NodeRole.ROLLOUT, NodeRole.DYNAMIC_SAMPLING})
"""Roles whose nodes call the rollout engine (dynamic sampling draws more prompts)."""
COUNT_CHANGING_OPERATIONS = frozenset({"embodied_sampling"})
"""Operations whose output has a varying number of samples (the accuracy band drops whole groups); under split
placement they run on the training slots (role `NodeRole.DEFAULT`: they use no model), after the coordinator edge."""
RECEIVE_WEIGHTS_NODE = "receive_weights"
"""Id of the node split placement adds at the end of the rollout sub-graph."""
STALENESS_BUFFER_NODE = "staleness_buffer"
"""Id of the node asynchronous split placement puts between the rollout's samples and the training sub-graph."""
GENERATE_OPERATION = "generate"
REGENERABLE_OPERATIONS = frozenset({GENERATE_OPERATION, "compute_reward", "dynamic_sampling"})
"""Rollout operations whose samples the staleness buffer can draw again when it drops stale ones."""
_FIX = "set placement.colocate=true (every slot runs the whole pipeline)"


def split_pipeline(graph: TaskGraph, *, staleness_buffer: bool = False, continuous: bool = False) -> SplitResult:
    """`graph` cut for split placement: `split_graph(graph, SplitRule.ROLLOUT)`, whose rollout sub-graph (the first)
    ends with the `receive_weights` node; with `staleness_buffer` (asynchronous training) the samples cross to the
    training sub-graph from a `staleness_buffer` node after the rollout's last sample node; with `continuous`
    (`algorithm.async_generation=continuous`) its `generate` nodes run `generate_continuous`. TrainerError when split
    placement cannot run `graph`. Count-changing filters (`COUNT_CHANGING_OPERATIONS`) go to the training side."""
    reserved = {RECEIVE_WEIGHTS_NODE: "the rollout slots' weight sync"}
    if staleness_buffer:
        reserved[STALENESS_BUFFER_NODE] = "the rollout slots' staleness buffer"
    for node_id, purpose in reserved.items():
        if node_id in graph:
            raise TrainerError(
                f"pipeline {graph.graph_id!r} has a node {node_id!r}, the id split placement gives {purpose}; "
                f"rename the node or {_FIX}"
            )
    graph = _filters_on_training_side(graph)
    try:
        cut = split_graph(graph, SplitRule.ROLLOUT)
    except GraphError as exc:
        raise TrainerError(f"placement.colocate=false: {exc}; {_FIX}") from exc
    rollout, train = cut.subgraphs
    _check_training_part(graph, train)
    crossing = cut.cross_dependencies
    if staleness_buffer:
        rollout, crossing = _with_buffer(graph, rollout, crossing)
    if continuous:
        rollout = _continuous_generation(rollout)
    receive = Node(RECEIVE_WEIGHTS_NODE, RECEIVE_WEIGHTS_OPERATION, NodeRole.ROLLOUT, rollout.exit_ids)
    rollout = TaskGraph(rollout.graph_id, [*rollout.nodes.values(), receive], rollout.description)
    return SplitResult(graph, (rollout, train), crossing)


def _with_buffer(
    graph: TaskGraph, rollout: TaskGraph, crossing: tuple[CrossDependency, ...]
) -> tuple[TaskGraph, tuple[CrossDependency, ...]]:
    """`rollout` with the staleness buffer after the one node whose samples cross, and the crossings from it."""
    sources = sorted({dep.upstream_node for dep in crossing})
    if len(sources) != 1:
        raise TrainerError(
            f"algorithm.max_staleness > 0: pipeline {graph.graph_id!r} sends samples to training from "
            f"{len(sources)} rollout nodes ({', '.join(map(repr, sources))}); the staleness buffer admits one "
            "stream of groups; make one rollout node feed the training nodes, or set algorithm.max_staleness=0"
        )
    regenerate = {node.operation for node in rollout.nodes.values()} <= REGENERABLE_OPERATIONS
    buffer = Node(
        STALENESS_BUFFER_NODE,
        STALENESS_BUFFER_OPERATION,
        NodeRole.ROLLOUT,
        (sources[0],),
        params={REGENERATE_PARAM: regenerate},
    )
    rollout = TaskGraph(rollout.graph_id, [*rollout.nodes.values(), buffer], rollout.description)
    moved = tuple(
        CrossDependency(dep.upstream_graph, STALENESS_BUFFER_NODE, dep.downstream_graph, dep.downstream_node)
        for dep in crossing
    )
    return rollout, moved


def _continuous_generation(rollout: TaskGraph) -> TaskGraph:
    """`rollout` with its `generate` nodes running `generate_continuous` instead."""
    nodes = [
        Node(node.id, CONTINUOUS_GENERATE_OPERATION, node.role, node.dependencies, params=node.params)
        if node.operation == GENERATE_OPERATION
        else node
        for node in rollout.nodes.values()
    ]
    return TaskGraph(rollout.graph_id, nodes, rollout.description)


def _filters_on_training_side(graph: TaskGraph) -> TaskGraph:
    """`graph` with its `COUNT_CHANGING_OPERATIONS` nodes given role DEFAULT, which `SplitRule.ROLLOUT` leaves to the
    training side (and with them every node after them)."""
    if not any(node.operation in COUNT_CHANGING_OPERATIONS for node in graph.nodes.values()):
        return graph
    nodes = [
        dataclasses.replace(node, role=NodeRole.DEFAULT) if node.operation in COUNT_CHANGING_OPERATIONS else node
        for node in graph.nodes.values()
    ]
    return TaskGraph(graph.graph_id, nodes, graph.description)


def _check_training_part(graph: TaskGraph, train: TaskGraph) -> None:
    train_ids = [node_id for node_id in graph.topological_order if node_id in train]
    stranded = [node_id for node_id in train_ids if graph[node_id].role in ENGINE_ROLES]
    if stranded:
        raise TrainerError(
            f"placement.colocate=false: node(s) {', '.join(map(repr, stranded))} of pipeline {graph.graph_id!r} use "
            "the rollout engine but run after a training node, so they cannot run on the rollout slots; move them "
            f"before the training nodes or {_FIX}"
        )
    updates = [node_id for node_id in train_ids if graph[node_id].operation == TRAIN_ACTOR_OPERATION]
    if len(updates) != 1:
        raise TrainerError(
            f"placement.colocate=false: pipeline {graph.graph_id!r} has {len(updates)} {TRAIN_ACTOR_OPERATION!r} "
            "nodes; the rollout slots wait for exactly one actor update (and its weight sync) per step; use a "
            f"pipeline with one, or {_FIX}"
        )


def scheduler_config(config: RunConfig) -> SchedulerConfig:
    """The planner settings of `config.placement`, over the policy's slots (a reward model on slots of its own,
    `reward_model.placement: slot`, takes its slots out of `placement.slots`)."""
    settings = config.placement
    slots = policy_slots(config)
    slots_per_node = settings.slots_per_node or slots
    return SchedulerConfig(
        num_nodes=slots // slots_per_node,
        slots_per_node=slots_per_node,
        strategy=settings.strategy.value,
        colocate=settings.colocate,
        node_cohesion=settings.node_cohesion,
        node_load=settings.node_load,
    )


def plan_placement(config: RunConfig, graph: TaskGraph) -> Placement:
    """Where `graph` runs under `config.placement`: whole on every slot, or split (`split_pipeline`)."""
    settings = scheduler_config(config)
    if settings.colocate:
        return TaskScheduler(settings).schedule(graph)
    algorithm = config.algorithm
    split = split_pipeline(
        graph, staleness_buffer=algorithm.max_staleness > 0, continuous=continuous_generation(config)
    )
    entries = [(sub, graph.graph_id, estimate_weight(sub)) for sub in split.subgraphs]  # rollout first
    return place_subgraphs(settings, entries, split.cross_dependencies)


def is_split(placement: Placement) -> bool:
    """Whether `placement` runs the rollout and the training on different slots."""
    return len(placement.subgraphs) > 1


def rollout_subgraph(placement: Placement) -> SubgraphPlacement:
    """The sub-graph that samples (the only one when colocated)."""
    return next(p for p in placement.subgraphs if ENGINE_ROLES & set(p.roles))


def train_subgraph(placement: Placement) -> SubgraphPlacement:
    """The sub-graph that updates the actor (the only one when colocated)."""
    return next(p for p in placement.subgraphs if NodeRole.ACTOR in p.roles)
