"""Discounted reward-to-go over the response tokens, skipping tokens the policy did not generate."""

from __future__ import annotations

import torch


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """Reward-to-go `G_t = r_t + gamma * G_next` over the masked tokens of each row.

    Masked-out tokens (padding, or tool observations inside a multi-turn response) are skipped: their
    rewards are ignored and the discount counts only response tokens, so a reward after an observation
    span still reaches the tokens before it.

    Args:
        rewards: `(B, T)` float rewards.
        mask: `(B, T)` bool mask of response tokens.
        gamma: discount per response token, in [0, 1].

    Returns:
        `(B, T)` returns, zero where `mask` is False.
    """
    zero = torch.zeros((), dtype=rewards.dtype, device=rewards.device)
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    # The recursion runs backwards in time; each step is one vectorised op over the whole batch.
    for t in reversed(range(rewards.shape[-1])):
        step = mask[:, t]
        running = torch.where(step, rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(step, running, zero)
    return returns
