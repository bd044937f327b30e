"""Loading GSM8K-format rows from jsonl, parquet and `datasets` folders, and every bad-input message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl_recipes.tasks import DatasetError, MathSample, extract_ground_truth, load_math_dataset

ROWS = [
    {"question": "What is 2 + 3?", "answer": "2 + 3 = 5 #### 5"},
    {"question": "Big?", "answer": "It is large.\n#### 1,234"},
    {"question": "Cold?", "answer": "#### -7"},
]
EXPECTED = [
    MathSample("What is 2 + 3?", "2 + 3 = 5 #### 5", "5", 0),
    MathSample("Big?", "It is large.\n#### 1,234", "1234", 1),
    MathSample("Cold?", "#### -7", "-7", 2),
]


def _write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize(
    ("answer", "truth"), [("#### 72", "72"), ("a #### 1 #### 2", "2"), ("x\n#### 3.50", "3.5"), ("####+4", "4")]
)
def test_extract_ground_truth(answer: str, truth: str) -> None:
    assert extract_ground_truth(answer) == truth


@pytest.mark.parametrize(("answer", "match"), [("72", "does not end with '#### N'"), ("#### ?", "no number after")])
def test_extract_ground_truth_rejects(answer: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        extract_ground_truth(answer)


def test_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + "".join(json.dumps(r) + "\n" for r in ROWS[1:]))
    assert load_math_dataset(path) == EXPECTED


def test_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert load_math_dataset(path) == EXPECTED


def test_saved_dataset_and_dataset_dict(tmp_path: Path) -> None:
    import datasets

    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "one"))
    assert load_math_dataset(tmp_path / "one") == EXPECTED
    both = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS), "test": datasets.Dataset.from_list(ROWS[:1])}
    )
    both.save_to_disk(str(tmp_path / "dict"))
    assert load_math_dataset(tmp_path / "dict", split="test") == EXPECTED[:1]
    with pytest.raises(DatasetError, match=r"no split 'validation'; splits: train, test"):
        load_math_dataset(tmp_path / "dict", split="validation")


def test_custom_fields(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "d.jsonl", [{"problem": "q", "solution": "#### 1"}])
    assert load_math_dataset(path, question_field="problem", answer_field="solution")[0].ground_truth == "1"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"dataset '.*missing.jsonl' not found"):
        load_math_dataset(tmp_path / "missing.jsonl")


def test_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text("question,answer\n")
    with pytest.raises(DatasetError, match=r"unknown suffix '.csv'"):
        load_math_dataset(path)


def test_not_a_saved_dataset(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"is not a saved `datasets` dataset"):
        load_math_dataset(tmp_path)


@pytest.mark.parametrize(
    ("bad_row", "match"),
    [
        ({"question": "q"}, r"d.jsonl: row 1 has no field 'answer' \(fields: question\)"),
        ({"answer": "#### 1"}, r"row 1 has no field 'question'"),
        ({"question": "q", "answer": 5}, r"row 1 field 'answer' is a int, expected str"),
        ({"question": "q", "answer": "five"}, r"row 1 field 'answer': answer 'five' does not end with '#### N'"),
        ([1, 2], r"row 1 is a list, expected an object"),
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path: Path, bad_row: Any, match: str) -> None:
    path = _write_jsonl(tmp_path / "d.jsonl", [ROWS[0], bad_row])
    with pytest.raises(DatasetError, match=match):
        load_math_dataset(path)


def test_bad_json_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(DatasetError, match=r"d.jsonl: line 2 \(row 1\) is not valid JSON"):
        load_math_dataset(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("")
    with pytest.raises(DatasetError, match="has no rows"):
        load_math_dataset(path)
