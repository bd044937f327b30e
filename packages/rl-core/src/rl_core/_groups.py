"""Group bookkeeping shared across rl-core: contiguous group numbers and per-group sums."""

from __future__ import annotations

from typing import cast

import torch


def group_index(group_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Map `(B,)` arbitrary integer ids to `(B,)` group numbers 0..G-1 (sorted by id); also return G."""
    # torch.unique is a boolean-dispatch wrapper that torch leaves untyped (a stub gap).
    unique, inverse = cast(
        "tuple[torch.Tensor, torch.Tensor]",
        torch.unique(group_ids, return_inverse=True),  # pyright: ignore[reportUnknownMemberType]
    )
    return inverse, unique.numel()


def group_sum(values: torch.Tensor, index: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Sum `(B, ...)` values into `(num_groups, ...)` by the `(B,)` group numbers in `index`."""
    out = torch.zeros((num_groups, *values.shape[1:]), dtype=values.dtype, device=values.device)
    return out.index_add_(0, index, values)
