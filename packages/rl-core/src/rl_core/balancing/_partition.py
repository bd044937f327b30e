"""The result of a partition and the argument checks every balancing function shares."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch

from rl_core.balancing._errors import BalancingError

Number = int | float
_NUMBER_TYPES = frozenset({int, float})


@dataclass(frozen=True)
class Partition:
    """Items split into parts.

    Attributes:
        parts: one list of item indices per part, each in ascending order; every index appears exactly once.
        loads: the summed workload of each part.
        max_over_mean: heaviest load divided by the mean load (1.0 is perfect balance; 1.0 when all loads are 0).
    """

    parts: list[list[int]]
    loads: list[Number]
    max_over_mean: float

    @classmethod
    def from_parts(cls, parts: list[list[int]], workloads: Sequence[Number]) -> Partition:
        """Build a Partition, summing each part's workloads."""
        loads = [sum(workloads[i] for i in part) for part in parts]
        return cls(parts=parts, loads=loads, max_over_mean=max_over_mean(loads))


def max_over_mean(loads: Sequence[Number]) -> float:
    """Heaviest load over the mean load; 1.0 for an empty or all-zero sequence."""
    total = sum(loads)
    if not loads or total == 0:
        return 1.0
    return max(loads) * len(loads) / total


def as_number_list(values: Sequence[Number] | torch.Tensor, name: str) -> list[Number]:
    """`values` as a list of Python numbers; a tensor must be 1-D `(n,)`."""
    if isinstance(values, torch.Tensor):
        if values.dim() != 1:
            raise BalancingError(f"{name} must be a 1-D tensor (n,), got shape {tuple(values.shape)}")
        if values.dtype == torch.bool or values.is_complex():
            raise BalancingError(f"{name} must hold real numbers, got dtype {values.dtype}")
        return cast("list[Number]", values.tolist())  # pyright: ignore[reportUnknownMemberType]  # torch: bare `list`
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        kind = type(values).__name__
        raise BalancingError(f"{name} must be a sequence of numbers or a 1-D tensor, got {kind}")
    out = list(values)
    # One C-level pass over the types keeps validation cheap next to the algorithms themselves.
    if not set(map(type, out)) <= _NUMBER_TYPES:
        bad = next(i for i, v in enumerate(out) if type(v) not in _NUMBER_TYPES)
        raise BalancingError(f"{name}[{bad}] must be an int or a float, got {out[bad]!r}")
    return out


def check_workloads(values: Sequence[Number] | torch.Tensor, name: str = "workloads") -> list[Number]:
    """`values` as a list of finite numbers >= 0, or BalancingError naming the first bad index."""
    out = as_number_list(values, name)
    if not out:
        raise BalancingError(f"{name} is empty; pass at least one item")
    if min(out) < 0 or not math.isfinite(sum(out)):
        bad = next(i for i, v in enumerate(out) if not (v >= 0 and math.isfinite(v)))
        raise BalancingError(f"{name}[{bad}] must be a finite number >= 0, got {out[bad]!r}")
    return out


def check_token_counts(values: Sequence[int] | torch.Tensor, name: str = "token_counts") -> list[int]:
    """`values` as a list of ints > 0, or BalancingError naming the first bad index."""
    out = as_number_list(values, name)
    if not out:
        raise BalancingError(f"{name} is empty; pass at least one sample")
    if float in set(map(type, out)):
        bad = next(i for i, v in enumerate(out) if type(v) is float)
        raise BalancingError(f"{name}[{bad}] must be an int token count, got {out[bad]!r}")
    if min(out) <= 0:
        bad = next(i for i, v in enumerate(out) if v <= 0)
        raise BalancingError(f"{name}[{bad}] must be > 0 (a sample has at least one token), got {out[bad]}")
    return cast("list[int]", out)  # no float is left


def check_positive_int(value: object, name: str) -> int:
    """`value` if it is an int >= 1 (not a bool), else BalancingError naming `name`."""
    if type(value) is not int or value < 1:
        raise BalancingError(f"{name} must be an int >= 1, got {value!r}")
    return value
