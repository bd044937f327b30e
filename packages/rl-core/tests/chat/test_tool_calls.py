"""Hermes/Qwen-style tool-call parsing: good calls, and a readable error for each malformed form."""

from __future__ import annotations

import pytest

from rl_core.chat import ToolCall, parse_tool_calls


def test_calls_are_parsed_in_order_with_their_arguments() -> None:
    text = (
        'Let me compute. <tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'
        '\n<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"print(1)\\"}"}</tool_call>'
    )
    assert parse_tool_calls(text) == [
        ToolCall("calculator", {"expression": "2 + 2"}),
        ToolCall("python", {"code": "print(1)"}),
    ]
    assert parse_tool_calls("The answer is 4.") == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('<tool_call>{"name": "calculator", "arguments": {</tool_call>', "not valid JSON"),
        ('<tool_call>{"name": "calculator"', "no closing </tool_call>"),
        ("<tool_call>[1, 2]</tool_call>", "expected a JSON object, got list"),
        ('<tool_call>{"arguments": {}}</tool_call>', "'name' must be the tool's name"),
        ('<tool_call>{"name": "calculator", "arguments": [1]}</tool_call>', "'arguments' must be a JSON object"),
        ('<tool_call>{"name": "calculator", "arguments": "2+2"}</tool_call>', "'arguments' is a string"),
    ],
)
def test_a_malformed_call_carries_an_error_message_for_the_model(text: str, why: str) -> None:
    (call,) = parse_tool_calls(text)
    assert call.name == "" and why in call.error
    assert call.error.startswith("Error: malformed tool call") and "<tool_call>{" in call.error  # shows the form
