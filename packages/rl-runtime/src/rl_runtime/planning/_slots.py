"""Which concrete slots each sub-graph gets, once its share is known: node cohesion and load balancing.

Slots are numbered `node * slots_per_node + local_slot`, and a worker's rank is its slot's number. The
sub-graphs are placed one after the other in the order given (the scheduler's priority order, heaviest
first), each taking the lowest free local slots of the nodes it picks:

- `node_cohesion`: a sub-graph goes on one node when its share fits on one, so its data-parallel group
  talks within a machine; when it fits nowhere, it takes whole nodes' free slots, fullest-free first, so it
  spans as few nodes as it can. Without cohesion, it takes one slot at a time.
- `node_load`: among the nodes that qualify, the one with the least load is picked: load is the summed
  per-slot weight (`weight / share`) of the slots already placed on it, then the number of used slots, so
  heavy sub-graphs spread over machines (host memory, network) instead of piling onto the first one.
  Without it, the lowest-numbered node that qualifies is picked (predictable, packs low ranks first).

Unlike siiRL's worker-at-a-time greedy search, a cohesive sub-graph never starts on a node that cannot hold
all of it while another node could, and nothing depends on hash order: the same input gives the same slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from rl_runtime.planning._errors import PlanningError


def assign_slots(
    shares: Sequence[int],
    weights: Sequence[int],
    num_nodes: int,
    slots_per_node: int,
    *,
    node_cohesion: bool,
    node_load: bool,
) -> tuple[tuple[int, ...], ...]:
    """The slot numbers (= worker ranks, ascending) of each sub-graph, in the order of `shares`."""
    if len(shares) != len(weights):
        raise PlanningError(f"got {len(shares)} shares for {len(weights)} weights; give one share per sub-graph")
    if sum(shares) > num_nodes * slots_per_node or any(share < 1 for share in shares):
        raise PlanningError(
            f"shares {tuple(shares)} do not fit {num_nodes} nodes x {slots_per_node} slots with at least one each"
        )
    cluster = _Cluster(num_nodes, slots_per_node)
    placed = []
    for share, weight in zip(shares, weights, strict=True):
        slot_weight = Fraction(weight, share)
        if node_cohesion:
            slots = _place_cohesive(cluster, share, slot_weight, node_load)
        else:
            slots = _place_one_by_one(cluster, share, slot_weight, node_load)
        placed.append(tuple(sorted(slots)))
    return tuple(placed)


def _place_cohesive(cluster: _Cluster, share: int, slot_weight: Fraction, node_load: bool) -> list[int]:
    slots: list[int] = []
    remaining = share
    while remaining:
        fitting = cluster.with_free(remaining)
        if fitting:
            return slots + cluster.take(cluster.pick(fitting, node_load), remaining, slot_weight)
        most_free = max(cluster.free_count(node) for node in cluster.nodes)
        node = cluster.pick(cluster.with_free(most_free), node_load)
        slots += cluster.take(node, most_free, slot_weight)
        remaining -= most_free
    return slots


def _place_one_by_one(cluster: _Cluster, share: int, slot_weight: Fraction, node_load: bool) -> list[int]:
    slots: list[int] = []
    for _ in range(share):
        slots += cluster.take(cluster.pick(cluster.with_free(1), node_load), 1, slot_weight)
    return slots


class _Cluster:
    """Free local slots and load per node while one placement is being built."""

    def __init__(self, num_nodes: int, slots_per_node: int) -> None:
        self.nodes = range(num_nodes)
        self._slots_per_node = slots_per_node
        self._free = [list(range(slots_per_node)) for _ in self.nodes]
        self._load = [Fraction(0)] * num_nodes
        self._used = [0] * num_nodes

    def free_count(self, node: int) -> int:
        return len(self._free[node])

    def with_free(self, count: int) -> list[int]:
        """Nodes with at least `count` free slots."""
        return [node for node in self.nodes if len(self._free[node]) >= count]

    def pick(self, candidates: list[int], node_load: bool) -> int:
        if node_load:
            return min(candidates, key=lambda node: (self._load[node], self._used[node], node))
        return min(candidates)

    def take(self, node: int, count: int, slot_weight: Fraction) -> list[int]:
        """Take the `count` lowest free local slots of `node`; returns their global numbers."""
        local = self._free[node][:count]
        del self._free[node][:count]
        self._load[node] += slot_weight * count
        self._used[node] += count
        return [node * self._slots_per_node + slot for slot in local]
