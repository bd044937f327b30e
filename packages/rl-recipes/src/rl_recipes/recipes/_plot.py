"""The run's reward curve: training score per step and held-out reward at each validation."""

from __future__ import annotations

import logging
from pathlib import Path

from rl_runtime.trainer import TrainResult

logger = logging.getLogger(__name__)

TRAIN_SCORE_METRIC = "critic/score/mean"
_FIGURE_SIZE = (7.0, 4.0)
_DPI = 120


def plot_reward_curve(result: TrainResult, path: Path, *, heldout_key: str) -> Path | None:
    """Write a PNG of the training score per step and the held-out reward per validation; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        logger.warning("matplotlib is not installed, so %s is not drawn; pip install matplotlib", path.name)
        return None
    steps = range(result.start_step + 1, result.end_step + 1)
    scores = [metrics.get(TRAIN_SCORE_METRIC, float("nan")) for metrics in result.history]
    validations = [(step, metrics[heldout_key]) for step, metrics in result.validations if heldout_key in metrics]
    figure, axes = pyplot.subplots(figsize=_FIGURE_SIZE)
    axes.plot(list(steps), scores, label="train score (mean)", alpha=0.7)
    if validations:
        axes.plot(*zip(*validations, strict=True), marker="o", label=f"held-out {heldout_key}")
    axes.set_xlabel("step")
    axes.set_ylabel("reward")
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=_DPI)
    pyplot.close(figure)
    return path
