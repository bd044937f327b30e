"""A tiny deterministic `EpisodeEnv` for testing env pools, rollouts, embedders and embodied pipelines without a
simulator, and `make_toy_env`, its `VectorEnv` factory of an `EnvConfig` (what `register_environment` takes)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import torch

from rl_core.envs import EnvConfig, EnvConfigError, EnvSpec, EnvTick, VectorEnv, vector_env

_WIDTH = 8
TOY_TASKS = ("reach the left end", "reach the right end")
"""`ToyEpisodeEnv`'s task table: task 0's goal is cell 0, task 1's cell 7."""


def toy_spec(max_steps: int = 8, num_trials: int = 6) -> EnvSpec:
    """The `EnvSpec` of `ToyEpisodeEnv`: a (3, 4, 8) frame, one action dim with 3 bins (left, stay, right)."""
    return EnvSpec(
        name="toy",
        image_shape=(3, 4, _WIDTH),
        action_dims=1,
        action_bins=3,
        max_steps=max_steps,
        task_names=TOY_TASKS,
        num_trials=num_trials,
    )


class ToyEpisodeEnv:
    """A walker on a line of 8 cells: task 0's goal is cell 0, task 1's cell 7; trial k starts at cell 1 + k % 6.

    Action bin 0 steps left, 1 stays, 2 steps right; reaching the goal is a success. The frame marks the walker in
    channel 0 and the goal in channel 1; `state` is (position, goal). `misbehave_task`: stepping an episode of that
    task makes the process hang (`misbehave="hang"`) or die (`misbehave="exit"`), to test pool timeouts and crashes.
    """

    def __init__(self, misbehave_task: int | None = None, misbehave: str = "hang") -> None:
        self._misbehave_task, self._misbehave = misbehave_task, misbehave
        self._task, self._pos, self._goal = 0, 0, 0

    def reset(self, task_id: int, trial_id: int) -> EnvTick:
        """Start task `task_id` from trial `trial_id`'s start cell."""
        self._task, self._goal = task_id, 0 if task_id == 0 else _WIDTH - 1
        self._pos = 1 + trial_id % (_WIDTH - 2)
        return self._tick(instruction=toy_spec().task_names[task_id])

    def step(self, action: Sequence[int]) -> EnvTick:
        """Move by `action[0] - 1` cells."""
        if self._task == self._misbehave_task:
            if self._misbehave == "exit":
                os._exit(3)
            time.sleep(3600)
        self._pos = min(max(self._pos + int(action[0]) - 1, 0), _WIDTH - 1)
        return self._tick()

    def close(self) -> None:
        """Nothing to release."""

    def _tick(self, instruction: str = "") -> EnvTick:
        frame = torch.zeros((3, 4, _WIDTH), dtype=torch.uint8)
        frame[0, :, self._pos] = 255
        frame[1, :, self._goal] = 255
        done = self._pos == self._goal
        state = torch.tensor([self._pos, self._goal], dtype=torch.float32)
        return EnvTick(frame, done=done, success=done, instruction=instruction, state=state)


def make_toy_env(config: EnvConfig) -> VectorEnv:
    """`config.num_envs` `ToyEpisodeEnv`s as a `VectorEnv` (in this process, or an `EnvPool` of `config.num_workers`)
    of `config.max_steps` and `config.num_trials`; `EnvConfigError` for other tasks than `TOY_TASKS` or any option."""
    if config.tasks and tuple(config.tasks) != TOY_TASKS:
        raise EnvConfigError(
            f"env.tasks: the toy env has exactly the tasks {list(TOY_TASKS)} (leave it empty for both), "
            f"got {list(config.tasks)}"
        )
    if config.options:
        raise EnvConfigError(f"env.options: the toy env takes none, got {sorted(config.options)}; remove them")
    return vector_env(config, toy_spec(config.max_steps, config.num_trials), ToyEpisodeEnv)
