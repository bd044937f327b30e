"""In-memory datasets, the schema check and `open_source`: rows read back, malformed rows named."""

from __future__ import annotations

import datasets
import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import DatasetSource, JsonlSource, ParquetSource, RowSource, check_row, open_source
from rl_core.testing import modules_loaded_by_import

from ._rows import make_rows, write_jsonl, write_parquet


def test_check_row_passes_and_copies() -> None:
    row = {"prompt": "p", "answer": "a", "extra": 1}
    checked = check_row(row, ("prompt", "answer"), "data row 0")
    assert checked == row
    assert checked is not row


def test_check_row_names_where_and_missing_fields() -> None:
    with pytest.raises(CoordinatorInputError, match=r"data.jsonl row 7 is missing required field\(s\) \['answer'\]"):
        check_row({"prompt": "p"}, ("prompt", "answer"), "data.jsonl row 7")
    with pytest.raises(
        CoordinatorInputError, match=r"row 3 is missing required field\(s\) \['prompt'\] \(absent or null"
    ):
        check_row({"prompt": None, "answer": "a"}, ("prompt", "answer"), "row 3")
    with pytest.raises(CoordinatorInputError, match="row 2 is a list, expected a mapping"):
        check_row([1, 2], ("prompt",), "row 2")


def test_list_of_dicts_source() -> None:
    rows = make_rows(5)
    source = DatasetSource(rows, name="toy")
    assert len(source) == 5
    assert source.row(3) == rows[3]
    assert source.rows([4, 0, 4]) == [rows[4], rows[0], rows[4]]
    assert source.columns() is None
    assert source.where(2) == "toy row 2"


def test_hf_dataset_source_reads_batches_in_order() -> None:
    rows = make_rows(7)
    dataset = datasets.Dataset.from_dict({key: [row[key] for row in rows] for key in rows[0]})
    source = DatasetSource(dataset)
    assert source.columns() == ("prompt", "answer", "id")
    assert source.rows([6, 1, 3]) == [rows[6], rows[1], rows[3]]
    assert source.row(0) == rows[0]
    assert source.rows([]) == []


def test_row_index_out_of_range() -> None:
    source = DatasetSource(make_rows(3), name="toy")
    with pytest.raises(CoordinatorInputError, match="row index 3 is outside toy, which has 3 rows"):
        source.row(3)
    with pytest.raises(CoordinatorInputError, match="row index -1 is outside toy"):
        source.rows([0, -1])


def test_dataset_source_rejects_non_dataset() -> None:
    with pytest.raises(CoordinatorInputError, match=r"dataset must support len\(\) and \[int\] indexing, got int"):
        DatasetSource(5)


def test_open_source_dispatches_on_suffix(tmp_path) -> None:
    rows = make_rows(4)
    assert isinstance(open_source(write_jsonl(tmp_path / "a.jsonl", rows)), JsonlSource)
    assert isinstance(open_source(str(write_jsonl(tmp_path / "b.NDJSON", rows))), JsonlSource)
    assert isinstance(open_source(write_parquet(tmp_path / "c.parquet", rows)), ParquetSource)
    assert isinstance(open_source(rows), DatasetSource)
    source = DatasetSource(rows)
    assert open_source(source) is source
    assert isinstance(source, RowSource)


def test_open_source_rejections(tmp_path) -> None:
    with pytest.raises(CoordinatorInputError, match="does not exist or is not a file"):
        open_source(tmp_path / "missing.jsonl")
    (tmp_path / "rows.txt").write_text("prompt,answer\n")
    with pytest.raises(CoordinatorInputError, match=r"cannot tell the format of .*rows.txt.* from its suffix '.txt'"):
        open_source(tmp_path / "rows.txt")
    with pytest.raises(CoordinatorInputError, match="dataset must support len"):
        open_source(3.5)


def test_loading_does_not_import_pyarrow_or_datasets() -> None:
    # torch itself pulls in numpy, so preload it: whatever is left was imported by the loader.
    loaded = {name.split(".")[0] for name in modules_loaded_by_import("rl_coordinator.loading", preload=("torch",))}
    optional = loaded & {"pyarrow", "datasets", "numpy", "pandas"}
    assert not optional, sorted(optional)
