"""KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
https://arxiv.org/abs/2505.22617): a KL penalty on the few tokens whose advantage/log-prob covariance is largest.
"""

from __future__ import annotations

import torch

from rl_core._validation import check_positive
from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_KL_COV_RATIO = 2e-4
"""Fraction of the batch's response tokens that get the KL penalty (verl's default)."""

DEFAULT_PPO_KL_COEF = 0.1
"""Weight of `|log_probs - old_log_probs|` on the selected tokens (verl's `policy_loss.ppo_kl_coef` default)."""


@register_policy_loss("kl_cov")
def kl_cov(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    kl_cov_ratio: float = DEFAULT_KL_COV_RATIO,
    ppo_kl_coef: float = DEFAULT_PPO_KL_COEF,
) -> PolicyLossOutput:
    """The unclipped surrogate `-A * r`, plus `ppo_kl_coef * |log r|` on the top-covariance tokens, as verl's `kl_cov`.

    `r = exp(log_probs - old_log_probs)` (unclamped, as verl). Per response token,
    `cov = (A - mean(A)) * (log_probs - mean(log_probs))` (means over the batch's response tokens); the
    `max(1, int(kl_cov_ratio * num_response_tokens))` tokens with the largest `cov` (`torch.topk`; ties
    go as topk breaks them) get the penalty. Counts are of this batch, not the global step.

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        kl_cov_ratio: in (0, 1], fraction of response tokens penalised.
        ppo_kl_coef: >= 0, weight of the penalty.

    Returns:
        The loss and `ppo_kl` (mean of old minus new log-prob), `ppo_kl_abs` (mean of its absolute value,
        which verl logs under `ppo_kl` for this loss).
    """
    if not 0 < kl_cov_ratio <= 1:
        raise ValueError(f"kl_cov_ratio must be in (0, 1], got {kl_cov_ratio}")
    check_positive("ppo_kl_coef", ppo_kl_coef, allow_zero=True)
    batch = masked_batch(inputs)
    mask, advantages = batch.mask, batch.advantages
    log_ratio = batch.log_probs - batch.old_log_probs
    surrogate = -advantages * torch.exp(log_ratio)
    with torch.no_grad():
        valid_index = mask.flatten().nonzero().squeeze(-1)
        penalised = torch.zeros(mask.numel(), dtype=torch.bool, device=mask.device)
        if valid_index.numel() > 0:
            valid_advantages = advantages.flatten()[valid_index]
            valid_log_probs = batch.log_probs.detach().flatten()[valid_index]
            cov = (valid_advantages - valid_advantages.mean()) * (valid_log_probs - valid_log_probs.mean())
            num_penalised = max(1, int(valid_index.numel() * kl_cov_ratio))
            penalised[valid_index[torch.topk(cov, num_penalised).indices]] = True
        penalised = penalised.view_as(mask)
    per_token = torch.where(penalised, surrogate + ppo_kl_coef * log_ratio.abs(), surrogate)
    metrics = {"ppo_kl": metric(-log_ratio, mask), "ppo_kl_abs": metric(log_ratio.abs(), mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
