"""`/generate` (JSON or server-sent events; token ids, and text given a tokenizer), `/health` and `/health_generate`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from rl_engines.remote import generate_output_json, output_to_json, parse_generate_payload
from rl_engines.rollout import (
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    SamplingParams,
    TokenCallback,
)
from rl_engines.server._body import read_json
from rl_engines.server._fastapi import FastAPI, JSONResponse, Request, Response, StreamingResponse
from rl_engines.server._generate_logprobs import (
    LogprobAsk,
    TokenScorer,
    add_prompt_logprobs,
    logprob_asks,
    take_logprob_fields,
)
from rl_engines.server._generate_text import (
    GenerateText,
    NoTokenizerError,
    no_tokenizer_response,
    prepare,
    with_text,
)
from rl_engines.server._generate_zero import cut_outputs, prefill_only
from rl_engines.server._responses import error_response
from rl_engines.server._state import ServerState

logger = logging.getLogger(__name__)

_DONE = b"data: [DONE]\n\n"
_HEALTH_PROMPT = (0,)


def _sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def _answer(i: int, output: GenerateOutput, text_side: GenerateText | None) -> tuple[dict[str, Any], str | None]:
    """The finished `/generate` result of request `i` (cut at a stop string, with `text`, when the server has a
    tokenizer), and its text (None without a tokenizer)."""
    if text_side is None:
        return generate_output_json(output), None
    output, text, matched = text_side.finish(i, output)
    data = generate_output_json(output)
    if matched is not None:
        data["meta_info"]["finish_reason"] = {"type": "stop", "matched": matched}
    return data, text


def _text_answers(outputs: Sequence[GenerateOutput], text_side: GenerateText) -> list[dict[str, Any]]:
    """The finished results of `outputs`, each with its `text`."""
    results = []
    for i, output in enumerate(outputs):
        data, text = _answer(i, output, text_side)
        results.append(with_text(data, text or "", text_side))
    return results


class _StreamState:
    """Tokens streamed so far per request, turned into SGLang stream chunks (with `text` given a tokenizer)."""

    def __init__(
        self,
        requests: Sequence[GenerateRequest],
        batch: bool,
        incremental: bool,
        version: int,
        text_side: GenerateText | None,
        abort: Callable[[list[str]], Any],
        zero: frozenset[int] = frozenset(),
    ) -> None:
        self.requests = requests
        self.index = {r.rid: i for i, r in enumerate(requests)}
        self.ids: list[list[int]] = [[] for _ in requests]
        self.logprobs: list[list[float]] = [[] for _ in requests]
        self.sent = [0 for _ in requests]
        """Output tokens already streamed per request."""
        self.sent_text = ["" for _ in requests]
        self.batch, self.incremental, self.version = batch, incremental, version
        self.text_side, self.abort = text_side, abort
        self.zero = zero
        """Prefill-only requests (`max_new_tokens: 0`): their token is never streamed (`_generate_zero`)."""

    def _chunk(self, i: int, data: dict[str, Any], text: str | None) -> bytes:
        if text is not None and self.text_side is not None:
            delta = text[len(self.sent_text[i]) :] if self.incremental else text
            self.sent_text[i] = text
            data = with_text(data, delta, self.text_side)
        if self.batch:
            data["index"] = i
        return _sse(data)

    def step(self, events: Sequence[tuple[str, int, float]]) -> list[bytes]:
        """One chunk per request that produced tokens in this step (finish_reason null); a request that met a stop
        string sends nothing more until its final chunk, and its engine request is aborted."""
        touched: dict[int, int] = {}
        for rid, token, logprob in events:
            i = self.index[rid]
            if i in self.zero:
                continue
            touched.setdefault(i, len(self.ids[i]))
            self.ids[i].append(int(token))
            self.logprobs[i].append(float(logprob))
        chunks = []
        for i, start in touched.items():
            request, text = self.requests[i], None
            if self.text_side is not None:
                stopped = self.text_side.stopped(i)
                text = self.text_side.push(i, self.ids[i][start:])
                if text is None:
                    if not stopped:
                        self.abort([request.rid])  # the rest of its budget would only be cut off
                    continue
            first = self.sent[i] if self.incremental else 0
            lps = self.logprobs[i][first:] if request.return_logprobs else None
            data = output_to_json(request.rid, self.ids[i][first:], lps, len(request.input_ids), self.version, None)
            self.sent[i] = len(self.ids[i])
            chunks.append(self._chunk(i, data, text))
        return chunks

    def final_answers(self, outputs: Sequence[GenerateOutput]) -> list[tuple[dict[str, Any], str | None]]:
        """The finished result of every request (whole), with its text."""
        return [_answer(i, output, self.text_side) for i, output in enumerate(cut_outputs(outputs, self.zero))]

    def final(self, answers: Sequence[tuple[dict[str, Any], str | None]]) -> list[bytes]:
        """The finishing chunk of every request (the whole output, or its unsent tail when incremental; prompt
        log-probs and `output_top_logprobs` whole in either case)."""
        chunks = []
        for i, (data, text) in enumerate(answers):
            if self.incremental:
                sent = min(self.sent[i], len(data["output_ids"]))
                data["output_ids"] = data["output_ids"][sent:]
                if "output_token_logprobs" in data["meta_info"]:
                    data["meta_info"]["output_token_logprobs"] = data["meta_info"]["output_token_logprobs"][sent:]
            chunks.append(self._chunk(i, data, text))
        return chunks


async def _stream(
    state: ServerState,
    requests: list[GenerateRequest],
    batch: bool,
    text_side: GenerateText | None,
    zero: frozenset[int],
    asks: list[LogprobAsk] | None,
) -> Any:
    """Start generation; answer an error before the first token as JSON, else stream chunks as SSE."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_tokens(events: Sequence[tuple[str, int, float]]) -> None:  # engine thread
        loop.call_soon_threadsafe(queue.put_nowait, ("tokens", list(events)))

    if text_side is not None:
        text_side.start(requests)
    future = state.submit_generate(state.engine.generate, requests, on_tokens=on_tokens)
    future.add_done_callback(lambda _: queue.put_nowait(("done", None)))
    first = await queue.get()
    if first[0] == "done" and (error := future.exception()) is not None:
        return error_response(error)
    stream = _StreamState(
        requests,
        batch,
        state.config.incremental_stream,
        state.engine.weight_version(),
        text_side,
        lambda rids: state.control_pool.submit(state.engine.abort, rids),
        zero,
    )

    async def body() -> AsyncIterator[bytes]:
        item = first
        try:
            while item[0] == "tokens":
                for chunk in stream.step(item[1]):
                    yield chunk
                item = await queue.get()
            error = future.exception()
            answers = []
            if error is None:
                answers = stream.final_answers(future.result())
                if asks is not None:  # one scoring forward per asking request: off the event loop
                    try:
                        await asyncio.to_thread(_score, state, requests, asks, [d for d, _ in answers], text_side)
                    except Exception as scoring_error:  # e.g. the weights went to sleep after generating
                        error = scoring_error
            if error is not None:
                yield _sse({"error": {"message": str(error), "type": type(error).__name__}})
            else:
                for chunk in stream.final(answers):
                    yield chunk
            yield _DONE
        finally:
            if not future.done():  # the client went away: stop spending compute on it
                logger.info("stream client disconnected; aborting %d requests", len(requests))
                state.control_pool.submit(state.engine.abort, [r.rid for r in requests])

    return StreamingResponse(body(), media_type="text/event-stream")


def _stop_watch(
    state: ServerState, requests: Sequence[GenerateRequest], text_side: GenerateText | None
) -> TokenCallback | None:
    """For a non-streaming call with stop strings: a token callback that aborts each request once its text meets
    one (the rest of its budget would only be cut off). None when no request has stop strings."""
    if text_side is None:
        return None
    text_side.start(requests)
    if not any(o.stop for o in text_side.options):
        return None
    loop = asyncio.get_running_loop()
    index = {r.rid: i for i, r in enumerate(requests)}

    def watch(events: Sequence[tuple[str, int, float]]) -> None:  # event loop
        for rid, token, _ in events:
            i = index[rid]
            if not text_side.stopped(i) and text_side.push(i, [int(token)]) is None:
                state.control_pool.submit(state.engine.abort, [rid])

    def on_tokens(events: Sequence[tuple[str, int, float]]) -> None:  # engine thread
        loop.call_soon_threadsafe(watch, list(events))

    return on_tokens


def _score(
    state: ServerState,
    requests: Sequence[GenerateRequest],
    asks: Sequence[LogprobAsk],
    results: Sequence[dict[str, Any]],
    text_side: GenerateText | None,
) -> None:
    """Add the prompt log-probs and top-k the requests asked for to `results` (`_generate_logprobs`)."""
    engine = state.engine
    assert isinstance(engine, TokenScorer)  # logprob_asks refused the request otherwise
    tokenizer = text_side.tokenizer if text_side is not None and text_side.text_in_logprobs else None
    add_prompt_logprobs(engine, requests, asks, results, tokenizer)


_DISCONNECT_POLL_S = 0.25
"""How often a non-streaming request checks that its client is still there."""


def _check_context(requests: Sequence[GenerateRequest], context_len: int | None, batch: bool) -> None:
    """A 400 for a request whose prompt plus `max_new_tokens` does not fit the context (SGLang refuses it too);
    the engine would otherwise cut the budget silently."""
    if context_len is None:
        return
    for i, request in enumerate(requests):
        prompt, budget = len(request.input_ids), request.sampling.max_new_tokens
        # A prompt that alone fills the context is the engine's PromptTooLongError, raised as it generates.
        if prompt < context_len < prompt + budget:
            where = f"generate[{i}]" if batch else "generate"
            raise InvalidRequestError(
                f"{where}: sampling_params.max_new_tokens={budget} plus the prompt's {prompt} tokens exceeds the "
                f"model's context length of {context_len} tokens; ask for at most {max(context_len - prompt, 0)} "
                "new tokens"
            )


async def until_done_or_disconnected(
    state: ServerState, request: Request, requests: list[GenerateRequest], on_tokens: TokenCallback | None = None
) -> list[GenerateOutput] | None:
    """The outputs of `requests`, or None after aborting them because the client disconnected first; `on_tokens`
    is the engine's token callback (called on the engine's thread)."""
    future = state.submit_generate(state.engine.generate, requests, on_tokens=on_tokens)
    while True:
        done, _ = await asyncio.wait({future}, timeout=_DISCONNECT_POLL_S)
        if done:
            return future.result()
        if await request.is_disconnected():
            logger.info("client disconnected; aborting %d requests", len(requests))
            state.engine.abort([r.rid for r in requests])
            with contextlib.suppress(Exception):
                await future  # the aborted call returns early; its outputs have no reader
            return None


def register_generate_routes(app: FastAPI, state: ServerState, tokenizer: Any | None = None) -> None:
    """Add `/generate`, `/health` and `/health_generate` to `app`; with `tokenizer`, `/generate` also takes `text`
    prompts and answers `text` (`_generate_text`)."""

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request) -> Any:
        body = await read_json(request, state.config.max_request_bytes)
        try:
            # Tokenising a large batch of texts would stall every other route: off the event loop.
            prepared = await asyncio.to_thread(prepare, body, tokenizer) if "text" in body else prepare(body, tokenizer)
        except NoTokenizerError as error:
            return no_tokenizer_response(error)
        payload, zero = prefill_only(prepared.body)
        payload, logprob_fields = take_logprob_fields(payload)
        requests, batch, stream = parse_generate_payload(payload)
        _check_context(requests, getattr(state.engine, "context_len", None), batch)
        asks = logprob_asks(logprob_fields, requests, batch, state.engine)
        if stream:
            return await _stream(state, requests, batch, prepared.text, zero, asks)
        on_tokens = _stop_watch(state, requests, prepared.text)
        outputs = await until_done_or_disconnected(state, request, requests, on_tokens)
        if outputs is None:
            return Response(status_code=499)  # nobody reads it: the client is gone
        outputs = cut_outputs(outputs, zero)
        text_side = prepared.text
        if text_side is None:
            results = [generate_output_json(o) for o in outputs]
        else:  # decoding every output is the tokenizer's work: off the event loop
            results = await asyncio.to_thread(_text_answers, outputs, text_side)
        if asks is not None:  # one scoring forward per asking request: off the event loop
            await asyncio.to_thread(_score, state, requests, asks, results, text_side)
        return JSONResponse(results if batch else results[0])

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200 if state.engine.health() else 503)

    @app.get("/health_generate")
    async def health_generate() -> Response:
        status = state.engine.status()
        if status.state != "serving" or not status.weights_loaded:
            return Response(f"engine is {status.state}", status_code=503)
        probe = GenerateRequest("HEALTH_CHECK", _HEALTH_PROMPT, SamplingParams(max_new_tokens=1, temperature=0.0))
        try:
            await asyncio.wait_for(state.submit_generate(state.engine.generate, [probe]), state.config.health_timeout_s)
        except Exception as error:
            logger.warning("health_generate failed: %r", error)
            return Response(f"generation failed: {error}", status_code=503)
        return Response(status_code=200)
