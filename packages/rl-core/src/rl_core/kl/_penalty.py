"""KL in the reward: subtract `kl_coef × KL(π‖π_ref)` from every response token's score."""

# isinstance checks here validate callers that do not type-check (YAML, user code) at run time.
# pyright: reportUnnecessaryIsInstance=false

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.kl._registry import get_kl_estimator
from rl_core.schema import REF_LOG_PROBS, RESPONSE_MASK, TOKEN_LEVEL_SCORES

REWARD_KL_METRIC = "actor/reward_kl_penalty"
"""Metric key: the batch mean of the per-sequence masked mean KL (what `AdaptiveKLController.update` takes)."""

REWARD_KL_COEF_METRIC = "actor/reward_kl_penalty_coeff"
"""Metric key: the coefficient the penalty used."""


class KLPenaltyOutput(NamedTuple):
    """Rewards with the KL penalty applied, the per-token KL, and the metrics to log.

    Attributes:
        token_level_rewards: `(B, T)` scores minus `kl_coef × kl`; equal to the scores off the mask.
        kl: `(B, T)` per-token KL estimate, 0 off the mask.
        metrics: `REWARD_KL_METRIC` and `REWARD_KL_COEF_METRIC`, as Python floats.
    """

    token_level_rewards: torch.Tensor
    kl: torch.Tensor
    metrics: dict[str, float]


@torch.no_grad()
def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    kl_coef: float,
    estimator: str = "k1",
) -> KLPenaltyOutput:
    """Penalise each response token's score by `kl_coef` times its KL estimate (verl's `apply_kl_penalty`).

    The KL metric averages each sequence's masked mean KL over the sequences that have at least one response
    token (0 when none has); feed it to the KL controller's `update` with `n_steps=B`. Values off the mask
    (NaN included) never reach the rewards or the metric. No gradient flows: rewards are targets.

    Args:
        token_level_scores: `(B, T)` float, the reward model's per-token scores.
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the rollout-time policy.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.
        response_mask: `(B, T)` 0/1 or bool, response tokens.
        kl_coef: the penalty coefficient, >= 0 (a controller's `value`).
        estimator: a name in `KL_ESTIMATORS` ("k1" by default, as verl's "kl").

    Returns:
        `KLPenaltyOutput(token_level_rewards, kl, metrics)`.
    """
    dims: dict[str, int] = {}
    check_tensor(TOKEN_LEVEL_SCORES, token_level_scores, ("B", "T"), dims=dims, floating=True)
    check_tensor("log_probs", log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(REF_LOG_PROBS, ref_log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    check_same_device(
        token_level_scores=token_level_scores,
        log_probs=log_probs,
        ref_log_probs=ref_log_probs,
        response_mask=response_mask,
    )
    if (
        isinstance(kl_coef, bool)
        or not isinstance(kl_coef, (int, float))
        or not (math.isfinite(kl_coef) and kl_coef >= 0)
    ):
        raise ValueError(f"kl_coef must be a finite number >= 0, got {kl_coef!r}")
    estimate = get_kl_estimator(estimator)
    mask = as_bool_mask(RESPONSE_MASK, response_mask)

    per_token = estimate(log_probs, ref_log_probs)
    # torch.where, not multiplication: a NaN/inf estimate under a zero mask must not leak.
    kl = torch.where(mask, per_token, torch.zeros((), dtype=per_token.dtype, device=per_token.device))
    token_level_rewards = token_level_scores - kl_coef * kl

    tokens_per_sequence = mask.sum(dim=-1)
    has_tokens = tokens_per_sequence > 0
    sequence_kl = kl.sum(dim=-1) / tokens_per_sequence.clamp(min=1)
    mean_kl = sequence_kl.sum() / has_tokens.sum().clamp(min=1)
    metrics = {REWARD_KL_METRIC: float(mean_kl), REWARD_KL_COEF_METRIC: float(kl_coef)}
    return KLPenaltyOutput(token_level_rewards, kl, metrics)
