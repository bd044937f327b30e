"""tools/check_sample_fields.py: what counts as a sample-field literal, and the real tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_sample_fields", ROOT / "tools" / "check_sample_fields.py")
assert _spec is not None and _spec.loader is not None
checker = importlib.util.module_from_spec(_spec)
sys.modules["check_sample_fields"] = checker
_spec.loader.exec_module(checker)

NAMES = frozenset({"input_ids", "uid"})


def _found(source: str) -> list[tuple[int, int, str]]:
    return sorted(checker.findings(source, NAMES))


def test_field_names_are_the_module_level_upper_case_string_constants() -> None:
    source = (
        '"""INPUT = "doc"."""\n'
        'INPUT_IDS = "input_ids"\n'
        'UID: str = "uid"\n'
        '_private = "not_a_field"\n'
        "LIMIT = 3\n"
        'def f():\n    LOCAL = "inner"\n'
    )
    assert checker.field_names(source) == {"input_ids", "uid"}


def test_keys_subscripts_tuples_and_calls_are_findings() -> None:
    source = (
        'batch = {"input_ids": x}\n'
        'y = batch["uid"]\n'
        'NEEDS = ("input_ids", "other")\n'
        'check("uid", y)\n'
        "z = batch['input_ids']\n"
    )
    assert _found(source) == [
        (1, 9, "input_ids"),
        (2, 10, "uid"),
        (3, 9, "input_ids"),
        (4, 6, "uid"),
        (5, 10, "input_ids"),
    ]


def test_docstrings_fstring_text_comments_and_other_strings_are_not() -> None:
    source = (
        '"""uid"""\n'
        "def f(batch):\n"
        '    """input_ids"""\n'
        "    # batch['uid']\n"
        '    return f"uid{batch}" + "the input_ids" + "uids"\n'
        "class C:\n"
        '    """uid"""\n'
        "    x = 1\n"
        '    """uid"""\n'
    )
    assert _found(source) == []


def test_an_fstring_replacement_field_holding_a_literal_is_a_finding() -> None:
    assert _found("msg = f\"{batch['uid']}\"\n") == [(1, 15, "uid")]


def test_the_pragma_needs_a_reason() -> None:
    assert _found('ids = out["input_ids"]  # not-a-sample-field: tokenizer output key\n') == []
    assert _found('ids = out["input_ids"]  # not-a-sample-field:\n') == [(1, 10, "input_ids")]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    schema = tmp_path / checker.SCHEMA
    schema.parent.mkdir(parents=True)
    schema.write_text('UID = "uid"\nINPUT_IDS = "input_ids"\n')
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_check_reports_path_line_and_the_fix(tmp_path: Path) -> None:
    root = _tree(
        tmp_path, {"packages/rl-x/src/rl_x/_a.py": 'k = "uid"\n', "packages/rl-x/tests/test_a.py": 'k = "uid"\n'}
    )
    (message,) = checker.check(root)
    assert message.startswith("packages/rl-x/src/rl_x/_a.py:1:4: string literal 'uid' is a sample field name")
    assert "rl_core.schema.UID" in message
    assert checker.main(["check", str(root)]) == 1


def test_the_repository_is_clean() -> None:
    assert checker.check(ROOT) == []


def test_the_names_read_from_source_are_the_schema_registry() -> None:
    pytest.importorskip("torch")
    from rl_core.schema import SAMPLE_FIELDS

    assert checker.field_names((ROOT / checker.SCHEMA).read_text()) == set(SAMPLE_FIELDS)
