"""Under `data_parallel="ddp"`, the loss normaliser's global counts ride on the gradient all-reduce instead of a
collective of their own, saving one round trip per optimizer step.

A `RescalableLoss` (rl-core's `PolicyObjective` and `ValueObjective`, or a plain function wrapped in `NormalizedLoss`)
divides by one product of the normaliser's counts and is linear in its inverse; the loss itself says so (`rescalable`)
and converts (`rescale`), since its aggregation mode is its own. So every rank runs the backward under the same
provisional normaliser (`PROVISIONAL`: all ones; it must be the same on every rank, since the ranks' gradients are
summed before the rescale), appends those counts to the gradients' all-reduce (token and sequence counts split in two
exact parts; each rank's width in its own slot of a world-size vector, so the sum carries every rank's width and the
horizon is their max), and then scales the summed gradients and the summed loss by the loss's
`rescale(PROVISIONAL, global counts)`: what the separate all-gather would have given, to float rounding. Metrics of
such a loss must not read the normaliser (the actor's and critic's are masked means).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from rl_core.losses import AGGREGATION_DIVISORS, LossNormalizer, rescaled_normalizer
from rl_engines.training._errors import BatchError
from rl_engines.training._types import Batch, ForwardOutput, LossFn, RescalableLoss

_SPLIT = 4096.0
"""Counts travel as `count // 4096` and `count % 4096`: both stay exact in a float32 sum far past 2**24."""

_EXACT_DTYPES = (torch.float32, torch.float64)

PROVISIONAL = LossNormalizer(1.0, 1.0, 1.0)
"""What every rank's micro-batch losses are divided by before the global counts are known: the same on every rank
(the summed gradient is rescaled as a whole), and 1 so that the rescale is `1 / divisor(global)`."""


@dataclass(frozen=True)
class NormalizedLoss:
    """A plain `LossFn` made a `RescalableLoss`: it declares that it divides by the normaliser only through the
    aggregation mode `aggregation` (every term aggregated with that one mode, metrics independent of the normaliser),
    so a replicated engine may learn the global counts after the backward. (rl-core's objectives say so themselves.)

    Attributes:
        fn: the loss function, `fn(outputs, micro_batch, normalizer) -> (loss, metrics)` (a `LossFn`).
        aggregation: the `rl_core.losses.AGGREGATIONS` mode every term of `fn` uses.
    """

    fn: LossFn
    aggregation: str

    def __call__(
        self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        """`fn`'s loss of the micro-batch."""
        return self.fn(outputs, micro_batch, normalizer)

    @property
    def rescalable(self) -> bool:
        """Whether `aggregation` is known to be linear in one divisor (`rl_core.losses.AGGREGATION_DIVISORS`)."""
        return self.aggregation in AGGREGATION_DIVISORS

    def rescale(
        self, provisional: LossNormalizer, num_tokens: float, num_sequences: float, horizon: float
    ) -> tuple[LossNormalizer, float]:
        """`rl_core.losses.rescaled_normalizer` of `aggregation`."""
        return rescaled_normalizer(self.aggregation, provisional, num_tokens, num_sequences, horizon)


def deferrable(loss_fn: object, parameters: Sequence[torch.nn.Parameter]) -> bool:
    """Whether the normaliser's counts can ride on the gradient all-reduce (else the separate collective): a
    `RescalableLoss` that is `rescalable`, with float32/float64 gradients (exact counts). Depends on nothing a rank
    holds alone, so every rank decides alike."""
    if not (isinstance(loss_fn, RescalableLoss) and loss_fn.rescalable):
        return False
    return all(p.dtype in _EXACT_DTYPES for p in parameters if p.requires_grad)


def _split(count: float) -> list[float]:
    high = count // _SPLIT
    return [high, count - high * _SPLIT]


@dataclass(frozen=True)
class DeferredCounts:
    """This rank's counts and the provisional normaliser its backward ran under.

    Attributes:
        provisional: what each micro-batch's loss was divided by (`PROVISIONAL`, the same on every rank).
        riders: float64 `(4 + world,)`: token and sequence counts split (see `_SPLIT`), then this rank's width in
            its own slot; summed over ranks by the gradient all-reduce.
    """

    provisional: LossNormalizer
    riders: torch.Tensor

    @classmethod
    def of(cls, response_mask: torch.Tensor, *, rank: int, world_size: int) -> DeferredCounts:
        """The counts of this rank's `response_mask` `(B, T)`."""
        mask = response_mask.bool()
        tokens, sequences, width = float(mask.sum()), float(mask.any(dim=-1).sum()), float(mask.shape[-1])
        widths = [0.0] * world_size
        widths[rank] = width
        riders = torch.tensor([*_split(tokens), *_split(sequences), *widths], dtype=torch.float64)
        return cls(PROVISIONAL, riders)

    def counts(self, summed: torch.Tensor) -> tuple[float, float, float]:
        """The step's global (tokens, sequences, horizon) from the summed `riders` `(4 + world,)`: what the loss's
        `rescale` turns into the global normaliser."""
        values = summed.double().tolist()
        tokens = values[0] * _SPLIT + values[1]
        sequences = values[2] * _SPLIT + values[3]
        if tokens == 0:
            raise BatchError("response_mask has no response tokens on any rank; there is nothing to train on")
        return tokens, sequences, max(values[4:])
