"""An engine stand-in for continuous generation's tests: `submit` returns a Future that the test completes."""

from __future__ import annotations

import concurrent.futures

from rl_engines.rollout import GenerateOutput, GenerateRequest, VersionSpan


class HeldEngine:
    """`submit` returns a Future the test completes with `finish`."""

    def __init__(self) -> None:
        self.requests: dict[str, tuple[GenerateRequest, concurrent.futures.Future[GenerateOutput]]] = {}

    def submit(self, request: GenerateRequest) -> concurrent.futures.Future[GenerateOutput]:
        future: concurrent.futures.Future[GenerateOutput] = concurrent.futures.Future()
        self.requests[request.rid] = (request, future)
        return future

    def finish(self, uid: int, spans: tuple[tuple[int, int], ...]) -> None:
        """Complete request `uid` with one token per (version, count) of `spans`, in order."""
        request, future = self.requests[str(uid)]
        tokens, version_spans, start = [], [], 0
        for version, count in spans:
            tokens += [7] * count
            version_spans.append(VersionSpan(version, start, start + count))
            start += count
        output = GenerateOutput(
            request.rid, tuple(tokens), (-0.5,) * len(tokens), "length", spans[-1][0], len(request.input_ids),
            tuple(version_spans),
        )  # fmt: skip
        future.set_result(output)
