"""2 Trainer steps on 2 Ray CPU slots reading the prompts from a Hugging Face `datasets` folder (`save_to_disk`),
sharded over the ranks like a jsonl file: the same prompts, so the same metrics, as the jsonl run."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import datasets
import pytest

from rl_runtime.trainer import Trainer

from ._runs import deterministic
from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow


def test_a_saved_datasets_folder_trains_as_its_jsonl_file(tmp_path: Path, ray_runtime: None) -> None:
    jsonl = tiny_config(tmp_path / "jsonl", total_steps=2, checkpoint_every=2)
    rows = [json.loads(line) for line in (tmp_path / "jsonl" / "train.jsonl").read_text().splitlines()]
    saved = tmp_path / "saved"
    datasets.Dataset.from_list(rows).save_to_disk(str(saved))
    base = tiny_config(tmp_path / "hf", total_steps=2, checkpoint_every=2)
    folder = attrs.evolve(base, data=attrs.evolve(base.data, train_files=(saved,)))

    expected = Trainer(jsonl, TokenTask).fit()
    result = Trainer(folder, TokenTask).fit()

    assert result.end_step == 2
    for ours, theirs in zip(result.history, expected.history, strict=True):
        assert ours["critic/score/mean"] == theirs["critic/score/mean"]
        ours, theirs = deterministic(ours), deterministic(theirs)
        assert ours["perf/total_num_tokens"] == theirs["perf/total_num_tokens"]
