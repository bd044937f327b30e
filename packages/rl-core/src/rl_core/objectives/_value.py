"""The critic's objective: the clipped value loss onto the returns, as one value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import torch

from rl_core.losses import (
    AGGREGATION_DIVISORS,
    LossNormalizer,
    ValueLossOutput,
    clipped_value_loss,
    get_aggregation,
    rescaled_normalizer,
)
from rl_core.losses._common import metric
from rl_core.schema import RESPONSE_MASK, RETURNS, VALUES


class ValueOutputs(Protocol):
    """What the objective reads of a forward (a training engine's `ForwardOutput` fits): `(B, T)` float per-token
    values (with grad), None when the forward did not compute them."""

    @property
    def values(self) -> torch.Tensor | None: ...


@dataclass(frozen=True)
class ValueObjective:
    """`rl_core.losses.clipped_value_loss` of the predicted values against the batch's `returns`, clipped around its
    `values` and aggregated with `aggregation` over the step's global counts: the critic's loss, built once and called
    by a training engine on each micro-batch.

    Attributes:
        clip_range: > 0, how far a prediction may move from the batch's `values` before its error stops shrinking
            (inf: no clip).
        aggregation: a `rl_core.losses.AGGREGATIONS` mode.
        rescalable: whether `aggregation` divides by one product of the normaliser's counts (`AGGREGATION_DIVISORS`),
            so a replicated engine may learn the step's global counts after the backward (`rescale`). Filled in on
            construction.
    """

    clip_range: float = math.inf
    aggregation: str = "token-mean"
    required_fields: ClassVar[tuple[str, ...]] = (VALUES, RETURNS, RESPONSE_MASK)
    """The batch fields `__call__` reads."""
    rescalable: bool = field(init=False)

    def __post_init__(self) -> None:
        if not self.clip_range > 0:
            raise ValueError(
                f"ValueObjective.clip_range: expected a number > 0 (inf: no clip), found {self.clip_range}"
            )
        get_aggregation(self.aggregation)
        # Frozen: the derived flag is set once here.
        object.__setattr__(self, "rescalable", self.aggregation in AGGREGATION_DIVISORS)

    def rescale(
        self, provisional: LossNormalizer, num_tokens: float, num_sequences: float, horizon: float
    ) -> tuple[LossNormalizer, float]:
        """As `PolicyObjective.rescale`: `rl_core.losses.rescaled_normalizer` of this objective's `aggregation`."""
        return rescaled_normalizer(self.aggregation, provisional, num_tokens, num_sequences, horizon)

    def __call__(
        self, outputs: ValueOutputs, batch: Mapping[str, torch.Tensor], normalizer: LossNormalizer
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The micro-batch's loss (0-dim, divided by `normalizer`'s global counts) and verl's metrics
        `critic/vf_clipfrac` and `critic/vpred_mean` (detached masked means, independent of the normaliser)."""
        missing = [name for name in self.required_fields if name not in batch]
        if missing:
            raise KeyError(f"ValueObjective needs batch fields {missing}; found {sorted(batch)}")
        values = outputs.values
        if values is None:
            raise ValueError("the value loss needs the forward's values, which it returned as None; ask for them")
        mask = batch[RESPONSE_MASK]
        out: ValueLossOutput = clipped_value_loss(
            values,
            batch[VALUES],
            batch[RETURNS],
            mask,
            clip_range=self.clip_range,
            aggregation=self.aggregation,
            normalizer=normalizer,
        )
        return out.loss, {"critic/vf_clipfrac": out.clipfrac, "critic/vpred_mean": metric(values, mask.bool())}
