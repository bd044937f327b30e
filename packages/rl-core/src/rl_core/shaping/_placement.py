"""Turning one score per sequence into token-level rewards, as verl's reward managers do."""

from __future__ import annotations

import torch

from rl_core._errors import ShapeError
from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.schema import RESPONSE_MASK

_MAX_ROWS_LISTED = 10
"""How many offending rows an error message lists before it only gives the count."""


@torch.no_grad()
def scores_to_token_level(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Put each sequence's score on its last response token; every other token gets 0.

    "Last" is the highest position where `response_mask` is set, so masks with holes (tool output inside a
    multi-turn response) place the score on the final generated token.

    Args:
        scores: `(B,)` float, one score per sequence.
        response_mask: `(B, T)` 0/1 or bool; every row needs at least one response token.

    Returns:
        `(B, T)` token-level rewards in the dtype of `scores`.
    """
    dims: dict[str, int] = {}
    check_tensor("scores", scores, ("B",), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    check_same_device(scores=scores, response_mask=response_mask)
    mask = as_bool_mask(RESPONSE_MASK, response_mask)
    empty = [int(row) for row in (~mask.any(dim=-1)).nonzero().flatten()]
    if empty:
        listed = ", ".join(str(row) for row in empty[:_MAX_ROWS_LISTED])
        more = f" and {len(empty) - _MAX_ROWS_LISTED} more" if len(empty) > _MAX_ROWS_LISTED else ""
        raise ShapeError(
            f"response_mask has no response token in rows [{listed}]{more}; a score needs a token to sit on "
            "(drop those rows or give each at least one response token)"
        )
    positions = torch.arange(mask.shape[-1], device=mask.device)
    last = torch.where(mask, positions, -1).amax(dim=-1, keepdim=True)
    out = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
    return out.scatter_(-1, last, scores.unsqueeze(-1))
