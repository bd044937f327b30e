"""Reserving the slots in Ray: one placement group per node of the placement, one bundle per slot.

Each node's group is `STRICT_PACK`, so the slots the scheduler put on one node share a machine, and worker
rank `r` runs in bundle `r % slots_per_node` of group `r // slots_per_node`. Two logical nodes may land on one
large machine; that only loses locality the scheduler did not count on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType

import attrs
import ray
import ray.exceptions
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl_runtime.planning._config import SlotGroupConfig
from rl_runtime.planning._errors import PlacementTimeout, PlanningError

logger = logging.getLogger(__name__)

NODE_STRATEGY = "STRICT_PACK"
"""All bundles of one node's group on one machine: a node's data-parallel traffic stays local."""

_SHOWN_RESOURCES = ("CPU", "GPU")
"""Cluster resources a timeout message lists besides the requested ones (memory and node tags are noise)."""


def slot_bundle(config: SlotGroupConfig) -> dict[str, float]:
    """The resources one slot reserves: `{"CPU": c}`, or `{"GPU": 1, "CPU": c}` when `config.use_gpu`."""
    bundle = {"CPU": float(config.cpus_per_slot)}
    return {"GPU": 1.0, **bundle} if config.use_gpu else bundle


@attrs.frozen(eq=False)
class SlotGroups:
    """The reserved placement groups, one per node; gives each worker rank its scheduling strategy."""

    groups: tuple[PlacementGroup, ...]
    slots_per_node: int
    bundle: Mapping[str, float]

    @property
    def world_size(self) -> int:
        return len(self.groups) * self.slots_per_node

    def strategy_for(self, rank: int) -> PlacementGroupSchedulingStrategy:
        """The scheduling strategy that puts an actor in worker `rank`'s slot (pass as `scheduling_strategy=`)."""
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world_size:
            raise PlanningError(f"rank must be an int in [0, {self.world_size}), got {rank!r}")
        node, slot = divmod(rank, self.slots_per_node)
        return PlacementGroupSchedulingStrategy(placement_group=self.groups[node], placement_group_bundle_index=slot)

    def strategies(self) -> tuple[PlacementGroupSchedulingStrategy, ...]:
        """One strategy per worker rank, indexed by rank."""
        return tuple(self.strategy_for(rank) for rank in range(self.world_size))

    def remove(self) -> None:
        """Release every slot (actors still in them are killed by Ray); removing twice is harmless."""
        for group in self.groups:
            remove_placement_group(group)

    def __enter__(self) -> SlotGroups:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.remove()


def create_slot_groups(num_nodes: int, slots_per_node: int, config: SlotGroupConfig | None = None) -> SlotGroups:
    """Reserve `num_nodes` x `slots_per_node` slots and wait until Ray has placed them all.

    Raises `PlacementTimeout` after `config.timeout_s` seconds, naming the request and what the cluster has
    (the groups made so far are removed first).
    """
    config = SlotGroupConfig() if config is None else config
    for name, value in (("num_nodes", num_nodes), ("slots_per_node", slots_per_node)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanningError(f"{name} must be an int >= 1, got {value!r}")
    bundle = slot_bundle(config)
    groups = tuple(placement_group([dict(bundle)] * slots_per_node, strategy=NODE_STRATEGY) for _ in range(num_nodes))
    slot_groups = SlotGroups(groups, slots_per_node, bundle)
    try:
        ray.get([group.ready() for group in groups], timeout=config.timeout_s)
    except ray.exceptions.GetTimeoutError:
        slot_groups.remove()
        raise PlacementTimeout(_timeout_message(num_nodes, slots_per_node, bundle, config.timeout_s)) from None
    except BaseException:
        slot_groups.remove()
        raise
    logger.info("reserved %d node(s) x %d slot(s) of %s", num_nodes, slots_per_node, bundle)
    return slot_groups


def _timeout_message(num_nodes: int, slots_per_node: int, bundle: Mapping[str, float], timeout_s: float) -> str:
    slots = num_nodes * slots_per_node
    total = {key: amount * slots for key, amount in bundle.items()}
    shown = (*bundle, *(key for key in _SHOWN_RESOURCES if key not in bundle))
    cluster = ray.cluster_resources()
    available = ray.available_resources()
    return (
        f"Ray could not reserve {num_nodes} node(s) x {slots_per_node} slot(s) of {dict(bundle)} "
        f"({_format(total, bundle)} in total, each node's slots on one machine) within {timeout_s:g} s; "
        f"the cluster has {_format(cluster, shown)}, {_format(available, shown)} available now; lower "
        "planner.scheduler.num_nodes, slots_per_node or planner.slots.cpus_per_slot, or add resources to the cluster"
    )


def _format(resources: Mapping[str, float], keys: tuple[str, ...] | Mapping[str, float]) -> str:
    return ", ".join(f"{resources.get(key, 0.0):g} {key}" for key in keys)
