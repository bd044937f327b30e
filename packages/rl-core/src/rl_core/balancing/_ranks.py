"""Partition by method name, and the balancing of a global batch across data-parallel ranks."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from rl_core import lookup
from rl_core.balancing._driver import PARTITION_METHODS, run_partition
from rl_core.balancing._errors import BalancingError
from rl_core.balancing._partition import Number, Partition, check_positive_int, check_token_counts
from rl_core.balancing._workload import WorkloadFn, compute_workloads

# PARTITION_METHODS is filled by _greedy and _karmarkar_karp, which the package's __init__ imports: importing
# this module runs that __init__ first.


def partition(
    workloads: Sequence[Number] | torch.Tensor,
    num_parts: int,
    *,
    method: str = "karmarkar_karp",
    equal_size: bool = False,
    group_ids: Sequence[Hashable] | torch.Tensor | None = None,
    soft_groups: bool = False,
) -> Partition:
    """Split items into `num_parts` parts of near-equal summed workload with a registered method.

    Args:
        workloads: `(n,)` finite numbers >= 0, one per item.
        num_parts: k >= 1, at most n (or the number of groups).
        method: a name in PARTITION_METHODS (`"karmarkar_karp"`, `"lpt"`).
        equal_size: every part gets n/k items.
        group_ids: `(n,)` hashable ids; items sharing an id stay in the same part.
        soft_groups: with group_ids, a preference rather than a rule: whole groups are placed first, then
            single items are exchanged between parts while that lowers the heaviest load (splitting a few
            groups).
    """
    core = lookup(PARTITION_METHODS, method, "partition method")
    return run_partition(
        core, workloads, num_parts, equal_size=equal_size, group_ids=group_ids, soft_groups=soft_groups
    )


def balance_across_ranks(
    token_counts: Sequence[int] | torch.Tensor,
    dp_size: int,
    *,
    method: str = "karmarkar_karp",
    workload: str | WorkloadFn = "tokens",
    equal_size: bool = True,
    group_ids: Sequence[Hashable] | torch.Tensor | None = None,
    soft_groups: bool = False,
) -> list[list[int]]:
    """Assign a global batch's samples to `dp_size` data-parallel ranks with near-equal workload per rank.

    Returns one ascending list of sample indices per rank; every index appears exactly once. The result is a
    pure function of the arguments, so every rank that computes it gets the same assignment.

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample.
        dp_size: number of ranks, >= 1.
        method: a name in PARTITION_METHODS.
        workload: what to balance: a name in WORKLOADS (`"tokens"`, `"attention"`) or a callable.
        equal_size: every rank gets n / dp_size samples (the usual requirement of a fixed per-rank batch).
        group_ids: `(n,)` ids; samples of a group (GRPO siblings) go to the same rank.
        soft_groups: keep groups together where it costs no balance: whole groups first, then single-sample
            exchanges between ranks while they lower the heaviest load (see `partition`).
    """
    counts = check_token_counts(token_counts)
    dp_size = check_positive_int(dp_size, "dp_size")
    n = len(counts)
    if equal_size and group_ids is None and n % dp_size:
        raise BalancingError(
            f"a batch of {n} samples cannot be split evenly across dp_size={dp_size} ranks; make the batch size "
            "a multiple of dp_size or pass equal_size=False"
        )
    costs = compute_workloads(counts, workload)
    return partition(
        costs, dp_size, method=method, equal_size=equal_size, group_ids=group_ids, soft_groups=soft_groups
    ).parts
