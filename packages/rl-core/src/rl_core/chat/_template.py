"""Rendering conversations with a chat template, and the tokens a new message adds to a rendered conversation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}{{ 'Tools:' }}{%- for tool in tools %}{{ ' ' + tool['function']['name'] }}{%- endfor %}"
    "{{ '\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{ 'Question: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'assistant' %}{{ 'Answer:' + (message['content'] or '') }}"
    "{%- for call in message.get('tool_calls') or [] %}{%- set fn = call['function'] %}"
    "{{ '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' }}"
    "{%- if fn['arguments'] is string %}{{ fn['arguments'] }}{%- else %}{{ fn['arguments'] | tojson }}{%- endif %}"
    "{{ '}</tool_call>' }}{%- endfor %}{{ eos_token }}"
    "{%- elif message['role'] == 'tool' %}{{ '<tool_response>' + message['content'] + '</tool_response>\\n' }}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{ 'Answer:' }}{%- endif %}"
)
"""A chat template for tokenizers without one (the embedded tokenizer): the plain `Question: ...\\nAnswer:` format
extended with the tool names, assistant turns ending in the eos token and `<tool_response>` messages. An assistant
turn renders as the generation prompt plus exactly the text the model produced (its `<tool_call>` JSON included; an
OpenAI-style assistant message's `tool_calls` render as `<tool_call>` JSON after its content),
so every rendering of a longer conversation starts with the tokens of the shorter one."""

Message = Mapping[str, Any]


def render(
    tokenizer: Any,
    messages: Sequence[Message],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    chat_template: str | None = None,
    add_generation_prompt: bool = True,
) -> str:
    """`messages` as text through `chat_template` (else the tokenizer's own), with the OpenAI tool schemas `tools`."""
    return tokenizer.apply_chat_template(
        [dict(m) for m in messages],
        tools=[dict(t) for t in tools] if tools else None,
        chat_template=chat_template,
        add_generation_prompt=add_generation_prompt,
        tokenize=False,
    )


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of rendered chat text (no special tokens added: the template wrote its own)."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])  # not-a-sample-field: tokenizer output key


def appended_text(before: str, after: str, where: str) -> str:
    """The text `after` adds to `before`; a ValueError naming `where` when `after` does not start with `before`
    (a template that rewrites earlier turns cannot be extended token by token)."""
    if not after.startswith(before):
        raise ValueError(
            f"{where}: the chat template rendered the longer conversation without the shorter one as its prefix; "
            "use a template that renders earlier turns unchanged (rl_core.chat.TOOL_CHAT_TEMPLATE does)"
        )
    return after[len(before) :]
