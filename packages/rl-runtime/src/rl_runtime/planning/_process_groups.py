"""Joining torch.distributed and building the data-parallel process group each role of a placement needs."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import cast

import torch
import torch.distributed as dist

from rl_core.graph import NodeRole
from rl_runtime.planning._config import ProcessGroupConfig
from rl_runtime.planning._errors import PlanningError, ProcessGroupError
from rl_runtime.planning._placement import Placement
from rl_runtime.planning._rendezvous import LOCALHOST, Exchange, RendezvousAddress, rendezvous

logger = logging.getLogger(__name__)


def resolve_backend(backend: str) -> str:
    """`gloo` or `nccl` as given; `auto` is NCCL when CUDA is available and gloo otherwise."""
    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise PlanningError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")
    return backend


def init_distributed(
    rank: int,
    world_size: int,
    exchange: Exchange,
    config: ProcessGroupConfig | None = None,
    *,
    host: str = LOCALHOST,
) -> RendezvousAddress:
    """Join the default torch.distributed group as `rank` of `world_size`, meeting at rank 0's address.

    Rank 0 picks a free port on `host` and publishes it through `exchange`; the others wait for it up to
    `config.rendezvous_timeout_s` (`RendezvousTimeout`). Returns the address used.
    """
    config = ProcessGroupConfig() if config is None else config
    if dist.is_initialized():
        raise ProcessGroupError("torch.distributed is already initialised in this process; call init_distributed once")
    address = rendezvous(rank, exchange, host=host, timeout_s=config.rendezvous_timeout_s)
    backend = resolve_backend(config.backend)
    dist.init_process_group(
        backend=backend,
        init_method=address.init_method,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=config.timeout_s),
    )
    logger.info("rank %d of %d joined %s over %s", rank, world_size, address.init_method, backend)
    return address


class ProcessGroupManager:
    """The data-parallel groups of one worker: one per (sub-graph, role) of the placement, shared by equal rank sets.

    Every process of the default group must build its manager from the same placement, in the same order
    relative to other `new_group` calls: torch requires all processes to take part in creating every group,
    members or not. Groups with identical ranks (all roles of one sub-graph, today) are created once.
    """

    def __init__(self, placement: Placement, rank: int, config: ProcessGroupConfig | None = None) -> None:
        config = ProcessGroupConfig() if config is None else config
        if not dist.is_initialized():
            raise ProcessGroupError(
                "torch.distributed is not initialised in this process; call init_distributed(...) before building "
                "the ProcessGroupManager"
            )
        if dist.get_world_size() != placement.world_size or dist.get_rank() != rank:
            raise ProcessGroupError(
                f"this process is rank {dist.get_rank()} of {dist.get_world_size()} in torch.distributed, but the "
                f"placement has {placement.world_size} workers and the manager was given rank {rank}; start one "
                "process per slot and pass each its own rank"
            )
        backend = None if config.backend == "auto" else config.backend  # auto: the default group's backend
        timeout = timedelta(seconds=config.timeout_s)
        self._worker = placement.worker(rank)
        groups: dict[tuple[int, ...], dist.ProcessGroup] = {}
        for ranks in dict.fromkeys(group.ranks for group in placement.role_groups):
            created = dist.new_group(list(ranks), timeout=timeout, backend=backend)
            if rank in ranks:  # a member gets the group itself (others a placeholder)
                groups[ranks] = cast(dist.ProcessGroup, created)
        own = self._worker.subgraph.subgraph_id
        self._ranks = {group.role: group.ranks for group in placement.role_groups if group.subgraph_id == own}
        self._groups = {role: groups[ranks] for role, ranks in self._ranks.items()}
        logger.info("rank %d: %d process group(s) for roles %s", rank, len(groups), [r.value for r in self._ranks])

    @property
    def rank(self) -> int:
        return self._worker.rank

    @property
    def roles(self) -> tuple[NodeRole, ...]:
        """The roles of this worker's sub-graph, each with a group."""
        return tuple(self._ranks)

    def group_for(self, role: NodeRole) -> dist.ProcessGroup:
        """The data-parallel group of `role` in this worker's sub-graph."""
        self._require(role)
        return self._groups[role]

    def ranks_for(self, role: NodeRole) -> tuple[int, ...]:
        """The global ranks in `role`'s group, ascending (a rank's position is its data-parallel rank)."""
        self._require(role)
        return self._ranks[role]

    def _require(self, role: NodeRole) -> None:
        if not isinstance(role, NodeRole):
            raise PlanningError(f"role must be a NodeRole (e.g. NodeRole.ACTOR), got {role!r}")
        if role not in self._ranks:
            raise PlanningError(
                f"rank {self.rank} runs sub-graph {self._worker.subgraph.subgraph_id!r}, which has no {role.value!r} "
                f"node, so it has no group for it; its roles: {', '.join(r.value for r in self._ranks)}"
            )
