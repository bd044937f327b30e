"""Turning workflow trajectories into the step's sample batch: one row per episode, every turn in it.

A row is `[prompt | model and environment turns | padding]`. `response_mask` is 1 on the model's own tokens only
(the trajectory's loss mask past the prompt), so the loss, the advantages, the reward placement and every
token-level statistic skip tool, environment and user tokens; `loss_mask` carries the same mask over the whole row,
`turn_id` the turn of each token and `token_policy_version` the weight version of each sampled token (-1 on tokens
the model did not sample). `prompt_len` is the first prompt; `response_len` counts every token after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from rl_core.schema import (
    ATTENTION_MASK,
    GROUP_ID,
    INPUT_IDS,
    LOSS_MASK,
    POLICY_VERSION,
    PROMPT_LEN,
    RESPONSE_LEN,
    RESPONSE_MASK,
    ROLLOUT_LOG_PROBS,
    TOKEN_POLICY_VERSION,
    TURN_ID,
    UID,
)
from rl_core.workflows import NO_VERSION, Trajectory
from rl_runtime.nodes._rollout_batch import FINISH_REASON_KEY, PAD_ID
from rl_runtime.workers import StepData, StepDataError

WORKFLOW_REWARD_KEY = "workflow_reward"
"""Extras key of each row's `Trajectory.reward` (None where the task scores the row)."""
TRUNCATED_KEY = "truncated"
"""Extras key of each row's `Trajectory.truncated`."""
WORKFLOW_KEYS = (WORKFLOW_REWARD_KEY, TRUNCATED_KEY)
"""Extras a trajectory batch adds beside the prompt's own; the task's scoring does not see them."""


def _padded(rows: Sequence[Sequence[float]], width: int, fill: float, dtype: torch.dtype) -> torch.Tensor:
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=dtype)
    return out


def build_trajectory_batch(
    trajectories: Sequence[Trajectory],
    prompt_extras: Sequence[Mapping[str, object]],
    uids: Sequence[int],
    group_ids: Sequence[int],
) -> StepData:
    """One StepData row per trajectory (see the module doc); extras: each prompt's extras, the last call's finish
    reason, the workflow's reward and the truncation flag."""
    if not (len(trajectories) == len(prompt_extras) == len(uids) == len(group_ids)) or not trajectories:
        raise StepDataError(
            f"a trajectory batch needs as many trajectories, prompt extras, uids and group ids (and at least one): "
            f"got {len(trajectories)}, {len(prompt_extras)}, {len(uids)}, {len(group_ids)}"
        )
    width = max(len(t.token_ids) for t in trajectories)
    prompt_lens = torch.tensor([t.prompt_len for t in trajectories], dtype=torch.int64)
    lengths = torch.tensor([len(t.token_ids) for t in trajectories], dtype=torch.int64)
    loss_mask = _padded([t.loss_mask for t in trajectories], width, 0, torch.int64)
    versions = _padded([t.versions for t in trajectories], width, NO_VERSION, torch.int64)
    sampled_versions = [[v for v, m in zip(t.versions, t.loss_mask, strict=True) if m] for t in trajectories]
    batch = {
        INPUT_IDS: _padded([t.token_ids for t in trajectories], width, PAD_ID, torch.int64),
        ATTENTION_MASK: (torch.arange(width) < lengths[:, None]).long(),
        RESPONSE_MASK: loss_mask.clone(),
        LOSS_MASK: loss_mask,
        ROLLOUT_LOG_PROBS: _padded([t.log_probs for t in trajectories], width, 0.0, torch.float32),
        TOKEN_POLICY_VERSION: versions,
        TURN_ID: _padded([t.turn_ids for t in trajectories], width, 0, torch.int64),
        PROMPT_LEN: prompt_lens,
        RESPONSE_LEN: lengths - prompt_lens,
        UID: torch.tensor(list(uids), dtype=torch.int64),
        GROUP_ID: torch.tensor(list(group_ids), dtype=torch.int64),
        # The oldest weights any of the row's tokens came from: what staleness accounting must see.
        POLICY_VERSION: torch.tensor([min(v) for v in sampled_versions], dtype=torch.int64),
    }
    names = sorted({name for extras in prompt_extras for name in extras})
    extras: dict[str, list[object]] = {name: [e.get(name) for e in prompt_extras] for name in names}
    extras[FINISH_REASON_KEY] = [t.finish_reason for t in trajectories]
    extras[WORKFLOW_REWARD_KEY] = [t.reward for t in trajectories]
    extras[TRUNCATED_KEY] = [t.truncated for t in trajectories]
    return StepData(batch, extras)
