"""The run's reward curve: training score per step and held-out reward at each validation."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TRAIN_SCORE_METRIC = "critic/score/mean"
_FIGURE_SIZE = (7.0, 4.0)
_DPI = 120


def plot_reward_curve(records: Mapping[int, Mapping[str, Any]], path: Path, *, heldout_key: str) -> Path | None:
    """Write a PNG of the training score per step and the held-out reward per validation of `records` (a whole
    run's metrics by step, as `read_metrics_jsonl` returns them, step 0 the validation before training); None
    without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        logger.warning("matplotlib is not installed, so %s is not drawn; pip install matplotlib", path.name)
        return None
    steps = sorted(step for step in records if step > 0)
    scores = [records[step].get(TRAIN_SCORE_METRIC, float("nan")) for step in steps]
    validations = [(step, records[step][heldout_key]) for step in sorted(records) if heldout_key in records[step]]
    figure, axes = pyplot.subplots(figsize=_FIGURE_SIZE)
    axes.plot(steps, scores, label="train score (mean)", alpha=0.7)
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
