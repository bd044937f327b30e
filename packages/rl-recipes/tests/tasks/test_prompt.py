"""Prompt building: the plain template, and the chat template when the tokenizer has one."""

from __future__ import annotations

from typing import Any

from rl_recipes.tasks import CHAT_INSTRUCTION, build_prompt


class _ChatTokenizer:
    chat_template = "{{ messages }}"

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool) -> Any:
        assert tokenize is False and add_generation_prompt is True
        return f"<user>{messages[0]['content']}</user><assistant>"


class _PlainTokenizer:
    chat_template = None


def test_plain_template() -> None:
    assert build_prompt("What is 2 + 3?") == "Question: What is 2 + 3?\nAnswer:"
    assert build_prompt("What is 2 + 3?", _PlainTokenizer()) == "Question: What is 2 + 3?\nAnswer:"
    assert build_prompt("q", template="Q: {question} A:") == "Q: q A:"


def test_chat_template() -> None:
    assert (
        build_prompt("What is 2 + 3?", _ChatTokenizer()) == f"<user>What is 2 + 3?{CHAT_INSTRUCTION}</user><assistant>"
    )
