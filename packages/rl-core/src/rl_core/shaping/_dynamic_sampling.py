"""Whole-group batch filters: DAPO dynamic sampling (drop zero-variance groups) and the accuracy band."""

from __future__ import annotations

from typing import NamedTuple

import torch

from rl_core._groups import group_index, group_sum
from rl_core._validation import as_bool_mask, check_positive, check_same_device, check_tensor
from rl_core.shaping._groups import group_mean_and_std

_DEFAULT_EPSILON = 1e-6
"""A group's score std must exceed this to count as varied; float noise (1.0 vs 1.0 + 1e-9) stays constant."""

# siiRL's embodied accuracy band: a group with under 10% or over 90% successes carries little learning signal.
_DEFAULT_LOWER = 0.1
_DEFAULT_UPPER = 0.9


class GroupFilterResult(NamedTuple):
    """Which samples a group filter keeps.

    Attributes:
        keep: `(B,)` bool, True for every sample of a kept group.
        num_groups: distinct group ids in the batch.
        num_kept_groups: groups whose samples are kept.
    """

    keep: torch.Tensor
    num_groups: int
    num_kept_groups: int


def _check_group_ids(group_ids: object, dims: dict[str, int]) -> torch.Tensor:
    return check_tensor("group_ids", group_ids, ("B",), dims=dims, floating=False)


@torch.no_grad()
def dynamic_sampling_mask(
    scores: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    epsilon: float = _DEFAULT_EPSILON,
    keep_singletons: bool = False,
) -> GroupFilterResult:
    """Keep the whole groups whose scores vary (DAPO dynamic sampling, https://arxiv.org/abs/2503.14476).

    A group is kept when the population std (divisor n, as `np.std` in DAPO/verl) of its scores exceeds
    `epsilon`; a group whose responses all scored alike gives every sample a zero GRPO advantage.
    A singleton group has no spread to measure: it is dropped unless `keep_singletons=True`
    (verl's DAPO trainer keeps it).

    Args:
        scores: `(B,)` float, finite sequence scores (or any per-sample metric such as accuracy).
        group_ids: `(B,)` integer group (prompt) of each sample; samples need not be contiguous.
        epsilon: >= 0; the std must be strictly greater. 0 reproduces verl's exact `std > 0` test.
        keep_singletons: keep groups of one sample instead of dropping them.

    Returns:
        `GroupFilterResult` with the `(B,)` bool keep mask and the group counts.
    """
    dims: dict[str, int] = {}
    check_tensor("scores", scores, ("B",), dims=dims, floating=True)
    _check_group_ids(group_ids, dims)
    check_same_device(scores=scores, group_ids=group_ids)
    check_positive("epsilon", epsilon, allow_zero=True)
    if not bool(torch.isfinite(scores).all()):
        raise ValueError("scores must be finite; a NaN/inf score makes its group's std meaningless")
    index, num_groups = group_index(group_ids)
    # float64: the threshold test must not depend on the caller's precision.
    count, _, std = group_mean_and_std(scores.double(), index, num_groups)
    singleton = count == 1
    kept_groups = torch.where(singleton, torch.tensor(keep_singletons, device=std.device), std > epsilon)
    return GroupFilterResult(kept_groups[index], num_groups, int(kept_groups.sum()))


@torch.no_grad()
def accuracy_band_mask(
    success: torch.Tensor,
    group_ids: torch.Tensor,
    *,
    lower: float = _DEFAULT_LOWER,
    upper: float = _DEFAULT_UPPER,
) -> torch.Tensor:
    """Keep the whole groups whose mean success lies in `[lower, upper]` (siiRL's embodied dynamic sampling).

    Args:
        success: `(B,)` bool, 0/1 integer, or float in [0, 1] per sample.
        group_ids: `(B,)` integer group (prompt) of each sample; samples need not be contiguous.
        lower: the lowest kept group mean, in [0, 1].
        upper: the highest kept group mean, in [lower, 1]; both bounds are inclusive.

    Returns:
        `(B,)` bool, True for every sample of a kept group.
    """
    dims: dict[str, int] = {}
    check_tensor("success", success, ("B",), dims=dims)
    _check_group_ids(group_ids, dims)
    check_same_device(success=success, group_ids=group_ids)
    if not 0.0 <= lower <= upper <= 1.0:
        raise ValueError(f"lower and upper must satisfy 0 <= lower <= upper <= 1, got lower={lower}, upper={upper}")
    if success.is_floating_point():
        if not bool(((success >= 0) & (success <= 1)).all()):
            raise ValueError("success must hold values in [0, 1] (NaN is rejected too)")
        values = success.double()
    else:
        values = as_bool_mask("success", success).double()
    index, num_groups = group_index(group_ids)
    count = group_sum(torch.ones_like(values), index, num_groups)
    # float64 so that e.g. 9 successes of 10 compare equal to the bound 0.9.
    mean = group_sum(values, index, num_groups) / count
    kept_groups = (mean >= lower) & (mean <= upper)
    return kept_groups[index]
