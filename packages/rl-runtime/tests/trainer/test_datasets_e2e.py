"""2 Trainer steps on 2 Ray CPU slots reading the prompts from a Hugging Face `datasets` folder (`save_to_disk`),
sharded over the ranks like a jsonl file: the same prompts, so the same metrics, as the jsonl run (the first 2 steps
of the session's STRAIGHT run, conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import datasets
import pytest

from rl_runtime.trainer import Trainer, TrainResult

from ._runs import deterministic
from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow


def test_a_saved_datasets_folder_trains_as_its_jsonl_file(tmp_path: Path, straight: TrainResult) -> None:
    base = tiny_config(tmp_path / "hf", total_steps=2, checkpoint_every=2)
    [jsonl] = base.data.train_files  # the rows every tiny_config writes, those the STRAIGHT run trained on
    rows = [json.loads(line) for line in Path(jsonl).read_text().splitlines()]
    saved = tmp_path / "saved"
    datasets.Dataset.from_list(rows).save_to_disk(str(saved))
    folder = attrs.evolve(base, data=attrs.evolve(base.data, train_files=(saved,)))

    # The jsonl run: the session's STRAIGHT run (conftest), whose first 2 steps are a plain 2-step run's.
    expected = straight.history[:2]
    result = Trainer(folder, TokenTask).fit()

    assert result.end_step == 2
    for ours, theirs in zip(result.history, expected, strict=True):
        assert ours["critic/score/mean"] == theirs["critic/score/mean"]
        ours, theirs = deterministic(ours), deterministic(theirs)
        assert ours["perf/total_num_tokens"] == theirs["perf/total_num_tokens"]
