"""Prompt building: the plain template, and the chat template when the tokenizer has one."""

from __future__ import annotations

from typing import Any

from rl_recipes.tasks import CHAT_INSTRUCTION, RESPONSE_PREFIX, build_prompt, encode_prompt, response_text


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


def test_response_text_continues_a_plain_prompt() -> None:
    assert RESPONSE_PREFIX == " "
    assert response_text("23 + 58 = 81 #### 81") == " 23 + 58 = 81 #### 81"
    assert response_text("23 + 58 = 81 #### 81", _PlainTokenizer()) == " 23 + 58 = 81 #### 81"
    assert response_text("#### 81", _ChatTokenizer()) == "#### 81"  # the assistant turn starts fresh


class _RecordingTokenizer:
    def __init__(self, chat_template: str | None) -> None:
        self.chat_template = chat_template
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, text: str, add_special_tokens: bool) -> dict[str, list[int]]:
        self.calls.append((text, add_special_tokens))
        return {"input_ids": [len(text)]}


def test_encode_prompt_adds_special_tokens_to_plain_prompts_only() -> None:
    plain, chat = _RecordingTokenizer(None), _RecordingTokenizer("{{ messages }}")
    assert encode_prompt("abc", plain) == [3]
    assert encode_prompt("abcd", chat) == [4]
    assert plain.calls == [("abc", True)] and chat.calls == [("abcd", False)]
