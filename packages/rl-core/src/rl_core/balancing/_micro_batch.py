"""Token-budget micro-batching: a rank's samples in micro-batches under `max_tokens`, equal counts across ranks."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rl_core.balancing._errors import BalancingError
from rl_core.balancing._karmarkar_karp import karmarkar_karp_core
from rl_core.balancing._partition import Number, check_positive_int, check_token_counts
from rl_core.balancing._workload import WorkloadFn, compute_workloads

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MicroBatchPlan:
    """One rank's samples split into micro-batches.

    Attributes:
        micro_batches: sample indices (into the rank's batch) of each micro-batch, ascending; heaviest
            micro-batch first, so running out of memory shows on the first one rather than late in the step.
        token_loads: tokens in each micro-batch.
        oversized: indices of samples longer than `max_tokens` on their own; each is alone in a micro-batch.
        max_tokens: the budget the plan was made for.
    """

    micro_batches: list[list[int]]
    token_loads: list[int]
    oversized: list[int]
    max_tokens: int

    @property
    def num_micro_batches(self) -> int:
        """How many micro-batches (forward/backward passes) the rank runs."""
        return len(self.micro_batches)


def _fits(parts: list[list[int]], counts: list[int], max_tokens: int) -> bool:
    return all(sum(counts[i] for i in part) <= max_tokens for part in parts)


def _first_fit_decreasing(counts: list[int], max_tokens: int) -> list[list[int]]:
    """A packing under the budget (every count <= max_tokens); its size bounds the minimal count from above."""
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(counts)), key=counts.__getitem__, reverse=True):
        for b, free in enumerate(room):
            if counts[i] <= free:
                bins[b].append(i)
                room[b] -= counts[i]
                break
        else:
            bins.append([i])
            room.append(max_tokens - counts[i])
    return bins


def _minimal_packing(counts: list[int], max_tokens: int) -> list[list[int]]:
    """The fewest balanced micro-batches under budget this search finds (all counts <= max_tokens).

    Tries Karmarkar–Karp on token counts from the lower bound ceil(total / max_tokens) upwards; first-fit
    decreasing caps the search, so the result depends on token counts and the budget only.
    """
    fallback = _first_fit_decreasing(counts, max_tokens)
    lower = -(-sum(counts) // max_tokens)
    for m in range(lower, len(fallback) + 1):
        parts, _ = karmarkar_karp_core(counts, m, False)
        if _fits(parts, counts, max_tokens):
            return parts
    return fallback


def _split_to(parts: list[list[int]], target: int, costs: Sequence[Number]) -> list[list[int]]:
    """Split the costliest splittable parts in two until there are `target`; sub-parts of fitting parts fit."""
    parts = [list(p) for p in parts]
    while len(parts) < target:
        p = max((q for q in range(len(parts)) if len(parts[q]) > 1), key=lambda q: sum(costs[i] for i in parts[q]))
        items = parts.pop(p)
        halves, _ = karmarkar_karp_core([costs[i] for i in items], 2, False, refine=False)
        parts.extend([items[j] for j in half] for half in halves)
    return parts


def _packing_of(
    minimal: list[list[int]], counts: list[int], costs: Sequence[Number], max_tokens: int, target: int
) -> list[list[int]]:
    """`target` micro-batches under budget, balanced by `costs` when possible; `minimal` is a fitting packing."""
    if target == len(minimal) and costs is counts:
        return minimal
    for weights in (costs,) if costs is counts else (costs, counts):
        parts, _ = karmarkar_karp_core(weights, target, False)
        if _fits(parts, counts, max_tokens):
            return parts
    return _split_to(minimal, target, costs)


def _check_budget(max_tokens: object) -> int:
    if type(max_tokens) is not int or max_tokens <= 0:
        raise BalancingError(f"max_tokens must be an int > 0 (tokens per micro-batch), got {max_tokens!r}")
    return max_tokens


@dataclass(frozen=True)
class _RankPacking:
    oversized: list[int]
    regular: list[int]
    minimal: list[list[int]]  # positions into `regular`

    @property
    def min_count(self) -> int:
        return len(self.oversized) + len(self.minimal)


def _rank_packing(counts: list[int], max_tokens: int) -> _RankPacking:
    oversized = [i for i, c in enumerate(counts) if c > max_tokens]
    regular = [i for i, c in enumerate(counts) if c <= max_tokens]
    minimal = _minimal_packing([counts[i] for i in regular], max_tokens) if regular else []
    return _RankPacking(oversized, regular, minimal)


def min_num_micro_batches(token_counts: Sequence[int] | torch.Tensor, max_tokens: int) -> int:
    """The micro-batch count `plan_micro_batches` needs for this rank; all-reduce its max across ranks.

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample of this rank.
        max_tokens: token budget per micro-batch, > 0.
    """
    return _rank_packing(check_token_counts(token_counts), _check_budget(max_tokens)).min_count


def _plan(
    counts: list[int], max_tokens: int, packing: _RankPacking, target: int, workload: str | WorkloadFn
) -> MicroBatchPlan:
    if target < packing.min_count:
        raise BalancingError(
            f"num_micro_batches={target} is below this rank's minimum {packing.min_count} under "
            f"max_tokens={max_tokens}; pass the max of min_num_micro_batches over all ranks"
        )
    if target > len(counts):
        raise BalancingError(
            f"num_micro_batches={target} exceeds this rank's {len(counts)} samples; micro-batches cannot be empty, "
            "so give every rank at least as many samples as micro-batches"
        )
    oversized, regular = packing.oversized, packing.regular
    if oversized:
        logger.warning(
            "%d sample(s) exceed max_tokens=%d on their own (indices %s); each runs in a micro-batch of its own",
            len(oversized),
            max_tokens,
            oversized[:8],
        )
    micro_batches = [[i] for i in oversized]
    if regular:
        sub_counts = [counts[i] for i in regular]
        sub_costs = sub_counts if workload == "tokens" else compute_workloads(sub_counts, workload)
        packed = _packing_of(packing.minimal, sub_counts, sub_costs, max_tokens, target - len(oversized))
        micro_batches += [sorted(regular[j] for j in part) for part in packed]
    micro_batches.sort(key=lambda mb: (-sum(counts[i] for i in mb), mb[0]))
    return MicroBatchPlan(
        micro_batches=micro_batches,
        token_loads=[sum(counts[i] for i in mb) for mb in micro_batches],
        oversized=oversized,
        max_tokens=max_tokens,
    )


def plan_micro_batches(
    token_counts: Sequence[int] | torch.Tensor,
    max_tokens: int,
    *,
    num_micro_batches: int | None = None,
    workload: str | WorkloadFn = "tokens",
) -> MicroBatchPlan:
    """Split one rank's samples into micro-batches of at most `max_tokens` tokens, balanced by `workload`.

    A sample longer than `max_tokens` gets a micro-batch of its own and is listed in `oversized`.

    Args:
        token_counts: `(n,)` ints > 0, tokens per sample of this rank.
        max_tokens: token budget per micro-batch, > 0.
        num_micro_batches: the count to produce, the same on every rank: the max over ranks of
            `min_num_micro_batches`. None uses this rank's own minimum (single rank, or no collectives).
        workload: what to balance between micro-batches: a name in WORKLOADS or a callable.
    """
    counts = check_token_counts(token_counts)
    max_tokens = _check_budget(max_tokens)
    packing = _rank_packing(counts, max_tokens)
    if num_micro_batches is None:
        target = packing.min_count
    else:
        target = check_positive_int(num_micro_batches, "num_micro_batches")
    return _plan(counts, max_tokens, packing, target, workload)


def plan_micro_batches_all_ranks(
    token_counts_per_rank: Sequence[Sequence[int] | torch.Tensor],
    max_tokens: int,
    *,
    workload: str | WorkloadFn = "tokens",
) -> list[MicroBatchPlan]:
    """Micro-batch plans for every rank, all with the same count (the max of the ranks' minimal counts).

    Args:
        token_counts_per_rank: one `(n_r,)` sequence of ints > 0 per rank.
        max_tokens: token budget per micro-batch, > 0.
        workload: what to balance between micro-batches: a name in WORKLOADS or a callable.
    """
    if isinstance(token_counts_per_rank, (str, bytes)) or not isinstance(token_counts_per_rank, Sequence):
        raise BalancingError("token_counts_per_rank must be a sequence with one sequence of counts per rank")
    if not token_counts_per_rank:
        raise BalancingError("token_counts_per_rank is empty; pass one sequence of token counts per rank")
    max_tokens = _check_budget(max_tokens)
    per_rank = [check_token_counts(c, f"token_counts_per_rank[{r}]") for r, c in enumerate(token_counts_per_rank)]
    packings = [_rank_packing(counts, max_tokens) for counts in per_rank]
    target = max(p.min_count for p in packings)
    for rank, counts in enumerate(per_rank):
        if len(counts) < target:
            raise BalancingError(
                f"rank {rank} has {len(counts)} samples but every rank needs {target} micro-batches under "
                f"max_tokens={max_tokens}; balance sample counts across ranks or raise max_tokens"
            )
    return [_plan(c, max_tokens, p, target, workload) for c, p in zip(per_rank, packings, strict=True)]
