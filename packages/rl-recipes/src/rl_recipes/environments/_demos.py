"""Expert demonstrations for SFT warm starts: minigrid's `BabyAIBot` played on the env's own (task, trial) seeds."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

import torch

from rl_core.envs import EnvConfig, EnvConfigError
from rl_recipes.environments._babyai import babyai_factory, babyai_spec

logger = logging.getLogger(__name__)


class Demonstration(NamedTuple):
    """One successful expert episode."""

    task_id: int
    trial_id: int
    instruction: str
    frames: torch.Tensor
    """(T, C, H, W) uint8: the frame seen before each action."""
    actions: torch.Tensor
    """(T, D) int64 bin indices (BabyAI: D = 1, the minigrid action)."""


def babyai_demos(config: EnvConfig, task_ids: Sequence[int], trial_ids: Sequence[int]) -> list[Demonstration]:
    """Play `BabyAIBot` on each (task, trial) of `config`'s env; return the episodes it solved within max_steps.

    An episode where the bot needs an action outside the env's `num_actions` (e.g. pickup with 3 actions) or does not
    succeed is skipped (logged), so the result may be shorter than the request.
    """
    from minigrid.utils.baby_ai_bot import BabyAIBot

    if len(task_ids) != len(trial_ids):
        raise EnvConfigError(
            f"babyai_demos: {len(task_ids)} task_ids but {len(trial_ids)} trial_ids; pass one trial per task"
        )
    spec = babyai_spec(config)
    env = babyai_factory(config)()
    demos: list[Demonstration] = []
    try:
        for task, trial in zip(task_ids, trial_ids, strict=True):
            if not 0 <= task < len(spec.task_names):
                raise EnvConfigError(
                    f"babyai_demos: task_id {task} out of range [0, {len(spec.task_names)}) for env.tasks "
                    f"{spec.task_names}; use a valid task_id"
                )
            tick = env.reset(task, trial)
            instruction = tick.instruction
            bot = BabyAIBot(env.unwrapped)
            frames: list[torch.Tensor] = []
            actions: list[int] = []
            for _ in range(spec.max_steps):
                planned = bot.replan()
                if planned is None or int(planned) >= spec.action_bins:
                    break
                action = int(planned)
                frames.append(tick.frame)
                actions.append(action)
                tick = env.step([action])
                if tick.done or tick.success:
                    break
            if tick.success:
                demos.append(
                    Demonstration(task, trial, instruction, torch.stack(frames), torch.tensor(actions).unsqueeze(1))
                )
            else:
                logger.info("BabyAIBot did not solve task %d trial %d with %d actions", task, trial, spec.action_bins)
    finally:
        env.close()
    return demos
