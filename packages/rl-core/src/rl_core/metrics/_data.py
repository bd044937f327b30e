"""verl's per-step data metrics of a batch: `compute_data_metrics` (score, reward, advantage, return, value and
length stats) and `count_tokens` (verl's `global_token_num`)."""

from __future__ import annotations

import logging

import torch

from rl_core._validation import as_bool_mask, check_tensor
from rl_core.metrics._batch import Batch, require, response_mask, sequence_lengths, token_counts
from rl_core.metrics._errors import MetricsError
from rl_core.schema import (
    ADVANTAGES,
    ATTENTION_MASK,
    RESPONSE_LEN,
    RETURNS,
    TOKEN_LEVEL_REWARDS,
    TOKEN_LEVEL_SCORES,
    VALUES,
)

logger = logging.getLogger(__name__)

NAN = float("nan")
VF_EXPLAINED_VAR_EPSILON = 1e-5
"""verl's guard against a constant return: 1 - Var(returns - values) / (Var(returns) + 1e-5)."""
_MIN_SAMPLES_FOR_VARIANCE = 2
"""The unbiased variance (verl's `torch.var`) of fewer than two tokens is undefined: we report NaN."""


def _stats(prefix: str, values: torch.Tensor, what: str) -> dict[str, float]:
    if values.numel() == 0:
        logger.warning("no %s to summarise this step; %s/{mean,max,min} are NaN", what, prefix)
        return {f"{prefix}/mean": NAN, f"{prefix}/max": NAN, f"{prefix}/min": NAN}
    return {
        f"{prefix}/mean": values.mean().item(),
        f"{prefix}/max": values.max().item(),
        f"{prefix}/min": values.min().item(),
    }


def _length_stats(prefix: str, lengths: torch.Tensor, limit: int) -> dict[str, float]:
    stats = _stats(prefix, lengths, f"{prefix} samples")
    stats[f"{prefix}/clip_ratio"] = (lengths == limit).double().mean().item() if lengths.numel() else NAN
    return stats


def _explained_variance(returns: torch.Tensor, values: torch.Tensor) -> float:
    if returns.numel() < _MIN_SAMPLES_FOR_VARIANCE:
        return NAN
    return (1.0 - torch.var(returns - values) / (torch.var(returns) + VF_EXPLAINED_VAR_EPSILON)).item()


def _check_length_limit(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MetricsError(f"{name} must be an int >= 1 (the configured maximum, in tokens), got {value!r}")
    return value


def _token_tensor(batch: Batch, key: str, dims: dict[str, int]) -> torch.Tensor:
    tensor = require(batch, key, f"critic/{key}/*")
    return check_tensor(key, tensor, ("B", "T"), dims=dims, floating=True).double()


def compute_data_metrics(
    batch: Batch, *, max_prompt_length: int, max_response_length: int, use_critic: bool | None = None
) -> dict[str, float]:
    """verl's data metrics of one step's batch, with verl's names and definitions.

    Args:
        batch: `token_level_scores`, `token_level_rewards`, `advantages`, `returns`, `response_mask` (B, T),
            with `values` (B, T) when the critic metrics are wanted, and either `prompt_len`, `response_len` (B,)
            or `attention_mask` (B, T) for the lengths.
        max_prompt_length, max_response_length: the configured limits; a length equal to its limit was clipped.
        use_critic: report `critic/values/*` and `critic/vf_explained_var`; None means "when `values` is present".

    Score and reward are per-sample sums over the response mask, over samples with a non-empty response only;
    advantages, returns and values are over response tokens. Also reports `response_length_non_aborted/*` and
    `response/aborted_ratio` (an aborted sample has an empty response), as verl does.
    """
    max_prompt_length = _check_length_limit("max_prompt_length", max_prompt_length)
    max_response_length = _check_length_limit("max_response_length", max_response_length)
    dims: dict[str, int] = {}
    mask = response_mask(batch, dims)
    scores = _token_tensor(batch, TOKEN_LEVEL_SCORES, dims)
    rewards = _token_tensor(batch, TOKEN_LEVEL_REWARDS, dims)
    advantages = _token_tensor(batch, ADVANTAGES, dims)
    returns = _token_tensor(batch, RETURNS, dims)
    prompt_length, response_length = sequence_lengths(batch)
    check_tensor(RESPONSE_LEN, response_length, (dims["B"],))

    kept = response_length != 0
    valid_returns = returns[mask]
    metrics = {
        **_stats("critic/score", (scores * mask).sum(-1)[kept], "non-aborted samples"),
        **_stats("critic/rewards", (rewards * mask).sum(-1)[kept], "non-aborted samples"),
        **_stats("critic/advantages", advantages[mask], "response tokens"),
        **_stats("critic/returns", valid_returns, "response tokens"),
    }
    if use_critic is None:
        use_critic = VALUES in batch
    if use_critic:
        valid_values = _token_tensor(batch, VALUES, dims)[mask]
        metrics.update(_stats("critic/values", valid_values, "response tokens"))
        metrics["critic/vf_explained_var"] = _explained_variance(valid_returns, valid_values)
    metrics.update(_length_stats("response_length", response_length, max_response_length))
    metrics.update(_length_stats("response_length_non_aborted", response_length[kept], max_response_length))
    metrics["response/aborted_ratio"] = (~kept).double().mean().item()
    metrics.update(_length_stats("prompt_length", prompt_length, max_prompt_length))
    return {name: float(value) for name, value in metrics.items()}


def count_tokens(batch: Batch) -> int:
    """verl's `global_token_num` summed: non-padding prompt+response tokens (`attention_mask`, else the lengths)."""
    if ATTENTION_MASK in batch:
        attention = check_tensor(ATTENTION_MASK, batch[ATTENTION_MASK], ("B", "T"))
        return int(as_bool_mask(ATTENTION_MASK, attention).sum().item())
    prompt, response = token_counts(batch)
    return prompt + response
