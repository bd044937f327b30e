"""BabyAI (minigrid) as the CPU default embodied env: levels are tasks, a fixed pool of seeds per level are trials.

Frames are egocentric RGB (`RGBImgPartialObsWrapper`: 7x7 cells x `tile_size` px, 56x56 by default); actions are the
first `num_actions` minigrid actions (3: turn left, turn right, forward); success is a positive terminal reward.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rl_core.envs import EnvConfig, EnvConfigError, EnvSpec, EnvTick, VectorEnv, register_environment, vector_env

DEFAULT_LEVELS = ("GoToLocal",)
"""Levels used when `env.tasks` is empty."""
STATE_DIM = 3
"""Privileged state features: the nearest target's offset ahead of and to the right of the agent, and its distance."""
_OPTIONS = {"num_actions": 3, "tile_size": 8, "trial_offset": 0}
_VIEW_CELLS = 7
_MAX_ACTIONS = 7


logger = logging.getLogger(__name__)


def babyai_options(options: Mapping[str, object]) -> dict[str, int]:
    """BabyAI's `env.options` with defaults filled; an unknown or out-of-range option raises `EnvConfigError`."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise EnvConfigError(
            f"env.options: unknown BabyAI option(s) {unknown}; valid options are {sorted(_OPTIONS)} (remove the others)"
        )
    merged = {**_OPTIONS, **options}
    values: dict[str, int] = {}
    for name, value in merged.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise EnvConfigError(f"env.options.{name}: expected an int, got {value!r}; set an integer")
        values[name] = value
    if not 1 <= values["num_actions"] <= _MAX_ACTIONS:
        raise EnvConfigError(
            f"env.options.num_actions: expected 1..{_MAX_ACTIONS} (minigrid's actions), got {values['num_actions']}"
        )
    if values["tile_size"] < 1 or values["trial_offset"] < 0:
        raise EnvConfigError(
            f"env.options: tile_size must be >= 1 and trial_offset >= 0, got {values['tile_size']} and "
            f"{values['trial_offset']}; fix those values"
        )
    return values


def babyai_levels(config: EnvConfig) -> tuple[str, ...]:
    """The configured levels (default GoToLocal); an unknown level raises `EnvConfigError` listing the known ones."""
    import gymnasium as gym
    import minigrid  # noqa: F401 - registers the BabyAI-* ids

    levels = config.tasks or DEFAULT_LEVELS
    known = sorted(k[len("BabyAI-") : -len("-v0")] for k in gym.registry if k.startswith("BabyAI-"))
    for level in levels:
        if level not in known:
            from rl_core import nearest_name

            near = nearest_name(level, known)
            hint = f" (did you mean {near!r}?)" if near else ""
            raise EnvConfigError(
                f"env.tasks: unknown BabyAI level {level!r}{hint}; use level names without the BabyAI- prefix, "
                f"e.g. GoToLocal, GoToRedBallGrey, GoToObj (known: {', '.join(known)})"
            )
    return levels


def babyai_spec(config: EnvConfig) -> EnvSpec:
    """The `EnvSpec` of BabyAI for `config` (validates levels and options)."""
    options = babyai_options(config.options)
    side = _VIEW_CELLS * options["tile_size"]
    return EnvSpec(
        name=config.name,
        image_shape=(3, side, side),
        action_dims=1,
        action_bins=options["num_actions"],
        max_steps=config.max_steps,
        task_names=babyai_levels(config),
        num_trials=config.num_trials,
    )


def trial_seed(seed: int, task_id: int, trial_id: int) -> int:
    """The minigrid reset seed of (task, trial): a fixed initial state, like a LIBERO trial."""
    return ((seed * 1_000_003 + task_id) * 1_000_003 + trial_id) % (2**31 - 1)


class BabyAIEpisodeEnv:
    """One BabyAI env; `reset(task, trial)` builds (and caches) the level and resets it to the trial's seed."""

    def __init__(
        self,
        levels: Sequence[str],
        max_steps: int,
        seed: int = 0,
        num_actions: int = 3,
        tile_size: int = 8,
        trial_offset: int = 0,
    ) -> None:
        self._levels, self._max_steps, self._seed = tuple(levels), max_steps, seed
        self._num_actions, self._tile_size, self._trial_offset = num_actions, tile_size, trial_offset
        self._envs: dict[int, Any] = {}  # gymnasium envs (imported lazily)
        self._env: Any = None

    @property
    def unwrapped(self):
        """The current level's `MiniGridEnv` (for the expert bot)."""
        assert self._env is not None, "reset first"
        return self._env.unwrapped

    def reset(self, task_id: int, trial_id: int) -> EnvTick:
        """Reset to level `task_id` with trial `trial_id`'s seed."""
        if task_id not in self._envs:
            self._envs[task_id] = self._make(self._levels[task_id])
        self._env = self._envs[task_id]
        # minigrid prints every rejected level layout ("Sampling rejected: ..."); that is its normal level
        # generation, so it goes to this module's debug log instead of flooding the run's console.
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            obs, _ = self._env.reset(seed=trial_seed(self._seed, task_id, trial_id + self._trial_offset))
        for line in printed.getvalue().splitlines():
            logger.debug("minigrid (level %d, trial %d): %s", task_id, trial_id, line)
        return EnvTick(_frame(obs), instruction=str(obs["mission"]), state=self._state())

    def step(self, action: Sequence[int]) -> EnvTick:
        """Take minigrid action `action[0]`."""
        assert self._env is not None, "reset first"
        obs, reward, terminated, truncated, _ = self._env.step(int(action[0]))
        success = bool(terminated and reward > 0)
        return EnvTick(_frame(obs), done=bool(terminated or truncated), success=success, state=self._state())

    def close(self) -> None:
        """Close every cached level."""
        for env in self._envs.values():
            env.close()
        self._envs.clear()

    def _make(self, level: str):
        import gymnasium as gym
        from minigrid.wrappers import RGBImgPartialObsWrapper

        env = gym.make(f"BabyAI-{level}-v0", max_steps=self._max_steps, disable_env_checker=True)
        return RGBImgPartialObsWrapper(env, tile_size=self._tile_size)

    def _state(self) -> torch.Tensor:
        """Nearest target in the agent's frame: cells ahead, cells to the right, Manhattan distance (/ grid width).

        Agent-relative, so every success ends near (1, 0, 1/width) whatever the layout: an oracle progress signal.
        Zeros when the mission names no object position (compound instructions).
        """
        env = self.unwrapped
        ax, ay = (int(v) for v in env.agent_pos)
        state = torch.zeros(STATE_DIM, dtype=torch.float32)
        targets = getattr(getattr(getattr(env, "instrs", None), "desc", None), "obj_poss", None) or []
        if targets:
            dx, dy = min(((int(x) - ax, int(y) - ay) for x, y in targets), key=lambda d: abs(d[0]) + abs(d[1]))
            fx, fy = (int(v) for v in env.dir_vec)
            state[0] = (dx * fx + dy * fy) / env.width  # ahead
            state[1] = (dx * -fy + dy * fx) / env.width  # to the right (minigrid's right_vec = (-fy, fx))
            state[2] = (abs(dx) + abs(dy)) / env.width
        return state


def _frame(obs: Mapping[str, object]) -> torch.Tensor:
    image = obs["image"]
    return torch.as_tensor(image).permute(2, 0, 1).contiguous()  # (H, W, 3) -> (3, H, W) uint8


def babyai_factory(config: EnvConfig) -> functools.partial[BabyAIEpisodeEnv]:
    """A picklable builder of one `BabyAIEpisodeEnv` for `config` (validates it first)."""
    spec = babyai_spec(config)
    options = babyai_options(config.options)
    return functools.partial(
        BabyAIEpisodeEnv,
        spec.task_names,
        config.max_steps,
        config.seed,
        options["num_actions"],
        options["tile_size"],
        options["trial_offset"],
    )


@register_environment("babyai")
def make_babyai(config: EnvConfig) -> VectorEnv:
    """BabyAI as a `VectorEnv`: config checked here, before any worker starts."""
    return vector_env(config, babyai_spec(config), babyai_factory(config))
