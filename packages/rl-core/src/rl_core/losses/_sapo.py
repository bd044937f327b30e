"""Soft Adaptive Policy Optimization (Gao et al. 2025, https://arxiv.org/abs/2511.20347)."""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import clamped_log_ratio, masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_TAU_POS = 1.0
"""Gate temperature of positive-advantage tokens (verl's default)."""

DEFAULT_TAU_NEG = 1.05
"""Gate temperature of the other tokens; a little sharper, so negative updates are damped sooner."""

_GATE_SCALE = 4.0
"""`4 / tau` makes the gate's slope at ratio 1 exactly 1, i.e. the on-policy gradient is REINFORCE's."""


@register_policy_loss("sapo")
def sapo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    tau_pos: float = DEFAULT_TAU_POS,
    tau_neg: float = DEFAULT_TAU_NEG,
) -> PolicyLossOutput:
    """SAPO's soft-gated loss `-A * sigmoid(tau * (r - 1)) * 4 / tau`, as verl's `sapo` loss.

    `r = exp(clamp(log_probs - old_log_probs, -20, 20))`; `tau = tau_pos` where `A > 0`, else `tau_neg`.
    The sigmoid gate replaces PPO's hard clip: gradients fade smoothly as `r` leaves 1. The paper
    aggregates with "seq-mean-token-mean" (verl forces it; here `aggregation` is honoured).

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        tau_pos: > 0, temperature for positive advantages.
        tau_neg: > 0, temperature for zero and negative advantages.

    Returns:
        The loss and `ppo_kl`.
    """
    for name, tau in (("tau_pos", tau_pos), ("tau_neg", tau_neg)):
        if not tau > 0:
            raise ValueError(f"{name} must be > 0, got {tau}")
    batch = masked_batch(inputs)
    log_ratio = clamped_log_ratio(batch)
    ratio = torch.exp(log_ratio)
    advantages = batch.advantages
    tau = torch.where(advantages > 0, advantages.new_tensor(tau_pos), advantages.new_tensor(tau_neg))
    gate = torch.sigmoid(tau * (ratio - 1)) * (_GATE_SCALE / tau)
    per_token = -gate * advantages
    metrics = {"ppo_kl": metric(-log_ratio, batch.mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
