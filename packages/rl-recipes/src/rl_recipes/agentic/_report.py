"""What the agentic recipe writes into its run folder besides the metrics: sample conversations before and after RL,
and the curves of the training success and tool-call rates with the held-out success before and after."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl_recipes._plotting import save_step_figure, step_figure
from rl_recipes.agentic._evaluate import EpisodeReport, failure_kind
from rl_recipes.agentic._task import SUCCESS_METRIC, TOOL_CALL_METRIC


def write_conversations(path: Path, title: str, episodes: Sequence[EpisodeReport]) -> Path:
    """A Markdown file of `episodes`: each turn's role and text, the ground truth and the verdict (right, or wrong
    with its `failure_kind`)."""
    lines = [f"# {title}", ""]
    for number, episode in enumerate(episodes, 1):
        verdict = "right" if episode.success else f"wrong, {failure_kind(episode)}"
        lines += [f"## Episode {number}: {verdict} (answer {episode.ground_truth})", ""]
        lines += [f"- **{m.get('role', '?')}**: `{m.get('content', '')}`" for m in episode.messages]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def plot_agentic_curves(
    records: Mapping[int, Mapping[str, Any]], path: Path, *, heldout: tuple[float, float] | None
) -> Path | None:
    """A PNG of the training success and tool-call rates per step of `records` (metrics by step), with the held-out
    success before (step 0) and after (the last step) when given; None without matplotlib."""
    figure_axes = step_figure(path)
    if figure_axes is None:
        return None
    figure, axes = figure_axes
    steps = sorted(step for step in records if step > 0 and SUCCESS_METRIC in records[step])
    axes.plot(steps, [records[s][SUCCESS_METRIC] for s in steps], label="train success rate")
    axes.plot(steps, [records[s].get(TOOL_CALL_METRIC, float("nan")) for s in steps], label="train tool-call rate")
    if heldout is not None:
        axes.plot([0, steps[-1] if steps else 1], list(heldout), marker="o", linestyle="--", label="held-out success")
    return save_step_figure(figure, axes, path, ylabel="rate")
