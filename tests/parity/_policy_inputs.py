"""Shared by the loss parity modules: random ragged policy-loss batches, verl's actor config, the tolerance check."""

from __future__ import annotations

from typing import Any

import torch

from rl_core.losses import PolicyLossInputs
from tests.parity.conftest import PARITY_TOLERANCE

DTYPE = torch.float64
LENGTH = 9
SEEDS = range(3)
BATCH_SIZES = [1, 4, 16]
AGGREGATIONS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
HOLE_RATE = 0.2
SPIKE_RATE = 0.05
SPIKE = 25.0  # beyond verl's +-20 log-ratio clamp


def policy_inputs(
    seed: int,
    size: int,
    *,
    empty_rows: bool = True,
    spikes: bool = True,
    weights: bool = False,
    sequence_advantages: bool = False,
) -> PolicyLossInputs:
    """Ragged lengths (empty rows allowed), a few holes, finite junk off the mask, optional log-ratio spikes."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0 if empty_rows else 1, LENGTH + 1, (size,), generator=gen)
    mask = torch.arange(LENGTH) < lengths.unsqueeze(-1)
    mask &= torch.rand(size, LENGTH, generator=gen) > HOLE_RATE
    mask[:, 0] |= lengths > 0
    mask[0, 0] = True
    old = -3.0 * torch.rand(size, LENGTH, generator=gen, dtype=DTYPE)
    current = old + 0.3 * torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    if spikes:
        spiked = torch.rand(size, LENGTH, generator=gen) < SPIKE_RATE
        signs = torch.where(torch.rand(size, LENGTH, generator=gen) < 0.5, -SPIKE, SPIKE).to(DTYPE)
        current = torch.where(spiked, old + signs, current)
    if sequence_advantages:
        advantages = torch.randn(size, 1, generator=gen, dtype=DTYPE).expand(size, LENGTH).clone()
    else:
        advantages = torch.randn(size, LENGTH, generator=gen, dtype=DTYPE)
    is_weights = 0.1 + 2.0 * torch.rand(size, LENGTH, generator=gen, dtype=DTYPE) if weights else None
    return PolicyLossInputs(current, old, advantages, mask.to(DTYPE), rollout_is_weights=is_weights)


def actor_config(**settings: Any) -> Any:
    """verl's ActorConfig with explicit clip ratios and policy-loss settings."""
    from verl.workers.config import ActorConfig, PolicyLossConfig

    policy_loss = PolicyLossConfig(**settings.pop("policy_loss", {}))
    return ActorConfig(
        strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, policy_loss=policy_loss, **settings
    )


def clip_config(low: float, high: float, **extra: Any) -> dict[str, Any]:
    """verl's clip settings for ratios in [1 - low, 1 + high]."""
    return {"clip_ratio": low, "clip_ratio_low": low, "clip_ratio_high": high, **extra}


def assert_close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """`ours` equals verl's `theirs` to PARITY_TOLERANCE."""
    torch.testing.assert_close(ours, theirs.to(ours.dtype), atol=PARITY_TOLERANCE, rtol=PARITY_TOLERANCE)
