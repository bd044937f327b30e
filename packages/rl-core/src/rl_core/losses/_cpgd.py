"""The clipped policy-gradient loss of CPGD (Liu et al. 2025, "CPGD: Toward Stable Rule-based Reinforcement Learning
for Language Models", https://arxiv.org/abs/2505.12504; official code ModalMinds/MM-EUREKA, `--use_cpg_loss`).

CPGD maximises, per response token,

    min(log r * A, clip(log r, log(1 - eps_low), log(1 + eps_high)) * A) - alpha * KL(pi_old || pi_theta)

with `log r = log pi_theta - log pi_old`: a policy gradient on the log-ratio (not PPO's ratio, whose
importance weight can explode), clipped on the side that would increase the objective, plus a
policy-drift penalty. The minimum equals a one-sided clamp: `min(log r, log(1 + eps_high))` for `A > 0`,
`max(log r, log(1 - eps_low))` otherwise. The policy-drift KL term is not part of this loss: add
`rl_core.kl`'s KL loss against `old_log_probs` with coefficient `alpha` (the paper's forward KL).

The official code clamps the log-probability itself (`clamp(log_probs, max=log(1 + eps) + old_log_probs)`),
which adds the constant `-A * old_log_probs` to the loss value and leaves the gradient unchanged; this
loss uses the paper's log-ratio form, so it is 0 at `log_probs == old_log_probs`.
"""

from __future__ import annotations

import math

import torch

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import clip_range, masked_batch, metric, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput

DEFAULT_CLIP_RATIO = 0.2
"""The official code's `clip_eps`."""


@register_policy_loss("cpgd")
def cpgd(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
    clip_ratio: float = DEFAULT_CLIP_RATIO,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
) -> PolicyLossOutput:
    """CPGD's clipped log-ratio policy-gradient loss (see the module docstring for the formula and the paper).

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode (the official code uses "token-mean").
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.
        clip_ratio: in [0, 1), symmetric clip range.
        clip_ratio_low: in [0, 1), lower clip range (bound `log(1 - clip_ratio_low)`); defaults to `clip_ratio`.
        clip_ratio_high: >= 0, upper clip range (bound `log(1 + clip_ratio_high)`); defaults to `clip_ratio`.

    Returns:
        The loss and `pg_clipfrac` (non-zero-advantage tokens whose log-ratio was clipped), `ppo_kl`.
    """
    low, high = clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    if not low < 1:
        name = "clip_ratio" if clip_ratio_low is None else "clip_ratio_low"
        raise ValueError(f"{name} must be < 1 for cpgd (its bound is log(1 - {name})), got {low}")
    batch = masked_batch(inputs)
    advantages = batch.advantages
    log_ratio = batch.log_probs - batch.old_log_probs
    positive = advantages > 0
    clipped = torch.where(positive, log_ratio.clamp(max=math.log1p(high)), log_ratio.clamp(min=math.log1p(-low)))
    per_token = -advantages * clipped
    # A token with zero advantage contributes nothing either way; like PPO's, the fraction skips it.
    was_clipped = (clipped != log_ratio) & (advantages != 0)
    metrics = {"pg_clipfrac": metric(was_clipped, batch.mask), "ppo_kl": metric(-log_ratio, batch.mask)}
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), metrics)
