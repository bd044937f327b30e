"""The actor's objective: a registered policy loss, the KL-to-reference loss and the entropy bonus, as one value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import torch

from rl_core.kl import get_kl_estimator, kl_loss
from rl_core.losses import (
    AGGREGATION_DIVISORS,
    LossNormalizer,
    PolicyLoss,
    PolicyLossInputs,
    PolicyLossOutput,
    aggregate_loss,
    get_aggregation,
    get_policy_loss,
    is_advantage_multiple,
    rescaled_normalizer,
    with_rollout_correction,
)
from rl_core.losses._common import metric
from rl_core.schema import ADVANTAGES, OLD_LOG_PROBS, REF_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS

_CORRECTION_METRIC_PREFIX = "rollout_is_"
"""Metrics of `rl_core.losses.rollout_correction`; reported under verl's `rollout_corr/`, not `actor/`."""


class PolicyOutputs(Protocol):
    """What the objective reads of a forward (a training engine's `ForwardOutput` fits): `(B, T)` float per-token
    log-probs (with grad) and entropy, each None when the forward did not compute it."""

    @property
    def log_probs(self) -> torch.Tensor | None: ...

    @property
    def entropy(self) -> torch.Tensor | None: ...


def _output(value: torch.Tensor | None, name: str, needed_by: str) -> torch.Tensor:
    if value is None:
        raise ValueError(f"the {needed_by} needs the forward's {name}, which it returned as None; ask for it")
    return value


def _check_coef(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"PolicyObjective.{name}: expected a finite number >= 0, found {value!r}")


@dataclass(frozen=True, eq=False)
class PolicyObjective:
    """Policy loss + `kl_coef` * KL loss - `entropy_coef` * entropy, each aggregated with `aggregation` over the
    step's global counts: the actor's loss, resolved once from names and numbers (every name is looked up on
    construction, so an unknown one is refused before any step), then called on each micro-batch.

    Attributes:
        policy_loss: a `rl_core.losses.POLICY_LOSSES` name.
        params: the policy loss's keyword parameters (kept as a read-only copy).
        aggregation: a `rl_core.losses.AGGREGATIONS` mode, used by every term.
        kl_coef: >= 0, weight of the KL-to-reference loss (0: none; the batch then needs no `ref_log_probs`).
        kl_estimator: a `rl_core.kl.KL_ESTIMATORS` name, for the KL loss and its metric.
        entropy_coef: >= 0, weight of the entropy bonus (0: none).
        rollout_correction: keyword settings of `with_rollout_correction` (mode, level, upper, lower) wrapping the
            policy loss, or None.
        loss_fn: the policy loss function the objective runs (rollout-corrected when set), filled in on construction.
        inert_on_zero_advantage: whether a row whose advantage is 0 on every response token adds nothing to the loss
            or its gradient whatever the forward gives: a policy loss registered as a multiple of the advantage with
            no other term (no KL loss, entropy bonus or rollout correction). Filled in on construction.
        required_fields: the batch fields `__call__` reads (`ref_log_probs` only with a KL loss).
        rescalable: whether `aggregation` divides by one product of the normaliser's counts (`AGGREGATION_DIVISORS`);
            every term uses it, so the loss and its gradient under one normaliser are a fixed multiple of those under
            another (`rescale`), and a replicated engine may learn the step's global counts after the backward.
            Filled in on construction.
    """

    policy_loss: str = "ppo"
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    aggregation: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    rollout_correction: Mapping[str, Any] | None = None
    loss_fn: PolicyLoss = field(init=False, repr=False)
    inert_on_zero_advantage: bool = field(init=False)
    required_fields: tuple[str, ...] = field(init=False)
    rescalable: bool = field(init=False)

    def __post_init__(self) -> None:
        coefs: dict[str, object] = {"kl_coef": self.kl_coef, "entropy_coef": self.entropy_coef}
        for name, value in coefs.items():
            _check_coef(name, value)
        get_aggregation(self.aggregation)
        get_kl_estimator(self.kl_estimator)
        loss_fn = get_policy_loss(self.policy_loss)
        if self.rollout_correction is not None:
            loss_fn = with_rollout_correction(loss_fn, **self.rollout_correction)
        inert = (
            is_advantage_multiple(self.policy_loss)
            and self.rollout_correction is None
            and self.kl_coef == 0
            and self.entropy_coef == 0
        )
        needs = (ADVANTAGES, RESPONSE_MASK, *((REF_LOG_PROBS,) if self.kl_coef > 0 else ()))
        # Frozen: the derived values are set once here and never change; the copy keeps the caller's dict out.
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "loss_fn", loss_fn)
        object.__setattr__(self, "inert_on_zero_advantage", inert)
        object.__setattr__(self, "required_fields", needs)
        object.__setattr__(self, "rescalable", self.aggregation in AGGREGATION_DIVISORS)

    def rescale(
        self, provisional: LossNormalizer, num_tokens: float, num_sequences: float, horizon: float
    ) -> tuple[LossNormalizer, float]:
        """The step's global normaliser from its counts, and the factor that turns this objective's loss (and its
        gradient) computed under `provisional` into the loss under it (`rl_core.losses.rescaled_normalizer` of
        `aggregation`); only for a `rescalable` objective (ValueError otherwise)."""
        return rescaled_normalizer(self.aggregation, provisional, num_tokens, num_sequences, horizon)

    def __call__(
        self, outputs: PolicyOutputs, batch: Mapping[str, torch.Tensor], normalizer: LossNormalizer
    ) -> PolicyLossOutput:
        """The micro-batch's loss (0-dim, divided by `normalizer`'s global counts) and verl's metrics (`actor/...`,
        `rollout_corr/rollout_is_...`, detached 0-dim masked means, independent of the normaliser).

        Args:
            outputs: the forward's `(B, T)` log-probs (with grad) and, with an entropy bonus, entropy.
            batch: the micro-batch's `required_fields`, `(B, T)`; optional `old_log_probs` and `rollout_log_probs`.
                Without `old_log_probs` the old log-probs are the detached log-probs of this very forward (an
                on-policy update): the ratio is exactly 1 and the gradient is the on-policy one.
            normalizer: the optimizer step's global counts.
        """
        missing = [name for name in self.required_fields if name not in batch]
        if missing:
            raise KeyError(f"PolicyObjective needs batch fields {missing}; found {sorted(batch)}")
        mask = batch[RESPONSE_MASK]
        log_probs = _output(outputs.log_probs, "log_probs", "policy loss")
        old_log_probs = batch.get(OLD_LOG_PROBS)
        inputs = PolicyLossInputs(
            log_probs,
            log_probs.detach() if old_log_probs is None else old_log_probs,
            batch[ADVANTAGES],
            mask,
            rollout_log_probs=batch.get(ROLLOUT_LOG_PROBS),
        )
        loss, policy_metrics = self.loss_fn(inputs, aggregation=self.aggregation, normalizer=normalizer, **self.params)
        metrics = {
            f"{'rollout_corr' if name.startswith(_CORRECTION_METRIC_PREFIX) else 'actor'}/{name}": value
            for name, value in policy_metrics.items()
        }
        if self.kl_coef > 0:
            ref = batch[REF_LOG_PROBS]
            kl = kl_loss(
                log_probs, ref, mask, estimator=self.kl_estimator, aggregation=self.aggregation, normalizer=normalizer
            )
            loss = loss + self.kl_coef * kl
            metrics["actor/kl_loss"] = metric(get_kl_estimator(self.kl_estimator)(log_probs, ref), mask.bool())
        if self.entropy_coef > 0:
            entropy = _output(outputs.entropy, "entropy", "entropy bonus (entropy_coef > 0)")
            loss = loss - self.entropy_coef * aggregate_loss(entropy, mask, self.aggregation, normalizer)
            metrics["actor/entropy"] = metric(entropy, mask.bool())
        return PolicyLossOutput(loss, metrics)
