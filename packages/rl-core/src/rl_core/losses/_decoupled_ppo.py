"""AReaL's decoupled PPO objective for asynchronous, off-policy training (Fu et al. 2025, arXiv:2505.24298).

Asynchronous training learns from samples a *behaviour* policy `pi_behav` (the rollout engine, possibly
several versions old) generated. Standard PPO would clip the ratio against `pi_behav`, which can lie far
away from the current policy and makes the trust region stale. The decoupled objective separates the two jobs:

- the trust region is centred on the *proximal* policy `pi_prox`: the trainer's policy at the start of
  the update, whose log-probs it recomputes (`old_log_probs`): `r = pi_theta / pi_prox`, clipped as PPO;
- the off-policyness is corrected by the importance weight `w = pi_prox / pi_behav`
  (`exp(old_log_probs - rollout_log_probs)`), which multiplies the clipped per-token loss.

As AReaL's `ppo_actor_loss_fn`, tokens whose weight exceeds `behav_imp_weight_cap` get weight 0 (they stay
in the normaliser's counts: they are dropped from the gradient, not from the batch). When the proximal and
behaviour policies agree (`w = 1` everywhere) the objective is PPO's clipped loss exactly.
"""

from __future__ import annotations

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import LOG_RATIO_BOUND, clip_range, masked_batch, masked_mean, metric, reduce
from rl_core.losses._ppo import DEFAULT_CLIP_RATIO, DEFAULT_CLIP_RATIO_C, check_dual_clip, clipped_surrogate
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._rollout_correction import weight_statistics
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_BEHAV_IMP_WEIGHT_CAP = 5.0
"""AReaL's `behav_imp_weight_cap` in its asynchronous GRPO examples: tokens with weight > 5 are dropped."""


@register_policy_loss("decoupled_ppo", advantage_multiple=True)
def decoupled_ppo(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float | None = DEFAULT_CLIP_RATIO_C,
    behav_imp_weight_cap: float | None = DEFAULT_BEHAV_IMP_WEIGHT_CAP,
) -> PolicyLossOutput:
    """AReaL's decoupled PPO loss: PPO clipped against the proximal policy, weighted by proximal / behaviour.

    Per token, with `r = exp(clamp(log_probs - old_log_probs, -20, 20))` and
    `w = exp(clamp(old_log_probs - rollout_log_probs, -20, 20))`, the loss is
    `w' * max(-A * r, -A * clip(r, 1 - clip_ratio_low, 1 + clip_ratio_high))` (dual-clipped at
    `-A * clip_ratio_c` for `A < 0`, as `ppo`), where `w' = w` if `w <= behav_imp_weight_cap`, else 0.

    Args:
        inputs: the batch: `log_probs` (current policy), `old_log_probs` (the proximal policy, recomputed by
            the trainer), `rollout_log_probs` (the behaviour policy, reported by the rollout engine; required),
            `advantages`, `response_mask`, all `(B, T)`; optional `rollout_is_weights` multiply as well.
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: >= 0, symmetric clip range.
        clip_ratio_low: >= 0, lower clip range; defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range; defaults to `clip_ratio`.
        clip_ratio_c: > 1, dual-clip bound; `None` turns dual clip off.
        behav_imp_weight_cap: > 1, tokens whose behaviour weight exceeds it leave the gradient; `None`: no cap.

    Returns:
        The loss and `ppo`'s metrics, plus the behaviour weights' statistics under verl's names
        (`rollout_is_mean` of the applied weights, `rollout_is_masked_fraction` of capped tokens,
        `rollout_is_std`, `_min`, `_max`, `_eff_sample_size`, `_ratio_fraction_high`, `_ratio_fraction_low`)
        and `behav_kl` (mean of `old_log_probs - rollout_log_probs`).
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    check_dual_clip(clip_ratio_c)
    if behav_imp_weight_cap is not None and not behav_imp_weight_cap > 1:
        raise ValueError(
            f"behav_imp_weight_cap must be > 1 (a cap on proximal/behaviour weights around 1) or None, "
            f"got {behav_imp_weight_cap}"
        )
    if inputs.rollout_log_probs is None:
        raise ValueError(
            "decoupled_ppo needs rollout_log_probs (the behaviour policy's log-probs): build PolicyLossInputs with them"
        )
    batch = masked_batch(inputs)
    per_token, metrics = clipped_surrogate(batch, low, high, clip_ratio_c)
    mask = batch.mask
    zero = batch.old_log_probs.new_zeros(())
    behav_log_ratio = torch.where(mask, batch.old_log_probs - inputs.rollout_log_probs, zero).detach()
    raw = torch.where(mask, torch.exp(behav_log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)), zero)
    capped = mask & (raw > behav_imp_weight_cap) if behav_imp_weight_cap is not None else torch.zeros_like(mask)
    weights = torch.where(capped, zero, raw)
    upper = float("inf") if behav_imp_weight_cap is None else behav_imp_weight_cap
    metrics.update(
        {
            "rollout_is_mean": masked_mean(weights, mask),
            "rollout_is_masked_fraction": metric(capped, mask),
            **weight_statistics(raw, mask, upper, 1.0 / upper),
            "behav_kl": metric(behav_log_ratio, mask),
        }
    )
    return PolicyLossOutput(reduce(per_token * weights, batch, aggregation, normalizer), metrics)
