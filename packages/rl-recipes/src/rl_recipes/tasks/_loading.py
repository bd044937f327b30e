"""Loading GSM8K-format math data (rows with `question` and `answer ... #### N`) from local files."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_recipes._errors import RecipeError
from rl_recipes.rewards._extract import ANSWER_MARKER, extract_answer

QUESTION_FIELD = "question"
ANSWER_FIELD = "answer"
JSONL_SUFFIXES = (".jsonl", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")


class DatasetError(RecipeError, ValueError):
    """A dataset file or row is unusable; the message names the file, the row index and the field."""


@dataclass(frozen=True)
class MathSample:
    """One GSM8K-format row: the question, the full answer text, and the extracted final answer."""

    question: str
    answer: str
    ground_truth: str
    index: int


def extract_ground_truth(answer_text: str) -> str:
    """Return the normalised final answer after the last `####` of a GSM8K answer; raise ValueError if none."""
    if ANSWER_MARKER not in answer_text:
        raise ValueError(f"answer {answer_text[-60:]!r} does not end with '{ANSWER_MARKER} N'")
    truth = extract_answer(answer_text.rsplit(ANSWER_MARKER, 1)[1])
    if truth is None:
        raise ValueError(f"answer {answer_text[-60:]!r} has no number after '{ANSWER_MARKER}'")
    return truth


def load_math_dataset(
    path: str | Path,
    *,
    split: str = "train",
    question_field: str = QUESTION_FIELD,
    answer_field: str = ANSWER_FIELD,
) -> list[MathSample]:
    """Load GSM8K-format rows from a `.jsonl`, a `.parquet` file or a saved `datasets` folder.

    `split` picks the split when the folder holds a `DatasetDict`. Every bad row raises `DatasetError`
    naming the file, the row index and the field.
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset {str(path)!r} not found; give a .jsonl, a .parquet or a saved `datasets` folder")
    if path.is_dir():
        rows = _read_saved_dataset(path, split)
    elif path.suffix in JSONL_SUFFIXES:
        rows = _read_jsonl(path)
    elif path.suffix in PARQUET_SUFFIXES:
        rows = _read_parquet(path)
    else:
        raise DatasetError(
            f"dataset {str(path)!r} has unknown suffix {path.suffix!r}; use .jsonl, .parquet or a folder"
        )
    samples = [_to_sample(path, index, row, question_field, answer_field) for index, row in enumerate(rows)]
    if not samples:
        raise DatasetError(f"dataset {str(path)!r} has no rows")
    return samples


def _to_sample(path: Path, index: int, row: object, question_field: str, answer_field: str) -> MathSample:
    if not isinstance(row, Mapping):
        raise DatasetError(f"{path}: row {index} is a {type(row).__name__}, expected an object with fields")
    values: dict[str, str] = {}
    for name in (question_field, answer_field):
        if name not in row:
            raise DatasetError(f"{path}: row {index} has no field {name!r} (fields: {', '.join(map(str, row))})")
        if not isinstance(row[name], str):
            raise DatasetError(f"{path}: row {index} field {name!r} is a {type(row[name]).__name__}, expected str")
        values[name] = row[name]
    try:
        truth = extract_ground_truth(values[answer_field])
    except ValueError as exc:
        raise DatasetError(f"{path}: row {index} field {answer_field!r}: {exc}") from None
    return MathSample(question=values[question_field], answer=values[answer_field], ground_truth=truth, index=index)


def _read_jsonl(path: Path) -> list[Any]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}: line {line_number} (row {len(rows)}) is not valid JSON: {exc}") from None
    return rows


def _read_parquet(path: Path) -> Iterable[Any]:
    try:
        parquet = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise DatasetError(f"reading {str(path)!r} needs pyarrow; `pip install pyarrow`") from exc
    return parquet.read_table(path).to_pylist()


def _read_saved_dataset(path: Path, split: str) -> Iterable[Any]:
    try:
        datasets = importlib.import_module("datasets")
    except ImportError as exc:
        raise DatasetError(f"reading the folder {str(path)!r} needs `datasets`; `pip install datasets`") from exc
    try:
        loaded = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise DatasetError(f"folder {str(path)!r} is not a saved `datasets` dataset: {exc}") from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetError(f"{path}: no split {split!r}; splits: {', '.join(loaded)}; set split=")
        loaded = loaded[split]
    return loaded
