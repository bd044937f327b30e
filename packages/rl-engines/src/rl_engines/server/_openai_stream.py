"""`stream: true` on the OpenAI routes: a finished answer sent as OpenAI's server-sent event chunks.

The answer is generated whole first (stop strings and tool calls need the whole reply), then sent as one chunk per
choice with the role and content (or tool calls), one closing chunk per choice with its finish reason, a usage
chunk when `stream_options.include_usage` is true, and `data: [DONE]`. Clients that insist on streaming work; the
first byte comes when the reply is complete, not token by token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from rl_engines.server._openai_types import OpenAIError


def stream_settings(body: dict[str, Any]) -> tuple[bool, bool]:
    """`(stream, include_usage)` of `body`, removing both fields from it (the parsers see a plain request)."""
    stream = body.pop("stream", None)
    options = body.pop("stream_options", None)
    if stream not in (None, True, False):
        raise OpenAIError(f"stream must be true or false, got {stream!r}", "stream")
    if options is not None and (not isinstance(options, Mapping) or not stream):
        raise OpenAIError("stream_options is an object, allowed only with stream=true", "stream_options")
    include_usage = bool(options.get("include_usage", False)) if isinstance(options, Mapping) else False  # pyright: ignore[reportUnknownMemberType]
    return bool(stream), include_usage


def _sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def stream_chunks(answer: Mapping[str, Any], include_usage: bool) -> Iterator[bytes]:
    """The SSE chunks of a finished `chat.completion` or `text_completion` body (see the module doc)."""
    chat = answer["object"] == "chat.completion"
    head = {"id": answer["id"], "created": answer["created"], "model": answer["model"]}
    head["object"] = "chat.completion.chunk" if chat else "text_completion"
    for choice in answer["choices"]:
        if chat:
            message = choice["message"]
            delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
            body = {"index": choice["index"], "delta": delta, "logprobs": choice["logprobs"], "finish_reason": None}
            closing = {
                "index": choice["index"],
                "delta": {},
                "logprobs": None,
                "finish_reason": choice["finish_reason"],
            }
        else:
            body = {**choice, "finish_reason": None}
            closing = {"index": choice["index"], "text": "", "logprobs": None, "finish_reason": choice["finish_reason"]}
        yield _sse({**head, "choices": [body]})
        yield _sse({**head, "choices": [closing]})
    if include_usage:
        yield _sse({**head, "choices": [], "usage": answer["usage"]})
    if "rl" in answer:
        yield _sse({**head, "choices": [], "rl": answer["rl"]})
    yield b"data: [DONE]\n\n"
