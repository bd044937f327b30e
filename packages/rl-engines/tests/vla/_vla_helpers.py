"""A tiny VLA and a batch of trajectories for the VLA tests (shared by the engine and policy tests)."""

from __future__ import annotations

from typing import Any

import torch

from rl_engines.training import MicroBatchConfig, ModelConfig, OptimizerConfig, TrainEngineConfig
from rl_engines.vla import TinyVLAConfig, TinyVLAForActionChunking

SMALL = {
    "image_shape": (3, 16, 16),
    "chunk_size": 2,
    "action_dims": 2,
    "action_bins": 5,
    "vocab_size": 12,
    "max_instruction_len": 6,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "conv_channels": (4, 8),
}


def small_config(**overrides: object) -> TinyVLAConfig:
    return TinyVLAConfig(**{**SMALL, **overrides})


def small_model(seed: int = 0, **overrides: object) -> TinyVLAForActionChunking:
    torch.manual_seed(seed)
    return TinyVLAForActionChunking(small_config(**overrides)).eval()


def trajectory_batch(config: TinyVLAConfig, batch: int = 4, steps: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    """input_ids/attention_mask (B, L), pixel_values (B, S, C, H, W) uint8, action_tokens (B, S, A), finish_step and
    the response_mask (B, S*A) it implies (token j valid iff j < finish_step * D)."""
    g = torch.Generator().manual_seed(seed)
    length = config.max_instruction_len
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    attention_mask = (torch.arange(length) < lengths[:, None]).long()
    input_ids = torch.randint(2, config.vocab_size, (batch, length), generator=g) * attention_mask
    pixels = torch.randint(0, 256, (batch, steps, *config.image_shape), generator=g, dtype=torch.uint8)
    width = config.action_tokens_per_chunk
    actions = torch.randint(0, config.action_bins, (batch, steps, width), generator=g)
    finish = torch.randint(1, steps * config.chunk_size + 1, (batch,), generator=g)
    response_mask = (torch.arange(steps * width) < finish[:, None] * config.action_dims).long()
    return {
        "instruction_ids": input_ids,
        "instruction_mask": attention_mask,
        "pixel_values": pixels,
        "action_tokens": actions,
        "finish_step": finish,
        "response_mask": response_mask,
    }


def vla_engine_config(
    path: str | None = None, *, max_tokens: int = 300, lr: float = 1e-2, **kwargs: Any
) -> TrainEngineConfig:
    """A CPU train-engine config on the small VLA (from `path`, else from its config mapping, init_seed 3)."""
    model = kwargs.pop("model", None) or (
        ModelConfig(path=path) if path else ModelConfig(hf_config={"model_type": "tiny_vla", **SMALL}, init_seed=3)
    )
    return TrainEngineConfig(
        model=model,
        optimizer=OptimizerConfig(lr=lr, max_grad_norm=None),
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=max_tokens),
        device="cpu",
        **kwargs,
    )


def reference_vla(init_seed: int = 3) -> TinyVLAForActionChunking:
    """The model the engine builds from `vla_engine_config()`, as a plain module."""
    torch.manual_seed(init_seed)
    return TinyVLAForActionChunking(small_config())


def with_ppo_fields(batch: dict[str, torch.Tensor], seed: int = 0) -> dict[str, torch.Tensor]:
    """`batch` plus old log-probs near the small model's (about -log 5) and random advantages, on the valid tokens."""
    g = torch.Generator().manual_seed(seed + 100)
    mask = batch["response_mask"]
    return {
        **batch,
        "old_log_probs": (-1.6 + 0.05 * torch.randn(mask.shape, generator=g)) * mask,
        "advantages": torch.randn(mask.shape, generator=g) * mask,
    }
