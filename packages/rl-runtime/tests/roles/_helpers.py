"""Tiny engines, rollout-shaped batches and a plain PPO loss for the role tests: rl-engines' training doubles
(`rl_engines.testing`, shared with its own training tests) under the names these tests use, plus the roles' own."""

from __future__ import annotations

from typing import Any

import torch

from rl_engines.testing import ppo_loss_fn
from rl_engines.testing import tiny_engine_config as engine_config
from rl_engines.testing import tiny_qwen_config as qwen_config
from rl_engines.testing import tiny_rollout_batch as rollout_batch
from rl_engines.training import ForwardOutput, FSDPEngine, ModelConfig
from rl_runtime.config import AlgorithmConfig, KLConfig

__all__ = [
    "algorithm",
    "concat",
    "critic_engine",
    "engine_config",
    "fake_outputs",
    "mini_batches",
    "ppo_loss_fn",
    "qwen_config",
    "rollout_batch",
]


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
