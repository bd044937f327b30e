"""The math task's prompt: a plain-text template, or the tokenizer's chat template when it has one."""

from __future__ import annotations

from typing import Any

PLAIN_TEMPLATE = "Question: {question}\nAnswer:"
"""Plain-text prompt; the response continues after `Answer:`."""

CHAT_INSTRUCTION = "\nGive the final answer after '####', as in '#### 42'."
"""Appended to the question in a chat prompt, so a chat model knows the expected answer format."""


def build_prompt(question: str, tokenizer: Any = None, *, template: str = PLAIN_TEMPLATE) -> str:
    """Return the prompt text for `question`.

    When `tokenizer` has a chat template, the question (plus `CHAT_INSTRUCTION`) becomes one user turn
    rendered with the generation prompt; otherwise `template` is filled in with `{question}`.
    """
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": question + CHAT_INSTRUCTION}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return template.format(question=question)
