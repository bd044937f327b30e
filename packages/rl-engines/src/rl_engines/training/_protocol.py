"""The `TrainEngine` protocol: what the actor, critic and reference roles (and rl-runtime) need of a trainer.

Implementations: `FSDPEngine` (FSDP2, `torch.distributed.fsdp.fully_shard`). A Megatron-core engine
(the `rl-engines[megatron]` extra) belongs beside it as another implementation of this protocol, in its
own module that imports megatron lazily: it receives the same batch mapping and micro-batch plan, returns
the same `(B, T)` outputs and `StepResult`, and exports weights under Hugging Face names, so the roles and
the runtime work with either unchanged. Tensor/pipeline parallel layouts stay inside that engine.

Collective calls: with more than one rank, every method except the properties is a collective; all
ranks call it in the same order with their own shard of the data.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from rl_core.losses import LossNormalizer
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec, LossFn, StepResult


@runtime_checkable
class TrainEngine(Protocol):
    """A data-parallel model trainer that runs caller-planned micro-batches (see the module docstring)."""

    @property
    def world_size(self) -> int:
        """Number of data-parallel ranks."""
        ...

    @property
    def rank(self) -> int:
        """This process's data-parallel rank."""
        ...

    @property
    def global_step(self) -> int:
        """Optimizer steps applied so far (skipped steps do not count)."""
        ...

    @property
    def trainable(self) -> bool:
        """Whether the engine has an optimizer (False for a frozen, forward-only engine)."""
        ...

    @property
    def has_value_head(self) -> bool:
        """Whether the model has a value head (the critic), so `ForwardSpec(values=True)` works."""
        ...

    @property
    def micro_batches_in_lockstep(self) -> bool:
        """Whether every rank must run the same number of micro-batches in a forward or step (sharded engines
        pair their collectives per micro-batch); False lets each rank plan its own."""
        ...

    def forward(self, batch: Batch, micro_batches: Sequence[Sequence[int]], spec: ForwardSpec) -> ForwardOutput:
        """Per-token outputs of `batch` without gradients, each `(B, T)` float32 on the batch's device.

        Args:
            batch: `input_ids`, optional `attention_mask`, `position_ids`, `response_mask`, all `(B, T)`.
            micro_batches: row indices of each micro-batch, covering the batch exactly once.
            spec: which outputs to compute.
        """
        ...

    def global_normalizer(self, response_mask: torch.Tensor, *, horizon: float | None = None) -> LossNormalizer:
        """The counts of `response_mask` `(B, T)` summed over every rank (the step's `LossNormalizer`)."""
        ...

    def train_step(
        self,
        batch: Batch,
        micro_batches: Sequence[Sequence[int]],
        normalizer: LossNormalizer,
        loss_fn: LossFn,
        spec: ForwardSpec,
    ) -> StepResult:
        """One optimizer step: forward and backward every micro-batch, then clip and apply the gradient
        (skipped and reported when the loss or gradient is not finite)."""
        ...

    def step_lr_scheduler(self) -> float:
        """Advance the learning-rate schedule by one step; return the new rate."""
        ...

    def export_weights(
        self, bucket_bytes: int, dtype: torch.dtype | None = None
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """Full tensors under Hugging Face names, in buckets of at most `bucket_bytes`."""
        ...

    def export_hf(self, path: str | Path, dtype: torch.dtype | None = None) -> Path:
        """Write a folder `AutoModelForCausalLM.from_pretrained` loads."""
        ...

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a resumable checkpoint atomically."""
        ...

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore a checkpoint written by `save_checkpoint`; return its step count."""
        ...

    def offload(self) -> None:
        """Move parameters and optimizer state to CPU memory until `onload` (no-op on a CPU engine)."""
        ...

    def onload(self) -> None:
        """Move parameters and optimizer state back to the compute device."""
        ...
