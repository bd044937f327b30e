"""OpenAI-compatible routes on the rollout server: `/v1/chat/completions`, `/v1/completions` and
`/v1/rl/completions/{id}` (the recorded tokens of an earlier answer); `/v1/models` lives with the info routes.

They need the served model's tokenizer (`create_app(..., tokenizer=...)`, `--tokenizer` on the command line);
without one they answer 501 naming the flag. Errors use OpenAI's shape, `{"error": {"message", "type", "param",
"code"}}`. The `model` field is required but any name is accepted (the server serves one model) and echoed back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from rl_core.workflows import Completion
from rl_engines.remote import status_for
from rl_engines.rollout import GenerateRequest, RolloutError, SamplingParams
from rl_engines.server._body import read_json
from rl_engines.server._config import DEFAULT_MAX_REQUEST_BYTES
from rl_engines.server._fastapi import FastAPI, JSONResponse, Request, Response, StreamingResponse
from rl_engines.server._openai_service import ChoiceTokens, OpenAIService, choice_seed
from rl_engines.server._openai_store import CompletionStore
from rl_engines.server._openai_stream import stream_answer, stream_settings
from rl_engines.server._openai_types import OpenAIError, parse_chat, parse_completion
from rl_engines.server._routes_generate import until_done_or_disconnected
from rl_engines.server._state import ServerState

logger = logging.getLogger(__name__)


class _Disconnected(Exception):
    """The client went away before its completion was ready."""


class EngineBackend:
    """The served engine as an `OpenAIBackend`: `n` choices as one batched `generate` on the generate pool, its
    tokens reported as they are decoded (the engine's `on_tokens`, as the native `/generate` stream uses)."""

    streams_tokens = True

    def __init__(self, state: ServerState, request: Any) -> None:
        self.state = state
        self.request = request

    def room(self, prompt_ids: Sequence[int]) -> int | None:
        """The context length left after `prompt_ids` (None when the engine does not say)."""
        context_len = getattr(self.state.engine, "context_len", None)
        return None if context_len is None else context_len - len(prompt_ids)

    async def agenerate(
        self,
        rid: str,
        prompt_ids: tuple[int, ...],
        sampling: SamplingParams,
        n: int,
        on_tokens: ChoiceTokens | None = None,
    ) -> list[Completion]:
        """`n` continuations; choice i is seeded `seed + i` when the request has a seed. `on_tokens(choice, token)`
        is called on this event loop as tokens are decoded. Cancelling the call aborts the requests in the engine."""
        requests = [
            GenerateRequest(
                f"{rid}-{i}",
                prompt_ids,
                SamplingParams(
                    max_new_tokens=sampling.max_new_tokens,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    seed=choice_seed(sampling.seed, i),
                    stop_token_ids=sampling.stop_token_ids,
                ),
            )
            for i in range(n)
        ]
        callback = None if on_tokens is None else _on_loop(asyncio.get_running_loop(), requests, on_tokens)
        try:
            outputs = await until_done_or_disconnected(self.state, self.request, requests, on_tokens=callback)
        except asyncio.CancelledError:
            logger.info("completion %s cancelled; aborting its %d requests", rid, len(requests))
            self.state.control_pool.submit(self.state.engine.abort, [r.rid for r in requests])
            raise
        if outputs is None:
            raise _Disconnected
        return [o.completion() for o in outputs]


def _on_loop(
    loop: asyncio.AbstractEventLoop, requests: Sequence[GenerateRequest], on_tokens: ChoiceTokens
) -> Callable[[Sequence[tuple[str, int, float]]], None]:
    """The engine's token callback (engine thread; `(rid, token, log-prob)` events) calling `on_tokens(choice,
    token)` on `loop`."""
    index = {r.rid: i for i, r in enumerate(requests)}

    def deliver(events: Sequence[tuple[str, int, float]]) -> None:
        for rid, token, _ in events:
            on_tokens(index[rid], int(token))

    def on_engine_thread(events: Sequence[tuple[str, int, float]]) -> None:
        loop.call_soon_threadsafe(deliver, list(events))

    return on_engine_thread


def openai_error_response(error: BaseException) -> Any:
    """`error` as OpenAI's error body and status (an engine error keeps its server status)."""
    if isinstance(error, OpenAIError):
        return JSONResponse(error.body(), status_code=error.status)
    status = int(status_for(error))
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(
        {"error": {"message": str(error), "type": kind, "param": None, "code": type(error).__name__}},
        status_code=status,
    )


def _no_tokenizer() -> Any:
    return openai_error_response(
        OpenAIError(
            "this server was started without a tokenizer, so it cannot read text; restart it with --tokenizer "
            "<folder> (or a --model folder holding the tokenizer files)",
            None,
            status=501,
            kind="not_implemented",
        )
    )


ServiceFor = Callable[[Any], "OpenAIService | None"]
"""The service answering one HTTP request (None: no tokenizer, answered 501)."""


def add_openai_routes(app: FastAPI, store: CompletionStore, service_for: ServiceFor, max_request_bytes: int) -> None:
    """Add `/v1/chat/completions`, `/v1/completions` and `/v1/rl/completions/{id}` to `app`, answered by
    `service_for(request)` and recorded in `store`."""

    async def answer(request: Request, chat: bool) -> Any:
        service = service_for(request)
        if service is None:
            return _no_tokenizer()
        try:
            body = await read_json(request, max_request_bytes)
            stream, include_usage = stream_settings(body)
            if chat:
                prepared = service.prepare_chat(parse_chat(body))
            else:
                prepared = service.prepare_completion(parse_completion(body))
            if stream:  # checked and prepared: what fails from here on arrives as an error event
                chunks = stream_answer(service, prepared, include_usage)
                return StreamingResponse(chunks, media_type="text/event-stream")
            return JSONResponse(service.answer(prepared, await service.generate(prepared)))
        except _Disconnected:
            return Response(status_code=499)  # nobody reads it: the client is gone
        except RolloutError as error:
            return openai_error_response(error)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await answer(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        return await answer(request, chat=False)

    @app.get("/v1/rl/completions/{completion_id}")
    async def recorded(completion_id: str) -> Any:
        record = store.get(completion_id)
        if record is None:
            return openai_error_response(
                OpenAIError(
                    f"no recorded completion {completion_id!r}: it was never answered here or is older than the "
                    f"newest {store.capacity} this server keeps",
                    "completion_id",
                    status=404,
                    kind="not_found_error",
                )
            )
        return JSONResponse(record.to_json())


def register_openai_routes(app: FastAPI, state: ServerState, tokenizer: Any | None) -> None:
    """The OpenAI routes of the rollout server, over its engine (`EngineBackend`) and its store."""
    store = state.completions

    def service_for(request: Any) -> OpenAIService | None:
        if tokenizer is None:
            return None
        return OpenAIService(tokenizer, EngineBackend(state, request), store=store)

    add_openai_routes(app, store, service_for, state.config.max_request_bytes)


def create_openai_app(service: OpenAIService, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Any:
    """A FastAPI app with only the OpenAI routes, every request answered by `service` (an in-process endpoint:
    `openai.AsyncOpenAI(http_client=httpx.AsyncClient(transport=httpx.ASGITransport(app)))` drives it)."""
    app = FastAPI(title="rl-engines OpenAI endpoint", openapi_url=None)
    add_openai_routes(app, service.store, lambda _: service, max_request_bytes)
    return app
