"""Held-out and training curves of runs side by side: the learning comparison of docs/async.md (issue 25).

Each `--run LABEL=FOLDER` is a run folder of `rl-recipes train grpo ...` (its `metrics.jsonl`); the figure shows the
held-out exact match at every validation (markers) and the training score averaged over 10 steps (thin line), one
colour per run, and prints the held-out figures as a markdown table row per run.

Run: python bench/async_learning_plot.py --run "eta=0=runs/sync" --run "eta=1=runs/async" --out curves.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELDOUT = "val/pass@1"
SCORE = "critic/score/mean"
WINDOW = 10


def _records(folder: Path) -> dict[int, dict[str, float]]:
    records: dict[int, dict[str, float]] = {}
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            records.setdefault(int(row["step"]), {}).update(row)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="append", required=True, help="LABEL=FOLDER (the label may contain '=')")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7.0, 4.0))
    for index, spec in enumerate(args.run):
        label, folder = spec.rsplit("=", 1)
        records = _records(Path(folder))
        colour = f"C{index}"
        validations = [(step, records[step][HELDOUT]) for step in sorted(records) if HELDOUT in records[step]]
        steps = [step for step in sorted(records) if step > 0 and SCORE in records[step]]
        smooth = [
            sum(records[s][SCORE] for s in steps[max(0, i - WINDOW + 1) : i + 1])
            / len(steps[max(0, i - WINDOW + 1) : i + 1])
            for i in range(len(steps))
        ]
        axes.plot(steps, smooth, color=colour, alpha=0.35, linewidth=1)
        axes.plot(*zip(*validations, strict=True), color=colour, marker="o", label=f"{label}: held-out")
        cells = " | ".join(f"{value:.3f}" for _, value in validations)
        print(f"| {label} | {cells} | {validations[-1][1] - validations[0][1]:+.3f} |")
    axes.set_xlabel("step (512 samples each)")
    axes.set_ylabel("exact match (thin: training score, 10-step mean)")
    axes.set_ylim(0.0, 0.8)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
