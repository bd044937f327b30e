"""The strict YAML reader and writer: YAML 1.2 floats, quoted look-alike strings, duplicate keys."""

from __future__ import annotations

import pytest

from rl_runtime.config import ConfigError
from rl_runtime.config._yaml import dump_yaml, parse_yaml


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-6", 1e-6), ("-2E+3", -2000.0), ("1.5", 1.5), (".5", 0.5), ("1_000", 1000), ("3", 3), ("'1e-6'", "1e-6")],
)
def test_scalars_read_as_yaml_1_2(text: str, value: object) -> None:
    parsed = parse_yaml(f"v: {text}", "t")["v"]
    assert parsed == value and type(parsed) is type(value)


def test_special_floats() -> None:
    parsed = parse_yaml("a: .inf\nb: -.inf\nc: .nan", "t")
    assert parsed["a"] == float("inf") and parsed["b"] == float("-inf") and parsed["c"] != parsed["c"]


@pytest.mark.parametrize("value", ["1e-6", "1.5", "true", "null", "007", "3"])
def test_strings_that_look_like_other_types_survive_a_round_trip(value: str) -> None:
    text = dump_yaml({"v": value})
    assert parse_yaml(text, "t") == {"v": value}


def test_dump_is_block_style_in_insertion_order() -> None:
    assert dump_yaml({"b": 1, "a": [1e-6, None]}) == "b: 1\na:\n- 1.0e-06\n- null\n"


def test_duplicate_keys_are_refused_even_when_nested() -> None:
    with pytest.raises(
        ConfigError, match=r"in f.yaml: .*duplicate key 'x' \(first set on line 2\) at line 3, column 3"
    ):
        parse_yaml("a:\n  x: 1\n  x: 2\n", "f.yaml")


def test_python_objects_are_not_constructed() -> None:
    with pytest.raises(ConfigError, match=r"expected well-formed YAML, found could not determine a constructor"):
        parse_yaml("v: !!python/object/apply:os.system ['true']", "f.yaml")
