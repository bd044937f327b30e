"""The `TrainEngine` protocol: what the actor, critic and reference roles (in rl-runtime) need of a trainer.

Engines compute, the caller decides: the caller hands over one batch (a mini-batch: one optimizer step) and a
loss function; the engine plans its own micro-batches under its `MicroBatchConfig` token budget
(`rl_core.balancing`) and computes the step's global `LossNormalizer` (the token and sequence counts over every
rank) itself. Splitting a step into mini-batches for PPO epochs stays with the caller.

Implementations: `FSDPEngine` (FSDP2, `torch.distributed.fsdp.fully_shard`). A Megatron-core engine
(the `rl-engines[megatron]` extra) belongs beside it as another implementation of this protocol, in its
own module that imports megatron lazily: it receives the same batch mapping, plans its micro-batches under
its own budget, returns the same `(B, T)` outputs and `StepResult`, and exports weights under Hugging Face
names, so the roles and the runtime work with either unchanged. Tensor/pipeline parallel layouts stay
inside that engine.

Weights to the rollout: as in AReaL's TrainEngine (`connect_engine`, `update_weights`), the engine publishes its
own weights. Connected once to a `rl_engines.sync.WeightPublisher` (`connect_weight_sync`), each
`update_weights(version)` exports its buckets and hands them to the publisher, which moves and verifies them; the
caller (the runtime's actor role) decides only when, and under which version.

Collective calls: with more than one rank, every method except the properties is a collective; all
ranks call it in the same order with their own shard of the data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from rl_engines.sync import SyncReport, WeightPublisher
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec, LossFn, StepResult


@runtime_checkable
class TrainEngine(Protocol):
    """A data-parallel model trainer that plans its own micro-batches and loss normaliser (see the module docstring)."""

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
    def splits_inert_rows(self) -> bool:
        """Whether `train_step` runs the rows a batch marks `inert_rows` apart from the others (without autograd, or
        not at all with `ForwardSpec.inert_outputs` False); False where a forward is a collective (FSDP2 sharding),
        whose ranks must all run the same forwards."""
        ...

    @property
    def hf_config(self) -> Any:
        """The transformers config of the model (what a rollout engine of the same model is built from)."""
        ...

    @property
    def has_value_head(self) -> bool:
        """Whether the model has a value head (the critic), so `ForwardSpec(values=True)` works."""
        ...

    def forward(self, batch: Batch, spec: ForwardSpec) -> ForwardOutput:
        """Per-token outputs of `batch` without gradients, each `(B, T)` float32 on the batch's device, run in
        micro-batches the engine plans under its token budget.

        Args:
            batch: `input_ids`, optional `attention_mask`, `position_ids`, `response_mask`, all `(B, T)`. For a
                vision-language-action model: the instruction in `instruction_ids`/`instruction_mask` `(B, L)`,
                `pixel_values` `(B, S, C, H, W)`, `action_tokens` `(B, S, A)` and `response_mask` `(B, S*A)`; the
                outputs are then `(B, S*A)`, one per action token.
            spec: which outputs to compute.
        """
        ...

    def train_step(self, batch: Batch, loss_fn: LossFn, spec: ForwardSpec) -> StepResult:
        """One optimizer step on `batch` (this rank's share of one mini-batch): the engine plans the micro-batches
        under its token budget and computes the step's global `LossNormalizer` from `response_mask` `(B, T)` over
        every rank, then runs forward and backward on every micro-batch (`loss_fn(outputs, micro_batch,
        normalizer)`), clips and applies the gradient (skipped and reported when the loss or gradient is not
        finite). The result carries the normaliser it used, and with `spec.return_outputs` the training forward's
        detached outputs. Rows the batch marks in `inert_rows` `(B,)` bool (zero loss and gradient whatever the
        forward gives) may run their forward without autograd, or none with `spec.inert_outputs` False."""
        ...

    def step_lr_scheduler(self) -> float:
        """Advance the learning-rate schedule by one step; return the new rate."""
        ...

    def export_weights(
        self, bucket_bytes: int, dtype: torch.dtype | None = None
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """Full tensors under Hugging Face names, in buckets of at most `bucket_bytes`."""
        ...

    def connect_weight_sync(self, sync: WeightPublisher, bucket_bytes: int) -> None:
        """Publish this engine's weights through `sync` (a `rl_engines.sync.WeightSync`, a server fleet's
        `FleetWeightSync`, or the caller's own sender): `update_weights` exports them in buckets of at most
        `bucket_bytes`. The engine holds `sync` until `close_weight_sync`."""
        ...

    def update_weights(self, version: int) -> SyncReport:
        """Export the weights (`export_weights`) and send them through the connected sync as weight `version`; what
        the sync moved. Every rank calls it: a rank whose sync sends nothing still takes part in the export's
        gathers. Refused when no sync is connected."""
        ...

    def close_weight_sync(self) -> None:
        """Close the connected weight sync and disconnect it (nothing when none is connected)."""
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
