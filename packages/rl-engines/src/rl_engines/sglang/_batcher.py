"""`SubmitBatcher`: `submit` for an engine whose generate call may run on one thread at a time (`sglang.Engine`
drives its own event loop with `run_until_complete`, so two threads must not call it at once).

Submitted requests queue; one thread takes everything queued (distinct rids) as one batch, runs the engine's
`generate` on it and resolves each request's Future; requests submitted meanwhile form the next batch. Each
request's `on_tokens` gets its own tokens. `cancel` answers a queued request "abort" without running it and asks
the engine to abort a running one (repeated while it runs, as the engine may not have registered it yet).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rl_engines.rollout import EngineShutdownError, GenerateOutput, GenerateRequest, TokenCallback
from rl_engines.rollout._submit import aborted_output

logger = logging.getLogger(__name__)

ABORT_RETRY_S = 0.2
ABORT_RETRIES = 20


@dataclass(eq=False)
class _Entry:
    request: GenerateRequest
    on_tokens: TokenCallback | None
    future: concurrent.futures.Future[GenerateOutput]


class SubmitBatcher:
    """See the module doc. `generate(batch, on_tokens)` is the engine's blocking batch call."""

    def __init__(
        self,
        generate: Callable[[list[GenerateRequest], TokenCallback | None], list[GenerateOutput]],
        abort: Callable[[list[str]], None],
        version: Callable[[], int],
    ) -> None:
        self._generate, self._abort, self._version = generate, abort, version
        self._cond = threading.Condition()
        self._queue: list[_Entry] = []
        self._running: list[_Entry] = []
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="sglang-submit", daemon=True)
        self._thread.start()

    def submit(self, request: GenerateRequest, on_tokens: TokenCallback | None) -> concurrent.futures.Future:
        """Queue `request` for the next batch."""
        entry = _Entry(request, on_tokens, concurrent.futures.Future())
        with self._cond:
            if self._closed:
                entry.future.set_exception(EngineShutdownError("the engine was shut down; build a new one"))
                return entry.future
            self._queue.append(entry)
            self._cond.notify_all()
        return entry.future

    def _take(self) -> list[_Entry] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._queue or self._closed)
            if self._closed:
                return None
            batch, rest, seen = [], [], set()
            for entry in self._queue:
                (rest if entry.request.rid in seen else batch).append(entry)
                seen.add(entry.request.rid)
            self._queue, self._running = rest, batch
            return batch

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            callbacks = {e.request.rid: e.on_tokens for e in batch if e.on_tokens is not None}

            def dispatch(events: Sequence[tuple[str, int, float]], callbacks=callbacks) -> None:
                for rid, callback in callbacks.items():
                    mine = [event for event in events if event[0] == rid]
                    if mine:
                        callback(mine)

            try:
                outputs = self._generate([e.request for e in batch], dispatch if callbacks else None)
            except BaseException as error:  # every request of the batch shares the call's failure
                for entry in batch:
                    entry.future.set_exception(error)
            else:
                for entry, output in zip(batch, outputs, strict=True):
                    entry.future.set_result(output)
            with self._cond:
                self._running = []

    def cancel(self, rid: str) -> None:
        """See the module doc; unknown or finished rids are a no-op."""
        with self._cond:
            queued = [e for e in self._queue if e.request.rid == rid]
            self._queue = [e for e in self._queue if e.request.rid != rid]
            running = [e for e in self._running if e.request.rid == rid]
        for entry in queued:
            entry.future.set_result(aborted_output(entry.request, self._version()))
        if running:
            threading.Thread(target=self._abort_until_done, args=(rid, running[0]), daemon=True).start()

    def _abort_until_done(self, rid: str, entry: _Entry) -> None:
        for _ in range(ABORT_RETRIES):
            try:
                self._abort([rid])
            except Exception as error:  # the engine may be shutting down; the request then ends anyway
                logger.debug("abort of %r failed: %r", rid, error)
                return
            try:
                entry.future.result(timeout=ABORT_RETRY_S)
                return
            except concurrent.futures.TimeoutError:
                continue
            except BaseException:
                return

    def shutdown(self) -> None:
        """Fail queued requests with `EngineShutdownError`; the running batch ends with the engine."""
        with self._cond:
            self._closed = True
            queued, self._queue = self._queue, []
            self._cond.notify_all()
        for entry in queued:
            entry.future.set_exception(EngineShutdownError("the engine was shut down; build a new one"))
