"""What every partitioning method shares: argument checks, keeping groups together, the method registry."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import cast

import torch

from rl_core import registrar
from rl_core.balancing._errors import BalancingError
from rl_core.balancing._partition import Number, Partition, check_positive_int, check_workloads, max_over_mean
from rl_core.balancing._refine import refine_by_swaps

CoreFn = Callable[[list[Number], int, bool], tuple[list[list[int]], list[Number]]]
"""A method's core: (workloads, k, equal_size) -> (k index lists, k loads); inputs already checked."""

PARTITION_METHODS: dict[str, CoreFn] = {}
"""Partitioning methods by name (`"karmarkar_karp"`, `"lpt"`), each a core function (see CoreFn)."""

register_method = registrar(PARTITION_METHODS, "partition method")


def _group_members(group_ids: Sequence[Hashable] | torch.Tensor, n: int) -> list[list[int]]:
    """Item indices of each group, groups in order of first appearance."""
    if isinstance(group_ids, torch.Tensor) and group_ids.dim() != 1:
        raise BalancingError(f"group_ids must be a 1-D tensor (n,), got shape {tuple(group_ids.shape)}")
    ids: Sequence[Hashable] = (
        cast("list[Hashable]", group_ids.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`
        if isinstance(group_ids, torch.Tensor)
        else group_ids
    )
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise BalancingError(f"group_ids must be a sequence or a 1-D tensor, got {type(group_ids).__name__}")
    if len(ids) != n:
        raise BalancingError(f"group_ids has {len(ids)} entries but there are {n} items; pass one id per item")
    members: dict[Hashable, list[int]] = {}
    for index, gid in enumerate(ids):
        members.setdefault(gid, []).append(index)
    return list(members.values())


def _check_equal_groups(members: list[list[int]], k: int, n: int) -> None:
    sizes = {len(m) for m in members}
    if len(sizes) > 1:
        small = min(members, key=len)
        large = max(members, key=len)
        raise BalancingError(
            "equal_size=True with group_ids needs every group to have the same size (equal sample counts per "
            f"part); found groups of {len(small)} (item {small[0]}) and {len(large)} (item {large[0]}) samples; "
            "pass equal_size=False or complete the groups"
        )
    if len(members) % k:
        raise BalancingError(
            f"equal_size=True with group_ids needs the group count ({len(members)} groups of {n // len(members)}, "
            f"n={n}) to be divisible by num_parts k={k}; pass equal_size=False or a multiple of k groups"
        )


def run_partition(
    core: CoreFn,
    workloads: Sequence[Number] | torch.Tensor,
    num_parts: int,
    *,
    equal_size: bool,
    group_ids: Sequence[Hashable] | torch.Tensor | None,
    soft_groups: bool = False,
) -> Partition:
    """Check the arguments, run `core` on items (or on whole groups when `group_ids` is given), expand.

    With `soft_groups`, the whole-group partition is then refined by exchanging single items between parts
    (`refine_by_swaps`), which may split a few groups to lower the heaviest load.
    """
    if type(soft_groups) is not bool:
        raise BalancingError(f"soft_groups must be a bool, got {soft_groups!r}")
    w = check_workloads(workloads)
    k = check_positive_int(num_parts, "num_parts")
    n = len(w)
    if group_ids is None:
        if n < k:
            raise BalancingError(f"cannot split n={n} items into k={k} non-empty parts; pass k <= n")
        if equal_size and n % k:
            raise BalancingError(
                f"equal_size=True needs the item count n={n} to be divisible by num_parts k={k}; "
                "pass a multiple of k items or equal_size=False"
            )
        parts, loads = core(w, k, equal_size)
        for part in parts:
            part.sort()
        return Partition(parts=parts, loads=loads, max_over_mean=max_over_mean(loads))
    members = _group_members(group_ids, n)
    if len(members) < k:
        raise BalancingError(
            f"cannot split {len(members)} groups into k={k} non-empty parts with groups kept together; pass k <= "
            f"{len(members)} or group_ids=None"
        )
    if equal_size:
        _check_equal_groups(members, k, n)
    group_loads = [sum(w[i] for i in m) for m in members]
    group_parts, loads = core(group_loads, k, equal_size)
    parts = [[i for g in part for i in members[g]] for part in group_parts]
    if soft_groups:
        parts, loads = refine_by_swaps(w, parts, loads, allow_moves=not equal_size)
    return Partition(parts=[sorted(part) for part in parts], loads=loads, max_over_mean=max_over_mean(loads))
