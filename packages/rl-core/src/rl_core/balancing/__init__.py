"""Sequence-length balancing: partitioning by workload across ranks, token-budget micro-batching.

Partitioning methods (registry PARTITION_METHODS): Karmarkar–Karp largest differencing ("karmarkar_karp",
followed by a swap refinement) and greedy LPT ("lpt"), each unconstrained or equal-size, optionally keeping
groups together. Workloads (registry WORKLOADS): token count ("tokens") or `a·L + L²` ("attention").
Torch and the standard library only: the coordinator balances a step across ranks with it, a training engine
plans its micro-batches with it. Invalid input raises `BalancingError`.
"""

from rl_core.balancing._driver import PARTITION_METHODS, register_method
from rl_core.balancing._errors import BalancingError
from rl_core.balancing._greedy import greedy_lpt
from rl_core.balancing._karmarkar_karp import karmarkar_karp
from rl_core.balancing._micro_batch import (
    MicroBatchPlan,
    min_num_micro_batches,
    plan_micro_batches,
    plan_micro_batches_all_ranks,
)
from rl_core.balancing._partition import Partition, max_over_mean
from rl_core.balancing._ranks import balance_across_ranks, partition
from rl_core.balancing._workload import (
    DEFAULT_LINEAR_COEFF,
    WORKLOADS,
    attention_workload,
    compute_workloads,
    register_workload,
    token_workload,
)

__all__ = [
    "DEFAULT_LINEAR_COEFF",
    "PARTITION_METHODS",
    "WORKLOADS",
    "BalancingError",
    "MicroBatchPlan",
    "Partition",
    "attention_workload",
    "balance_across_ranks",
    "compute_workloads",
    "greedy_lpt",
    "karmarkar_karp",
    "max_over_mean",
    "min_num_micro_batches",
    "partition",
    "plan_micro_batches",
    "plan_micro_batches_all_ranks",
    "register_method",
    "register_workload",
    "token_workload",
]
