"""KL as a loss: a per-token KL estimate reduced to a scalar like any other loss term."""

from __future__ import annotations

import torch

from rl_core._validation import check_tensor
from rl_core.kl._registry import get_kl_estimator
from rl_core.losses._aggregation import LossNormalizer, aggregate_loss, get_aggregation
from rl_core.schema import REF_LOG_PROBS, RESPONSE_MASK


def kl_loss(
    log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    estimator: str = "k3",
    aggregation: str = "token-mean",
    normalizer: LossNormalizer | None = None,
) -> torch.Tensor:
    """The KL(π‖π_ref) penalty term of the actor loss (GRPO's `β·KL`, without the β).

    The estimator decides which divergence the gradient follows (see its docstring): "k3" (the default, as
    GRPO) is unbiased in value but its gradient is that of the reverse KL(π_ref‖π); "k3+", "k1+" or "k2" give
    the gradient of KL(π‖π_ref).

    Args:
        log_probs: `(B, T)` float, log-probs of the sampled tokens under the policy being trained.
        ref_log_probs: `(B, T)` float, their log-probs under the reference policy.
        response_mask: `(B, T)` 0/1 or bool, tokens that count.
        estimator: a name in `KL_ESTIMATORS`.
        aggregation: a name in `rl_core.losses.AGGREGATIONS`.
        normalizer: the optimizer step's global counts; `None` means this batch is the whole step.

    Returns:
        A 0-dim tensor.
    """
    dims: dict[str, int] = {}
    check_tensor("log_probs", log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(REF_LOG_PROBS, ref_log_probs, ("B", "T"), dims=dims, floating=True)
    check_tensor(RESPONSE_MASK, response_mask, ("B", "T"), dims=dims)
    estimate = get_kl_estimator(estimator)
    get_aggregation(aggregation)  # fail on an unknown mode before any work is done
    return aggregate_loss(estimate(log_probs, ref_log_probs), response_mask, aggregation, normalizer)
