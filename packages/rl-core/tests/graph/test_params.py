"""Node parameters: plain data only, frozen deeply, `param_count` a non-negative int."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from rl_core.graph import PARAM_COUNT_KEY, GraphError
from rl_core.graph._params import freeze_params, thaw


def test_freeze_and_thaw_round_trip() -> None:
    params = {"a": None, "b": True, "c": 3, "d": 2.5, "e": "s", "f": [1, [2, {"g": "h"}]], "i": {"j": (4, 5)}}
    frozen = freeze_params(params, "node 'n'")
    assert isinstance(frozen, MappingProxyType)
    assert frozen["f"] == (1, (2, MappingProxyType({"g": "h"})))
    assert thaw(frozen) == {
        "a": None,
        "b": True,
        "c": 3,
        "d": 2.5,
        "e": "s",
        "f": [1, [2, {"g": "h"}]],
        "i": {"j": [4, 5]},
    }


def test_none_is_empty() -> None:
    assert dict(freeze_params(None, "node 'n'")) == {}


def test_param_count_key_is_documented_name() -> None:
    assert PARAM_COUNT_KEY == "param_count"
    assert freeze_params({PARAM_COUNT_KEY: 0}, "node 'n'")[PARAM_COUNT_KEY] == 0


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({1: "x"}, "node 'n': params has key 1 of type int; parameter keys must be str"),
        ({"a": {2: "x"}}, r"node 'n': params\['a'\] has key 2 of type int"),
        ({"fn": print}, r"node 'n': params\['fn'\] is a builtin_function_or_method; parameters hold only None"),
        ({"a": [1, {3}]}, r"node 'n': params\['a'\]\[1\] is a set"),
        ({"b": b"x"}, r"node 'n': params\['b'\] is a bytes"),
        (
            {PARAM_COUNT_KEY: -1},
            r"node 'n': params\['param_count'\] must be a non-negative int \(e.g. 7000000000\), got -1",
        ),
        ({PARAM_COUNT_KEY: True}, r"params\['param_count'\] must be a non-negative int .* got True"),
        ({PARAM_COUNT_KEY: 7e9}, r"params\['param_count'\] must be a non-negative int .* got 7000000000.0"),
        ({PARAM_COUNT_KEY: "7B"}, r"params\['param_count'\] must be a non-negative int .* got '7B'"),
        ("x", "node 'n': params must be a mapping with str keys, got str"),
    ],
)
def test_rejections(params: object, match: str) -> None:
    with pytest.raises(GraphError, match=match):
        freeze_params(params, "node 'n'")  # type: ignore[arg-type]
