"""The rollout server's OpenAI routes driven by the real `openai` client (in-process ASGI transport, no port):
chat and text completions on an HFEngine with the embedded tokenizer, log-probs and recorded tokens matching, the
API key, bad input answered in OpenAI's error shape naming the field, and a tool-call round trip on a scripted
backend (a random model does not write tool calls)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
import openai
import pytest

from rl_core.workflows import Completion
from rl_engines.rollout import HFEngine, HFEngineConfig, SamplingParams
from rl_engines.server import OpenAIService, ServerConfig, create_app, create_openai_app
from rl_recipes.embedded import build_embedded_model, build_embedded_tokenizer

T = TypeVar("T")
BASE = "http://test/v1"
KEY = "sekrit"
CONTEXT = 64
QUESTION: list[Any] = [{"role": "user", "content": "What is 2 + 2?"}]
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
    },
}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return build_embedded_tokenizer()


@pytest.fixture(scope="module")
def engine(tokenizer: Any) -> HFEngine:
    return HFEngine(build_embedded_model(0, tokenizer), HFEngineConfig(context_len=CONTEXT))


@pytest.fixture(scope="module")
def app(engine: HFEngine, tokenizer: Any) -> Any:
    return create_app(engine, ServerConfig(api_key=KEY), tokenizer=tokenizer, owns_engine=False)


def _run(app: Any, body: Callable[[openai.AsyncOpenAI], Awaitable[T]], key: str = KEY) -> T:
    async def main() -> T:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
            client = openai.AsyncOpenAI(api_key=key, base_url=BASE, http_client=http)  # pyright: ignore[reportArgumentType]
            return await body(client)

    return asyncio.run(main())


def _raw(app: Any, path: str, body: dict[str, Any], key: str = KEY) -> httpx.Response:
    async def main() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            return await http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})

    return asyncio.run(main())


def test_chat_completion_with_logprobs_and_recorded_tokens(app: Any, tokenizer: Any) -> None:
    async def body(client: openai.AsyncOpenAI) -> Any:
        response = await client.chat.completions.create(
            model="any-name",
            messages=QUESTION,
            max_tokens=6,
            temperature=0.0,
            logprobs=True,
            extra_body={"return_rl": True},
        )
        fetched = await client.get(f"/rl/completions/{response.id}", cast_to=object)
        return response, fetched

    response, fetched = _run(app, body)
    choice = response.choices[0]
    rl = (response.model_extra or {})["rl"]
    assert response.model == "any-name" and response.object == "chat.completion"
    prompt = tokenizer.decode(rl["prompt_token_ids"])
    assert prompt == "Question: What is 2 + 2?\nAnswer:"  # the fallback chat template
    tokens = rl["choices"][0]["token_ids"]
    assert response.usage is not None
    assert response.usage.prompt_tokens == len(rl["prompt_token_ids"]) and response.usage.completion_tokens == len(
        tokens
    )
    assert choice.message.content == tokenizer.decode(tokens, skip_special_tokens=True)
    assert choice.logprobs is not None and choice.logprobs.content is not None
    assert [e.logprob for e in choice.logprobs.content] == pytest.approx(rl["choices"][0]["log_probs"])
    assert all(lp <= 0 for lp in rl["choices"][0]["log_probs"]) and rl["choices"][0]["versions"] == [0] * len(tokens)
    assert fetched == rl  # the same record, retrievable by the completion id


def test_text_completion_n_choices_seeded_and_stop_string(app: Any, tokenizer: Any) -> None:
    async def body(client: openai.AsyncOpenAI) -> Any:
        first = await client.completions.create(model="m", prompt="Question: 1", max_tokens=8, n=2, seed=5)
        again = await client.completions.create(model="m", prompt="Question: 1", max_tokens=8, n=2, seed=5)
        stop = first.choices[0].text[2]
        cut = await client.completions.create(
            model="m",
            prompt="Question: 1",
            max_tokens=8,
            seed=5,
            stop=[stop],
            logprobs=0,
            extra_body={"return_rl": True},
        )
        return first, again, stop, cut

    first, again, stop, cut = _run(app, body)
    assert [c.text for c in first.choices] == [c.text for c in again.choices] and len(first.choices) == 2
    assert first.usage is not None and first.usage.completion_tokens == 16
    text = first.choices[0].text
    assert cut.choices[0].text == text[: text.index(stop)] and cut.choices[0].finish_reason == "stop"
    kept = (cut.model_extra or {})["rl"]["choices"][0]["token_ids"]
    assert tokenizer.decode(kept) == text[: text.index(stop) + 1]  # recorded up to the token completing the stop
    assert cut.choices[0].logprobs is not None and len(cut.choices[0].logprobs.token_logprobs or []) == len(kept)


def test_stream_deltas_add_up_to_the_answer(app: Any) -> None:
    async def body(client: openai.AsyncOpenAI) -> Any:
        plain = await client.chat.completions.create(model="m", messages=QUESTION, max_tokens=5, seed=3)
        stream = await client.chat.completions.create(
            model="m", messages=QUESTION, max_tokens=5, seed=3, stream=True, stream_options={"include_usage": True}
        )
        return plain, [chunk async for chunk in stream]

    plain, chunks = _run(app, body)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == plain.choices[0].finish_reason
    assert chunks[-1].usage is not None and chunks[-1].usage == plain.usage


def test_the_api_key_is_required(app: Any) -> None:
    async def body(client: openai.AsyncOpenAI) -> Any:
        return await client.chat.completions.create(model="m", messages=QUESTION, max_tokens=2)

    with pytest.raises(openai.AuthenticationError):
        _run(app, body, key="wrong")


@pytest.mark.parametrize(
    ("path", "body", "param", "message"),
    [
        ("/v1/chat/completions", {"model": "m", "messages": []}, "messages", "non-empty"),
        (
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "robot", "content": "hi"}]},
            "messages[0].role",
            "robot",
        ),
        ("/v1/chat/completions", {"model": "m", "messages": QUESTION, "max_tokens": 500}, "max_tokens", "at most"),
        (
            "/v1/chat/completions",
            {"model": "m", "messages": QUESTION, "logit_bias": {"5": 1}},
            "logit_bias",
            "not supported",
        ),
        ("/v1/chat/completions", {"model": "m", "messages": QUESTION, "top_logprobs": 2}, "top_logprobs", "sampled"),
        ("/v1/chat/completions", {"messages": QUESTION}, "model", "required"),
        ("/v1/chat/completions", {"model": "m", "messages": QUESTION, "temprature": 0}, "temprature", "temperature"),
        ("/v1/completions", {"model": "m", "prompt": ["a", "b"]}, "prompt", "one prompt"),
        ("/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 0}, "max_tokens", ">= 1"),
    ],
)
def test_bad_input_is_a_400_in_openai_shape_naming_the_field(
    app: Any, path: str, body: dict[str, Any], param: str, message: str
) -> None:
    response = _raw(app, path, body)
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == param and message in error["message"]
    assert error["type"] == "invalid_request_error" and "code" in error
    assert _raw(app, "/v1/completions", {"model": "m", "prompt": "1", "max_tokens": 1}).status_code == 200


def test_max_tokens_over_the_context_names_the_limit(app: Any) -> None:
    error = _raw(app, "/v1/completions", {"model": "m", "prompt": "12345", "max_tokens": CONTEXT}).json()["error"]
    assert error["param"] == "max_tokens" and f"at most {CONTEXT - 5} new tokens" in error["message"]


def test_without_a_tokenizer_the_routes_answer_501_naming_the_flag(engine: HFEngine) -> None:
    response = _raw(create_app(engine, owns_engine=False), "/v1/chat/completions", {"model": "m", "messages": QUESTION})
    assert response.status_code == 501 and "--tokenizer" in response.json()["error"]["message"]


class ScriptedBackend:
    """An `OpenAIBackend` answering each call with the next scripted text plus eos."""

    def __init__(self, tokenizer: Any, replies: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.replies = list(replies)
        self.prompts: list[str] = []

    def room(self, prompt_ids: Sequence[int]) -> int | None:
        return None

    async def agenerate(
        self, rid: str, prompt_ids: tuple[int, ...], sampling: SamplingParams, n: int
    ) -> list[Completion]:
        self.prompts.append(self.tokenizer.decode(prompt_ids))
        ids = (*self.tokenizer(self.replies.pop(0), add_special_tokens=False)["input_ids"], *sampling.stop_token_ids)
        return [Completion(ids, (-0.5,) * len(ids), (3,) * len(ids), "stop")] * n


def test_a_tool_call_round_trip(tokenizer: Any) -> None:
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 2"}}</tool_call>'
    backend = ScriptedBackend(tokenizer, [call, "4"])
    app = create_openai_app(OpenAIService(tokenizer, backend))

    async def body(client: openai.AsyncOpenAI) -> Any:
        messages: list[Any] = list(QUESTION)
        first = await client.chat.completions.create(model="m", messages=messages, tools=[CALCULATOR])  # pyright: ignore[reportArgumentType]
        reply = first.choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        for tool_call in reply.tool_calls or []:
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": "4"})
        second = await client.chat.completions.create(model="m", messages=messages, tools=[CALCULATOR])  # pyright: ignore[reportArgumentType]
        return first, second

    first, second = _run(app, body)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert len(calls) == 1 and calls[0].function.name == "calculator"  # pyright: ignore[reportAttributeAccessIssue]
    assert json.loads(calls[0].function.arguments) == {"expression": "2 + 2"}  # pyright: ignore[reportAttributeAccessIssue]
    assert second.choices[0].message.content == "4" and second.choices[0].finish_reason == "stop"
    # The assistant's call and the tool's answer were rendered back into the second prompt.
    assert backend.prompts[1] == (
        f"Tools: calculator\nQuestion: What is 2 + 2?\nAnswer:{call}<eos><tool_response>4</tool_response>\nAnswer:"
    )
