"""The planner: split a plan into sub-graphs, share device slots among them, reserve the slots, build the groups.

    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=8)).schedule(get_pipeline("grpo"))
    print(placement.describe())

The Trainer then reserves the slots as Ray placement groups (`_placement_groups`), meets at a rendezvous
(`_rendezvous`) and builds the torch.distributed groups of each role (`_process_groups`).

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
