"""`ProcessEngine`: an `HFEngine` in a spawned child process, driven over a pipe.

It lets the conformance suite and the sync tests cross a real process boundary: shared-memory handles are
opened by another process, the broadcast group spans two processes, and nothing relies on the engine
sharing the trainer's memory. Calls may come from several threads; each carries an id, the child runs it
on its own thread and the reply is matched back. Tensors sent in arguments travel through torch's
multiprocessing reductions. The `on_tokens` callback cannot cross processes, so there is no "stream".
`submit` sends one message per request; the child submits it to its engine in message order, so a `cancel` sent
after it always finds it.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Collection, Sequence
from typing import Any

import torch.multiprocessing as mp

from rl_engines.rollout import (
    EngineShutdownError,
    EngineTimeoutError,
    GenerateOutput,
    GenerateRequest,
    HFEngine,
    HFEngineConfig,
)
from rl_engines.rollout._submit import agenerate_by_submit, failed_future

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 180.0
"""Spawning a child that imports torch and transformers takes seconds; allow for a loaded machine."""
_STOP = "__stop__"


def _serve(conn: Any, config: HFEngineConfig, step_delay_s: float) -> None:  # runs in the child
    engine = HFEngine.from_config(config)
    slow_steps = {"on_tokens": lambda events: time.sleep(step_delay_s)} if step_delay_s > 0 else {}
    send_lock = threading.Lock()
    conn.send((None, True, {"capabilities": engine.capabilities - {"stream"}, "logprob_mode": engine.logprob_mode}))

    def reply(call_id: int, future: concurrent.futures.Future) -> None:
        error = future.exception()
        with send_lock:
            conn.send((call_id, True, future.result()) if error is None else (call_id, False, error))

    def run(call_id: int, method: str, args: tuple, kwargs: dict) -> None:
        try:
            extra = slow_steps if method == "generate" else {}
            reply = (call_id, True, getattr(engine, method)(*args, **kwargs, **extra))
        except Exception as error:
            reply = (call_id, False, error)
        with send_lock:
            conn.send(reply)

    while True:
        call_id, method, args, kwargs = conn.recv()
        if method == _STOP:
            engine.shutdown()
            with send_lock:
                conn.send((call_id, True, None))
            return
        if method == "submit":  # returns at once; registered before any later message (a cancel) is read
            future = engine.submit(*args, **kwargs, **slow_steps)
            future.add_done_callback(lambda done, call_id=call_id: reply(call_id, done))
            continue
        threading.Thread(target=run, args=(call_id, method, args, kwargs), daemon=True).start()


class ProcessEngine:
    """Implements `InferenceEngine` by forwarding every call to an `HFEngine` in a child process."""

    def __init__(self, config: HFEngineConfig, *, call_timeout_s: float = 120.0, step_delay_s: float = 0.0) -> None:
        """`step_delay_s`: the child sleeps this long after each decode step, so that lifecycle checks, which cannot
        watch tokens stream across the process boundary, still find a long request in flight."""
        context = mp.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, config, step_delay_s), daemon=True)
        self._process.start()
        child.close()
        self.call_timeout_s = call_timeout_s
        self._send_lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._ids = itertools.count()
        if not self._conn.poll(START_TIMEOUT_S):
            self._process.kill()
            raise EngineTimeoutError(f"the engine process did not start within {START_TIMEOUT_S} s")
        _, _, info = self._conn.recv()
        self._capabilities = frozenset(info["capabilities"])
        self._logprob_mode = info["logprob_mode"]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                call_id, ok, value = self._conn.recv()
            except (EOFError, OSError):
                break
            future = self._pending.pop(call_id, None)
            if future is not None:
                future.set_result(value) if ok else future.set_exception(value)
        for future in list(self._pending.values()):
            future.set_exception(EngineShutdownError("the engine process exited"))

    def _send(self, method: str, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        call_id = next(self._ids)
        self._pending[call_id] = future
        with self._send_lock:
            self._conn.send((call_id, method, args, kwargs))
        return future

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        future = self._send(method, *args, **kwargs)
        try:
            return future.result(timeout=self.call_timeout_s)
        except concurrent.futures.TimeoutError:
            raise EngineTimeoutError(
                f"{method} got no reply from the engine process in {self.call_timeout_s} s"
            ) from None

    @property
    def capabilities(self) -> frozenset[str]:
        """The child engine's capabilities, minus "stream"."""
        return self._capabilities

    @property
    def logprob_mode(self) -> str:
        """The child engine's log-prob mode."""
        return self._logprob_mode

    def generate(self, requests: Sequence, *, on_tokens: Any = None) -> list:
        """Forwarded; `on_tokens` is not supported across processes."""
        if on_tokens is not None:
            raise NotImplementedError("ProcessEngine cannot stream tokens across processes")
        return self._call("generate", list(requests))

    def submit(self, request: GenerateRequest, *, on_tokens: Any = None) -> concurrent.futures.Future:
        """Forwarded as one message; `on_tokens` is not supported across processes."""
        if on_tokens is not None:
            return failed_future(NotImplementedError("ProcessEngine cannot stream tokens across processes"))
        if not self._process.is_alive():
            return failed_future(EngineShutdownError("the engine process exited"))
        return self._send("submit", request)

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        """Forwarded (`submit` made awaitable)."""
        return await agenerate_by_submit(self.submit, self.cancel, request)

    def cancel(self, rid: str) -> None:
        """Forwarded."""
        self._call("cancel", rid)

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """Forwarded."""
        return self._call("weights_checksum", None if names is None else list(names))

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: self._call(method, *args, **kwargs)

    def shutdown(self) -> None:
        """Stop the child engine and wait for the process to exit."""
        if not self._process.is_alive():
            return
        try:
            self._call(_STOP)
        except (EngineTimeoutError, EngineShutdownError):
            logger.warning("the engine process did not stop cleanly; killing it")
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()
