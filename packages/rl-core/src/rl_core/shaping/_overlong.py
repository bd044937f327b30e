"""DAPO's soft overlong punishment: a length penalty that ramps up over the last tokens of the length budget."""

from __future__ import annotations

import torch

from rl_core._validation import check_positive, check_tensor


@torch.no_grad()
def overlong_penalty(
    response_lengths: torch.Tensor,
    *,
    max_response_length: int,
    buffer_length: int,
    penalty_factor: float = 1.0,
) -> torch.Tensor:
    """The reward to add for each response's length (DAPO, https://arxiv.org/abs/2503.14476, eq. 13).

    0 up to `max_response_length - buffer_length` tokens, then falling linearly by
    `penalty_factor / buffer_length` per token to `-penalty_factor` at `max_response_length`, and
    `-penalty_factor` beyond it (verl's reward manager never sees longer responses; we clamp rather than
    extrapolate).

    Args:
        response_lengths: `(B,)` integer, >= 0, the number of response tokens of each sample.
        max_response_length: > 0, the generation budget.
        buffer_length: in [1, max_response_length], the length of the penalty ramp.
        penalty_factor: >= 0, the penalty at and beyond `max_response_length`.

    Returns:
        `(B,)` float (the default dtype), values in `[-penalty_factor, 0]`.
    """
    check_tensor("response_lengths", response_lengths, (None,), floating=False)
    if response_lengths.dtype == torch.bool:
        raise ValueError("response_lengths must be integer token counts, got a bool tensor")
    if bool((response_lengths < 0).any()):
        raise ValueError("response_lengths must be >= 0")
    check_positive("max_response_length", max_response_length)
    check_positive("buffer_length", buffer_length)
    check_positive("penalty_factor", penalty_factor, allow_zero=True)
    if buffer_length > max_response_length:
        raise ValueError(
            f"buffer_length ({buffer_length}) must be <= max_response_length ({max_response_length}); "
            "the penalty ramp cannot start before length 0"
        )
    ramp_start = max_response_length - buffer_length
    exceed = (response_lengths - ramp_start).clamp(min=0, max=buffer_length)
    return -(exceed.to(torch.get_default_dtype()) / buffer_length) * penalty_factor
