"""The Bradley-Terry loss of a reward model on preference pairs."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    """Mean of `-log sigmoid(r_chosen - r_rejected)` over the pairs.

    Args:
        chosen: `(B,)` float scores of the preferred responses.
        rejected: `(B,)` float scores of the other responses.

    Returns:
        A 0-dim tensor; `log(2)` when the scores are equal, towards 0 as the margin grows.
    """
    if chosen.shape != rejected.shape or chosen.dim() != 1:
        raise ValueError(
            f"chosen and rejected must both be (B,), got {tuple(chosen.shape)} and {tuple(rejected.shape)}"
        )
    return -F.logsigmoid(chosen - rejected).mean()


def pairwise_accuracy(chosen: torch.Tensor, rejected: torch.Tensor) -> float:
    """Share of pairs whose chosen response scores strictly higher (`(B,)` each)."""
    return (chosen > rejected).float().mean().item() if chosen.numel() else 0.0
