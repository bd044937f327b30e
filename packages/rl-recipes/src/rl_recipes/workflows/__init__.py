"""Rollout workflows with tools and chat templates, registered with `rl_core.workflows`.

Importing this package registers "tool_calling" (`ToolCallingWorkflow`); choose it with
`rollout.workflow=tool_calling` and pass its settings in `rollout.workflow_kwargs` (`tokenizer` at least).
"""

from rl_core.chat import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_CHAT_TEMPLATE,
    ToolCall,
    appended_text,
    encode,
    parse_tool_calls,
    render,
)
from rl_recipes.workflows._tool_calling import TOOL_CALLING, ToolCallingWorkflow

__all__ = [
    "TOOL_CALLING",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "TOOL_CHAT_TEMPLATE",
    "ToolCall",
    "ToolCallingWorkflow",
    "appended_text",
    "encode",
    "parse_tool_calls",
    "render",
]
