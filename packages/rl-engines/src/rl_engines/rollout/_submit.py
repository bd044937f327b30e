"""The asynchronous request API shared by every engine: `submit` -> Future, `agenerate`, `cancel`, and `generate`
as a thin wrapper over `submit`.

`RequestThreads` gives an engine whose generation is a blocking per-request call (an HTTP request, a vLLM or
SGLang call) a `submit`: each request runs on a pool thread and its Future resolves with the output or the
error. `cancel(rid)` ends a request that has not started with an empty "abort" output, and asks the engine to
abort one that has (the engine's own `abort`); an engine that registers a request only once it runs may miss an
abort sent in that instant, so `abort_retry_s` repeats the abort until the request ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rl_engines.rollout._errors import EngineShutdownError
from rl_engines.rollout._types import GenerateOutput, GenerateRequest, TokenCallback, check_requests

logger = logging.getLogger(__name__)

ABORT_RETRIES = 20
"""How many times `RequestThreads.cancel` repeats an abort while the cancelled request is still running."""


def aborted_output(request: GenerateRequest, version: int) -> GenerateOutput:
    """The output of `request` cancelled before it produced a token: no tokens, finish reason "abort"."""
    return GenerateOutput(
        rid=request.rid,
        output_ids=(),
        output_logprobs=() if request.return_logprobs else None,
        finish_reason="abort",
        weight_version=version,
        prompt_len=len(request.input_ids),
    )


def failed_future(error: BaseException) -> concurrent.futures.Future[GenerateOutput]:
    """A Future already holding `error` (how `submit` reports a request it refuses)."""
    future: concurrent.futures.Future[GenerateOutput] = concurrent.futures.Future()
    future.set_exception(error)
    return future


def generate_by_submit(
    submit: Callable[..., concurrent.futures.Future[GenerateOutput]],
    cancel: Callable[[str], None],
    requests: Sequence[GenerateRequest],
    on_tokens: TokenCallback | None,
    check: Callable[[GenerateRequest], None] | None = None,
) -> list[GenerateOutput]:
    """`generate` as a thin wrapper: validate the batch (and each request with `check`, so nothing starts when one
    is bad), submit all, wait for all; outputs in request order. The first error in request order is raised after
    the other requests are cancelled."""
    batch = check_requests(requests)
    if check is not None:
        for request in batch:
            check(request)
    futures = [submit(request, on_tokens=on_tokens) for request in batch]
    outputs: list[GenerateOutput] = []
    try:
        for future in futures:
            outputs.append(future.result())
    except BaseException:
        for request, future in zip(batch, futures, strict=True):
            if not future.done():
                cancel(request.rid)
        raise
    return outputs


async def agenerate_by_submit(
    submit: Callable[..., concurrent.futures.Future[GenerateOutput]],
    cancel: Callable[[str], None],
    request: GenerateRequest,
) -> GenerateOutput:
    """`agenerate`: await `submit(request)` on the running event loop; cancelling the awaiting task cancels the
    request in the engine too (so a workflow's timeout frees the engine)."""
    future = submit(request)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        cancel(request.rid)
        raise


@dataclass(eq=False)
class _Entry:
    request: GenerateRequest
    future: concurrent.futures.Future[GenerateOutput]
    cancelled: threading.Event = field(default_factory=threading.Event)
    started: bool = False


RunOne = Callable[[GenerateRequest, "TokenCallback | None", threading.Event], GenerateOutput]
"""Generates one request on the calling thread; the Event is set when it was cancelled (check it once the request
is registered with the engine, so an abort sent before then is not lost)."""


class RequestThreads:
    """`submit` / `cancel` for an engine whose generation blocks per request; see the module doc."""

    def __init__(
        self,
        run: RunOne,
        abort: Callable[[list[str]], None],
        version: Callable[[], int],
        *,
        max_workers: int,
        name: str,
        abort_retry_s: float | None = None,
    ) -> None:
        """`run` generates one request; `abort` aborts rids in the engine; `version` is the engine's weight version
        (for requests cancelled before they start); `abort_retry_s`: repeat an abort this often while the request
        still runs (None: once)."""
        self._run, self._abort, self._version = run, abort, version
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._entries: dict[str, list[_Entry]] = {}
        self._abort_retry_s = abort_retry_s

    def submit(
        self, request: GenerateRequest, on_tokens: TokenCallback | None = None
    ) -> concurrent.futures.Future[GenerateOutput]:
        """Start `request` on a pool thread; its Future resolves with the output or the error."""
        entry = _Entry(request, concurrent.futures.Future())
        with self._lock:
            self._entries.setdefault(request.rid, []).append(entry)
        try:
            self._pool.submit(self._work, entry, on_tokens)
        except RuntimeError as error:  # the pool was shut down
            self._forget(entry)
            entry.future.set_exception(EngineShutdownError(f"the engine was shut down ({error}); build a new one"))
        return entry.future

    def _work(self, entry: _Entry, on_tokens: TokenCallback | None) -> None:
        with self._lock:
            if entry.started:  # claimed by shutdown
                return
            entry.started = True
            cancelled = entry.cancelled.is_set()
        if not entry.future.set_running_or_notify_cancel():
            self._forget(entry)
            return
        try:
            if cancelled:
                output = aborted_output(entry.request, self._version())
            else:
                output = self._run(entry.request, on_tokens, entry.cancelled)
        except BaseException as error:
            entry.future.set_exception(error)
        else:
            entry.future.set_result(output)
        finally:
            self._forget(entry)

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            entries = self._entries.get(entry.request.rid, [])
            if entry in entries:
                entries.remove(entry)
            if not entries:
                self._entries.pop(entry.request.rid, None)

    def cancel(self, rid: str) -> None:
        """End every request `rid` submitted here with "abort"; unknown or finished rids are a no-op."""
        with self._lock:
            entries = list(self._entries.get(rid, ()))
            for entry in entries:
                entry.cancelled.set()
            running = [entry for entry in entries if entry.started]
        if not running:
            return
        self._abort([rid])
        if self._abort_retry_s is not None:
            threading.Thread(target=self._repeat_abort, args=(rid, running), daemon=True).start()

    def _repeat_abort(self, rid: str, running: list[_Entry]) -> None:
        if self._abort_retry_s is None:
            return
        for _ in range(ABORT_RETRIES):
            done, _ = concurrent.futures.wait([e.future for e in running], timeout=self._abort_retry_s)
            if len(done) == len(running):
                return
            try:
                self._abort([rid])
            except Exception as error:  # the engine may be shutting down; the request then ends anyway
                logger.debug("repeated abort of %r failed: %r", rid, error)
                return

    def rids(self) -> list[str]:
        """Rids submitted here and not yet finished."""
        with self._lock:
            return list(self._entries)

    def shutdown(self) -> None:
        """Stop accepting requests; queued ones fail with `EngineShutdownError`, running ones end in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            queued = [entry for entries in self._entries.values() for entry in entries if not entry.started]
            for entry in queued:
                entry.started = True
        for entry in queued:
            if entry.future.set_running_or_notify_cancel():
                entry.future.set_exception(EngineShutdownError("the engine was shut down; build a new one"))
            self._forget(entry)
