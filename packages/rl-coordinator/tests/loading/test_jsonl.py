"""JSON-lines source: line-offset index, blank lines, bad JSON named by line, pickling."""

from __future__ import annotations

import pickle

import pytest

from rl_coordinator import CoordinatorInputError
from rl_coordinator.loading import JsonlSource

from ._rows import make_rows, write_jsonl


def test_rows_read_back_in_any_order(tmp_path) -> None:
    rows = make_rows(20)
    source = JsonlSource(write_jsonl(tmp_path / "d.jsonl", rows))
    assert len(source) == 20
    order = [13, 0, 19, 5, 5, 2]
    assert source.rows(order) == [rows[i] for i in order]
    assert [source.row(i) for i in range(20)] == rows


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path) -> None:
    path = tmp_path / "gaps.jsonl"
    # Lines: 1 row0, 2 blank, 3 blank (spaces), 4 row1, 5 row2 (no trailing newline).
    path.write_text('{"prompt": "a"}\n\n   \n{"prompt": "b"}\n{"prompt": "c"}')
    source = JsonlSource(path)
    assert len(source) == 3
    assert [source.line_number(i) for i in range(3)] == [1, 4, 5]
    assert source.rows([2, 1, 0]) == [{"prompt": "c"}, {"prompt": "b"}, {"prompt": "a"}]
    assert source.where(1) == f"{path} row 1 (line 4)"


def test_bad_json_names_line_and_row_and_other_rows_still_read(tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": oops}\n{"prompt": "d"}\n')
    source = JsonlSource(path)
    assert source.row(0) == {"prompt": "a"}
    assert source.row(2) == {"prompt": "d"}
    with pytest.raises(CoordinatorInputError, match=r"bad.jsonl row 1 \(line 3\) is not valid JSON: Expecting value"):
        source.row(1)


def test_non_object_line_is_rejected(tmp_path) -> None:
    path = tmp_path / "list.jsonl"
    path.write_text('{"prompt": "a"}\n[1, 2]\n')
    with pytest.raises(CoordinatorInputError, match=r"row 1 \(line 2\) is a JSON list, expected a JSON object"):
        JsonlSource(path).row(1)


def test_invalid_utf8_is_named(tmp_path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(CoordinatorInputError, match=r"row 0 \(line 1\) is not valid (UTF-8|JSON)"):
        JsonlSource(path).row(0)


def test_pickled_copy_reopens_the_file(tmp_path) -> None:
    rows = make_rows(6)
    source = JsonlSource(write_jsonl(tmp_path / "p.jsonl", rows))
    assert source.row(4) == rows[4]  # opens the handle before pickling
    copy = pickle.loads(pickle.dumps(source))
    assert copy.rows([5, 1]) == [rows[5], rows[1]]
    source.close()
    assert source.row(2) == rows[2]


def test_missing_file_and_bad_index(tmp_path) -> None:
    with pytest.raises(CoordinatorInputError, match=r"jsonl file .*nope.jsonl.* does not exist"):
        JsonlSource(tmp_path / "nope.jsonl")
    source = JsonlSource(write_jsonl(tmp_path / "x.jsonl", make_rows(2)))
    with pytest.raises(CoordinatorInputError, match=r"row index 2 is outside .*x.jsonl, which has 2 rows"):
        source.line_number(2)
    assert source.where(9).endswith("x.jsonl row 9")
