"""Doubles for tests of training engines and of the roles around them: a tiny Qwen2, a CPU engine config on it,
rollout-shaped batches with PPO tensors, and the registry's PPO loss as a `LossFn`."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Qwen2Config

from rl_core.losses import LossNormalizer, PolicyLossInputs, get_policy_loss
from rl_core.schema import ADVANTAGES, ATTENTION_MASK, INPUT_IDS, OLD_LOG_PROBS, POSITION_IDS, RESPONSE_MASK
from rl_engines.training import (
    ForwardOutput,
    LossOutput,
    MicroBatchConfig,
    ModelConfig,
    OptimizerConfig,
    TrainEngineConfig,
)

TINY_VOCAB = 128
"""Vocabulary size of `tiny_qwen_config`."""
TINY_PROMPT_LEN = 6
"""Width of the (left-padded) prompt part of a `tiny_rollout_batch` row."""
TINY_RESPONSE_LEN = 10
"""Width of the (right-padded) response part of a `tiny_rollout_batch` row."""


def tiny_qwen_config() -> Qwen2Config:
    """A 2-layer Qwen2 with hidden size 32 (fp32, no dropout)."""
    return Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=TINY_VOCAB,
        max_position_embeddings=64,
    )


def tiny_engine_config(
    hf_config: Any = None, *, packing: bool = True, lr: float = 1e-2, **kwargs: Any
) -> TrainEngineConfig:
    """A CPU engine config on a tiny model (`hf_config`, default `tiny_qwen_config()`, init seed 3); `kwargs`
    override TrainEngineConfig fields."""
    model = kwargs.pop("model", None) or ModelConfig(hf_config=hf_config or tiny_qwen_config(), init_seed=3)
    return TrainEngineConfig(
        model=model,
        optimizer=kwargs.pop("optimizer", OptimizerConfig(lr=lr, max_grad_norm=None)),
        # 24 tokens split a few rollout rows (at most 16 tokens each) into several micro-batches.
        micro_batch=kwargs.pop("micro_batch", MicroBatchConfig(max_tokens_per_micro_batch=24, packing=packing)),
        device="cpu",
        **kwargs,
    )


def tiny_rollout_batch(batch_size: int, seed: int) -> dict[str, torch.Tensor]:
    """`batch_size` rows laid out as a rollout makes them: left-padded prompt, response, right padding (each
    `(B, TINY_PROMPT_LEN + TINY_RESPONSE_LEN)`); plus PPO tensors (`with_ppo_fields`)."""
    gen = torch.Generator().manual_seed(seed)
    width = TINY_PROMPT_LEN + TINY_RESPONSE_LEN
    input_ids = torch.randint(1, TINY_VOCAB, (batch_size, width), generator=gen)
    attention_mask = torch.zeros(batch_size, width, dtype=torch.int64)
    response_mask = torch.zeros(batch_size, width, dtype=torch.int64)
    for row in range(batch_size):
        prompt = int(torch.randint(2, TINY_PROMPT_LEN + 1, (1,), generator=gen))
        response = int(torch.randint(1, TINY_RESPONSE_LEN + 1, (1,), generator=gen))
        attention_mask[row, TINY_PROMPT_LEN - prompt : TINY_PROMPT_LEN + response] = 1
        response_mask[row, TINY_PROMPT_LEN : TINY_PROMPT_LEN + response] = 1
    return with_ppo_fields(input_ids * attention_mask, attention_mask, response_mask, gen)


def with_ppo_fields(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, response_mask: torch.Tensor, gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """The batch of these `(B, T)` rows with default position ids and random old log-probs and advantages `(B, T)`
    drawn from `gen`."""
    shape = tuple(input_ids.shape)
    return {
        INPUT_IDS: input_ids,
        ATTENTION_MASK: attention_mask,
        POSITION_IDS: (attention_mask.cumsum(-1) - 1).clamp(min=0),
        RESPONSE_MASK: response_mask,
        # Near the tiny model's log-probs (about -log(TINY_VOCAB)), so most PPO ratios stay inside the clip range.
        OLD_LOG_PROBS: (-4.85 + 0.1 * torch.randn(shape, generator=gen)) * response_mask,
        ADVANTAGES: torch.randn(shape, generator=gen) * response_mask,
    }


def ppo_loss_fn(outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer: LossNormalizer) -> LossOutput:
    """The registry's PPO loss on a micro-batch (what the actor role computes without KL or entropy terms)."""
    log_probs = outputs.log_probs
    if log_probs is None:
        raise ValueError("ppo_loss_fn needs the forward's log_probs; ask for them in ForwardSpec (log_probs=True)")
    inputs = PolicyLossInputs(
        log_probs, micro_batch[OLD_LOG_PROBS], micro_batch[ADVANTAGES], micro_batch[RESPONSE_MASK]
    )
    loss, metrics = get_policy_loss("ppo")(inputs, normalizer=normalizer)
    return LossOutput(loss, metrics)
