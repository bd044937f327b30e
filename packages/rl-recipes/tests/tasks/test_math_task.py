"""MathTask: prompts encode like the warm start's, rule rewards score responses, bad rows and rewards are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_recipes.embedded import build_embedded_tokenizer, save_embedded_tokenizer
from rl_recipes.tasks import DatasetError, MathTask, MathTaskConfig, build_prompt, encode_prompt, load_tokenizer
from rl_runtime.nodes import ResponseSample


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_embedded_tokenizer(build_embedded_tokenizer(), tmp_path_factory.mktemp("tok"))


def _sample(task: MathTask, text: str, truth: str, uid: int = 0) -> ResponseSample:
    ids = tuple(task.tokenizer(text, add_special_tokens=False)["input_ids"])
    return ResponseSample(uid, (1,), ids, "stop", {"ground_truth": truth})


def test_prompt_ids_equal_the_warm_start_encoding(tokenizer_dir: Path) -> None:
    task = MathTask(MathTaskConfig(), str(tokenizer_dir))
    item = task.encode({"question": "What is 2 + 3?", "answer": "2 + 3 = 5 #### 5"}, "train.jsonl row 0")
    tokenizer = load_tokenizer(tokenizer_dir)
    assert list(item.prompt_ids) == encode_prompt(build_prompt("What is 2 + 3?", tokenizer), tokenizer)
    assert item.extras == {"ground_truth": "5"}


def test_rows_missing_a_field_or_an_answer_are_named(tokenizer_dir: Path) -> None:
    task = MathTask(MathTaskConfig(), str(tokenizer_dir))
    with pytest.raises(DatasetError, match=r"train.jsonl row 3: field 'answer' is missing"):
        task.encode({"question": "q"}, "train.jsonl row 3")
    with pytest.raises(DatasetError, match=r"row 4: field 'answer'.*####"):
        task.encode({"question": "q", "answer": "five"}, "train.jsonl row 4")


def test_exact_match_scores_and_format_bonus(tokenizer_dir: Path) -> None:
    task = MathTask(MathTaskConfig(format_weight=0.5), str(tokenizer_dir))
    result = task.score([_sample(task, " 2 + 3 = 5 #### 5", "5"), _sample(task, " 2 + 3 = 6", "5", uid=1)])
    assert result.scores == (1.5, 0.0)
    assert result.metrics["reward/format_rate"] == 0.5
    assert result.metrics["reward/exception_failure_count"] == 0


def test_a_reward_that_raises_is_counted_not_fatal(tokenizer_dir: Path, tmp_path: Path) -> None:
    reward_file = tmp_path / "bad_reward.py"
    reward_file.write_text("def reward(response_text, ground_truth, **extra):\n    raise RuntimeError('boom')\n")
    task = MathTask(MathTaskConfig(reward=f"{reward_file}:reward"), str(tokenizer_dir))
    result = task.score([_sample(task, " 5", "5")])
    assert result.scores == (0.0,)
    assert result.metrics["reward/exception_failure_count"] == 1
