"""The planner: split a plan into sub-graphs, share device slots among them, reserve the slots, build the groups.

    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=8)).schedule(get_pipeline("grpo"))
    print(placement.describe())
    slots = create_slot_groups(1, 8, SlotGroupConfig(use_gpu=True))       # Ray placement groups
    # in worker `rank`, started with scheduling_strategy=slots.strategy_for(rank):
    init_distributed(rank, placement.world_size, exchange)             # exchange = ActorRendezvous.start()
    groups = ProcessGroupManager(placement, rank)
    dist.all_reduce(tensor, group=groups.group_for(NodeRole.ACTOR))

Apportioning (`APPORTION_STRATEGIES`): `even` gives equal shares, the remainder one each to the heaviest
sub-graphs; `param_aware` gives shares proportional to `rl_core.graph.estimate_weight` by the
largest-remainder method with at least one slot each (all weights 0: it falls back to `even`). Both raise
`InsufficientSlotsError` when there are fewer slots than sub-graphs. Placement on slots keeps a sub-graph on
one node when it fits (`node_cohesion`) and prefers the least-loaded node (`node_load`).
"""

from rl_runtime.planning._apportion import APPORTION_STRATEGIES, ApportionStrategy, register_apportion_strategy
from rl_runtime.planning._config import SchedulerConfig
from rl_runtime.planning._errors import InsufficientSlotsError, PlanningError
from rl_runtime.planning._placement import Placement, WorkerAssignment
from rl_runtime.planning._scheduler import TaskScheduler

__all__ = [
    "APPORTION_STRATEGIES",
    "ApportionStrategy",
    "InsufficientSlotsError",
    "Placement",
    "PlanningError",
    "SchedulerConfig",
    "TaskScheduler",
    "WorkerAssignment",
    "register_apportion_strategy",
]
