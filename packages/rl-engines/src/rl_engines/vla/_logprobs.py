"""Log-probabilities and entropy of a trajectory's action tokens under the VLA, as siiRL's embodied actor computes
them: the softmax is restricted to the action bins (the tiny VLA's head has only those logits; OpenVLA-OFT's
`logits[..., -256-64:-64]` slice) and taken at the sampling temperature."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl_engines.vla._errors import VLAError


def action_distribution(logits: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`(..., action_bins)` logits -> (log-softmax at `temperature`, entropy `(...)`), both float32."""
    if not temperature > 0:
        raise VLAError(f"log-probs need a temperature > 0 (the sampler's), got {temperature}")
    log_p = torch.log_softmax(logits.float() / temperature, dim=-1)
    entropy = -(log_p.exp() * log_p).sum(dim=-1)
    return log_p, entropy


def _check_shapes(
    input_ids: torch.Tensor, pixel_values: torch.Tensor, action_tokens: torch.Tensor, steps: torch.Tensor | None
) -> None:
    batch = input_ids.shape[0]
    if pixel_values.dim() != 5 or pixel_values.shape[0] != batch:
        raise VLAError(f"pixel_values must be (B={batch}, S, C, H, W), got {tuple(pixel_values.shape)}")
    if action_tokens.dim() != 3 or tuple(action_tokens.shape[:2]) != tuple(pixel_values.shape[:2]):
        raise VLAError(
            f"action_tokens must be (B, S, A) = {tuple(pixel_values.shape[:2])} + (A,) like pixel_values, "
            f"got {tuple(action_tokens.shape)}"
        )
    if steps is not None and tuple(steps.shape) != tuple(action_tokens.shape[:2]):
        raise VLAError(f"steps must be (B, S) = {tuple(action_tokens.shape[:2])}, got {tuple(steps.shape)}")


def action_log_probs(
    model: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pixel_values: torch.Tensor,
    action_tokens: torch.Tensor,
    temperature: float,
    steps: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probs and entropy of the emitted action bins, flattened over the trajectory.

    Every policy step runs as one row of a single forward (the instruction repeated per step).

    Args:
        model: a `TinyVLAForActionChunking`, an `OpenVLAActions`, or anything with their call:
            `(input_ids, attention_mask, pixel_values (N, C, H, W)) -> (N, A, action_bins)` logits.
        input_ids: (B, L) instruction word ids.
        attention_mask: (B, L) 1 on real words.
        pixel_values: (B, S, C, H, W) the frame seen at each policy step.
        action_tokens: (B, S, A) int64 bins in [0, action_bins) emitted at each step.
        temperature: the sampling temperature (> 0).
        steps: optional (B, S) bool: only these steps are computed (others are 0), e.g. the steps with any valid
            token; None computes every step.

    Returns:
        (log_probs (B, S*A), entropy (B, S*A)), float32; token `s*A + a` is step s's a-th action token.
    """
    _check_shapes(input_ids, pixel_values, action_tokens, steps)
    batch, num_steps, width = action_tokens.shape
    if steps is None:
        steps = torch.ones(batch, num_steps, dtype=torch.bool, device=action_tokens.device)
    rows, cols = steps.nonzero(as_tuple=True)
    # Fresh (B, S*A) tensors, not views of (B, S, A) ones: FSDP2 hangs its pre-backward hook on the root's outputs.
    log_probs = torch.zeros(batch, num_steps * width, dtype=torch.float32, device=action_tokens.device)
    entropy = torch.zeros_like(log_probs)
    if rows.numel():
        logits = model(input_ids[rows], attention_mask[rows], pixel_values[rows, cols])
        if tuple(logits.shape[:2]) != (rows.numel(), width):
            raise VLAError(
                f"the model emits {logits.shape[1]} action tokens per step but action_tokens has A={width}; "
                "A must be the model's chunk_size * action_dims"
            )
        log_p, step_entropy = action_distribution(logits, temperature)
        chosen = log_p.gather(-1, action_tokens[rows, cols].unsqueeze(-1)).squeeze(-1)
        token_rows = rows[:, None].expand(-1, width)
        token_cols = cols[:, None] * width + torch.arange(width, device=cols.device)
        log_probs = log_probs.index_put((token_rows, token_cols), chosen)
        entropy = entropy.index_put((token_rows, token_cols), step_entropy)
    return log_probs, entropy
