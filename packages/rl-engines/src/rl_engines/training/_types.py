"""The values that cross the training engine's interface: what to compute, what comes back, what a loss is."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

import torch

from rl_core.losses import LossNormalizer
from rl_engines.training._errors import TrainConfigError

Batch = Mapping[str, torch.Tensor]
"""Tensors keyed by the sample-schema names (`input_ids`, `attention_mask`, `response_mask`, ...), all `(B, ...)`."""


@dataclass(frozen=True)
class ForwardSpec:
    """Which per-token outputs a forward computes.

    A token's output at position `t` is predicted from the hidden state at `t - 1`: `log_probs[b, t]` is
    the log-probability of `input_ids[b, t]` given the tokens before it, and `values[b, t]` the value of
    the state before generating it (verl's alignment for response tokens).

    Attributes:
        log_probs: compute per-token log-probabilities.
        entropy: compute per-token entropy of the next-token distribution.
        values: compute per-token values from the value head.
        temperature: divides the logits before the softmax, as the sampler did.
        response_only: compute only where `response_mask` is set (when the batch has one); otherwise at
            every token with a preceding token in its sequence.
        return_outputs: `train_step` only: also return the training forward's detached outputs, merged over the
            micro-batches in the batch's row order (`StepResult.outputs`); `forward` always returns them.
        inert_outputs: `train_step` only, for the rows the batch marks `inert_rows` where the engine runs them apart
            (no collective in its forward): compute their outputs without autograd (True), or run no forward for them
            and leave their outputs 0 (False), for a loss whose value, gradient and metrics do not read those rows'
            outputs (an on-policy PPO step, whose ratio is 1 whatever the log-probs).
    """

    log_probs: bool = True
    entropy: bool = False
    values: bool = False
    temperature: float = 1.0
    response_only: bool = True
    return_outputs: bool = False
    inert_outputs: bool = True

    def __post_init__(self) -> None:
        if not (self.log_probs or self.entropy or self.values):
            raise TrainConfigError("ForwardSpec asks for nothing; set log_probs, entropy or values to True")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise TrainConfigError(f"ForwardSpec.temperature must be a finite number > 0, got {self.temperature}")


class ForwardOutput(NamedTuple):
    """Per-token outputs, each `(B, T)` float32 aligned with `input_ids` and 0 where not computed, or None
    when not asked for."""

    log_probs: torch.Tensor | None
    entropy: torch.Tensor | None
    values: torch.Tensor | None


class LossOutput(NamedTuple):
    """A micro-batch's loss (0-dim, already divided by the step's global counts) and detached 0-dim metrics."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor]


LossFn = Callable[[ForwardOutput, Batch, LossNormalizer], tuple[torch.Tensor, Mapping[str, torch.Tensor]]]
"""`loss_fn(outputs, micro_batch, normalizer)`: the micro-batch's model outputs (with grad), its tensors,
and the step's global normaliser -> `(loss, metrics)`, as `LossOutput` (or any pair such as rl-core's
`PolicyObjective` returns). Summed over micro-batches and ranks it is the step's loss."""


@runtime_checkable
class RescalableLoss(Protocol):
    """A `LossFn` that divides by the normaliser only through one product of its counts, so its loss and gradient
    under one normaliser are a fixed multiple of those under another: a replicated engine may then run the backward
    under a provisional normaliser and learn the step's global counts after it (`_deferred_norm`). rl-core's
    `PolicyObjective` and `ValueObjective` are such losses; `NormalizedLoss` makes one of a plain function."""

    def __call__(
        self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer
    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor]]:
        """The micro-batch's loss and metrics, as a `LossFn`."""
        ...

    @property
    def rescalable(self) -> bool:
        """Whether `rescale` holds for this loss (its aggregation mode is linear in one divisor)."""
        ...

    def rescale(
        self, provisional: LossNormalizer, num_tokens: float, num_sequences: float, horizon: float
    ) -> tuple[LossNormalizer, float]:
        """The global normaliser of the counts, and the factor from the loss under `provisional` to the loss under
        it."""
        ...


@dataclass(frozen=True)
class StepResult:
    """What one optimizer step did.

    Attributes:
        loss: the step's loss summed over micro-batches and ranks (the full-batch loss).
        grad_norm: the global gradient norm before clipping (NaN/inf when the step was skipped for it).
        skipped: True when the loss or the gradient was not finite and the optimizer was not applied.
        lr: the learning rate the step used.
        num_micro_batches: micro-batches run on this rank (the engine's plan under its token budget).
        normalizer: the step's global counts over every rank that each micro-batch's loss was divided by.
        metrics: the loss function's metrics, averaged over this rank's micro-batches.
        outputs: with `ForwardSpec.return_outputs`, the training forward's detached outputs, each `(B, T)` float32 on
            the batch's device in the batch's row order (as `forward` returns them before the step); else None.
    """

    loss: float
    grad_norm: float
    skipped: bool
    lr: float
    num_micro_batches: int
    normalizer: LossNormalizer
    metrics: dict[str, float] = field(default_factory=dict)
    outputs: ForwardOutput | None = None
