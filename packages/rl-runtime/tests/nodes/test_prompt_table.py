"""Prompts are encoded once per row when the rollout worker is built (`PromptTable`), and the generate operation
takes each step's prompts from that table by the loader's dataset indices, calling the task no more."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rl_coordinator.loading import JsonlSource, ShardedLoader
from rl_core.graph import get_pipeline
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, PromptItem, PromptTable, ResponseSample, ScoreResult
from rl_runtime.nodes._generate import generate
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import NodeContext, StepDataError

from .test_greedy_baseline import PromptLengthEngine

ROWS = 8
PROMPTS_PER_STEP = 2
SAMPLES = 2


class CountingTask:
    """Test double of a task: a row's `ids` are its prompt, its `truth` goes to the extras; counts `encode` calls by
    the row's place."""

    def __init__(self) -> None:
        self.encoded: Counter[str] = Counter()

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        self.encoded[where] += 1
        if not row.get("ids"):
            raise ValueError(f"{where}: field 'ids' must be a non-empty list, got {row.get('ids')!r}")
        return PromptItem(tuple(row["ids"]), {"truth": row["truth"]})

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(0.0 for _ in samples))

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""


def _rows(count: int) -> list[dict[str, Any]]:
    """Row i's prompt is (100 + i, i) and its truth i: which row a prompt came from shows in its tokens."""
    return [{"ids": [100 + i, i], "truth": i} for i in range(count)]


def _write(path: Path, rows: Sequence[object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _config(train: Path) -> RunConfig:
    return config_from_dict(
        RunConfig,
        {
            "data": {"train_files": [str(train)], "max_prompt_length": 4, "max_response_length": 4},
            "batch": {"prompts_per_step": PROMPTS_PER_STEP, "samples_per_prompt": SAMPLES},
            "actor": {"model": {"hf_config": {"model_type": "qwen2"}}},
            "algorithm": {"kl": {"mode": "none"}},
        },
    )


def _loader(train: Path) -> ShardedLoader:
    return ShardedLoader(train, dp_rank=0, dp_size=1, batch_size=PROMPTS_PER_STEP, seed=7)


def test_the_generate_node_takes_each_steps_prompts_from_the_table_by_index(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.jsonl", _rows(ROWS))
    config, task, engine, loader = _config(train), CountingTask(), PromptLengthEngine(), _loader(train)
    table = PromptTable.encode(task, loader.source, config.data.max_prompt_length)
    assert len(table) == ROWS
    assert sorted(task.encoded.values()) == [1] * ROWS  # every row once, when the worker is built

    resources = NodeResources(config, None, task, loader, engine, None, prompt_table=table)  # type: ignore[arg-type]
    node = next(n for n in get_pipeline("grpo").nodes.values() if n.operation == "generate")
    steps = 6  # past the 4-step epoch: the second epoch's order draws the same rows again
    for step in range(steps):
        generate(NodeContext(node, 0, DataParallelInfo(0, 1), step, resources), {})

    assert sorted(task.encoded.values()) == [1] * ROWS  # no step called the task
    expected = _loader(train)  # the same seed: the loader's dataset indices of each step
    drawn = [index for _ in range(steps) for index in next(expected).indices]
    assert [r.input_ids for r in engine.requests] == [(100 + i, i) for i in drawn for _ in range(SAMPLES)]
    assert table.items([3, 0]) == [PromptItem((103, 3), {"truth": 3}), PromptItem((100, 0), {"truth": 0})]


def test_a_prompt_longer_than_max_prompt_length_is_refused_naming_its_row(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[2]["ids"] = [1, 2, 3, 4, 5]
    source = JsonlSource(_write(tmp_path / "train.jsonl", rows))
    with pytest.raises(
        StepDataError,
        match=r"train.jsonl row 2 \(line 3\): the prompt has 5 tokens, more than data.max_prompt_length=4; "
        r"raise max_prompt_length or remove the row",
    ):
        PromptTable.encode(CountingTask(), source, max_prompt_length=4)


def test_a_row_the_task_refuses_is_named_with_the_tasks_message(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[3]["ids"] = []
    source = JsonlSource(_write(tmp_path / "train.jsonl", rows))
    message = r"train.jsonl row 3 \(line 4\): field 'ids' must be a non-empty list, got \[\]$"
    with pytest.raises(ValueError, match=message):
        PromptTable.encode(CountingTask(), source, max_prompt_length=4)


def test_a_worker_without_a_table_says_how_to_build_one(tmp_path: Path) -> None:
    train = _write(tmp_path / "train.jsonl", _rows(ROWS))
    resources = NodeResources(_config(train), None, CountingTask(), _loader(train), PromptLengthEngine(), None)  # type: ignore[arg-type]
    node = next(n for n in get_pipeline("grpo").nodes.values() if n.operation == "generate")
    with pytest.raises(StepDataError, match=r"no prompt table: .*PromptTable.encode\(task, loader.source"):
        generate(NodeContext(node, 0, DataParallelInfo(0, 1), 0, resources), {})
