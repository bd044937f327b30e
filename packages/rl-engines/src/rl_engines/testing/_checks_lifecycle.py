"""Conformance checks of pause modes, per-request abort and sleep / wake-up."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from rl_engines.rollout import EngineAsleepError, EngineStateError, GenerateOutput
from rl_engines.testing._harness import Harness, expect
from rl_engines.testing._models import V1, V2

THROTTLE_S = 0.002
"""With streaming, each step of a long request waits this long, so pauses reliably land mid-request."""
STARTED_TOKENS = 3
QUIET_S = 0.3
"""How long to watch that a parked or waiting request makes no progress."""


class _LongRequest:
    """One long greedy generate call running on a thread, counting streamed tokens when it can."""

    def __init__(self, h: Harness, rid: str = "long", seed: int = 31) -> None:
        self.h = h
        self.prompt = h.models.prompts(1, seed=seed)[0]
        self.max_new_tokens = h.models.spec.context_len - len(self.prompt) - 1
        self.tokens = 0
        self._started = threading.Event()
        self._streams = "stream" in h.engine.capabilities
        self._pool = concurrent.futures.ThreadPoolExecutor(1)
        request = h.request(rid, self.prompt, self.max_new_tokens)
        kwargs = {"on_tokens": self._on_tokens} if self._streams else {}
        self.future = self._pool.submit(h.engine.generate, [request], **kwargs)

    def _on_tokens(self, events: object) -> None:
        self.tokens += 1
        if self.tokens >= STARTED_TOKENS:
            self._started.set()
        time.sleep(THROTTLE_S)

    def wait_started(self) -> None:
        """Return once the request has produced a few tokens (or, without streaming, is in flight)."""
        if self._streams:
            expect(self._started.wait(self.h.timeout_s), "the long request produced no tokens")
            return
        deadline = time.monotonic() + self.h.timeout_s
        while self.h.engine.status().in_flight == 0:
            expect(time.monotonic() < deadline, "the long request never became in-flight")
            time.sleep(0.005)
        time.sleep(0.05)

    def result(self) -> GenerateOutput:
        """The request's output (waits at most the harness timeout)."""
        try:
            return self.future.result(timeout=self.h.timeout_s)[0]
        finally:
            self._pool.shutdown(wait=False)


def check_pause_abort(h: Harness) -> None:
    """pause("abort") ends the in-flight request with "abort" and partial tokens; new calls wait for resume."""
    h.require("pause")
    h.reset()
    long = _LongRequest(h)
    long.wait_started()
    h.engine.pause("abort", timeout_s=h.timeout_s)
    output = long.result()
    expect(output.finish_reason == "abort", f"finish {output.finish_reason!r} after pause('abort')")
    expect(0 < len(output.output_ids) < long.max_new_tokens, f"{len(output.output_ids)} tokens after an abort")
    expect(output.weight_version == V1, f"aborted output claims version {output.weight_version!r}")
    prompt = h.models.prompts(1)[0]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(h.greedy, [prompt], 4)
        time.sleep(QUIET_S)
        expect(not waiting.done(), "a request submitted while paused was served before resume()")
        h.engine.resume()
        h.expect_greedy(waiting.result(timeout=h.timeout_s), [prompt], V1, "request queued during a pause")


def check_pause_wait(h: Harness) -> None:
    """pause("wait") returns only after the in-flight request has finished normally."""
    h.require("pause")
    h.reset()
    long = _LongRequest(h)
    long.wait_started()
    h.engine.pause("wait", timeout_s=h.timeout_s)
    # The engine's own count, not the client's future: an out-of-process engine's result may still be in
    # transit when pause returns, which is fine; a request still decoding is not.
    in_flight = h.engine.status().in_flight
    expect(in_flight == 0, f"pause('wait') returned with {in_flight} request(s) still running")
    output = long.result()  # before resume(): a request parked instead of finished would never complete here
    h.engine.resume()
    expect(output.finish_reason == "length", f"finish {output.finish_reason!r} after pause('wait')")
    expect(len(output.output_ids) == long.max_new_tokens, "pause('wait') cut the request short")


def check_pause_keep_across_update(h: Harness) -> None:
    """pause("keep") parks the request; after a v2 sync it completes, its early tokens labelled v1, later v2."""
    h.require("pause")
    h.reset()
    long = _LongRequest(h)
    long.wait_started()
    h.engine.pause("keep", timeout_s=h.timeout_s)
    parked_at = long.tokens
    time.sleep(QUIET_S)
    expect(not long.future.done(), "pause('keep') ended the request")
    expect(long.tokens == parked_at, "a parked request kept generating")
    h.sync(h.models.state(V2), V2, h.transports()[0], pause_mode="keep")
    output = long.result()
    expect(output.finish_reason == "length", f"finish {output.finish_reason!r} after pause('keep')")
    versions = output.versions
    expect(len(versions) == long.max_new_tokens, "the kept request lost tokens")
    # Without streaming the count of tokens made before the park is unknown (parked_at is 0 then).
    expect(set(versions[:parked_at]) <= {V1}, "tokens produced before the update are not labelled v1")
    expect(versions[0] == V1 or parked_at == 0, "the first token is not labelled v1")
    expect(versions[-1] == V2 and output.weight_version == V2, "tokens after the update are not labelled v2")
    expect(V1 not in versions[versions.index(V2) :], f"version labels go back and forth: {output.version_spans}")
    prompts = h.models.prompts(2)
    outputs = h.greedy(prompts, 6)
    expect(all(o.weight_version == V2 for o in outputs), "new requests after resume do not carry v2")


def check_abort_rids(h: Harness) -> None:
    """abort([rid]) ends that request only; the other in-flight request finishes normally."""
    h.require("abort")
    h.reset()
    first, second = _LongRequest(h, "first", seed=41), _LongRequest(h, "second", seed=42)
    first.wait_started()
    second.wait_started()
    h.engine.abort(["first"])
    a, b = first.result(), second.result()
    expect(a.finish_reason == "abort", f"aborted request finished with {a.finish_reason!r}")
    expect(b.finish_reason == "length", f"the other request finished with {b.finish_reason!r}")


def check_sleep_wake(h: Harness) -> None:
    """Level 1 keeps outputs across sleep/wake; level 2 needs a full update; generate while asleep is refused."""
    h.require("sleep")
    h.reset()
    prompts = h.models.prompts(3, seed=51)
    before = h.greedy(prompts, 8)
    h.engine.sleep(1)
    try:
        h.greedy(prompts, 2)
    except EngineAsleepError:
        pass
    else:
        raise AssertionError("generate was served while the engine slept")
    h.engine.wake_up()
    after = h.greedy(prompts, 8)
    expect([o.output_ids for o in after] == [o.output_ids for o in before], "outputs changed across sleep(1)")
    h.engine.sleep(2)
    h.engine.wake_up(["weights"])
    try:
        h.greedy(prompts, 2)
    except EngineStateError:
        pass
    else:
        raise AssertionError("generate was served with discarded weights and the KV cache asleep")
    transport = "reference" if "tensor" in h.engine.capabilities else "disk"
    h.sync(h.models.state(V1), V1, transport)
    h.engine.wake_up(["kv_cache"])
    h.expect_greedy(h.greedy(prompts, 8), prompts, V1, "after sleep(2) and a full update")
