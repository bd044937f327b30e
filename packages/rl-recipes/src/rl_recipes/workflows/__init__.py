"""Rollout workflows with tools and chat templates, registered with `rl_core.workflows`.

Importing this package registers "tool_calling" (`ToolCallingWorkflow`) and "openai_agent" (`OpenAIAgentWorkflow`,
agent code on the OpenAI SDK); choose one with `rollout.workflow=<name>` and pass its settings in
`rollout.workflow_kwargs` (`tokenizer` at least; `agent` for openai_agent).
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
from rl_recipes.workflows._openai_agent import OPENAI_AGENT, OpenAIAgentWorkflow, trajectory_of
from rl_recipes.workflows._tool_calling import TOOL_CALLING, ToolCallingWorkflow

__all__ = [
    "OPENAI_AGENT",
    "TOOL_CALLING",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "TOOL_CHAT_TEMPLATE",
    "OpenAIAgentWorkflow",
    "ToolCall",
    "ToolCallingWorkflow",
    "appended_text",
    "encode",
    "parse_tool_calls",
    "render",
    "trajectory_of",
]
