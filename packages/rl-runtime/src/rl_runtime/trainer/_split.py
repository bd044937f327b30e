"""Placing a pipeline on the slots: whole on every slot (colocated), or cut into a rollout and a training sub-graph
on slots of their own (split placement).

Split placement cuts the pipeline by role rather than by shape (`rl_core.graph.split_plan` leaves a chain such as
GRPO whole): the rollout sub-graph is every generate / reward / dynamic-sampling node that depends only on nodes
of its own kind, the training sub-graph is everything after (log-probs, values, advantages, updates), and every
edge between them is a cross dependency the workers route through the DataCoordinator. The rollout sub-graph ends
with a `receive_weights` node, so a rollout rank finishes a step only once it holds the weights of that step's
actor update, and the next step samples from them. The rollout sub-graph takes the lowest ranks; the slots are
shared with the configured apportion strategy and placed with node cohesion and load balancing, as the
TaskScheduler does.
"""

from __future__ import annotations

import attrs

from rl_core.graph import CrossDependency, Node, NodeRole, TaskGraph, estimate_weight
from rl_runtime.config import RunConfig
from rl_runtime.nodes._train import RECEIVE_WEIGHTS_OPERATION, TRAIN_ACTOR_OPERATION
from rl_runtime.planning import Placement, SchedulerConfig, SubgraphPlacement, TaskScheduler, place_subgraphs
from rl_runtime.trainer._errors import TrainerError

ROLLOUT_ROLES = frozenset({NodeRole.ROLLOUT, NodeRole.REWARD, NodeRole.DYNAMIC_SAMPLING})
"""Roles whose nodes run on the rollout slots: sampling needs the rollout engine, and the reward stays with it."""
ENGINE_ROLES = frozenset({NodeRole.ROLLOUT, NodeRole.DYNAMIC_SAMPLING})
"""Roles whose nodes call the rollout engine (dynamic sampling draws more prompts)."""
RECEIVE_WEIGHTS_NODE = "receive_weights"
"""Id of the node split placement adds at the end of the rollout sub-graph."""
ROLLOUT_SUFFIX = "/rollout"
TRAIN_SUFFIX = "/train"
"""Sub-graph ids are `<pipeline id>/rollout` and `<pipeline id>/train`, like `split_plan`'s `<graph id>/<index>`."""


@attrs.frozen
class SplitPipeline:
    """A pipeline cut for split placement: the rollout and training sub-graphs and the edges between them."""

    rollout: TaskGraph
    """Ends with the `receive_weights` node."""
    train: TaskGraph
    cross_dependencies: tuple[CrossDependency, ...]
    """Every edge from a rollout node to a training node."""


def split_pipeline(graph: TaskGraph) -> SplitPipeline:
    """Cut `graph` into its rollout and training sub-graphs (see the module doc); TrainerError when it cannot be cut."""
    rollout_ids: list[str] = []
    for node_id in graph.topological_order:
        node = graph[node_id]
        if node.role in ROLLOUT_ROLES and all(dep in rollout_ids for dep in node.dependencies):
            rollout_ids.append(node_id)
    train_ids = [node_id for node_id in graph.topological_order if node_id not in rollout_ids]
    _check_cut(graph, rollout_ids, train_ids)
    base = graph.graph_id
    rollout = graph.subgraph(rollout_ids, f"{base}{ROLLOUT_SUFFIX}")
    receive = Node(
        RECEIVE_WEIGHTS_NODE,
        RECEIVE_WEIGHTS_OPERATION,
        NodeRole.ROLLOUT,
        rollout.exit_ids,
    )
    rollout = TaskGraph(rollout.graph_id, [*rollout.nodes.values(), receive], graph.description)
    train = graph.subgraph(train_ids, f"{base}{TRAIN_SUFFIX}")
    cross = tuple(
        CrossDependency(rollout.graph_id, dep, train.graph_id, node_id)
        for node_id in train_ids
        for dep in graph.predecessors(node_id)
        if dep in rollout_ids
    )
    return SplitPipeline(rollout, train, cross)


def _check_cut(graph: TaskGraph, rollout_ids: list[str], train_ids: list[str]) -> None:
    fix = "set placement.colocate=true (every slot runs the whole pipeline)"
    if RECEIVE_WEIGHTS_NODE in graph:
        raise TrainerError(
            f"pipeline {graph.graph_id!r} has a node {RECEIVE_WEIGHTS_NODE!r}, the id split placement gives the "
            f"rollout slots' weight sync; rename the node or {fix}"
        )
    if not rollout_ids or not train_ids:
        empty = "rollout" if not rollout_ids else "training"
        raise TrainerError(
            f"placement.colocate=false: pipeline {graph.graph_id!r} has no {empty} part to give slots of its own "
            f"(rollout roles: {', '.join(sorted(r.value for r in ROLLOUT_ROLES))}, starting the pipeline); {fix}"
        )
    stranded = [node_id for node_id in train_ids if graph[node_id].role in ENGINE_ROLES]
    if stranded:
        raise TrainerError(
            f"placement.colocate=false: node(s) {', '.join(map(repr, stranded))} of pipeline {graph.graph_id!r} use "
            "the rollout engine but run after a training node, so they cannot run on the rollout slots; move them "
            f"before the training nodes or {fix}"
        )
    updates = [node_id for node_id in train_ids if graph[node_id].operation == TRAIN_ACTOR_OPERATION]
    if len(updates) != 1:
        raise TrainerError(
            f"placement.colocate=false: pipeline {graph.graph_id!r} has {len(updates)} {TRAIN_ACTOR_OPERATION!r} "
            "nodes; the rollout slots wait for exactly one actor update (and its weight sync) per step; use a "
            f"pipeline with one, or {fix}"
        )


def scheduler_config(config: RunConfig) -> SchedulerConfig:
    """The planner settings of `config.placement`."""
    settings = config.placement
    slots_per_node = settings.slots_per_node or settings.slots
    return SchedulerConfig(
        num_nodes=settings.slots // slots_per_node,
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
    split = split_pipeline(graph)
    entries = [
        (split.rollout, graph.graph_id, estimate_weight(split.rollout)),
        (split.train, graph.graph_id, estimate_weight(split.train)),
    ]
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
