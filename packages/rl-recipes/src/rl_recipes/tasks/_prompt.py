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


RESPONSE_PREFIX = " "
"""Put before the answer text in a plain-template response, so `...Answer:` continues as `Answer: 23 + 58 = 81`."""


def response_text(answer: str, tokenizer: Any = None) -> str:
    """Return the response text the model is trained to produce for a GSM8K `answer` (without the eos token).

    After a plain-template prompt the response is `RESPONSE_PREFIX + answer` (`" 23 + 58 = 81 #### 81"`);
    after a chat prompt (the tokenizer has a chat template) the assistant turn starts fresh, so it is the
    answer alone. SFT and the RL side both use this, so the warm start and the rollouts agree on the format.
    """
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return answer
    return RESPONSE_PREFIX + answer


def encode_prompt(prompt: str, tokenizer: Any) -> list[int]:
    """Token ids of a prompt from `build_prompt`: special tokens (a bos) are added to a plain prompt only,
    since a chat-rendered prompt already holds its own."""
    add_special_tokens = not getattr(tokenizer, "chat_template", None)
    encoded = tokenizer(prompt, add_special_tokens=add_special_tokens)
    return list(encoded["input_ids"])  # not-a-sample-field: tokenizer output key
