"""Tiny engines, rollout-shaped batches and a plain PPO loss for the role tests (as rl-engines' training tests
build them)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Qwen2Config

from rl_core.losses import LossNormalizer, PolicyLossInputs, get_policy_loss
from rl_engines.training import (
    ForwardOutput,
    FSDPEngine,
    LossOutput,
    MicroBatchConfig,
    ModelConfig,
    OptimizerConfig,
    TrainEngineConfig,
)
from rl_runtime.config import AlgorithmConfig, KLConfig

VOCAB = 128
PROMPT, RESPONSE = 6, 10


def qwen_config() -> Qwen2Config:
    """A 2-layer Qwen2 with hidden size 32 (fp32, no dropout)."""
    return Qwen2Config(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
    )


def engine_config(hf_config: Any = None, *, packing: bool = True, lr: float = 1e-2, **kwargs: Any) -> TrainEngineConfig:
    """A CPU engine config on a tiny model; `kwargs` override TrainEngineConfig fields."""
    model = kwargs.pop("model", None) or ModelConfig(hf_config=hf_config or qwen_config(), init_seed=3)
    return TrainEngineConfig(
        model=model,
        optimizer=kwargs.pop("optimizer", OptimizerConfig(lr=lr, max_grad_norm=None)),
        # 24 tokens split a few rollout rows (at most 16 tokens each) into several micro-batches.
        micro_batch=kwargs.pop("micro_batch", MicroBatchConfig(max_tokens_per_micro_batch=24, packing=packing)),
        device="cpu",
        **kwargs,
    )


def rollout_batch(batch_size: int, seed: int) -> dict[str, torch.Tensor]:
    """Rows laid out as a rollout makes them: left-padded prompt, response, right padding; plus PPO tensors."""
    gen = torch.Generator().manual_seed(seed)
    width = PROMPT + RESPONSE
    input_ids = torch.randint(1, VOCAB, (batch_size, width), generator=gen)
    attention_mask = torch.zeros(batch_size, width, dtype=torch.int64)
    response_mask = torch.zeros(batch_size, width, dtype=torch.int64)
    for row in range(batch_size):
        prompt = int(torch.randint(2, PROMPT + 1, (1,), generator=gen))
        response = int(torch.randint(1, RESPONSE + 1, (1,), generator=gen))
        attention_mask[row, PROMPT - prompt : PROMPT + response] = 1
        response_mask[row, PROMPT : PROMPT + response] = 1
    return with_ppo_fields(input_ids * attention_mask, attention_mask, response_mask, gen)


def with_ppo_fields(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, response_mask: torch.Tensor, gen: torch.Generator
) -> dict[str, torch.Tensor]:
    """The batch of these `(B, T)` rows with default position ids and random old log-probs and advantages."""
    shape = tuple(input_ids.shape)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
        "response_mask": response_mask,
        # Near the tiny model's log-probs (about -log(VOCAB)), so most PPO ratios stay inside the clip range.
        "old_log_probs": (-4.85 + 0.1 * torch.randn(shape, generator=gen)) * response_mask,
        "advantages": torch.randn(shape, generator=gen) * response_mask,
    }


def ppo_loss_fn(outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer: LossNormalizer) -> LossOutput:
    """The registry's PPO loss on a micro-batch (what the actor role computes without KL or entropy terms)."""
    inputs = PolicyLossInputs(
        outputs.log_probs, micro_batch["old_log_probs"], micro_batch["advantages"], micro_batch["response_mask"]
    )
    loss, metrics = get_policy_loss("ppo")(inputs, normalizer=normalizer)
    return LossOutput(loss, metrics)


def critic_engine(**kwargs) -> FSDPEngine:
    return FSDPEngine.from_config(
        engine_config(model=ModelConfig(hf_config=qwen_config(), value_head=True, init_seed=3), **kwargs)
    )


def mini_batches(seeds: tuple[int, ...]) -> list[dict[str, torch.Tensor]]:
    minis = []
    for seed in seeds:
        batch = rollout_batch(4, seed=seed)
        batch["values"] = torch.randn(4, batch["input_ids"].shape[1]) * batch["response_mask"]
        batch["returns"] = batch["values"] + torch.randn_like(batch["values"])
        minis.append(batch)
    return minis


def concat(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """One step's batch holding `batches` one after another (what a role splits back into them)."""
    return {name: torch.cat([batch[name] for batch in batches]) for name in batches[0]}


def fake_outputs(batch: dict, seed: int) -> ForwardOutput:
    gen = torch.Generator().manual_seed(seed)
    shape = batch["input_ids"].shape
    log_probs = (batch["old_log_probs"] + 0.05 * torch.randn(shape, generator=gen)).requires_grad_()
    return ForwardOutput(log_probs, torch.rand(shape, generator=gen) * 4, torch.randn(shape, generator=gen))


def algorithm(kl_coef: float = 0.0, kl_estimator: str = "k3", **kwargs: Any) -> AlgorithmConfig:
    """The run config's algorithm section the roles read: a KL loss of weight `kl_coef` (0: none) with
    `kl_estimator`; `kwargs` set the other AlgorithmConfig fields."""
    return AlgorithmConfig(kl=KLConfig(coef=kl_coef, estimator=kl_estimator), **kwargs)
