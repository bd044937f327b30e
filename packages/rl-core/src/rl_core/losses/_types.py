"""The batch every policy loss reads, the pair it returns, and the policy-loss call signature."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import torch

from rl_core._validation import as_bool_mask, check_same_device, check_tensor
from rl_core.losses._aggregation import LossNormalizer
from rl_core.schema import ADVANTAGES, OLD_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS


@dataclass(frozen=True, eq=False)
class PolicyLossInputs:
    """One (micro-)batch of a policy update, validated on construction.

    Attributes:
        log_probs: `(B, T)` float log-probabilities of the response tokens under the current policy
            (requires grad in training).
        old_log_probs: `(B, T)` float log-probabilities under the policy that the update starts from.
        advantages: `(B, T)` float advantages.
        response_mask: `(B, T)` 0/1 or bool mask of the tokens that count. Values of every other
            tensor under a zero mask never reach a loss, its gradient or a metric, NaN and inf included.
        rollout_is_weights: optional `(B, T)` float, detached weights that multiply the per-token loss
            (the rollout importance-sampling correction, see `rollout_correction`).
        rollout_log_probs: optional `(B, T)` float log-probabilities under the inference engine that
            generated the batch; read only by a loss made with `with_rollout_correction`.
        mask: `(B, T)` bool view of `response_mask`, filled in on construction.
    """

    log_probs: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    response_mask: torch.Tensor
    rollout_is_weights: torch.Tensor | None = None
    rollout_log_probs: torch.Tensor | None = None
    mask: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        dims: dict[str, int] = {}
        check_tensor("log_probs", self.log_probs, ("B", "T"), dims=dims, floating=True)
        check_tensor(OLD_LOG_PROBS, self.old_log_probs, ("B", "T"), dims=dims, floating=True)
        check_tensor(ADVANTAGES, self.advantages, ("B", "T"), dims=dims, floating=True)
        check_tensor(RESPONSE_MASK, self.response_mask, ("B", "T"), dims=dims)
        if self.rollout_is_weights is not None:
            check_tensor("rollout_is_weights", self.rollout_is_weights, ("B", "T"), dims=dims, floating=True)
            if self.rollout_is_weights.requires_grad:
                # The weights change the sampling measure, not the objective: no gradient may flow through them.
                raise ValueError("rollout_is_weights must not require grad; pass rollout_is_weights.detach()")
        if self.rollout_log_probs is not None:
            check_tensor(ROLLOUT_LOG_PROBS, self.rollout_log_probs, ("B", "T"), dims=dims, floating=True)
        check_same_device(
            log_probs=self.log_probs,
            old_log_probs=self.old_log_probs,
            advantages=self.advantages,
            response_mask=self.response_mask,
            rollout_is_weights=self.rollout_is_weights,
            rollout_log_probs=self.rollout_log_probs,
        )
        # The dataclass is frozen; the derived bool mask is set once here and never changes.
        object.__setattr__(self, "mask", as_bool_mask(RESPONSE_MASK, self.response_mask))


class PolicyLossOutput(NamedTuple):
    """A policy loss and its diagnostics.

    Attributes:
        loss: 0-dim tensor, aggregated with the requested mode and normaliser.
        metrics: detached 0-dim tensors over this batch's response tokens, with verl's meanings where they
            apply: `pg_clipfrac` (fraction of tokens whose loss was clipped), `pg_clipfrac_lower` (fraction
            of negative-advantage tokens held by the dual clip), `ppo_kl` (mean of old minus new log-prob).
    """

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]


class PolicyLoss(Protocol):
    """A policy loss: the batch, the aggregation, then its own keyword-only parameters (all with defaults).

    `*args: Any, **params: Any` is the typing spec's gradual form: any loss taking the batch first and
    `aggregation` and `normalizer` by keyword fits.
    """

    def __call__(
        self,
        inputs: PolicyLossInputs,
        /,
        *args: Any,
        aggregation: str = ...,
        normalizer: LossNormalizer | None = ...,
        **params: Any,
    ) -> PolicyLossOutput: ...
