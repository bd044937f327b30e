"""`FSDPEngine`: the FSDP2 implementation of `TrainEngine`, composed from the modules beside it."""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rl_core.losses import LossNormalizer
from rl_core.schema import INPUT_IDS, INSTRUCTION_IDS, RESPONSE_MASK
from rl_engines._attention import SDPA, full_attention_only
from rl_engines._errors import EngineError
from rl_engines.sync import SyncReport, WeightPublisher
from rl_engines.training import _checkpoint, _export
from rl_engines.training._config import TrainEngineConfig
from rl_engines.training._deferred_norm import DeferredCounts, deferrable
from rl_engines.training._errors import BatchError, TrainConfigError
from rl_engines.training._fast_forward import FastForward
from rl_engines.training._forward import PolicyNetwork, forward_micro_batch
from rl_engines.training._fsdp import (
    ProcessLayout,
    all_gather_rows,
    collective_device,
    full_tensor,
    reshard,
    resolve_layout,
    shard,
)
from rl_engines.training._meta_init import build_network, build_sharded_from_rank0
from rl_engines.training._micro_batches import OutputRecorder, plan_micro_batches, select_rows
from rl_engines.training._optim import build_optimizer, build_scheduler
from rl_engines.training._packing import InputLayout
from rl_engines.training._replicate import broadcast_rank0_weights
from rl_engines.training._step import train_step
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec, LossFn, StepResult
from rl_engines.training._vla import VLANetwork, check_vla_batch, output_shape, token_counts

logger = logging.getLogger(__name__)

_SCHEDULER_ORDER_WARNING = re.escape("Detected call of `lr_scheduler.step()` before `optimizer.step()`")


def _input_layout(config: TrainEngineConfig, text_config: Any) -> InputLayout:
    if config.packing:
        return InputLayout.PACKED
    shares = (
        config.micro_batch.share_prefixes
        and not config.model.gradient_checkpointing
        and full_attention_only(text_config)
    )
    return InputLayout.SHARED_PREFIX if shares else InputLayout.PADDED


def _takes_fast_forward(config: TrainEngineConfig, layout: ProcessLayout) -> bool:
    """Whether the model's own parameters are whole here and its forward is the one `FastForward` computes: not
    sharded (FSDP2 gathers a layer's parameters in the layer module's forward), not recomputed in backward, and SDPA
    attention, whose result the fast forward's kernels give."""
    model = config.model
    return (
        model.fast_forward
        and not layout.sharded
        and not model.gradient_checkpointing
        and model.attn_implementation == SDPA
    )


class FSDPEngine:
    """A causal LM (optionally with a value head) sharded with FSDP2 over the default process group (or replicated
    on every rank under `TrainEngineConfig.data_parallel="ddp"`), with AdamW and a learning-rate schedule;
    unsharded in one process when no process group is initialised. A model whose config has `model_type:
    tiny_vla` is built as `rl_engines.vla.TinyVLAForActionChunking` instead, and its outputs are the `(B, S*A)`
    action-token log-probs of a batch carrying `pixel_values` and `action_tokens` (`_vla`).

    Build it with `FSDPEngine.from_config`; see `TrainEngine` for the methods' contracts.
    """

    def __init__(
        self, config: TrainEngineConfig, network: PolicyNetwork | VLANetwork, layout: ProcessLayout, hf_config: Any
    ):
        self.config = config
        self.network = network
        self.layout = layout
        self.hf_config = hf_config
        self.optimizer = None if config.optimizer is None else build_optimizer(network.parameters(), config.optimizer)
        self.scheduler = None if self.optimizer is None else build_scheduler(self.optimizer, config.schedule)
        self._global_step = 0
        self._offloaded = False
        self._weight_sync: WeightPublisher | None = None
        self._sync_bucket_bytes = _export.DEFAULT_BUCKET_BYTES
        self._vla = network if isinstance(network, VLANetwork) else None
        if self._vla is not None:
            self.input_layout = InputLayout.PADDED  # a VLA batch has no token layout to choose
        else:
            self.input_layout = _input_layout(config, network.backbone.config.get_text_config())
        if isinstance(network, PolicyNetwork) and _takes_fast_forward(config, layout):
            network.fast_forward = FastForward.for_model(network.backbone)
        if self.optimizer is None:
            network.requires_grad_(False)

    @classmethod
    def from_config(cls, config: TrainEngineConfig) -> FSDPEngine:
        """Build the model, shard or replicate it (when a process group is initialised) and the optimizer.

        Sharded (a collective), every rank builds the full model, or only rank 0 with
        `ModelConfig.broadcast_from_rank0`. Replicated (`data_parallel="ddp"`, a collective), every rank builds it
        and then takes rank 0's weights."""
        layout = resolve_layout(config)
        if layout.sharded and config.model.broadcast_from_rank0:
            network = build_sharded_from_rank0(config, layout)
        else:
            network = build_network(config.model, config.precision.param)
            if layout.sharded:
                shard(network, network.backbone, config, layout)
            else:
                network.to(layout.device)
                if layout.replicated:
                    broadcast_rank0_weights(network)
        return cls(config, network, layout, network.backbone.config)

    @property
    def world_size(self) -> int:
        """Number of data-parallel ranks."""
        return self.layout.world_size

    @property
    def rank(self) -> int:
        """This process's data-parallel rank."""
        return self.layout.rank

    @property
    def global_step(self) -> int:
        """Optimizer steps applied so far."""
        return self._global_step

    @property
    def trainable(self) -> bool:
        """Whether the engine has an optimizer."""
        return self.optimizer is not None

    @property
    def splits_inert_rows(self) -> bool:
        """Whether `train_step` runs the batch's `inert_rows` apart (not under FSDP2 sharding: a collective forward)."""
        return not self.layout.sharded

    @property
    def has_value_head(self) -> bool:
        """Whether the model has a value head."""
        return self.network.value_head is not None

    @property
    def lr(self) -> float:
        """The current learning rate (0 for a frozen engine)."""
        return 0.0 if self.optimizer is None else float(self.optimizer.param_groups[0]["lr"])

    def _plan(self, batch: Batch, spec: ForwardSpec) -> list[list[int]]:
        budget = self.config.micro_batch.max_tokens_per_micro_batch
        if self._vla is None:
            return plan_micro_batches(batch, budget, self.layout)
        check_vla_batch(batch, self._vla)
        return plan_micro_batches(batch, budget, self.layout, costs=token_counts(batch, self._vla, spec))

    def forward(self, batch: Batch, spec: ForwardSpec) -> ForwardOutput:
        """Per-token outputs of `batch` without gradients, each `(B, T)` float32 on the batch's device, run in the
        engine's own micro-batches (see `TrainEngine.forward`); for a VLA, `(B, S*A)` over the action tokens."""
        self._require_onloaded("run a forward")
        plan = self._plan(batch, spec)
        record = self._recorder(batch)
        self.network.eval()
        with torch.no_grad():
            for rows in plan:
                micro = select_rows(batch, rows, self.layout.device)
                outputs = forward_micro_batch(
                    self.network,
                    micro,
                    spec,
                    input_layout=self.input_layout,
                    chunk_size=self.config.micro_batch.logprob_chunk_size,
                )
                record.add(rows, outputs)
        reshard(self.network)
        return record.merged()

    def _recorder(self, batch: Batch) -> OutputRecorder:
        """Where a forward's per-micro-batch outputs are assembled: `(B, T)` on the batch's device (a VLA's
        `(B, S*A)`)."""
        if self._vla is None:
            return OutputRecorder(tuple(batch[INPUT_IDS].shape), batch[INPUT_IDS].device)
        return OutputRecorder(output_shape(batch), batch[INSTRUCTION_IDS].device)

    def global_normalizer(self, response_mask: torch.Tensor, *, horizon: float | None = None) -> LossNormalizer:
        """The counts of this rank's `response_mask` `(B, T)` summed over every rank (a collective): what
        `train_step` divides each micro-batch's loss by. `horizon` defaults to the widest `T` on any rank.

        Under ddp on several ranks a `RescalableLoss` step does not call it: the same counts ride on the gradient
        all-reduce (`_deferred_norm`)."""
        mask = response_mask.bool()
        local = torch.tensor([mask.sum(), mask.any(dim=-1).sum(), mask.shape[-1]], dtype=torch.float64)
        ranks = all_gather_rows(local.to(collective_device(self.layout)), self.layout).cpu()
        tokens, sequences = ranks[:, :2].sum(dim=0).tolist()
        if tokens == 0:
            raise BatchError("response_mask has no response tokens on any rank; there is nothing to train on")
        widest = float(ranks[:, 2].max())
        return LossNormalizer(tokens, sequences, float(horizon if horizon is not None else widest))

    def _require_optimizer(self, action: str) -> torch.optim.Optimizer:
        if self.optimizer is None:
            raise TrainConfigError(f"cannot {action}: the engine is frozen (TrainEngineConfig.optimizer=None)")
        return self.optimizer

    def _require_onloaded(self, action: str) -> None:
        if self._offloaded:
            raise TrainConfigError(f"cannot {action}: the engine is offloaded to the CPU; call onload() first")

    def _run_step(self, batch: Batch, loss_fn: LossFn, spec: ForwardSpec, *, keep_gradients: bool) -> StepResult:
        optimizer = self._require_optimizer("train")
        self._require_onloaded("train")
        if RESPONSE_MASK not in batch:
            raise BatchError(
                f"a training step needs 'response_mask' (B, T) to normalise the loss; the batch has {sorted(batch)}"
            )
        plan = self._plan(batch, spec)
        deferred = self._deferred_counts(batch[RESPONSE_MASK], loss_fn)
        normalizer = deferred.provisional if deferred is not None else self.global_normalizer(batch[RESPONSE_MASK])
        return train_step(
            self.network,
            optimizer,
            batch,
            plan,
            normalizer,
            loss_fn,
            spec,
            layout=self.layout,
            input_layout=self.input_layout,
            chunk_size=self.config.micro_batch.logprob_chunk_size,
            max_grad_norm=None if self.config.optimizer is None else self.config.optimizer.max_grad_norm,
            keep_gradients=keep_gradients,
            deferred=deferred,
            record=self._recorder(batch) if spec.return_outputs else None,
        )

    def _deferred_counts(self, response_mask: torch.Tensor, loss_fn: LossFn) -> DeferredCounts | None:
        """Under ddp on more than one rank, with a `rescalable` `RescalableLoss` (such as rl-core's objectives): this
        rank's counts, to ride on the gradient all-reduce instead of `global_normalizer`'s collective
        (`_deferred_norm`). Else None."""
        if not (self.layout.replicated and self.layout.world_size > 1):
            return None
        if not deferrable(loss_fn, list(self.network.parameters())):
            return None
        return DeferredCounts.of(response_mask, rank=self.layout.rank, world_size=self.layout.world_size)

    def train_step(self, batch: Batch, loss_fn: LossFn, spec: ForwardSpec) -> StepResult:
        """One optimizer step over `batch` in the engine's own micro-batches (see `TrainEngine.train_step`)."""
        result = self._run_step(batch, loss_fn, spec, keep_gradients=False)
        if not result.skipped:
            self._global_step += 1
        return result

    def compute_gradients(self, batch: Batch, loss_fn: LossFn, spec: ForwardSpec) -> dict[str, torch.Tensor]:
        """The full (gathered) gradient of the step's loss per parameter, under the network's names, without
        applying it: for checking the engine against a reference. A collective."""
        self._run_step(batch, loss_fn, spec, keep_gradients=True)
        gradients = {
            name: full_tensor(p.grad).detach().clone()
            for name, p in self.network.named_parameters()
            if p.grad is not None
        }
        self._require_optimizer("compute gradients").zero_grad(set_to_none=True)
        return gradients

    def step_lr_scheduler(self) -> float:
        """Advance the schedule one step; return the new learning rate."""
        self._require_optimizer("step the learning-rate schedule")
        assert self.scheduler is not None  # built together with the optimizer
        with warnings.catch_warnings():
            # After a skipped (non-finite) first step the optimizer has not stepped yet; torch warns about the
            # order, but the schedule counts RL steps, skipped ones included, on purpose.
            warnings.filterwarnings("ignore", message=_SCHEDULER_ORDER_WARNING, category=UserWarning)
            self.scheduler.step()
        return self.lr

    def export_weights(
        self, bucket_bytes: int = _export.DEFAULT_BUCKET_BYTES, dtype: torch.dtype | None = None
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """Full tensors under Hugging Face names in buckets of at most `bucket_bytes` (a collective generator:
        every rank iterates it to the end)."""
        return _export.iter_weight_buckets(self.network.backbone, bucket_bytes, dtype)

    def connect_weight_sync(self, sync: WeightPublisher, bucket_bytes: int = _export.DEFAULT_BUCKET_BYTES) -> None:
        """Publish this engine's weights through `sync` (AReaL's `connect_engine`): each `update_weights` exports
        them in buckets of at most `bucket_bytes` and hands them to `sync.sync`. The engine holds `sync` until
        `close_weight_sync`, which closes it."""
        _export.check_bucket_bytes(bucket_bytes, "FSDPEngine.connect_weight_sync")
        self._weight_sync = sync
        self._sync_bucket_bytes = bucket_bytes

    def update_weights(self, version: int) -> SyncReport:
        """Export the weights and send them through the connected sync as `version` (AReaL's `update_weights`; a
        collective: every rank calls it, and a rank whose sync sends nothing still takes part in the export's
        gathers); what the sync moved."""
        if self._weight_sync is None:
            raise EngineError(
                "FSDPEngine.update_weights: no weight sync is connected; connect one first with "
                "connect_weight_sync(sync, bucket_bytes)"
            )
        return self._weight_sync.sync(self.export_weights(self._sync_bucket_bytes), version)

    def close_weight_sync(self) -> None:
        """Close the connected weight sync (its groups and threads) and disconnect it; nothing when none is."""
        sync, self._weight_sync = self._weight_sync, None
        if sync is not None:
            sync.close()

    def export_hf(
        self, path: str | Path, dtype: torch.dtype | None = None, *, shard_bytes: int = _export.DEFAULT_SHARD_BYTES
    ) -> Path:
        """Write a Hugging Face folder (config, safetensors, the source folder's tokenizer files) atomically."""
        source = Path(self.config.model.path) if self.config.model.path is not None else None
        return _export.export_hf(
            self.network.backbone,
            self.hf_config,
            path,
            self.layout,
            dtype=dtype,
            shard_bytes=shard_bytes,
            source_folder=source,
        )

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write model, optimizer, schedule, step and RNG state atomically to `path`."""
        return _checkpoint.save_checkpoint(
            path, self.network, self.optimizer, self.scheduler, self._global_step, self.hf_config, self.layout
        )

    def load_checkpoint(self, path: str | Path) -> int:
        """Restore everything `save_checkpoint` wrote; return the step count."""
        self._global_step = _checkpoint.load_checkpoint(
            path, self.network, self.optimizer, self.scheduler, self.hf_config, self.layout
        )
        return self._global_step

    def _move(self, device: torch.device) -> None:
        self.network.to(device)
        if self.optimizer is not None:
            for state in self.optimizer.state.values():
                for key, value in state.items():
                    # Adam's `step` counter lives on the CPU unless the optimizer is fused/capturable.
                    if isinstance(value, torch.Tensor) and value.dim() > 0:
                        state[key] = value.to(device, non_blocking=True)

    def offload(self) -> None:
        """Move parameters and optimizer state to the CPU (no-op on a CPU engine or under FSDP2 CPU offload)."""
        if self.layout.device.type != "cpu" and not self.config.offload.fsdp_cpu_offload and not self._offloaded:
            reshard(self.network)  # gathered (plain) parameters cannot be moved as shards
            self._move(torch.device("cpu"))
            torch.cuda.empty_cache()
        self._offloaded = True

    def onload(self) -> None:
        """Move parameters and optimizer state back to the compute device."""
        if self.layout.device.type != "cpu" and not self.config.offload.fsdp_cpu_offload and self._offloaded:
            self._move(self.layout.device)
        self._offloaded = False
