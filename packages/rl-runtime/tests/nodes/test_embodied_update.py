"""One actor update on an embodied batch (episodes -> reward -> GRPO advantages -> the actor role on a tiny VLA):
the log-probs of the positive-advantage action tokens rise, the negative ones fall, masked tokens stay out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rl_engines.training import FSDPEngine, MicroBatchConfig, ModelConfig, OptimizerConfig, TrainEngineConfig
from rl_runtime.config import AlgorithmConfig, KLConfig
from rl_runtime.nodes import Episode
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._embodied import embodied_reward
from rl_runtime.nodes._embodied_batch import build_episode_batch
from rl_runtime.roles import ActorRole

from .test_embodied import _call, _context, embodied_config

VLA = {
    "model_type": "tiny_vla",
    "image_shape": (3, 16, 16),
    "chunk_size": 2,
    "action_dims": 1,
    "action_bins": 3,
    "vocab_size": 8,
    "max_instruction_len": 4,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "conv_channels": (4, 8),
}


def _episode(seed: int, steps: int, finish: int, success: bool) -> Episode:
    g = torch.Generator().manual_seed(seed)
    episode = Episode(0, seed, "go to the ball", (2, 3, 4, 5), finish_step=finish, complete=success)
    for _ in range(steps):
        episode.frames.append(torch.randint(0, 256, (3, 16, 16), generator=g, dtype=torch.uint8))
        episode.actions.append(torch.randint(0, 3, (2,), generator=g))
        episode.log_probs.append(torch.full((2,), -1.0986))
    return episode


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    return float((values * mask).sum() / mask.sum())


def test_one_update_raises_positive_advantage_log_probs(tmp_path: Path) -> None:
    config = embodied_config(tmp_path, ["algorithm.reward=binary"])
    episodes = [_episode(0, 3, 5, True), _episode(1, 3, 6, False), _episode(2, 2, 3, True), _episode(3, 3, 6, False)]
    data = build_episode_batch(
        episodes, torch.ones(4, 2), action_dims=1, uids=[0, 1, 2, 3], group_ids=[7, 7, 7, 7], policy_version=0
    )
    scored = _call(embodied_reward, _context(config, "embodied_reward"), {"r": data})
    advantaged = _call(compute_advantage, _context(config, "compute_advantage"), {"r": scored})
    batch: dict[str, Any] = dict(advantaged.batch)
    mask = batch["response_mask"].bool()
    assert mask.sum(-1).tolist() == [5, 6, 3, 6]  # finish_step * D valid tokens; the chunks' tails masked

    engine_config = TrainEngineConfig(
        model=ModelConfig(hf_config=VLA, init_seed=3),
        optimizer=OptimizerConfig(lr=1e-2, max_grad_norm=None),
        micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=512),
        device="cpu",
    )
    actor = ActorRole(FSDPEngine.from_config(engine_config), AlgorithmConfig(kl=KLConfig(coef=0.0)), temperature=1.0)
    before = actor.compute_log_probs(batch).log_probs
    assert before is not None and before.shape == mask.shape
    actor.update_on_policy(batch)
    after = actor.compute_log_probs(batch).log_probs
    assert after is not None
    positive = mask & (batch["advantages"] > 0)
    negative = mask & (batch["advantages"] < 0)
    assert positive.any() and negative.any()
    assert _masked_mean(after - before, positive) > 0
    assert _masked_mean(after - before, negative) < 0
