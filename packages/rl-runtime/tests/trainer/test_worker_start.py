"""What a rollout worker does with its prompts when it is built: a row longer than `data.max_prompt_length` stops
the run there, named, before any engine is built or any step runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_runtime.trainer import Trainer, _worker_state
from rl_runtime.trainer._worker_state import RunResourcesFactory
from rl_runtime.workers import StepDataError

from ._task import TokenTask, tiny_config

LONG_ROW = 5


def _no_engine(*args: object, **kwargs: object) -> None:
    raise AssertionError("an engine was built before the prompts were checked")


def test_an_overlong_prompt_stops_the_worker_build_naming_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tiny_config(tmp_path)
    train = config.data.train_files[0]
    rows = [json.loads(line) for line in Path(train).read_text().splitlines()]
    rows[LONG_ROW]["prompt_ids"] = list(range(4, 13))  # 9 tokens; max_prompt_length is 8
    Path(train).write_text("".join(json.dumps(row) + "\n" for row in rows))
    trainer = Trainer(config, TokenTask)
    monkeypatch.setattr(_worker_state, "build_actor", _no_engine)
    monkeypatch.setattr(_worker_state, "init_distributed", _no_engine)
    factory = RunResourcesFactory(config, TokenTask, trainer.total_steps, trainer.plan)
    with pytest.raises(
        StepDataError,
        match=rf"train.jsonl row {LONG_ROW} \(line {LONG_ROW + 1}\): the prompt has 9 tokens, more than "
        r"data.max_prompt_length=8; raise max_prompt_length or remove the row",
    ):
        factory(trainer.placement.worker(0))
