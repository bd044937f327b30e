"""LocalToolingEnv: schemas from typed functions, argument validation, timeouts, errors as results; calculator."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal, Optional

import pytest

from rl_core.testing import check_tooling_env
from rl_core.tools import TOOLS, ToolConfigError, ToolingEnvConfig, make_tooling_env
from rl_recipes.tools import CalculatorError, LocalToolingEnv, calculator, function_schema, parse_docstring


def typed(
    count: int,
    ratio: float,
    label: str,
    enabled: bool,
    items: list[int],
    maybe: Optional[str] = None,  # noqa: UP045 - the Optional spelling is what is tested
    mode: Literal["fast", "exact"] = "exact",
    title: str = "t",
) -> str:
    """Summarise the inputs.

    Args:
        count: How many
            things there are.
        ratio (float): A ratio.
        mode: Speed or exactness.
    """
    return f"{count}|{ratio}|{label}|{enabled}|{items}|{maybe}|{mode}|{title}"


def test_schema_from_signature_hints_defaults_and_docstring() -> None:
    schema = function_schema(typed).schema
    function = schema["function"]
    assert function["name"] == "typed"
    assert function["description"] == "Summarise the inputs."
    params = function["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["count", "ratio", "label", "enabled", "items"]
    props: dict[str, Any] = params["properties"]
    assert props["count"] == {"type": "integer", "description": "How many things there are."}
    assert props["ratio"] == {"type": "number", "description": "A ratio."}
    assert props["label"] == {"type": "string"}
    assert props["enabled"] == {"type": "boolean"}
    assert props["items"] == {"type": "array", "items": {"type": "integer"}}
    assert props["maybe"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["mode"] == {
        "type": "string",
        "enum": ["fast", "exact"],
        "default": "exact",
        "description": "Speed or exactness.",
    }
    assert props["title"] == {"type": "string", "default": "t"}  # a parameter named "title" survives title-stripping


def test_docstring_parser_reads_sphinx_params() -> None:
    summary, params = parse_docstring("Add.\n\n:param a: first\n    addend\n:param int b: second\n:returns: sum")
    assert summary == "Add." and params == {"a": "first addend", "b": "second"}


def _untyped(x, y: int) -> int:  # type: ignore[no-untyped-def]
    return y


def _star(*values: int) -> int:
    return 0


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_untyped, r"parameter 'x': expected a type hint, found none; annotate it"),
        (_star, r"parameter 'values': expected a named parameter, got variadic positional"),
    ],
)
def test_unschematizable_functions_are_refused_at_registration(fn: Any, message: str) -> None:
    with pytest.raises(ToolConfigError, match=message):
        LocalToolingEnv().register_tool(fn)


def test_duplicate_name_and_bad_timeout_are_refused() -> None:
    env = LocalToolingEnv()
    env.register_tool(calculator)
    with pytest.raises(ToolConfigError, match=r"'calculator' is already registered.*name=\.\.\."):
        env.register_tool(calculator)
    with pytest.raises(ToolConfigError, match=r"timeout_s: expected seconds > 0, got 0"):
        env.register_tool(typed, timeout_s=0)


def _boom(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"bad x={x}")


def _sleepy(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


async def _async_sleepy(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "awake"


def test_each_error_kind_comes_back_as_a_result_and_valid_calls_run() -> None:
    env = LocalToolingEnv(timeout_s=0.2, max_output_chars=40)
    for fn in (typed, _boom, _sleepy, _async_sleepy, calculator):
        env.register_tool(fn)
    env.register_tool(lambda: "x" * 100, name="long")

    async def run() -> list[Any]:
        return list(
            await asyncio.gather(
                env.aexecute("typo", {}),
                env.aexecute("typed", {"count": "many", "ratio": 1, "label": "a", "enabled": True, "items": []}),
                env.aexecute("typed", {"count": 1, "ratio": 1, "label": "a", "enabled": True, "items": [], "x": 0}),
                env.aexecute("_boom", {"x": 3}),
                env.aexecute("_sleepy", {"seconds": 5}),
                env.aexecute("_async_sleepy", {"seconds": 5}),
                env.aexecute("_async_sleepy", {"seconds": 0}),
                env.aexecute("typed", {"count": "2", "ratio": 0.5, "label": "a", "enabled": False, "items": [1]}),
                env.aexecute("long", {}),
            )
        )

    started = time.monotonic()
    unknown, bad_type, extra, raised, sync_slow, async_slow, fast, ok, long = asyncio.run(run())
    assert time.monotonic() - started < 3.0  # timeouts cut both sleepers short
    assert unknown.is_error and "unknown tool 'typo'" in unknown.content and "calculator" in unknown.content
    assert bad_type.is_error and "count: Input should be a valid integer" in bad_type.content
    assert '"required": ["count"' in bad_type.content  # the schema comes with the error
    assert extra.is_error and "x: Extra inputs are not permitted" in extra.content
    assert raised.is_error and raised.content == "Error: tool '_boom' raised RuntimeError: bad x=3"
    assert sync_slow.is_error and "'_sleepy' timed out after 0.2 s" in sync_slow.content
    assert async_slow.is_error and "'_async_sleepy' timed out after 0.2 s" in async_slow.content
    assert not fast.is_error and fast.content == "awake"
    assert not ok.is_error and ok.content == "2|0.5|a|False|[1]|None|exact|t"
    assert not long.is_error and long.content.startswith("x" * 40 + "\n[output truncated: 60 of 100")
    asyncio.run(env.aclose())


def test_local_env_from_config_passes_conformance() -> None:
    assert TOOLS["calculator"] is calculator
    env = asyncio.run(make_tooling_env(ToolingEnvConfig(name="local", tools=("calculator",))))
    check_tooling_env(env, [("calculator", {"expression": "2**100 + 1"}, str(2**100 + 1))])
    with pytest.raises(ToolConfigError, match=r"unknown option\(s\) \['color'\].*valid options"):
        asyncio.run(make_tooling_env(ToolingEnvConfig(name="local", tools=("calculator",), options={"color": 1})))
    with pytest.raises(ToolConfigError, match=r"needs at least one registered tool name"):
        asyncio.run(make_tooling_env(ToolingEnvConfig(name="local")))


def test_calculator_is_exact_and_refuses_what_it_cannot_do() -> None:
    a, b = 98765432109876543210, 12345678901234567890
    assert calculator(f"{a} * {b} - ({a} + {b})") == str(a * b - (a + b))
    assert calculator("7 / 2 + 1") == "9/2" and calculator("-7 // 2") == "-4" and calculator("2 ** 10 % 1000") == "24"
    for bad, message in [
        ("1.5 + 2", "unsupported expression '1.5'"),
        ("__import__('os')", "unsupported expression"),
        ("1 / 0", "division by zero"),
        ("9 ** 9 ** 9", "result exceeds 2\\*\\*14000"),
        ("2 +", "cannot parse"),
    ]:
        with pytest.raises(CalculatorError, match=message):
            calculator(bad)
