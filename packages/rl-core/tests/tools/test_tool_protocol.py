"""The tool seam's types, schema checks, registries and the conformance run on the shipped test double."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from rl_core import UnknownNameError
from rl_core.testing import ToyToolingEnv, acheck_tooling_env, check_tooling_env
from rl_core.tools import (
    TOOLING_ENVS,
    TOOLS,
    ToolConfigError,
    ToolError,
    ToolingEnv,
    ToolingEnvConfig,
    ToolResult,
    check_tool_schema,
    get_tool,
    make_tooling_env,
    unknown_tool_result,
)


def _schema(**function: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}
    return {"type": "function", "function": {**base, **function}}


def test_tool_result_is_frozen_text() -> None:
    result = ToolResult("42")
    assert result.is_error is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"ToolResult.content: expected str, got int.*json.dumps"):
        ToolResult(42)  # type: ignore[arg-type]


def test_check_tool_schema_accepts_openai_function_and_names_each_fault() -> None:
    assert check_tool_schema(_schema(name="calc-1_x")) == "calc-1_x"
    with pytest.raises(ToolConfigError, match=r'expected \{"type": "function"'):
        check_tool_schema({"name": "f"})
    with pytest.raises(ToolConfigError, match=r"function.name: expected 1-64 characters"):
        check_tool_schema(_schema(name="has space"))
    with pytest.raises(ToolConfigError, match=r"function.description: expected a string"):
        check_tool_schema(_schema(description=3))
    with pytest.raises(ToolConfigError, match=r"function.parameters: expected a JSON schema"):
        check_tool_schema(_schema(parameters={"type": "string"}))
    with pytest.raises(ToolConfigError, match=r"parameters.properties: expected a mapping"):
        check_tool_schema(_schema(parameters={"type": "object", "properties": []}))


def test_unknown_tool_result_lists_what_the_model_may_call() -> None:
    result = unknown_tool_result("calc", ["python", "calculator"])
    assert result.is_error
    assert "'calc'" in result.content and "calculator, python" in result.content


def test_toy_env_passes_the_conformance_run_and_is_a_tooling_env() -> None:
    env = ToyToolingEnv()
    assert isinstance(env, ToolingEnv)
    assert check_tooling_env(env, [("add", {"a": 2, "b": 40}, "42")]) == ["add"]
    assert env.closed and env.calls == 1
    with pytest.raises(ToolError, match="after aclose"):
        asyncio.run(env.aexecute("add", {"a": 1, "b": 2}))


class _Raising(ToyToolingEnv):
    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        if name != "add":
            raise KeyError(name)
        return await super().aexecute(name, arguments)


class _Lenient(ToyToolingEnv):
    async def aexecute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult("0") if name == "add" and not arguments else await super().aexecute(name, arguments)


class _Duplicated(ToyToolingEnv):
    def list_tools(self) -> list[dict[str, Any]]:
        return super().list_tools() * 2


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (_Raising(), r"raised KeyError.*an unknown tool must be a result"),
        (_Lenient(), r"without its required arguments \['a', 'b'\] must be an error result"),
        (_Duplicated(), r"names must be distinct"),
    ],
)
def test_conformance_run_catches_contract_breaches(env: ToolingEnv, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        check_tooling_env(env)


def test_conformance_run_checks_expected_calls_inside_a_running_loop() -> None:
    async def run() -> None:
        with pytest.raises(AssertionError, match=r"must succeed with '5'"):
            await acheck_tooling_env(ToyToolingEnv(), [("add", {"a": 2, "b": 2}, "5")], close=False)

    asyncio.run(run())


def test_registries_build_by_name_and_refuse_bad_config(monkeypatch: pytest.MonkeyPatch) -> None:
    async def factory(config: ToolingEnvConfig) -> ToolingEnv:
        return ToyToolingEnv(delay_s=config.timeout_s / 1000)

    monkeypatch.setitem(TOOLING_ENVS, "toy", factory)
    monkeypatch.setitem(TOOLS, "echo", lambda text: text)
    env = asyncio.run(make_tooling_env(ToolingEnvConfig(name="toy", timeout_s=2.0)))
    assert isinstance(env, ToyToolingEnv) and env.delay_s == 0.002
    assert get_tool("echo")("hi") == "hi"
    with pytest.raises(UnknownNameError, match=r"unknown tool 'ecko' \(did you mean 'echo'\?\)"):
        get_tool("ecko")
    with pytest.raises(ToolConfigError, match=r"tools.timeout_s must be > 0.*got 0"):
        asyncio.run(make_tooling_env(ToolingEnvConfig(name="toy", timeout_s=0)))
    with pytest.raises(UnknownNameError, match=r"unknown tooling env 'tyo'"):
        asyncio.run(make_tooling_env(ToolingEnvConfig(name="tyo")))
