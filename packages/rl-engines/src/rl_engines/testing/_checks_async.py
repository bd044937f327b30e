"""Conformance checks of the asynchronous request API: `agenerate` from one event loop, `cancel`, errors."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

from rl_engines.rollout import GenerateOutput, PromptTooLongError
from rl_engines.testing._harness import Harness, expect
from rl_engines.testing._models import V1

CONCURRENT = 8
THROTTLE_S = 0.002
STARTED_TOKENS = 3


def check_agenerate_concurrent(h: Harness) -> None:
    """8 `agenerate`s awaited together from one event loop (varied prompt and output lengths) give the outputs of
    sequential greedy calls, each under its own rid; `submit` futures (half of them) give the same."""
    h.reset()
    prompts = h.models.prompts(CONCURRENT, seed=13)
    lengths = [4 + (7 * i) % 17 for i in range(CONCURRENT)]
    requests = [h.request(f"a{i}", p, n) for i, (p, n) in enumerate(zip(prompts, lengths, strict=True))]
    alone = [h.engine.generate([request])[0] for request in requests]

    async def together() -> list[GenerateOutput]:
        return list(await asyncio.gather(*(h.engine.agenerate(request) for request in requests)))

    gathered = asyncio.run(asyncio.wait_for(together(), h.timeout_s))
    futures = [h.engine.submit(request) for request in requests[::2]]
    submitted = [future.result(timeout=h.timeout_s) for future in futures]
    for outputs, how, step in ((gathered, "agenerate", 1), (submitted, "submit", 2)):
        for request, a, b in zip(requests[::step], alone[::step], outputs, strict=True):
            expect(b.rid == request.rid, f"{how}: request {request.rid} got rid {b.rid!r}")
            expect(a.output_ids == b.output_ids, f"{how} {request.rid}: {b.output_ids} != sequential {a.output_ids}")
            expect(b.finish_reason == "length", f"{how} {request.rid}: finish {b.finish_reason!r}")
            expect(b.weight_version == V1, f"{how} {request.rid}: version {b.weight_version!r}")
    h.expect_greedy(gathered, prompts, V1, "concurrent agenerate")


def check_cancel(h: Harness) -> None:
    """`cancel(rid)` ends a running request with "abort" and its partial tokens; a request still queued behind a
    pause ends "abort" with none; unknown rids are a no-op; the engine keeps serving."""
    h.require("abort")
    h.reset()
    prompt = h.models.prompts(1, seed=61)[0]
    budget = h.models.spec.context_len - len(prompt) - 1
    started = threading.Event()
    count = [0]

    def on_tokens(events: object) -> None:
        count[0] += 1
        if count[0] >= STARTED_TOKENS:
            started.set()
        time.sleep(THROTTLE_S)

    streams = "stream" in h.engine.capabilities
    future = h.engine.submit(h.request("cancel-me", prompt, budget), **({"on_tokens": on_tokens} if streams else {}))
    if streams:
        expect(started.wait(h.timeout_s), "the request produced no tokens")
    else:
        deadline = time.monotonic() + h.timeout_s
        while h.engine.status().in_flight == 0 and not future.done():
            expect(time.monotonic() < deadline, "the request never became in-flight")
            time.sleep(0.005)
        time.sleep(0.05)
    h.engine.cancel("no-such-rid")
    h.engine.cancel("cancel-me")
    output = future.result(timeout=h.timeout_s)
    expect(output.finish_reason == "abort", f"finish {output.finish_reason!r} after cancel")
    expect(0 < len(output.output_ids) < budget, f"{len(output.output_ids)} tokens after cancel (of {budget})")
    expect(len(output.output_logprobs or ()) == len(output.output_ids), "log-prob count differs from token count")
    h.engine.cancel("cancel-me")  # finished: a no-op
    if "pause" in h.engine.capabilities:
        h.engine.pause("abort", timeout_s=h.timeout_s)
        queued = h.engine.submit(h.request("queued", prompt, 4))
        time.sleep(0.1)
        h.engine.cancel("queued")
        h.engine.resume()
        early = queued.result(timeout=h.timeout_s)
        expect(early.finish_reason == "abort", f"a request cancelled while queued finished {early.finish_reason!r}")
    prompts = h.models.prompts(2)
    h.expect_greedy(h.greedy(prompts, 6), prompts, V1, "after cancel")


def check_submit_errors(h: Harness) -> None:
    """`submit` returns at once even for a bad request; the error arrives through the Future (and `agenerate`
    raises it); other requests are unaffected."""
    h.reset()
    long_prompt = [1] * h.models.spec.context_len
    bad = h.engine.submit(h.request("too-long", long_prompt, 4))
    good = h.engine.submit(h.request("fine", h.models.prompts(1)[0], 4))
    try:
        bad.result(timeout=h.timeout_s)
    except PromptTooLongError:
        pass
    else:
        raise AssertionError("a too-long prompt did not fail its Future with PromptTooLongError")

    async def awaited() -> None:
        await h.engine.agenerate(h.request("too-long-2", long_prompt, 4))

    try:
        asyncio.run(awaited())
    except PromptTooLongError:
        pass
    else:
        raise AssertionError("agenerate of a too-long prompt did not raise PromptTooLongError")
    expect(good.result(timeout=h.timeout_s).finish_reason == "length", "a good request failed beside a bad one")
    expect(isinstance(bad, concurrent.futures.Future), "submit did not return a concurrent.futures.Future")
