"""`stream: true` on the OpenAI routes: the answer sent as OpenAI's server-sent event chunks as tokens are decoded.

A chat stream opens with one `{"role": "assistant", "content": ""}` delta per choice, then sends a content delta
whenever a choice's decoded text grows (a `text_completion` stream sends `text` deltas), then per choice the rest
of its content and its `tool_calls` (and its log-probs, when asked) in a last delta and a closing chunk with its
finish reason, a usage chunk when `stream_options.include_usage` is true, an `rl` chunk with `return_rl`, and
`data: [DONE]`. Text is held back while it could still turn out to be part of a stop string (which the answer cuts),
an unfinished UTF-8 character, or, when tools are parsed, a `<tool_call>` (sent as `tool_calls`, not content) or the
whitespace around the content before it (which the answer strips); so the deltas add up to the non-streamed answer.
A backend that does not report tokens as they come (`OpenAIService.streams_tokens` false) sends its whole answer in
the last delta. An error after the first chunk arrives as an `error` event (the `openai` client raises it); a client
that goes away mid-stream cancels the generation, which aborts its requests in the engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from rl_core.chat import TOOL_CALL_OPEN
from rl_engines.server._openai_service import OpenAIService, PreparedAnswer
from rl_engines.server._openai_types import ChatRequest, OpenAIError

logger = logging.getLogger(__name__)

_DONE = b"data: [DONE]\n\n"
_UNFINISHED_CHAR = "\ufffd"
"""What a tokenizer decodes the first bytes of a multi-byte character to."""


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


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that begins `marker` (without being all of it)."""
    for size in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0


class TextDeltas:
    """One choice's tokens decoded as they come: `push` returns the text that is safe to send now (see the module
    doc for what is held back), `rest` the part of the final text not sent yet."""

    def __init__(self, tokenizer: Any, stops: Sequence[str], tools: bool) -> None:
        self.tokenizer = tokenizer
        self.stops = tuple(stops)
        self.tools = tools
        self.ids: list[int] = []
        self.sent = ""

    def push(self, token: int) -> str:
        """Add `token`; the text newly safe to send ("" when none)."""
        self.ids.append(int(token))
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        end = self._safe_end(text)
        if end <= len(self.sent) or not text.startswith(self.sent):
            return ""
        delta = text[len(self.sent) : end]
        self.sent = text[:end]
        return delta

    def _safe_end(self, text: str) -> int:
        end = len(text)
        while end and text[end - 1] == _UNFINISHED_CHAR:
            end -= 1
        for stop in self.stops:
            found = text.find(stop)
            if found >= 0:
                end = min(end, found)
            end -= _partial_suffix(text[:end], stop)
        if self.tools:
            found = text.find(TOOL_CALL_OPEN)
            if found >= 0:
                end = min(end, found)
            end -= _partial_suffix(text[:end], TOOL_CALL_OPEN)
            kept = text[:end]
            end = len(kept.rstrip()) if kept.strip() else 0
        return max(end, 0)

    def rest(self, final: str | None) -> str:
        """What of the choice's final text (`final`, None for no content) the deltas have not sent."""
        final = final or ""
        if not final.startswith(self.sent):
            logger.warning("streamed text %r is not a prefix of the answer %r; its rest is not sent", self.sent, final)
            return ""
        return final[len(self.sent) :]


class _Stream:
    """The chunks of one prepared answer (see `stream_answer`)."""

    def __init__(self, service: OpenAIService, prepared: PreparedAnswer) -> None:
        self.service = service
        self.prepared = prepared
        request = prepared.request
        tools = isinstance(request, ChatRequest) and bool(request.tools) and request.parse_tools
        self.deltas = [TextDeltas(service.tokenizer, prepared.sampling.stop, tools) for _ in range(prepared.sampling.n)]
        self.head = {
            "id": prepared.completion_id,
            "object": "chat.completion.chunk" if prepared.chat else "text_completion",
            "created": prepared.created,
            "model": prepared.sampling.model,
        }

    def chunk(self, index: int, piece: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
        """One choice's chunk: `piece` is its delta (chat) or its text (completions)."""
        if self.prepared.chat:
            choice = {"index": index, "delta": piece, "logprobs": logprobs, "finish_reason": finish}
        else:
            choice = {"index": index, **piece, "logprobs": logprobs, "finish_reason": finish}
        return _sse({**self.head, "choices": [choice]})

    def opening(self) -> list[bytes]:
        """The role delta of every chat choice (nothing for completions)."""
        if not self.prepared.chat:
            return []
        return [self.chunk(i, {"role": "assistant", "content": ""}) for i in range(len(self.deltas))]

    def token(self, index: int, token: int) -> bytes | None:
        """The delta `token` makes safe to send for choice `index`, or None."""
        text = self.deltas[index].push(token)
        if not text:
            return None
        return self.chunk(index, {"content": text} if self.prepared.chat else {"text": text})

    def closing(self, answer: Mapping[str, Any], include_usage: bool) -> list[bytes]:
        """Every choice's last delta and finish reason, then usage, `rl` and `[DONE]`."""
        chunks = []
        for choice in answer["choices"]:
            i = choice["index"]
            if self.prepared.chat:
                message = choice["message"]
                delta: dict[str, Any] = {}
                rest = self.deltas[i].rest(message["content"])
                if rest:
                    delta["content"] = rest
                if message.get("tool_calls"):
                    delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
                if delta or choice["logprobs"] is not None:
                    chunks.append(self.chunk(i, delta, logprobs=choice["logprobs"]))
                chunks.append(self.chunk(i, {}, finish=choice["finish_reason"]))
            else:
                rest = self.deltas[i].rest(choice["text"])
                chunks.append(self.chunk(i, {"text": rest}, choice["finish_reason"], choice["logprobs"]))
        if include_usage:
            chunks.append(_sse({**self.head, "choices": [], "usage": answer["usage"]}))
        if "rl" in answer:
            chunks.append(_sse({**self.head, "choices": [], "rl": answer["rl"]}))
        chunks.append(_DONE)
        return chunks


async def stream_answer(service: OpenAIService, prepared: PreparedAnswer, include_usage: bool) -> AsyncIterator[bytes]:
    """The SSE chunks answering `prepared` as its tokens are decoded (see the module doc). Closing the iterator
    before the end (the client went away) cancels the generation."""
    stream = _Stream(service, prepared)
    queue: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
    task = asyncio.ensure_future(service.generate(prepared, lambda i, token: queue.put_nowait((i, token))))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        for chunk in stream.opening():
            yield chunk
        while (item := await queue.get()) is not None:
            chunk = stream.token(*item)
            if chunk is not None:
                yield chunk
        error = task.exception()
        if error is not None:
            logger.warning("streamed completion %s failed: %r", prepared.completion_id, error)
            yield _sse({"error": {"message": str(error), "type": "server_error", "code": type(error).__name__}})
            return
        for chunk in stream.closing(service.answer(prepared, task.result()), include_usage):
            yield chunk
    finally:
        if not task.done():  # the client went away: the backend aborts the requests on cancellation
            logger.info("stream client of %s disconnected; cancelling its generation", prepared.completion_id)
            task.cancel()
