"""How many device slots each sub-graph gets: the `even` and `param_aware` strategies, in a registry.

A strategy takes the sub-graphs' weights (`rl_core.graph.estimate_weight`) in priority order, heaviest
first, and the number of slots, and returns one share per sub-graph: every share >= 1 and the shares sum
to the slots. Position breaks ties: of two sub-graphs that are otherwise equal, the earlier one is favoured.
Add a strategy with one function:

    @register_apportion_strategy("my_strategy")
    def my_strategy(weights: Sequence[int], slots: int) -> tuple[int, ...]: ...
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from rl_core import registrar
from rl_runtime.planning._errors import InsufficientSlotsError, PlanningError

logger = logging.getLogger(__name__)

ApportionStrategy = Callable[[Sequence[int], int], tuple[int, ...]]

APPORTION_STRATEGIES: dict[str, ApportionStrategy] = {}
"""Strategy name -> function (weights in priority order, slots) -> one share per sub-graph."""

register_apportion_strategy = registrar(APPORTION_STRATEGIES, "apportion strategy")

MIN_SHARE = 1
"""Every sub-graph runs on at least one worker of its own (there is no time-sharing of a slot)."""


def check_apportion_args(weights: Sequence[int], slots: int) -> None:
    """Raise `PlanningError` for bad weights or slots and `InsufficientSlotsError` for fewer slots than weights."""
    if not weights:
        raise PlanningError("apportioning needs at least one sub-graph weight, got none")
    for index, weight in enumerate(weights):
        # bool is an int subclass, but True is a typo here, not a weight.
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise PlanningError(f"weights[{index}] must be a non-negative int (a parameter count), got {weight!r}")
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise PlanningError(f"slots must be an int, got {slots!r}")
    if slots < len(weights) * MIN_SHARE:
        raise InsufficientSlotsError(
            f"{slots} slots cannot hold {len(weights)} sub-graphs: each needs at least {MIN_SHARE}; "
            f"give the planner at least {len(weights) * MIN_SHARE} slots"
        )


@register_apportion_strategy("even")
def apportion_even(weights: Sequence[int], slots: int) -> tuple[int, ...]:
    """Equal shares; the `slots % n` left over go one each to the heaviest sub-graphs (ties: earlier first)."""
    check_apportion_args(weights, slots)
    base, extra = divmod(slots, len(weights))
    shares = [base] * len(weights)
    for index in _heaviest_first(weights)[:extra]:
        shares[index] += 1
    return tuple(shares)


@register_apportion_strategy("param_aware")
def apportion_param_aware(weights: Sequence[int], slots: int) -> tuple[int, ...]:
    """Shares proportional to weight by the largest-remainder method, every share at least one.

    A sub-graph whose proportional quota is below one gets exactly one slot, and the rest are shared in
    proportion among the others, repeatedly, until every remaining quota is at least one; those get their
    quota's floor plus one more for the largest remainders (ties: heavier, then earlier). Heavier never
    gets fewer slots than lighter. When every weight is 0 (no node declares `param_count`) there is nothing
    to be proportional to, and the shares are `even`'s.
    """
    check_apportion_args(weights, slots)
    if sum(weights) == 0:
        logger.info("param_aware: no sub-graph declares a param_count (all weights 0); apportioning evenly")
        return apportion_even(weights, slots)
    shares = [0] * len(weights)
    open_ = list(range(len(weights)))
    seats = slots
    while True:
        open_weight = sum(weights[i] for i in open_)
        # quota_i = seats * w_i / open_weight < 1, kept in integers so ties are exact.
        pinned = [i for i in open_ if weights[i] * seats < open_weight]
        if not pinned:
            break
        for index in pinned:
            shares[index] = MIN_SHARE
        seats -= MIN_SHARE * len(pinned)
        pinned_set = set(pinned)
        open_ = [i for i in open_ if i not in pinned_set]
    # Every open quota is >= 1 now, so open_ is not empty (the quotas sum to seats >= len(open_)).
    remainders: dict[int, int] = {}
    for index in open_:
        shares[index], remainders[index] = divmod(weights[index] * seats, open_weight)
    leftover = seats - sum(shares[i] for i in open_)
    by_remainder = sorted(open_, key=lambda i: (-remainders[i], -weights[i], i))
    for index in by_remainder[:leftover]:
        shares[index] += 1
    return tuple(shares)


def _heaviest_first(weights: Sequence[int]) -> list[int]:
    return sorted(range(len(weights)), key=lambda i: (-weights[i], i))
