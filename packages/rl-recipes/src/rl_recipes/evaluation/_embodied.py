"""Success rate per task of a VLA folder on an env's (task, trial) pairs: `rl-recipes eval --env`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rl_core.envs import EnvConfig
from rl_engines.vla import VLAPolicy, instruction_encoder
from rl_recipes.embodied import EmbodiedTask, play_episodes, probe_env


@dataclass(frozen=True)
class EmbodiedEvaluation:
    """Success rates of one evaluation, overall and by task name."""

    success_rate: float
    per_task: dict[str, float]
    episodes: int


def evaluate_policy(
    model: str | Path, env: EnvConfig, trials: Sequence[int], *, temperature: float = 0.0, seed: int = 0
) -> EmbodiedEvaluation:
    """One episode of the VLA in `model` per (task, trial) of `env`'s tasks and `trials` (greedy by default)."""
    policy = VLAPolicy.from_pretrained(model)
    task = EmbodiedTask(instruction_encoder(model))
    names = probe_env(env)[0].task_names
    tasks = [t for t in range(len(names)) for _ in trials]
    episodes = play_episodes(
        env,
        policy,
        task.encode_instruction,
        tasks,
        [k for _ in names for k in trials],
        temperature=temperature,
        seed=seed,
    )
    wins = [float(e.complete and not e.failed) for e in episodes]
    per_task = {
        name: sum(w for w, t in zip(wins, tasks, strict=True) if t == index) / max(len(trials), 1)
        for index, name in enumerate(names)
    }
    return EmbodiedEvaluation(sum(wins) / max(len(wins), 1), per_task, len(episodes))
