"""The OpenAI-compatible API over any token generator: render, sample, cut at stop strings, parse tool calls, record.

`OpenAIService` answers checked chat and completion requests (`_openai_types`) with OpenAI's response bodies. It
generates through an `OpenAIBackend`: the rollout server's engine (`_routes_openai.EngineBackend`) or, inside the
`openai_agent` workflow, an episode's engine. Each answer is recorded (`CompletionStore`) with its prompt token ids
and every choice's tokens, behaviour log-probs and weight versions; `return_rl: true` also returns that record in
the response's `rl` field. An answer runs in three steps, `prepare_chat` / `prepare_completion` (checks, prompt,
sampling: errors before any token), `generate` (tokens reported as they are decoded when the backend streams) and
`answer` (the response body); `chat` and `complete` chain them, `_openai_stream` streams between them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rl_core.chat import TOOL_CALL_OPEN, TOOL_CHAT_TEMPLATE, encode, parse_tool_calls, render
from rl_core.workflows import Completion
from rl_engines.rollout import SamplingParams
from rl_engines.rollout._types import MAX_SEED
from rl_engines.server._openai_store import CompletionRecord, CompletionStore
from rl_engines.server._openai_types import (
    DEFAULT_COMPLETION_MAX_TOKENS,
    ChatRequest,
    CompletionRequest,
    OpenAIError,
    Sampling,
)

DEFAULT_MAX_TOKENS = 256
"""Chat reply budget when neither the request nor the backend gives one (no known context length)."""

ChatPrompt = Callable[["OpenAIService", Sequence[dict[str, Any]], Sequence[dict[str, Any]]], tuple[int, ...]]
"""Builds the context token ids of a chat request (the default renders and encodes the whole conversation)."""
ChoiceTokens = Callable[[int, int], None]
"""Called on the event loop with `(choice index, token id)` for each token as it is decoded (streaming)."""


class OpenAIBackend(Protocol):
    """Where the OpenAI routes get tokens from. A backend that reports tokens as they are decoded also sets
    `streams_tokens = True` and takes `on_tokens: ChoiceTokens` in `agenerate` (the rollout server's engine does);
    the others stream their whole answer in the last chunk."""

    def room(self, prompt_ids: Sequence[int]) -> int | None:
        """New tokens that fit after `prompt_ids` (None: no known limit)."""
        ...

    async def agenerate(
        self, rid: str, prompt_ids: tuple[int, ...], sampling: SamplingParams, n: int
    ) -> list[Completion]:
        """`n` sampled continuations of `prompt_ids` (their seeds derived from `sampling.seed` when set)."""
        ...


def _text(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def cut_at_stop(tokenizer: Any, completion: Completion, stops: Sequence[str]) -> tuple[Completion, str]:
    """`completion` up to the token that completes the first stop string, and its text without the stop string.

    The tokens kept are a prefix of those sampled, so their log-probs stay the behaviour log-probs of training."""
    text = _text(tokenizer, completion.token_ids)
    hits = [(text.find(s), s) for s in stops if s in text]
    if not hits:
        return completion, text
    position, stop = min(hits)
    end = position + len(stop)
    keep = next(
        k for k in range(1, len(completion.token_ids) + 1) if len(_text(tokenizer, completion.token_ids[:k])) >= end
    )
    cut = Completion(completion.token_ids[:keep], completion.log_probs[:keep], completion.versions[:keep], "stop")
    return cut, text[:position]


def _tool_message(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Content and OpenAI `tool_calls` of a reply; a reply with a malformed call stays plain text."""
    calls = parse_tool_calls(text)
    if not calls or any(c.error for c in calls):
        return text, []
    tool_calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
        }
        for c in calls
    ]
    content = text[: text.find(TOOL_CALL_OPEN)].strip()
    return content or None, tool_calls


@dataclass(frozen=True)
class PreparedAnswer:
    """A checked request ready to generate: its completion id, prompt token ids and sampling."""

    request: ChatRequest | CompletionRequest
    completion_id: str
    prompt_ids: tuple[int, ...]
    params: SamplingParams
    created: int

    @property
    def chat(self) -> bool:
        """Whether it answers `/v1/chat/completions` (else `/v1/completions`)."""
        return isinstance(self.request, ChatRequest)

    @property
    def sampling(self) -> Sampling:
        """The request's sampling fields."""
        return self.request.sampling


class OpenAIService:
    """Answers OpenAI chat and completion requests for one tokenizer and one backend (see the module doc)."""

    def __init__(
        self,
        tokenizer: Any,
        backend: OpenAIBackend,
        *,
        chat_template: str | None = None,
        store: CompletionStore | None = None,
        chat_prompt: ChatPrompt | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.backend = backend
        self.chat_template = chat_template or (
            None if getattr(tokenizer, "chat_template", None) else TOOL_CHAT_TEMPLATE
        )
        self.store = store or CompletionStore()
        self.chat_prompt = chat_prompt
        eos = getattr(tokenizer, "eos_token_id", None)
        self.stop_ids: tuple[int, ...] = (eos,) if isinstance(eos, int) else ()

    def render(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], generation: bool
    ) -> str:
        """`messages` through the chat template, with `tools` (OpenAI function schemas)."""
        return render(
            self.tokenizer, messages, tools=tools, chat_template=self.chat_template, add_generation_prompt=generation
        )

    def encode(self, text: str) -> tuple[int, ...]:
        """Token ids of rendered text."""
        return tuple(encode(self.tokenizer, text))

    def _params(self, sampling: Sampling, prompt_ids: Sequence[int], where: str, default: int | None) -> SamplingParams:
        """Sampling of one request; without `max_tokens`, `default` tokens (None: all the room left)."""
        room = self.backend.room(prompt_ids)
        if room is not None and room < 1:
            raise OpenAIError(
                f"the {where} is {len(prompt_ids)} tokens, which fills the model's context; shorten it", where
            )
        wanted = sampling.max_tokens
        if wanted is not None and room is not None and wanted > room:
            raise OpenAIError(
                f"{sampling.max_tokens_field}={wanted} plus the {where}'s {len(prompt_ids)} tokens exceeds the model's "
                f"context; at most {room} new tokens fit: lower {sampling.max_tokens_field}",
                sampling.max_tokens_field,
            )
        if wanted is not None:
            budget = wanted
        elif default is None:
            budget = DEFAULT_MAX_TOKENS if room is None else room
        else:
            budget = default if room is None else min(room, default)
        return SamplingParams(
            max_new_tokens=budget,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            stop_token_ids=self.stop_ids,
        )

    def _prepared(
        self, prefix: str, request: ChatRequest | CompletionRequest, prompt_ids: tuple[int, ...], params: SamplingParams
    ) -> PreparedAnswer:
        completion_id = f"{prefix}-{uuid.uuid4().hex[:24]}"
        return PreparedAnswer(request, completion_id, prompt_ids, params, int(time.time()))

    @property
    def streams_tokens(self) -> bool:
        """Whether the backend reports tokens as they are decoded (`generate`'s `on_tokens` is called)."""
        return bool(getattr(self.backend, "streams_tokens", False))

    async def generate(self, prepared: PreparedAnswer, on_tokens: ChoiceTokens | None = None) -> list[Completion]:
        """The `n` completions of `prepared`; `on_tokens(choice, token)` as they are decoded when the backend
        streams (`streams_tokens`), never otherwise."""
        n = prepared.sampling.n
        if on_tokens is not None and self.streams_tokens:
            streaming: Any = self.backend  # it takes on_tokens (streams_tokens; see OpenAIBackend)
            return await streaming.agenerate(
                prepared.completion_id, prepared.prompt_ids, prepared.params, n, on_tokens=on_tokens
            )
        return await self.backend.agenerate(prepared.completion_id, prepared.prompt_ids, prepared.params, n)

    def cut(self, prepared: PreparedAnswer, completions: Sequence[Completion]) -> list[tuple[Completion, str]]:
        """Each completion cut at the request's first stop string, with its text."""
        return [cut_at_stop(self.tokenizer, c, prepared.sampling.stop) for c in completions]

    def _logprobs(self, completion: Completion) -> list[dict[str, Any]]:
        entries = []
        for token, logprob in zip(completion.token_ids, completion.log_probs, strict=True):
            text = self.tokenizer.decode([token])
            entries.append({"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": []})
        return entries

    def _finish(
        self, record: CompletionRecord, prepared: PreparedAnswer, body: dict[str, Any], choices: list[dict[str, Any]]
    ) -> dict[str, Any]:
        sampling = prepared.sampling
        self.store.add(record)
        prompt_tokens = len(record.prompt_ids)
        completion_tokens = sum(len(c.token_ids) for c in record.choices)
        body.update(
            id=record.id,
            created=prepared.created,
            model=sampling.model,
            choices=choices,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
        if sampling.return_rl:
            body["rl"] = record.to_json()
        return body

    def prepare_chat(self, request: ChatRequest) -> PreparedAnswer:
        """`request`'s prompt ids and sampling; an OpenAIError when the prompt leaves no room."""
        if self.chat_prompt is not None:
            prompt_ids = self.chat_prompt(self, request.messages, request.tools)
        else:
            prompt_ids = self.encode(self.render(request.messages, request.tools, generation=True))
        params = self._params(request.sampling, prompt_ids, "messages", None)
        return self._prepared("chatcmpl", request, prompt_ids, params)

    def prepare_completion(self, request: CompletionRequest) -> PreparedAnswer:
        """`request`'s prompt ids and sampling; an OpenAIError when the prompt leaves no room."""
        prompt = request.prompt
        prompt_ids = self.encode(prompt) if isinstance(prompt, str) else prompt
        params = self._params(request.sampling, prompt_ids, "prompt", DEFAULT_COMPLETION_MAX_TOKENS)
        return self._prepared("cmpl", request, prompt_ids, params)

    def answer(self, prepared: PreparedAnswer, completions: Sequence[Completion]) -> dict[str, Any]:
        """The `chat.completion` or `text_completion` body of `prepared`'s `completions` (recorded in `store`)."""
        request = prepared.request
        if isinstance(request, ChatRequest):
            return self._chat_body(prepared, request, completions)
        return self._completion_body(prepared, completions)

    async def chat(self, request: ChatRequest) -> dict[str, Any]:
        """The `chat.completion` body answering `request` (recorded in `store`)."""
        prepared = self.prepare_chat(request)
        return self.answer(prepared, await self.generate(prepared))

    async def complete(self, request: CompletionRequest) -> dict[str, Any]:
        """The `text_completion` body answering `request` (recorded in `store`)."""
        prepared = self.prepare_completion(request)
        return self.answer(prepared, await self.generate(prepared))

    def _chat_body(
        self, prepared: PreparedAnswer, request: ChatRequest, completions: Sequence[Completion]
    ) -> dict[str, Any]:
        sampling = request.sampling
        results = self.cut(prepared, completions)
        choices, replies = [], []
        for i, (completion, text) in enumerate(results):
            content, tool_calls = _tool_message(text) if request.tools and request.parse_tools else (text, [])
            message: dict[str, Any] = {"role": "assistant", "content": content}
            finish = completion.finish_reason
            if tool_calls:
                message["tool_calls"] = tool_calls
                finish = "tool_calls" if finish == "stop" else finish
            replies.append(message)
            choice: dict[str, Any] = {"index": i, "message": message, "finish_reason": finish, "logprobs": None}
            if sampling.logprobs:
                choice["logprobs"] = {"content": self._logprobs(completion)}
            choices.append(choice)
        record = CompletionRecord(
            prepared.completion_id,
            prepared.prompt_ids,
            tuple(c for c, _ in results),
            tuple(request.messages),
            tuple(replies),
        )
        return self._finish(record, prepared, {"object": "chat.completion"}, choices)

    def _completion_body(self, prepared: PreparedAnswer, completions: Sequence[Completion]) -> dict[str, Any]:
        sampling = prepared.sampling
        results = self.cut(prepared, completions)
        choices = []
        for i, (completion, text) in enumerate(results):
            logprobs = None
            if sampling.logprobs:
                tokens = [self.tokenizer.decode([t]) for t in completion.token_ids]
                offsets = [sum(len(t) for t in tokens[:k]) for k in range(len(tokens))]
                logprobs = {
                    "tokens": tokens,
                    "token_logprobs": list(completion.log_probs),
                    "top_logprobs": None,
                    "text_offset": offsets,
                }
            choices.append({"index": i, "text": text, "finish_reason": completion.finish_reason, "logprobs": logprobs})
        record = CompletionRecord(prepared.completion_id, prepared.prompt_ids, tuple(c for c, _ in results))
        return self._finish(record, prepared, {"object": "text_completion"}, choices)


def choice_seed(seed: int | None, index: int) -> int | None:
    """The seed of choice `index` of a request seeded with `seed` (None stays unseeded)."""
    return None if seed is None else (seed + index) % (MAX_SEED + 1)
