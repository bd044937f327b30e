"""What an SRPO run leaves to look at: the success curve (SRPO and its binary baseline when both ran) and a frame
strip of a few held-out episodes before and after training."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from rl_core.envs import EnvConfig, make_env
from rl_recipes._plotting import DPI, save_step_figure, step_figure
from rl_runtime.nodes import ActionPolicy, Episode, InstructionEncoder, run_episodes

logger = logging.getLogger(__name__)

TRAIN_SUCCESS = "rollout/success_rate"
HELDOUT_SUCCESS = "val/reward/mean@"
"""Prefix of the held-out success rate (`mean@k`, k = rollout.val_samples_per_prompt)."""
STEP_KEY = "step"
_STRIP_FRAMES = 8


def read_metrics(path: Path) -> list[dict[str, float]]:
    """The records of a run's metrics.jsonl (empty when it does not exist)."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        logger.warning("matplotlib is not installed, so the SRPO frame strip is not drawn; pip install matplotlib")
        return None
    return pyplot


def plot_success_curve(runs: Mapping[str, Sequence[Mapping[str, float]]], path: Path) -> Path | None:
    """Training and held-out success rate per step of each run (label -> metrics records); None without
    matplotlib."""
    made = step_figure(path)
    if made is None:
        return None
    figure, axes = made
    for label, records in runs.items():
        train = [(r[STEP_KEY], r[TRAIN_SUCCESS]) for r in records if TRAIN_SUCCESS in r]
        heldout = [(r[STEP_KEY], v) for r in records for k, v in r.items() if k.startswith(HELDOUT_SUCCESS)]
        if train:
            axes.plot(*zip(*train, strict=True), alpha=0.5, label=f"{label}: train rollouts")
        if heldout:
            axes.plot(*zip(*heldout, strict=True), marker="o", label=f"{label}: held-out")
    return save_step_figure(figure, axes, path, ylabel="success rate", legend_fontsize="small")


def play_episodes(
    env_config: EnvConfig,
    policy: ActionPolicy,
    encode: InstructionEncoder,
    tasks: Sequence[int],
    trials: Sequence[int],
    *,
    temperature: float = 0.0,
    seed: int = 0,
) -> list[Episode]:
    """Run one episode per (task, trial) in this process (greedy by default)."""
    env = make_env(dataclasses.replace(env_config, num_envs=max(1, len(tasks)), num_workers=0))
    try:
        return asyncio.run(
            run_episodes(
                env,
                policy,
                encode,
                tasks,
                trials,
                temperature=temperature,
                generator=torch.Generator().manual_seed(seed),
                max_policy_steps=env.spec.max_steps,
            )
        )
    finally:
        env.close()


def _strip_frames(episode: Episode) -> list[torch.Tensor]:
    video = episode.full_video()
    if video.shape[0] == 0:
        return []
    picks = torch.linspace(0, video.shape[0] - 1, min(_STRIP_FRAMES, video.shape[0])).round().long().unique()
    return [video[i] for i in picks.tolist()]


def draw_frame_strip(rows: Mapping[str, Sequence[Episode]], path: Path) -> Path | None:
    """One row of frames per episode (first to last frame), grouped by label ("before", "after"); the title of each
    row says the instruction and whether it succeeded. None without matplotlib or episodes."""
    pyplot = _pyplot()
    episodes = [(label, episode) for label, group in rows.items() for episode in group]
    if pyplot is None or not episodes:
        return None
    figure, grid = pyplot.subplots(
        len(episodes), _STRIP_FRAMES, figsize=(1.4 * _STRIP_FRAMES, 1.7 * len(episodes)), squeeze=False
    )
    for row, (label, episode) in enumerate(episodes):
        frames = _strip_frames(episode)
        for column in range(_STRIP_FRAMES):
            axes = grid[row][column]
            axes.axis("off")
            if column < len(frames):
                axes.imshow(frames[column].permute(1, 2, 0).numpy())
        outcome = "success" if episode.complete else "failure"
        grid[row][0].set_title(
            f"{label}: {episode.instruction!r}, {outcome} at step {episode.finish_step}", loc="left", fontsize=8
        )
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    pyplot.close(figure)
    return path
