"""Hugging Face `datasets` sources: a `save_to_disk` folder, a folder of data files, .csv and .json files read back
row for row, sharded and resumed exactly as the jsonl file of the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import DatasetSource, ShardedLoader, needs_datasets, open_source

from ._rows import make_rows, write_jsonl

ROWS = 23


def _text(rows: list[dict]) -> list[dict]:
    """`rows` with every value as text: csv infers column types (an answer "0" reads back as 0)."""
    return [{key: str(value) for key, value in row.items()} for row in rows]


def _hf(rows: list[dict]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({key: [row[key] for row in rows] for key in rows[0]})


def _sources(tmp_path: Path) -> dict[str, Path]:
    """The same rows as a jsonl file and in every form read through `datasets`."""
    rows = make_rows(ROWS)
    saved = tmp_path / "saved"
    _hf(rows).save_to_disk(str(saved))
    folder = tmp_path / "folder"
    folder.mkdir()
    write_jsonl(folder / "part.jsonl", rows)
    csv = tmp_path / "rows.csv"
    csv.write_text("prompt,answer,id\n" + "".join(f"{r['prompt']},{r['answer']},{r['id']}\n" for r in rows))
    array = tmp_path / "rows.json"
    array.write_text(json.dumps(rows))
    return {"jsonl": write_jsonl(tmp_path / "rows.jsonl", rows), "saved": saved, "folder": folder, "csv": csv,
            "json": array}  # fmt: skip


def test_every_datasets_form_reads_the_rows_back(tmp_path: Path) -> None:
    rows = make_rows(ROWS)
    for form, path in _sources(tmp_path).items():
        source = open_source(path)
        assert needs_datasets(path) == (form != "jsonl")
        assert isinstance(source, DatasetSource) == (form != "jsonl"), form
        assert len(source) == ROWS, form
        assert _text(source.rows([0, 7, 22])) == _text([rows[0], rows[7], rows[22]]), form
        assert source.where(3).startswith(f"{path} row 3")


def test_datasets_sources_shard_and_resume_as_the_jsonl_file(tmp_path: Path) -> None:
    settings = {"dp_rank": 1, "dp_size": 2, "batch_size": 3, "seed": 4}
    jsonl = write_jsonl(tmp_path / "x.jsonl", make_rows(ROWS))
    straight = ShardedLoader(open_source(jsonl), **settings)
    expected = [next(straight).rows for _ in range(8)]
    for form, path in _sources(tmp_path).items():
        first = ShardedLoader(open_source(path), **settings)
        head = [next(first).rows for _ in range(3)]
        resumed = ShardedLoader(open_source(path), **settings)
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        tail = [next(resumed).rows for _ in range(5)]
        assert [_text(rows) for rows in head + tail] == [_text(rows) for rows in expected], form


def test_a_saved_dataset_dict_names_its_splits(tmp_path: Path) -> None:
    rows = make_rows(4)
    datasets.DatasetDict({"train": _hf(rows), "test": _hf(rows)}).save_to_disk(str(tmp_path / "dict"))
    with pytest.raises(CoordinatorInputError, match=r"DatasetDict with splits test, train; give one split's folder"):
        open_source(tmp_path / "dict")
    assert len(open_source(tmp_path / "dict" / "train")) == 4


def test_an_unreadable_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(CoordinatorInputError, match=r"empty' could not be read with datasets.load_dataset"):
        open_source(tmp_path / "empty")
