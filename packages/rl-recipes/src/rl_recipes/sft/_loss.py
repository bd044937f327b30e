"""The warm start's loss: the token-mean negative log-likelihood of the response tokens."""

from __future__ import annotations

from rl_core.losses import LossNormalizer, aggregate_loss
from rl_core.schema import RESPONSE_MASK
from rl_engines.training import Batch, ForwardOutput, ForwardSpec, LossOutput

LOG_PROBS_ONLY = ForwardSpec(log_probs=True, response_only=True)
"""The forward the loss needs: log-probabilities of the response tokens only."""


def response_nll_loss(outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
    """`-log p(token)` summed over the micro-batch's response tokens and divided by the step's global token
    count, so the micro-batches and ranks add up to the step's token-mean NLL.

    Args:
        outputs: the engine's forward; `log_probs` is `(b, T)` float with grad.
        micro_batch: holds `response_mask` `(b, T)` 0/1, the tokens the loss covers.
        normalizer: the step's global counts (the engine computes them for its `train_step`).
    """
    if outputs.log_probs is None:
        raise ValueError(
            "response_nll_loss needs log-probs: run it with ForwardSpec(log_probs=True), e.g. LOG_PROBS_ONLY"
        )
    loss = aggregate_loss(-outputs.log_probs, micro_batch[RESPONSE_MASK], "token-mean", normalizer)
    return LossOutput(loss, {})
