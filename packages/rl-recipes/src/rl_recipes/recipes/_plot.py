"""The run's reward curve: training score per step and held-out reward at each validation."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rl_recipes._plotting import save_step_figure, step_figure

TRAIN_SCORE_METRIC = "critic/score/mean"


def plot_reward_curve(records: Mapping[int, Mapping[str, Any]], path: Path, *, heldout_key: str) -> Path | None:
    """Write a PNG of the training score per step and the held-out reward per validation of `records` (a whole
    run's metrics by step, as `read_metrics_jsonl` returns them, step 0 the validation before training); None
    without matplotlib."""
    figure_axes = step_figure(path)
    if figure_axes is None:
        return None
    figure, axes = figure_axes
    steps = sorted(step for step in records if step > 0)
    scores = [records[step].get(TRAIN_SCORE_METRIC, float("nan")) for step in steps]
    validations = [(step, records[step][heldout_key]) for step in sorted(records) if heldout_key in records[step]]
    axes.plot(steps, scores, label="train score (mean)", alpha=0.7)
    if validations:
        axes.plot(*zip(*validations, strict=True), marker="o", label=f"held-out {heldout_key}")
    return save_step_figure(figure, axes, path, ylabel="reward")
