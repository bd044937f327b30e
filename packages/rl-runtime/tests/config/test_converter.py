"""The strict converter: no silent coercion, attrs classes and frozen dataclasses alike, dotted error paths."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any

import attrs
import pytest

from rl_runtime.config import ConfigError
from rl_runtime.config._converter import structure, unstructure
from rl_runtime.config._types import Scalar


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@dataclasses.dataclass(frozen=True)
class EngineSettings:
    """A component config in rl-engines' style: a frozen dataclass validating itself in __post_init__."""

    max_new_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@attrs.frozen
class Leaf:
    count: int = 0
    ratio: float = 1.0
    flag: bool = False
    name: str = "x"
    where: Path = Path(".")
    color: Color = Color.RED
    maybe: int | None = None
    params: dict[str, Scalar] = attrs.Factory(dict)
    extra: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class Root:
    leaf: Leaf = Leaf()
    engine: EngineSettings | None = None
    items: tuple[Leaf, ...] = ()
    names: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"count": 1.7}, r"leaf.count: expected an int, found 1.7 \(float\)"),
        ({"count": True}, r"leaf.count: expected an int, found True \(bool\)"),
        ({"count": "3"}, r"leaf.count: expected an int, found '3' \(str\)"),
        ({"ratio": False}, r"leaf.ratio: expected a float, found False \(bool\)"),
        (
            {"flag": "false"},
            r"leaf.flag: expected a bool \(true or false\), found 'false' \(str\); write true or false",
        ),
        ({"flag": 1}, r"leaf.flag: expected a bool \(true or false\), found 1 \(int\)"),
        ({"name": 3}, r"leaf.name: expected a str, found 3 \(int\); quote it to make it a str"),
        ({"where": 3}, r"leaf.where: expected a path \(str\), found 3 \(int\)"),
        ({"where": ""}, r"leaf.where: expected a path \(str\), found '' \(str\)"),
        (
            {"color": "gren"},
            r"leaf.color: expected one of 'red', 'green', found 'gren' \(str\); did you mean 'green'\?",
        ),
        ({"maybe": "x"}, r"leaf.maybe: expected an int or null, found 'x' \(str\)"),
        ({"params": {"a": [1]}}, r"leaf.params.a: expected a scalar \(bool, int, float, str or null\), found \[1\]"),
        ({"params": [1]}, r"leaf.params: expected a mapping of str to scalar .*, found \[1\] \(list\)"),
        ({"params": {3: 1}}, r"leaf.params.3: expected a str, found 3 \(int\)"),
    ],
)
def test_leaf_values_are_not_coerced(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        structure({"leaf": data}, Root)


def test_an_int_is_a_valid_float_and_values_keep_their_types() -> None:
    leaf = structure({"leaf": {"ratio": 2, "where": "a/b", "color": "green", "params": {"k": None}}}, Root).leaf
    assert leaf.ratio == 2.0 and type(leaf.ratio) is float
    assert leaf.where == Path("a/b") and leaf.color is Color.GREEN and leaf.params == {"k": None}


def test_sequences_refuse_a_str_and_report_each_bad_index() -> None:
    with pytest.raises(ConfigError, match=r"names: expected a list of str, found 'abc' \(str\)"):
        structure({"names": "abc"}, Root)
    with pytest.raises(ConfigError) as caught:
        structure({"items": [{"count": 1}, {"count": "a"}, {"cuont": 2}]}, Root)
    assert [(p.path, p.found) for p in caught.value.problems] == [
        ("items.1.count", "'a' (str)"),
        ("items.2.cuont", "an unknown key"),
    ]
    assert caught.value.problems[1].fix == "did you mean 'count'?"


def test_frozen_dataclasses_structure_like_attrs_classes() -> None:
    root = structure({"engine": {"max_new_tokens": 8, "stop_token_ids": [1, 2], "betas": [0.5, 0.6]}}, Root)
    assert root.engine == EngineSettings(max_new_tokens=8, stop_token_ids=(1, 2), betas=(0.5, 0.6))
    assert structure(unstructure(root), Root) == root
    assert unstructure(root)["engine"] == {"max_new_tokens": 8, "stop_token_ids": [1, 2], "betas": [0.5, 0.6]}


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        (
            {"max_new_tokens": 8, "stop_tokens": [1]},
            r"engine.stop_tokens: expected a field of EngineSettings .*'stop_token_ids'",
        ),
        ({}, r"engine.max_new_tokens: expected an int, found nothing; the field has no default; set it"),
        (
            {"max_new_tokens": 0},
            r"engine: expected a valid EngineSettings, found ValueError: max_new_tokens must be >= 1",
        ),
        ({"max_new_tokens": 8, "betas": [0.9]}, r"engine.betas: expected a list of 2 values .*; give exactly 2 values"),
        ({"max_new_tokens": 8, "stop_token_ids": [1, 2.5]}, r"engine.stop_token_ids.1: expected an int, found 2.5"),
        ("eight", r"engine: expected a mapping \(EngineSettings\) or null, found 'eight' \(str\)"),
    ],
)
def test_dataclass_errors_carry_dotted_paths(engine: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        structure({"engine": engine}, Root)


def test_a_top_level_that_is_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"<config>: expected a mapping \(Root\), found \[1\] \(list\)"):
        structure([1], Root)


def test_source_labels_the_message() -> None:
    with pytest.raises(ConfigError, match=r"^invalid configuration in run.yaml: leaf.count") as caught:
        structure({"leaf": {"count": "x"}}, Root, source="run.yaml")
    assert caught.value.source == "run.yaml"


def test_unstructure_gives_yaml_friendly_data() -> None:
    root = Root(leaf=Leaf(where=Path("out"), color=Color.GREEN), names=("a",))
    data = unstructure(root)
    assert data["leaf"]["where"] == "out" and data["leaf"]["color"] == "green" and data["names"] == ["a"]
