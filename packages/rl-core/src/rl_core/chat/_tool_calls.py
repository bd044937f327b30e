"""Parsing Hermes/Qwen-style tool calls, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, from model text."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
"""The tags around one call's JSON (the format Qwen2.5's and Hermes' chat templates teach)."""
_CALL = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.DOTALL)
_EXAMPLE = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'


@dataclass(frozen=True)
class ToolCall:
    """One call the model made: the tool's name and its arguments; `error` is set (and the rest empty) when the
    call was malformed, with a message the model can read."""

    name: str = ""
    arguments: Mapping[str, Any] = field(default_factory=lambda: dict[str, Any]())
    error: str = ""


def _malformed(body: str, why: str) -> ToolCall:
    return ToolCall(error=f"Error: malformed tool call {body.strip()[:200]!r}: {why}. Write calls as {_EXAMPLE}.")


def _one(body: str, closed: bool) -> ToolCall:
    if not closed:
        return _malformed(body, f"no closing {TOOL_CALL_CLOSE}")
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return _malformed(body, f"not valid JSON ({exc.msg} at character {exc.pos})")
    if not isinstance(value, dict):
        return _malformed(body, f"expected a JSON object, got {type(value).__name__}")
    call: dict[str, Any] = value  # pyright: ignore[reportUnknownVariableType]  # json.loads gives Any
    name, arguments = call.get("name"), call.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return _malformed(body, "'arguments' is a string that is not a JSON object")
    if not isinstance(name, str) or not name:
        return _malformed(body, "'name' must be the tool's name, a non-empty string")
    if not isinstance(arguments, dict):
        return _malformed(body, f"'arguments' must be a JSON object, got {type(arguments).__name__}")
    return ToolCall(name, dict(arguments))  # pyright: ignore[reportUnknownArgumentType]  # JSON keys are str


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every `<tool_call>...</tool_call>` in `text`, in order (an unclosed last one is reported malformed)."""
    return [_one(match.group(1), bool(match.group(2))) for match in _CALL.finditer(text)]
