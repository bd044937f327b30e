"""Parquet source: rows across row groups, schema checked from the file, the extra named when pyarrow is absent."""

from __future__ import annotations

import pickle
import sys

import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import ParquetSource, ShardedLoader

from ._rows import make_rows, write_parquet


def test_rows_across_row_groups(tmp_path) -> None:
    rows = make_rows(10)
    source = ParquetSource(write_parquet(tmp_path / "d.parquet", rows, row_group_size=3))
    assert len(source) == 10
    assert source.columns() == ("prompt", "answer", "id")
    # 9 is in group 3, 0 in group 0, 4 and 5 in group 1: more groups than the cache holds.
    order = [9, 0, 4, 5, 7, 0, 3]
    assert source.rows(order) == [rows[i] for i in order]
    assert [source.row(i) for i in range(10)] == rows
    copy = pickle.loads(pickle.dumps(source))
    assert copy.rows([8, 2]) == [rows[8], rows[2]]


def test_missing_column_is_rejected_before_reading(tmp_path) -> None:
    rows = [{"prompt": f"q{i}"} for i in range(4)]
    path = write_parquet(tmp_path / "noanswer.parquet", rows)
    with pytest.raises(
        CoordinatorInputError, match=r"noanswer.parquet row 0 is missing required field\(s\) \['answer'\]"
    ):
        ShardedLoader(path, dp_rank=0, dp_size=1, batch_size=2, seed=0, required_fields=("prompt", "answer"))


def test_null_field_names_the_row(tmp_path) -> None:
    rows = make_rows(4)
    rows[2]["answer"] = None
    path = write_parquet(tmp_path / "null.parquet", rows)
    loader = ShardedLoader(path, dp_rank=0, dp_size=1, batch_size=4, seed=0, shuffle=False, required_fields=("answer",))
    with pytest.raises(CoordinatorInputError, match=r"null.parquet row 2 is missing required field\(s\) \['answer'\]"):
        next(loader)


def test_missing_pyarrow_names_the_extra(tmp_path, monkeypatch) -> None:
    path = write_parquet(tmp_path / "d.parquet", make_rows(3))
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"rl-coordinator\[parquet\]"):
        ParquetSource(path)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(CoordinatorInputError, match=r"parquet file .*gone.parquet.* does not exist"):
        ParquetSource(tmp_path / "gone.parquet")
