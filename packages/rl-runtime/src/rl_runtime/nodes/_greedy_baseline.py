"""The `compute_greedy_baseline` operation (ReMax): a greedy response to each prompt, whose score is its baseline."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from rl_core.schema import BASELINE_REWARDS, GROUP_ID, INPUT_IDS, PROMPT_LEN
from rl_engines.rollout import SamplingParams
from rl_runtime.metrics._timer import timed
from rl_runtime.nodes._batching import require_fields, single_input, with_fields
from rl_runtime.nodes._generate import put_rollout_to_sleep, response_budget, sample_prompts
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._reward import sequence_scores
from rl_runtime.nodes._rollout_batch import FINISH_REASON_KEY
from rl_runtime.nodes._seeds import DRAW_BITS
from rl_runtime.nodes._task import PromptItem
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

_NEEDS = (INPUT_IDS, PROMPT_LEN, GROUP_ID)
GREEDY_DRAW = (1 << DRAW_BITS) - 1
"""The draw number of the greedy responses' ids and seeds (the last one; sampling draws count up from 0)."""


def group_prompts(data: StepData) -> tuple[list[PromptItem], torch.Tensor]:
    """One `PromptItem` per group of `data` (its first sample's prompt and extras), in order of first appearance,
    and the `(B,)` int64 index of each sample's group in that list."""
    groups = data.batch[GROUP_ID].tolist()
    first_row: dict[int, int] = {}
    for row, group in enumerate(groups):
        first_row.setdefault(group, row)
    prompt_lens = data.batch[PROMPT_LEN].tolist()
    names = [name for name in data.extras if name != FINISH_REASON_KEY]
    items = [
        PromptItem(
            tuple(data.batch[INPUT_IDS][row, : prompt_lens[row]].tolist()),
            {name: data.extras[name][row] for name in names},
        )
        for row in first_row.values()
    ]
    position = {group: index for index, group in enumerate(first_row)}
    return items, torch.tensor([position[group] for group in groups], dtype=torch.int64)


@register_operation("compute_greedy_baseline")
def compute_greedy_baseline(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """Adds `baseline_rewards` `(B,)`: the score (the task's, with overlong shaping when configured) of one greedy
    response (temperature 0) to each sample's prompt, shared by the prompt's group; ReMax's baseline.

    Reports `reward/greedy_baseline/mean`, the mean greedy score over this rank's prompts."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    require_fields(data, _NEEDS, ctx.node.id)
    rollout = res.rollout
    if rollout is None:
        raise StepDataError(
            f"node {ctx.node.id!r} samples greedy responses, but this worker holds no rollout engine; keep it in the "
            "rollout part of the pipeline (role rollout, right after the reward)"
        )
    metrics: dict[str, float] = {}
    with timed("greedy", metrics):
        items, group_of_sample = group_prompts(data)
        if "sleep" in rollout.capabilities and rollout.status().state == "asleep":
            rollout.wake_up()
        greedy = sample_prompts(
            rollout,
            items,
            1,
            SamplingParams(max_new_tokens=response_budget(res.config), temperature=0.0),
            seed_parts=(res.config.trainer.seed, ctx.step, ctx.dp.rank, GREEDY_DRAW),
            uid_of=(ctx.step, ctx.dp.rank, GREEDY_DRAW),
            policy_version=res.policy_version,
        )
        put_rollout_to_sleep(res)
        scores, _ = sequence_scores(res, greedy)
    metrics["reward/greedy_baseline/mean"] = scores.mean().item()
    return with_fields(data, metrics, **{BASELINE_REWARDS: scores[group_of_sample]})
