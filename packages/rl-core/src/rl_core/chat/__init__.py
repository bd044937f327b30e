"""Chat rendering and tool-call parsing shared by the tool-calling workflows and the OpenAI-compatible endpoint.

`render` draws a conversation through a tokenizer's chat template (with OpenAI `tools=` schemas), `encode` turns the
text into token ids, `appended_text` gives what a longer conversation adds to a shorter one; `parse_tool_calls` reads
Hermes/Qwen-style `<tool_call>{...}</tool_call>` JSON from model text. Standard library only: the tokenizer is any
object with transformers' `apply_chat_template` and `__call__`.
"""

from rl_core.chat._template import TOOL_CHAT_TEMPLATE, Message, appended_text, encode, render
from rl_core.chat._tool_calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ToolCall, parse_tool_calls

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "TOOL_CHAT_TEMPLATE",
    "Message",
    "ToolCall",
    "appended_text",
    "encode",
    "parse_tool_calls",
    "render",
]
