"""Under `data_parallel="ddp"`, the loss normaliser's global counts ride on the gradient all-reduce instead of a
collective of their own, saving one round trip per optimizer step.

A loss that declares its aggregation mode (`NormalizedLoss`) divides by one product of the normaliser's counts
(`rl_core.losses.AGGREGATION_DIVISORS`) and is linear in its inverse. So every rank runs the backward under the
same provisional normaliser (`PROVISIONAL`: all ones; it must be the same on every rank, since the ranks' gradients
are summed before the rescale), appends those counts to the gradients' all-reduce (token and sequence
counts split in two exact parts; each rank's width in its own slot of a world-size vector, so the sum carries every
rank's width and the horizon is their max), and then scales the summed gradients and the summed loss by
`divisor(provisional) / divisor(global)`: what the separate all-gather would have given, to float rounding.
Metrics of such a loss must not read the normaliser (the actor's and critic's are masked means).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from rl_core.losses import AGGREGATION_DIVISORS, LossNormalizer, aggregation_divisor
from rl_engines.training._errors import BatchError
from rl_engines.training._types import Batch, ForwardOutput, LossFn

_SPLIT = 4096.0
"""Counts travel as `count // 4096` and `count % 4096`: both stay exact in a float32 sum far past 2**24."""

_EXACT_DTYPES = (torch.float32, torch.float64)

PROVISIONAL = LossNormalizer(1.0, 1.0, 1.0)
"""What every rank's micro-batch losses are divided by before the global counts are known: the same on every rank
(the summed gradient is rescaled as a whole), and 1 so that the rescale is `1 / divisor(global)`."""


@dataclass(frozen=True)
class NormalizedLoss:
    """A `LossFn` that declares it divides by the normaliser only through the aggregation mode `aggregation`
    (every term aggregated with that one mode, metrics independent of the normaliser), so a replicated engine may
    learn the global counts after the backward.

    Attributes:
        fn: the loss function, `fn(outputs, micro_batch, normalizer) -> (loss, metrics)` (a `LossFn`, such as
            rl-core's `PolicyObjective`).
        aggregation: the `rl_core.losses.AGGREGATIONS` mode every term of `fn` uses.
    """

    fn: LossFn
    aggregation: str

    def __call__(
        self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        """`fn`'s loss of the micro-batch."""
        return self.fn(outputs, micro_batch, normalizer)


def deferrable_mode(loss_fn: object, parameters: Sequence[torch.nn.Parameter]) -> str | None:
    """The aggregation mode whose divisor can ride on the gradient all-reduce, or None for the separate collective:
    a `NormalizedLoss` of a known-linear mode, with float32/float64 gradients (exact counts). Depends on nothing a
    rank holds alone, so every rank decides alike."""
    mode = loss_fn.aggregation if isinstance(loss_fn, NormalizedLoss) else None
    if mode not in AGGREGATION_DIVISORS:
        return None
    if any(p.dtype not in _EXACT_DTYPES for p in parameters if p.requires_grad):
        return None
    return mode


def _split(count: float) -> list[float]:
    high = count // _SPLIT
    return [high, count - high * _SPLIT]


@dataclass(frozen=True)
class DeferredCounts:
    """This rank's counts and the provisional normaliser its backward ran under.

    Attributes:
        mode: the aggregation mode of the step's loss.
        provisional: what each micro-batch's loss was divided by (`PROVISIONAL`, the same on every rank).
        riders: float64 `(4 + world,)`: token and sequence counts split (see `_SPLIT`), then this rank's width in
            its own slot; summed over ranks by the gradient all-reduce.
    """

    mode: str
    provisional: LossNormalizer
    riders: torch.Tensor

    @classmethod
    def of(cls, response_mask: torch.Tensor, mode: str, *, rank: int, world_size: int) -> DeferredCounts:
        """The counts of this rank's `response_mask` `(B, T)`."""
        mask = response_mask.bool()
        tokens, sequences, width = float(mask.sum()), float(mask.any(dim=-1).sum()), float(mask.shape[-1])
        widths = [0.0] * world_size
        widths[rank] = width
        riders = torch.tensor([*_split(tokens), *_split(sequences), *widths], dtype=torch.float64)
        return cls(mode, PROVISIONAL, riders)

    def resolve(self, summed: torch.Tensor) -> tuple[LossNormalizer, float]:
        """The global normaliser from the summed `riders` `(4 + world,)`, and the factor that turns a loss or
        gradient under the provisional normaliser into one under the global one."""
        values = summed.double().tolist()
        tokens = values[0] * _SPLIT + values[1]
        sequences = values[2] * _SPLIT + values[3]
        if tokens == 0:
            raise BatchError("response_mask has no response tokens on any rank; there is nothing to train on")
        normalizer = LossNormalizer(tokens, sequences, max(values[4:]))
        provisional = aggregation_divisor(self.mode, self.provisional)
        final = aggregation_divisor(self.mode, normalizer)
        assert provisional is not None and final is not None  # the mode was checked by deferrable_mode
        return normalizer, provisional / final
