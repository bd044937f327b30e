"""Reading the sample-schema tensors that metrics need: masks, per-sample lengths and token counts."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rl_core._validation import as_bool_mask, check_tensor
from rl_core.metrics._errors import MetricsError
from rl_core.schema import ATTENTION_MASK, PROMPT_LEN, RESPONSE_LEN, RESPONSE_MASK

Batch = Mapping[str, torch.Tensor]
"""A step's tensors keyed by the sample-schema names (`attention_mask`, `response_mask`, `advantages`, ...)."""


def require(batch: Batch, key: str, purpose: str) -> torch.Tensor:
    """`batch[key]`, or a `MetricsError` naming the missing key, what needs it and the keys present."""
    if key not in batch:
        present = ", ".join(sorted(batch)) or "none"
        raise MetricsError(f"batch has no {key!r}, which {purpose} needs; keys present: {present}")
    return batch[key]


def response_mask(batch: Batch, dims: dict[str, int]) -> torch.Tensor:
    """`response_mask` `(B, T)` as bool."""
    mask = check_tensor(RESPONSE_MASK, require(batch, RESPONSE_MASK, "token-level statistics"), ("B", "T"), dims=dims)
    return as_bool_mask(RESPONSE_MASK, mask)


def sequence_lengths(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample prompt and response lengths `(B,)` float64.

    `prompt_len` and `response_len` when the batch has both; otherwise (single-turn batches only) the response
    length is `response_mask.sum(-1)` and the prompt length the rest of `attention_mask.sum(-1)`.
    """
    dims: dict[str, int] = {}
    if PROMPT_LEN in batch and RESPONSE_LEN in batch:
        prompt = check_tensor(PROMPT_LEN, batch[PROMPT_LEN], ("B",), dims=dims)
        response = check_tensor(RESPONSE_LEN, batch[RESPONSE_LEN], ("B",), dims=dims)
        return prompt.double(), response.double()
    attention = check_tensor(
        ATTENTION_MASK, require(batch, ATTENTION_MASK, "prompt and response lengths"), ("B", "T"), dims=dims
    )
    response = response_mask(batch, dims).sum(-1).double()
    return as_bool_mask(ATTENTION_MASK, attention).sum(-1).double() - response, response


def token_counts(batch: Batch) -> tuple[int, int]:
    """The batch's total prompt tokens and total response tokens."""
    prompt, response = sequence_lengths(batch)
    return int(prompt.sum().item()), int(response.sum().item())
