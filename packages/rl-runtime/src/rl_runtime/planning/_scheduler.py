"""The TaskScheduler: split a plan into irreducible sub-graphs, share the slots among them, place them on slots."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rl_core import lookup
from rl_core.graph import CrossDependency, SplitResult, TaskGraph, estimate_weight, split_plan, validate_plan
from rl_runtime.planning._apportion import APPORTION_STRATEGIES, MIN_SHARE
from rl_runtime.planning._config import SchedulerConfig
from rl_runtime.planning._errors import InsufficientSlotsError, PlanningError
from rl_runtime.planning._placement import DataParallelInfo, Placement, SubgraphPlacement, WorkerAssignment
from rl_runtime.planning._slots import assign_slots


class TaskScheduler:
    """Turns a plan (one TaskGraph, or a list with distinct ids) into a `Placement` of its sub-graphs on slots.

    `schedule` splits every graph with `rl_core.graph.split_plan` (unless `colocate`), orders the sub-graphs
    heaviest first (`estimate_weight`, then more nodes, then plan order), apportions `num_nodes * slots_per_node`
    slots with the configured strategy, and places each sub-graph's share on concrete slots (node cohesion, load
    balancing: see `rl_runtime.planning`). It keeps no state between calls: the same plan and config give the
    same placement in every process.
    """

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        config = SchedulerConfig() if config is None else config
        if not isinstance(config, SchedulerConfig):
            raise PlanningError(f"TaskScheduler takes a SchedulerConfig, got {type(config).__name__}")
        self._config = config

    @classmethod
    def from_config(cls, config: SchedulerConfig) -> TaskScheduler:
        """Build a scheduler from its config."""
        return cls(config)

    @property
    def config(self) -> SchedulerConfig:
        return self._config

    @property
    def num_slots(self) -> int:
        return self._config.num_nodes * self._config.slots_per_node

    def schedule(self, plan: TaskGraph | Iterable[TaskGraph]) -> Placement:
        """Place `plan` on the slots.

        Raises `rl_core.graph.DuplicateGraphError` when two plan graphs (or their sub-graphs) share an id,
        `rl_core.graph.GraphError` for an empty plan, and `InsufficientSlotsError` when there are fewer slots
        than sub-graphs.
        """
        config = self._config
        if config.colocate:
            results = tuple(SplitResult(graph, (graph,), ()) for graph in validate_plan(plan))
        else:
            results = split_plan(plan)
        entries = [
            (sub, result.source.graph_id, estimate_weight(sub)) for result in results for sub in result.subgraphs
        ]
        # Heaviest first, then longer chains, then plan order: the remainder of `even` and the first pick of
        # the slots go to the sub-graphs that need them most, and the order never depends on hashing.
        order = sorted(range(len(entries)), key=lambda i: (-entries[i][2], -len(entries[i][0]), i))
        cross = tuple(dep for result in results for dep in result.cross_dependencies)
        return place_subgraphs(config, [entries[i] for i in order], cross)


def place_subgraphs(
    config: SchedulerConfig,
    entries: Sequence[tuple[TaskGraph, str, int]],
    cross_dependencies: tuple[CrossDependency, ...] = (),
) -> Placement:
    """Share the slots of `config` among `entries` (sub-graph, source graph id, weight) with the configured
    apportion strategy, in the order given (the remainder and the first pick of slots go to the first), and place
    each share on concrete slots (node cohesion, load balancing); `InsufficientSlotsError` when there are fewer
    slots than sub-graphs."""
    num_slots = config.num_nodes * config.slots_per_node
    _check_enough_slots(config, [sub.graph_id for sub, _, _ in entries])
    weights = [weight for _, _, weight in entries]
    shares = lookup(APPORTION_STRATEGIES, config.strategy, "apportion strategy")(weights, num_slots)
    _check_shares(config, shares, len(entries))
    rank_sets = assign_slots(
        shares,
        weights,
        config.num_nodes,
        config.slots_per_node,
        node_cohesion=config.node_cohesion,
        node_load=config.node_load,
    )
    placed = tuple(
        SubgraphPlacement(sub, source_id, weight, ranks)
        for (sub, source_id, weight), ranks in zip(entries, rank_sets, strict=True)
    )
    workers: list[WorkerAssignment | None] = [None] * num_slots
    for subgraph in placed:
        for dp_rank, rank in enumerate(subgraph.ranks):
            node_index, local_slot = divmod(rank, config.slots_per_node)
            dp = DataParallelInfo(dp_rank, len(subgraph.ranks))
            workers[rank] = WorkerAssignment(rank, node_index, local_slot, subgraph, dp)
    return Placement(config, placed, tuple(w for w in workers if w is not None), cross_dependencies)


def _check_enough_slots(config: SchedulerConfig, subgraph_ids: list[str]) -> None:
    num_slots = config.num_nodes * config.slots_per_node
    needed = len(subgraph_ids) * MIN_SHARE
    if num_slots >= needed:
        return
    raise InsufficientSlotsError(
        f"the plan splits into {len(subgraph_ids)} sub-graphs ({', '.join(subgraph_ids)}) but the scheduler has "
        f"{num_slots} slots (planner.scheduler.num_nodes={config.num_nodes} x "
        f"slots_per_node={config.slots_per_node}); every sub-graph needs at least {MIN_SHARE} worker of its own: "
        f"give at least {needed} slots, or run fewer or merged graphs"
    )


def _check_shares(config: SchedulerConfig, shares: object, count: int) -> None:
    """A registered third-party strategy must still return one share >= 1 per sub-graph, summing to the slots."""
    num_slots = config.num_nodes * config.slots_per_node
    if (
        not isinstance(shares, tuple)
        or len(shares) != count
        or any(isinstance(s, bool) or not isinstance(s, int) or s < MIN_SHARE for s in shares)
        or sum(shares) != num_slots
    ):
        raise PlanningError(
            f"apportion strategy {config.strategy!r} returned {shares!r}; it must return a tuple of "
            f"{count} ints >= {MIN_SHARE} summing to {num_slots}"
        )
