"""Token-by-token streaming on the rollout server's OpenAI routes, driven by the real `openai` client over a real
socket (uvicorn in a thread: the in-process ASGI transport buffers whole responses). The served HFEngine is gated:
once the tokens it reported decode to some text it waits until the test lets it go on, so a content chunk that
reaches the client while the engine waits proves the answer streams as it is decoded (events, not timing). Also:
the deltas add up to the non-streamed answer under the same seed, text completions stream too, a client that leaves
mid-stream aborts its request in the engine, tool calls arrive in the last delta, and an error mid-stream reaches
the client."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

import httpx
import openai
import pytest

from rl_engines.rollout import GenerateOutput, GenerateRequest, HFEngine, HFEngineConfig
from rl_engines.server import OpenAIService, create_app, create_openai_app
from rl_engines.sync import free_port
from rl_recipes.embedded import build_embedded_model, build_embedded_tokenizer

QUESTION: list[Any] = [{"role": "user", "content": "What is 2 + 2?"}]
WAIT_S = 60.0
"""The longest any event is waited for; a bound on a hang, never a verdict on speed."""
TokenCallback = Callable[[Sequence[tuple[str, int, float]]], None]


class GatedEngine:
    """An HFEngine whose `generate`, once the tokens it reported decode to visible text (a random model may start
    with a special token), waits for `go_on` before decoding more; it records what was aborted. Everything else is
    the engine's."""

    def __init__(self, engine: HFEngine, tokenizer: Any) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.go_on = threading.Event()
        self.waiting = threading.Event()
        """Set while (and after) the gated generate waits for `go_on`."""
        self.finished = threading.Event()
        self.aborted: list[str] = []
        self.abort_seen = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def reset(self) -> None:
        for event in (self.go_on, self.waiting, self.finished, self.abort_seen):
            event.clear()
        self.aborted.clear()

    def generate(
        self, requests: Sequence[GenerateRequest], *, on_tokens: TokenCallback | None = None
    ) -> list[GenerateOutput]:
        reported: list[int] = []

        def gated(events: Sequence[tuple[str, int, float]]) -> None:
            assert on_tokens is not None
            reported.extend(token for _, token, _ in events)
            hold = not self.go_on.is_set() and bool(self.tokenizer.decode(reported, skip_special_tokens=True))
            if hold:
                self.waiting.set()  # before the tokens go out: the client may read them at once
            on_tokens(events)
            if hold:
                self.go_on.wait(WAIT_S)

        try:
            return self.engine.generate(requests, on_tokens=None if on_tokens is None else gated)
        finally:
            self.finished.set()

    def abort(self, rids: Collection[str] | None = None) -> None:
        self.aborted.extend(rids or ())
        self.abort_seen.set()
        self.go_on.set()
        self.engine.abort(rids)


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_embedded_tokenizer()


@pytest.fixture(scope="module")
def engine(tokenizer: Any) -> GatedEngine:
    return GatedEngine(HFEngine(build_embedded_model(0, tokenizer), HFEngineConfig(context_len=64)), tokenizer)


@pytest.fixture(scope="module")
def base_url(engine: GatedEngine, tokenizer: Any) -> Iterator[str]:
    import uvicorn

    app = create_app(engine, owns_engine=False, tokenizer=tokenizer)  # pyright: ignore[reportArgumentType]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT_S
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(WAIT_S)


@pytest.fixture
def client(base_url: str, engine: GatedEngine) -> Iterator[openai.OpenAI]:
    engine.reset()
    with openai.OpenAI(api_key="none", base_url=base_url, timeout=WAIT_S, max_retries=0) as client:
        yield client
    engine.go_on.set()  # never leave the engine waiting


def _text(chunk: Any) -> str:
    """The content (chat) or text (completions) a chunk carries."""
    if not chunk.choices:
        return ""
    choice = chunk.choices[0]
    delta = getattr(choice, "delta", None)
    return (delta.content or "") if delta is not None else (choice.text or "")


def _read_streaming(stream: Any, engine: GatedEngine) -> tuple[list[Any], bool]:
    """Every chunk; and whether the first chunk with text arrived while the engine was still waiting to decode
    more (then it is let go on)."""
    chunks, early = [], None
    for chunk in stream:
        chunks.append(chunk)
        if early is None and _text(chunk):
            early = engine.waiting.is_set() and not engine.finished.is_set()
            engine.go_on.set()
    return chunks, bool(early)


def test_chat_streams_tokens_as_they_are_decoded(client: openai.OpenAI, engine: GatedEngine) -> None:
    engine.go_on.set()
    plain = client.chat.completions.create(model="m", messages=QUESTION, max_tokens=8, seed=3)
    engine.reset()
    stream = client.chat.completions.create(
        model="m", messages=QUESTION, max_tokens=8, seed=3, stream=True, stream_options={"include_usage": True}
    )
    chunks, early = _read_streaming(stream, engine)

    assert early, "no content reached the client before the engine finished decoding"
    first = chunks[0].choices[0]
    assert first.delta.role == "assistant" and not first.delta.content  # the role delta comes first
    content = [c for c in chunks if _text(c)]
    assert len(content) >= 2  # more than one content delta: token by token, not the whole answer at the end
    assert "".join(_text(c) for c in chunks) == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == plain.choices[0].finish_reason
    assert all(c.choices[0].finish_reason is None for c in chunks[:-2] if c.choices)
    assert chunks[-1].usage == plain.usage and not chunks[-1].choices
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"


def test_text_completions_stream_too(client: openai.OpenAI, engine: GatedEngine) -> None:
    engine.go_on.set()
    plain = client.completions.create(model="m", prompt="Question: 1", max_tokens=8, seed=5)
    engine.reset()
    stream = client.completions.create(model="m", prompt="Question: 1", max_tokens=8, seed=5, stream=True)
    chunks, early = _read_streaming(stream, engine)

    assert early
    assert "".join(_text(c) for c in chunks) == plain.choices[0].text
    assert chunks[-1].choices[0].finish_reason == plain.choices[0].finish_reason


def test_a_client_leaving_mid_stream_aborts_its_request(client: openai.OpenAI, engine: GatedEngine) -> None:
    stream = client.chat.completions.create(model="m", messages=QUESTION, max_tokens=40, seed=3, stream=True)
    for chunk in stream:
        if _text(chunk):
            break
    assert engine.waiting.is_set() and not engine.finished.is_set()
    stream.close()  # the client goes away while the engine still has tokens to decode

    assert engine.abort_seen.wait(WAIT_S), "the server never aborted the request of the client that left"
    assert engine.aborted and all(rid.startswith("chatcmpl-") for rid in engine.aborted)
    assert engine.finished.wait(WAIT_S)


class ScriptedBackend:
    """An `OpenAIBackend` (not streaming tokens) answering with one scripted text plus eos."""

    def __init__(self, tokenizer: Any, reply: str) -> None:
        self.tokenizer, self.reply = tokenizer, reply

    def room(self, prompt_ids: Sequence[int]) -> int | None:
        return None

    async def agenerate(self, rid: str, prompt_ids: tuple[int, ...], sampling: Any, n: int) -> list[Any]:
        from rl_core.workflows import Completion

        ids = (*self.tokenizer(self.reply, add_special_tokens=False)["input_ids"], *sampling.stop_token_ids)
        return [Completion(ids, (-0.5,) * len(ids), (3,) * len(ids), "stop")] * n


def test_tool_calls_arrive_in_the_last_delta(tokenizer: Any) -> None:
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'
    app = create_openai_app(OpenAIService(tokenizer, ScriptedBackend(tokenizer, call)))
    calculator = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}

    async def main() -> list[Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test/v1") as http:
            client = openai.AsyncOpenAI(api_key="none", base_url="http://test/v1", http_client=http)
            stream = await client.chat.completions.create(
                model="m",
                messages=QUESTION,
                tools=[calculator],  # pyright: ignore[reportArgumentType]
                stream=True,
            )
            return [chunk async for chunk in stream]

    chunks = asyncio.run(main())
    deltas = [c.choices[0].delta for c in chunks]
    assert deltas[0].role == "assistant" and not any(d.content for d in deltas)  # the call is not content
    calls = [d.tool_calls for d in deltas if d.tool_calls]
    assert len(calls) == 1 and calls[0][0].function.name == "calculator" and calls[0][0].index == 0  # pyright: ignore[reportOptionalMemberAccess]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


class FailingBackend(ScriptedBackend):
    """Fails every generation (after the stream's first chunk was sent)."""

    async def agenerate(self, rid: str, prompt_ids: tuple[int, ...], sampling: Any, n: int) -> list[Any]:
        raise RuntimeError("the engine fell over")


def test_an_error_mid_stream_is_an_error_event_the_client_raises(tokenizer: Any) -> None:
    app = create_openai_app(OpenAIService(tokenizer, FailingBackend(tokenizer, "")))

    async def main() -> list[Any]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test/v1") as http:
            client = openai.AsyncOpenAI(api_key="none", base_url="http://test/v1", http_client=http)
            stream = await client.chat.completions.create(model="m", messages=QUESTION, stream=True)
            return [chunk async for chunk in stream]

    with pytest.raises(openai.APIError, match="the engine fell over"):
        asyncio.run(main())
