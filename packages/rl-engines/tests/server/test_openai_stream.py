"""`TextDeltas`, what an OpenAI stream sends of a choice as its tokens come: everything at once without stops or
tools; held back while it could still be a stop string (cut from the answer), a `<tool_call>` (sent as tool calls)
or whitespace the answer strips; the deltas and `rest` always add up to the final text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from rl_engines.server._openai_stream import TextDeltas

CHARS = "abcdefghijklmnopqrstuvwxyz <>_/{}:\"'"


class CharTokenizer:
    """Token id i + 2 is character i; 0 and 1 are special (decoded to nothing)."""

    def encode(self, text: str) -> list[int]:
        return [CHARS.index(c) + 2 for c in text]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(CHARS[i - 2] for i in ids if i >= 2)


def _feed(deltas: TextDeltas, text: str, tokenizer: Any) -> list[str]:
    return [deltas.push(token) for token in [0, *tokenizer.encode(text)]]


def test_without_stops_or_tools_each_token_is_sent_as_it_comes() -> None:
    tokenizer = CharTokenizer()
    deltas = TextDeltas(tokenizer, (), tools=False)
    assert _feed(deltas, "ab c", tokenizer) == ["", "a", "b", " ", "c"]
    assert deltas.rest("ab c") == ""


def test_a_possible_stop_string_is_held_until_it_is_not_one() -> None:
    tokenizer = CharTokenizer()
    deltas = TextDeltas(tokenizer, ("xyz",), tools=False)
    assert _feed(deltas, "axyb", tokenizer) == ["", "a", "", "", "xyb"]  # "xy" might have begun "xyz"
    stopped = TextDeltas(tokenizer, ("xyz",), tools=False)
    assert "".join(_feed(stopped, "abxyzcd", tokenizer)) == "ab"  # nothing from the stop string on
    assert stopped.rest("ab") == ""


@pytest.mark.parametrize(
    ("text", "final", "sent"),
    [
        ("hi <tool_call>{}</tool_call>", "hi", "hi"),  # the call and the space before it wait for the answer
        ("<tool_call>{}</tool_call>", None, ""),
        ("a <tool", "a <tool", "a"),  # held while it could begin a call; the answer sends the rest
        ("  ", "  ", ""),  # whitespace only: held (the answer would strip it before a call)
    ],
)
def test_tool_calls_and_the_whitespace_around_them_are_held(text: str, final: str | None, sent: str) -> None:
    tokenizer = CharTokenizer()
    deltas = TextDeltas(tokenizer, (), tools=True)
    assert "".join(_feed(deltas, text, tokenizer)) == sent
    assert sent + deltas.rest(final) == (final or "")


class BytesTokenizer:
    """Token ids are UTF-8 bytes + 2; an unfinished character decodes to U+FFFD, as byte-level tokenizers do."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return bytes(i - 2 for i in ids if i >= 2).decode("utf-8", errors="replace")


def test_an_unfinished_character_waits_for_its_last_byte() -> None:
    deltas = TextDeltas(BytesTokenizer(), (), tools=False)
    pieces = [deltas.push(byte + 2) for byte in "aé".encode()]
    assert pieces == ["a", "", "é"]
