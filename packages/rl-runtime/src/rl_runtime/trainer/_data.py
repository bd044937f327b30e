"""The run's prompt files as one row source, and how many steps an epoch holds."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import RowSource, open_source
from rl_runtime.config import BatchPlan
from rl_runtime.trainer._errors import TrainerError


class ConcatSource(RowSource):
    """Several row sources read as one: rows of the first, then of the second, and so on."""

    def __init__(self, sources: Sequence[RowSource]) -> None:
        if not sources:
            raise TrainerError("ConcatSource needs at least one source")
        self.sources = list(sources)
        self.name = " + ".join(source.name for source in self.sources)
        self._starts = [0]
        for source in self.sources:
            self._starts.append(self._starts[-1] + len(source))

    def __len__(self) -> int:
        return self._starts[-1]

    def _locate(self, index: int) -> tuple[RowSource, int]:
        part = bisect.bisect_right(self._starts, index) - 1
        return self.sources[part], index - self._starts[part]

    def _read(self, index: int) -> dict[str, Any]:
        source, local = self._locate(index)
        return source.row(local)

    def where(self, index: int) -> str:
        """Where row `index` lives, in its own file's words."""
        source, local = self._locate(index)
        return source.where(local)


def open_files(paths: Sequence[Path], setting: str) -> RowSource:
    """The rows of `paths` (jsonl, parquet, csv or json files, or `datasets` folders) as one source; a TrainerError
    names `setting` for a missing path."""
    sources = []
    for path in paths:
        if not Path(path).exists():
            raise TrainerError(
                f"{setting}: {str(path)!r} is not a file; give jsonl or parquet files that exist (or csv/json files, "
                "or a Hugging Face datasets folder)"
            )
        try:
            sources.append(open_source(path))
        except CoordinatorInputError as error:
            raise TrainerError(f"{setting}: {error}") from None
    return sources[0] if len(sources) == 1 else ConcatSource(sources)


def steps_per_epoch(num_rows: int, plan: BatchPlan) -> int:
    """Whole steps one pass over `num_rows` prompts gives (the remainder is dropped, reshuffled each epoch)."""
    steps = num_rows // plan.prompts_per_step
    if steps == 0:
        raise TrainerError(
            f"data.train_files hold {num_rows} prompts, fewer than batch.prompts_per_step={plan.prompts_per_step}; "
            "add data or lower prompts_per_step"
        )
    return steps
