"""The TaskScheduler: split a plan into irreducible sub-graphs, share the slots among them, place them on slots."""

from __future__ import annotations

from collections.abc import Iterable

from rl_core import lookup
from rl_core.graph import SplitResult, TaskGraph, estimate_weight, split_plan, validate_plan
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
        entries = [entries[i] for i in order]
        self._check_enough_slots([sub.graph_id for sub, _, _ in entries])
        weights = [weight for _, _, weight in entries]
        shares = lookup(APPORTION_STRATEGIES, config.strategy, "apportion strategy")(weights, self.num_slots)
        self._check_shares(shares, len(entries))
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
        workers: list[WorkerAssignment | None] = [None] * self.num_slots
        for subgraph in placed:
            for dp_rank, rank in enumerate(subgraph.ranks):
                node_index, local_slot = divmod(rank, config.slots_per_node)
                dp = DataParallelInfo(dp_rank, len(subgraph.ranks))
                workers[rank] = WorkerAssignment(rank, node_index, local_slot, subgraph, dp)
        cross = tuple(dep for result in results for dep in result.cross_dependencies)
        return Placement(config, placed, tuple(w for w in workers if w is not None), cross)

    def _check_enough_slots(self, subgraph_ids: list[str]) -> None:
        needed = len(subgraph_ids) * MIN_SHARE
        if self.num_slots >= needed:
            return
        config = self._config
        raise InsufficientSlotsError(
            f"the plan splits into {len(subgraph_ids)} sub-graphs ({', '.join(subgraph_ids)}) but the scheduler has "
            f"{self.num_slots} slots (planner.scheduler.num_nodes={config.num_nodes} x "
            f"slots_per_node={config.slots_per_node}); every sub-graph needs at least {MIN_SHARE} worker of its own: "
            f"give at least {needed} slots, or run fewer or merged graphs"
        )

    def _check_shares(self, shares: object, count: int) -> None:
        """A registered third-party strategy must still return one share >= 1 per sub-graph, summing to the slots."""
        if (
            not isinstance(shares, tuple)
            or len(shares) != count
            or any(isinstance(s, bool) or not isinstance(s, int) or s < MIN_SHARE for s in shares)
            or sum(shares) != self.num_slots
        ):
            raise PlanningError(
                f"apportion strategy {self._config.strategy!r} returned {shares!r}; it must return a tuple of "
                f"{count} ints >= {MIN_SHARE} summing to {self.num_slots}"
            )
