"""The recipes' step curves (`recipes/_plot.py`, `agentic/_report.py`, `embodied/_report.py`): a figure on
matplotlib's headless backend, and the shared finish, a 0..1 y axis over the steps with grid and legend, written as a
PNG. Neutral ground they all import, so `rl_recipes.recipes`, `rl_recipes.agentic` and `rl_recipes.embodied` do not
import each other."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FIGURE_SIZE = (7.0, 4.0)
"""Inches, width x height."""
DPI = 120


def step_figure(path: Path) -> tuple[Any, Any] | None:
    """`(figure, axes)` of a new figure for `path`; None, with a warning naming the file, without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        logger.warning("matplotlib is not installed, so %s is not drawn; pip install matplotlib", path.name)
        return None
    return pyplot.subplots(figsize=FIGURE_SIZE)


def save_step_figure(
    figure: Any, axes: Any, path: Path, *, ylabel: str, legend_fontsize: str | float | None = None
) -> Path:
    """Finish a `step_figure` (x "step", y `ylabel` over 0..1 with a margin, grid, legend in `legend_fontsize`, by
    default matplotlib's), write it to `path` and close it; `path`."""
    from matplotlib import pyplot

    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.set_ylim(-0.05, 1.05)
    axes.grid(alpha=0.3)
    axes.legend(**({} if legend_fontsize is None else {"fontsize": legend_fontsize}))
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    pyplot.close(figure)
    return path
