"""Continuous generation's pool on a rollout slot, against an engine stand-in whose requests finish when the test
says: whole groups in the order they finish, first-token and per-token versions of interrupted samples, the flush."""

from __future__ import annotations

import concurrent.futures

import pytest

from rl_core.schema import GROUP_ID, POLICY_VERSION, RESPONSE_MASK, TOKEN_POLICY_VERSION, UID
from rl_core.workflows import NO_VERSION
from rl_engines.rollout import GenerateOutput, GenerateRequest, SamplingParams, VersionSpan
from rl_runtime.nodes import PromptItem
from rl_runtime.nodes._continuous import GenerationPool
from rl_runtime.nodes._seeds import sample_uid
from rl_runtime.workers import StepDataError

N = 2
"""Samples per prompt."""


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


def _pool(engine: HeldEngine, prompts: int, draw: int = 0) -> GenerationPool:
    pool = GenerationPool()
    items = [PromptItem((1, 2, 3 + j)) for j in range(prompts)]
    pool.submit(
        engine,  # pyright: ignore[reportArgumentType]  # the stand-in has the one method the pool calls
        items,
        N,
        SamplingParams(max_new_tokens=4),
        seed_parts=(0, 0, 0, draw),
        uid_of=(0, 0, draw),
    )
    return pool


def test_a_step_takes_the_groups_that_finished_whole_and_leaves_the_rest_in_flight() -> None:
    engine = HeldEngine()
    pool = _pool(engine, prompts=3)
    uid = [sample_uid(0, 0, 0, i) for i in range(3 * N)]
    engine.finish(uid[0], ((0, 4),))  # group 0 half done
    engine.finish(uid[2], ((0, 2),))
    engine.finish(uid[3], ((0, 3),))  # group 1 done
    engine.finish(uid[4], ((0, 1),))
    engine.finish(uid[5], ((0, 1),))  # group 2 done
    data = pool.take(2, timeout_s=5.0)
    assert data.batch[UID].tolist() == uid[2:6] and len(pool) == 1
    assert data.batch[GROUP_ID].tolist() == [sample_uid(0, 0, 0, 1)] * N + [sample_uid(0, 0, 0, 2)] * N
    with pytest.raises(StepDataError, match=r"fewer than 1 prompt groups finished in 0.05s"):
        pool.take(1, timeout_s=0.05)  # group 0's second sample is still generating


def test_an_interrupted_sample_records_its_first_tokens_version_and_every_tokens() -> None:
    engine = HeldEngine()
    pool = _pool(engine, prompts=1)
    first, second = (sample_uid(0, 0, 0, i) for i in range(N))
    engine.finish(first, ((3, 2), (4, 3)))  # parked by a weight update after 2 tokens, 3 more under version 4
    engine.finish(second, ((4, 2),))
    data = pool.flush(timeout_s=5.0)
    assert data is not None and len(pool) == 0 and pool.flush(timeout_s=5.0) is None
    assert data.batch[POLICY_VERSION].tolist() == [3, 4]
    versions = data.batch[TOKEN_POLICY_VERSION]
    response = data.batch[RESPONSE_MASK].bool()
    assert versions[0][response[0]].tolist() == [3, 3, 4, 4, 4]
    assert versions[1][response[1]].tolist() == [4, 4]
    assert (versions[~response] == NO_VERSION).all()
