"""Episodes -> the step's sample batch: per-step frames and action tokens, flattened token-level fields, masks.

Token `j` of an episode's flattened `(S*A)` action sequence belongs to env step `j // D` (A = K*D tokens per
policy step, D per env step), so it is valid iff `j < finish_step * D`: the unexecuted tail of the last chunk
is masked. The batch's prompt fields hold the instruction ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from rl_core.schema import (
    ACTION_TOKENS,
    FINISH_STEP,
    GROUP_ID,
    INSTRUCTION_IDS,
    INSTRUCTION_MASK,
    PIXEL_VALUES,
    POLICY_VERSION,
    PROMPT_LEN,
    RESPONSE_LEN,
    RESPONSE_MASK,
    ROLLOUT_LOG_PROBS,
    UID,
)
from rl_runtime.nodes._episodes import Episode, pad_prompts
from rl_runtime.workers import StepData, StepDataError

TASK_ID_KEY = "task_id"
"""Extras: the env task of each sample (the SRPO reward groups by it)."""
TRIAL_ID_KEY = "trial_id"
"""Extras: the fixed initial state of each sample."""
INSTRUCTION_KEY = "instruction"
"""Extras: the language instruction of each sample."""
SUCCESS_KEY = "complete"
"""Extras: whether each episode succeeded (bool)."""
FAILED_KEY = "env_failed"
"""Extras: whether the env worker crashed or timed out in the episode (bool; the episode counts as a failure)."""
TRUNCATED_KEY = "truncated"
"""Extras: whether the episode hit its step bound (max_steps) instead of finishing (bool)."""
EMBEDDING_KEY = "video_embedding"
"""Extras: each episode's `(dim,)` float32 video embedding (all zeros: invalid, never shaped)."""


def valid_token_mask(finish_step: torch.Tensor, width: int, action_dims: int) -> torch.Tensor:
    """`(B, width)` int64: token j valid iff `j < finish_step * action_dims`."""
    return (torch.arange(width)[None, :] < (finish_step * action_dims)[:, None]).long()


def _stack_steps(episodes: Sequence[Episode], steps: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(B, S, C, H, W)` frames, `(B, S, A)` bins and `(B, S*A)` log-probs, zero after each episode's last step."""
    first = next(episode for episode in episodes if episode.frames)
    frame_shape, tokens = tuple(first.frames[0].shape), int(first.actions[0].numel())
    size = len(episodes)
    pixels = torch.zeros((size, steps, *frame_shape), dtype=torch.uint8)
    actions = torch.zeros((size, steps, tokens), dtype=torch.int64)
    log_probs = torch.zeros((size, steps, tokens), dtype=torch.float32)
    for row, episode in enumerate(episodes):
        taken = len(episode.frames)
        if taken:
            pixels[row, :taken] = torch.stack(episode.frames)
            actions[row, :taken] = torch.stack(episode.actions)
            log_probs[row, :taken] = torch.stack(episode.log_probs)
    return pixels, actions, log_probs.reshape(size, steps * tokens)


def build_episode_batch(
    episodes: Sequence[Episode],
    embeddings: torch.Tensor,
    *,
    action_dims: int,
    uids: Sequence[int],
    group_ids: Sequence[int],
    policy_version: int,
) -> StepData:
    """The StepData of `episodes` (B of them): `pixel_values` (B, S, C, H, W) uint8, `action_tokens` (B, S, A),
    `finish_step` (B,), `response_mask` and `rollout_log_probs` (B, S*A), instruction `input_ids` and
    `attention_mask` (B, L), `prompt_len`, `response_len` (valid action tokens), `uid`, `group_id`,
    `policy_version` (B,); extras: task, trial, instruction, success, env failure, truncation, embedding.

    `embeddings` is `(B, dim)` float32, one per episode; an env failure's row is zeroed (invalid)."""
    if not episodes or not any(episode.frames for episode in episodes):
        raise StepDataError("the rollout produced no policy step: every episode ended at reset; check the env")
    if embeddings.shape[0] != len(episodes):
        raise StepDataError(f"got {embeddings.shape[0]} video embeddings for {len(episodes)} episodes")
    steps = max(len(episode.frames) for episode in episodes)
    pixels, actions, log_probs = _stack_steps(episodes, steps)
    finish = torch.tensor([episode.finish_step for episode in episodes], dtype=torch.int64)
    width = log_probs.shape[1]
    if bool((finish * action_dims > width).any()):
        raise StepDataError(
            f"an episode reports more env steps ({int(finish.max())}) than its chunks hold "
            f"({width // action_dims}); the env's finish_step must count executed steps only"
        )
    mask = valid_token_mask(finish, width, action_dims)
    input_ids, attention_mask = pad_prompts([episode.prompt_ids for episode in episodes])
    failed = [episode.failed for episode in episodes]
    embeddings = embeddings.to(torch.float32).clone()
    embeddings[torch.tensor(failed, dtype=torch.bool)] = 0.0
    batch = {
        INSTRUCTION_IDS: input_ids,
        INSTRUCTION_MASK: attention_mask,
        PIXEL_VALUES: pixels,
        ACTION_TOKENS: actions,
        FINISH_STEP: finish,
        RESPONSE_MASK: mask,
        ROLLOUT_LOG_PROBS: log_probs * mask,
        PROMPT_LEN: attention_mask.sum(dim=-1),
        RESPONSE_LEN: mask.sum(dim=-1),
        UID: torch.tensor(list(uids), dtype=torch.int64),
        GROUP_ID: torch.tensor(list(group_ids), dtype=torch.int64),
        POLICY_VERSION: torch.full((len(episodes),), policy_version, dtype=torch.int64),
    }
    extras: dict[str, list[Any]] = {
        TASK_ID_KEY: [episode.task_id for episode in episodes],
        TRIAL_ID_KEY: [episode.trial_id for episode in episodes],
        INSTRUCTION_KEY: [episode.instruction for episode in episodes],
        SUCCESS_KEY: [episode.complete and not episode.failed for episode in episodes],
        FAILED_KEY: failed,
        TRUNCATED_KEY: [episode.truncated or not episode.complete for episode in episodes],
        EMBEDDING_KEY: list(embeddings.unbind(0)),
    }
    return StepData(batch, extras)
