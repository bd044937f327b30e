"""The heavy-tailed row of bench/rollout.py: a stream of requests with grouped lognormal lengths, served by HFEngine's
continuous batching (`submit`, at most CONCURRENCY in flight, the next submitted as each finishes) against
batch-at-a-time `generate` (consecutive batches of CONCURRENCY requests, each waiting for its longest response).

Workload: GROUPS groups of GROUP_SIZE requests (a GRPO group: one prompt, several samples); group g's median length
is drawn from lognormal(log(MEDIAN_TOKENS), GROUP_SIGMA), each sample's `max_new_tokens` from that median times
lognormal(0, SAMPLE_SIGMA), clipped to [MIN_TOKENS, MAX_TOKENS]. Greedy, EOS ignored, so both sides make exactly
the same tokens. The groups arrive in a fixed random order; both sides see the same order and the same cap.
"""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Callable

import torch

from rl_engines.rollout import GenerateRequest, HFEngine, SamplingParams

GROUPS, GROUP_SIZE, CONCURRENCY = 16, 4, 16
MEDIAN_TOKENS, GROUP_SIGMA, SAMPLE_SIGMA = 24, 0.9, 0.4
MIN_TOKENS, MAX_TOKENS = 4, 192
GOAL_RATIO = 1.5


def workload(prompts: list[list[int]], seed: int = 7) -> list[GenerateRequest]:
    """The stream's requests, in arrival order (see the module doc)."""
    generator = torch.Generator().manual_seed(seed)
    requests = []
    for g in range(GROUPS):
        median = MEDIAN_TOKENS * math.exp(GROUP_SIGMA * float(torch.randn((), generator=generator)))
        prompt = tuple(prompts[g % len(prompts)])
        for s in range(GROUP_SIZE):
            tokens = median * math.exp(SAMPLE_SIGMA * float(torch.randn((), generator=generator)))
            budget = int(min(MAX_TOKENS, max(MIN_TOKENS, round(tokens))))
            params = SamplingParams(max_new_tokens=budget, temperature=0.0, ignore_eos=True)
            requests.append(GenerateRequest(f"g{g}s{s}", prompt, params))
    return requests


def continuous(engine: HFEngine, requests: list[GenerateRequest]) -> Callable[[], list[list[int]]]:
    """Submit the stream with at most CONCURRENCY requests in flight -> each request's tokens, in stream order."""

    def run() -> list[list[int]]:
        outputs: dict[str, list[int]] = {}
        pending: dict[concurrent.futures.Future, str] = {}
        queue = list(requests)
        while queue or pending:
            while queue and len(pending) < CONCURRENCY:
                request = queue.pop(0)
                pending[engine.submit(request)] = request.rid
            done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                outputs[pending.pop(future)] = list(future.result().output_ids)
        return [outputs[r.rid] for r in requests]

    return run


def batch_at_a_time(engine: HFEngine, requests: list[GenerateRequest]) -> Callable[[], list[list[int]]]:
    """`generate` on consecutive batches of CONCURRENCY requests -> each request's tokens, in stream order."""

    def run() -> list[list[int]]:
        outputs: list[list[int]] = []
        for start in range(0, len(requests), CONCURRENCY):
            outputs += [list(o.output_ids) for o in engine.generate(requests[start : start + CONCURRENCY])]
        return outputs

    return run
