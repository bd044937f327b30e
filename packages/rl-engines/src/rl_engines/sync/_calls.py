"""Engine calls with a deadline: a call that does not return in time raises `SyncTimeoutError`.

Engines enforce their own timeouts, but the trainer must not depend on that: every call of a sync runs on
a worker thread and the trainer waits at most `timeout_s` for it. A call that times out keeps running on
its (daemon) worker; the sync reports the failure and the engine must be treated as broken.

An inline caller runs `call_all` on the caller's own thread instead, for engines in the trainer's process that
bound their own waits (`HFEngine`'s drain and admission timeouts): each call then saves two thread hand-offs,
which are slow in a loaded training process (a sync makes seven such calls; figures in bench/README.md), and a
call that overruns its bound is reported when it returns. `submit` always uses a worker: transports that overlap
engine calls with the trainer's own work need one.
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rl_engines.sync._errors import SyncTimeoutError

T = TypeVar("T")


class EngineCaller:
    """Runs engine calls on worker threads and waits for them with a timeout."""

    def __init__(self, max_workers: int, *, inline: bool = False) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="weight-sync")
        self.inline = inline

    def submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        """Start `fn(*args)` on a worker."""
        return self._pool.submit(fn, *args)

    def wait(self, future: concurrent.futures.Future[T], timeout_s: float, what: str) -> T:
        """The result of `future`, re-raising its exception; `SyncTimeoutError` naming `what` after `timeout_s`."""
        try:
            return future.result(timeout=timeout_s)
        except concurrent.futures.TimeoutError:
            raise SyncTimeoutError(
                f"{what} did not return within {timeout_s} s; the engine may be hung (raise "
                "WeightSyncConfig.timeout_s for very large models)"
            ) from None

    def call(self, fn: Callable[..., T], *args: Any, timeout_s: float, what: str) -> T:
        """Run `fn(*args)` and wait for it."""
        return self.wait(self.submit(fn, *args), timeout_s, what)

    def call_all(self, calls: Sequence[tuple[Callable[..., Any], tuple]], timeout_s: float, what: str) -> list[Any]:
        """Run calls concurrently (inline: one after another); wait for all; re-raise the first failure after all
        have ended or timed out."""
        labels = [f"{what} on engine {index}" for index in range(len(calls))]
        if self.inline:
            outcomes = [
                functools.partial(self._call_inline, fn, args, timeout_s, label)
                for (fn, args), label in zip(calls, labels, strict=True)
            ]
        else:
            futures = [self.submit(fn, *args) for fn, args in calls]
            outcomes = [
                functools.partial(self.wait, future, timeout_s, label)
                for future, label in zip(futures, labels, strict=True)
            ]
        return _every_result(outcomes)

    @staticmethod
    def _call_inline(fn: Callable[..., T], args: tuple, timeout_s: float, what: str) -> T:
        start = time.monotonic()
        result = fn(*args)
        elapsed = time.monotonic() - start
        if elapsed > timeout_s:
            raise SyncTimeoutError(
                f"{what} returned after {elapsed:.1f} s, past its {timeout_s} s bound; the engine may be stalling "
                "(raise WeightSyncConfig.timeout_s for very large models)"
            )
        return result

    def close(self) -> None:
        """Stop accepting calls; running ones finish in the background."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _every_result(outcomes: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each outcome's result, in order, once all have run; the first failure re-raised after the last."""
    results, first_error = [], None
    for outcome in outcomes:
        try:
            results.append(outcome())
        except Exception as error:
            first_error = first_error or error
            results.append(None)
    if first_error is not None:
        raise first_error
    return results
