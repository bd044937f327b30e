"""Prompt tokenization as data preparation: every row of a prompt source encoded by the task once, when the
rollout worker is built, and looked up by dataset index in each step.

As verl tokenizes every prompt when its dataset starts (to filter the overlong ones, `data.filter_overlong_prompts`)
and TRL's dataset `map`s do, a rollout worker encodes each row of `data.train_files` once, before its first step
(`PromptTable.encode`, called by the trainer's resources factory). A row the task cannot encode, or whose prompt is
longer than `data.max_prompt_length`, stops the run there, named by its file and row, instead of at the step that
draws it; and no step spends time in the tokenizer. The loader still gives the step its rows and their dataset
indices (`LoaderBatch.indices`); the generate operations take the prompts of those indices from the table.

Cost: one `task.encode` per row of the source on every rollout worker, at start-up (the whole source, since each
epoch's order gives a rank other rows), and the table holds 8 bytes per prompt token (a flat int64 array with
offsets, not a tuple of Python ints per row) plus each row's `PromptItem.extras`; measured figures are in
docs/tutorials/own-model-and-data.md ("Your data"). A step's lookup builds its rows' `PromptItem`s from the array.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from rl_coordinator.loading import RowSource, check_row
from rl_runtime.nodes._task import PromptItem, Task
from rl_runtime.workers import StepDataError

logger = logging.getLogger(__name__)

ENCODE_CHUNK_ROWS = 1024
"""Rows read from the source at once while the table is built (a source reads a batch faster than single rows)."""


def encode_rows(
    task: Task, rows: Sequence[Mapping[str, object]], where: Sequence[str], max_len: int
) -> list[PromptItem]:
    """Each row's prompt; a StepDataError names the row whose prompt exceeds `data.max_prompt_length`."""
    items = []
    for row, place in zip(rows, where, strict=True):
        item = task.encode(row, place)
        if len(item.prompt_ids) > max_len:
            raise StepDataError(
                f"{place}: the prompt has {len(item.prompt_ids)} tokens, more than data.max_prompt_length={max_len}; "
                "raise max_prompt_length or remove the row"
            )
        items.append(item)
    return items


class PromptTable:
    """The `PromptItem` of every row of a prompt source, by dataset index: token ids in one flat int64 array
    (`offsets[i]:offsets[i + 1]` are row i's), extras in a list."""

    def __init__(self, ids: array[int], offsets: array[int], extras: list[Mapping[str, Any]]) -> None:
        """Use `PromptTable.encode`; `offsets` has one entry per row of `extras` plus a last one, `len(ids)`."""
        self._ids, self._offsets, self._extras = ids, offsets, extras

    @classmethod
    def encode(cls, task: Task, source: RowSource, max_prompt_length: int) -> PromptTable:
        """Every row of `source` encoded by `task`, once. A row that is not a mapping, that the task refuses, or whose
        prompt is longer than `max_prompt_length` raises, naming the row (`source.where(index)`: file and row)."""
        start = time.perf_counter()
        ids, offsets, extras = array("q"), array("q", [0]), []
        for first in range(0, len(source), ENCODE_CHUNK_ROWS):
            indices = range(first, min(first + ENCODE_CHUNK_ROWS, len(source)))
            where = [source.where(index) for index in indices]
            rows = [check_row(row, (), place) for row, place in zip(source.rows(indices), where, strict=True)]
            for item in encode_rows(task, rows, where, max_prompt_length):
                ids.extend(item.prompt_ids)
                offsets.append(len(ids))
                extras.append(item.extras)
        table = cls(ids, offsets, extras)
        logger.info(
            "encoded the %d prompts of %s in %.2f s (%d tokens)",
            len(table),
            source.name,
            time.perf_counter() - start,
            len(ids),
        )
        return table

    def __len__(self) -> int:
        """Rows in the table."""
        return len(self._extras)

    def items(self, indices: Sequence[int]) -> list[PromptItem]:
        """The prompts of dataset rows `indices` (a `LoaderBatch.indices`), in that order."""
        items = []
        for index in indices:
            if not 0 <= index < len(self._extras):
                raise StepDataError(
                    f"row {index} is outside the prompt table of {len(self._extras)} rows; the loader and the table "
                    "must read the same source (build the table from the loader's `source`)"
                )
            begin, end = self._offsets[index], self._offsets[index + 1]
            items.append(PromptItem(tuple(self._ids[begin:end]), self._extras[index]))
        return items
