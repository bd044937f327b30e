"""Group Policy Gradient's loss (Chu et al. 2025, https://arxiv.org/abs/2504.02546): plain REINFORCE."""

from __future__ import annotations

from rl_core.losses._aggregation import LossNormalizer
from rl_core.losses._common import masked_batch, reduce
from rl_core.losses._registry import register_policy_loss
from rl_core.losses._types import PolicyLossInputs, PolicyLossOutput


@register_policy_loss("gpg")
def gpg(
    inputs: PolicyLossInputs,
    *,
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
) -> PolicyLossOutput:
    """GPG's loss `-A * log_probs`, as verl's `gpg` loss: no ratio, no clipping (`old_log_probs` is unused).

    Args:
        inputs: the batch (`rollout_is_weights`, if given, multiply the per-token loss).
        aggregation: an `AGGREGATIONS` mode.
        normalizer: global counts of the optimizer step; `None` means this batch is the whole step.

    Returns:
        The loss and no metrics (none of verl's apply).
    """
    batch = masked_batch(inputs)
    per_token = -batch.advantages * batch.log_probs
    return PolicyLossOutput(reduce(per_token, batch, aggregation, normalizer), {})
