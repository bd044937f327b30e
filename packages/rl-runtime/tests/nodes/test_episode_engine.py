"""The engine adapter workflows generate with: concurrent episodes share batched `generate` calls, one refused
request fails only its own episode, and an engine with continuous batching gets `agenerate` calls instead."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rl_engines.rollout import GenerateOutput, GenerateRequest, InvalidRequestError, SamplingParams
from rl_runtime.nodes._episode_engine import CONTINUOUS_BATCHING, EngineEpisodes

SAMPLING = SamplingParams(max_new_tokens=4, temperature=1.0)


class RecordingEngine:
    """Test double of an InferenceEngine: replies with the prompt's last token twice, refuses prompts holding 0."""

    def __init__(self, capabilities: frozenset[str] = frozenset()) -> None:
        self.capabilities = capabilities
        self.batches: list[list[str]] = []
        self.async_calls = 0

    def _reply(self, request: GenerateRequest) -> GenerateOutput:
        last = request.input_ids[-1]
        return GenerateOutput(request.rid, (last, last), (-0.5, -0.5), "stop", 3, len(request.input_ids))

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        self.batches.append([r.rid for r in requests])
        if any(0 in r.input_ids for r in requests):
            raise InvalidRequestError("prompt holds token 0")
        return [self._reply(r) for r in requests]

    async def agenerate(self, request: GenerateRequest) -> GenerateOutput:
        self.async_calls += 1
        await asyncio.sleep(0)
        return self._reply(request)


def _episodes(engine: Any) -> EngineEpisodes:
    return EngineEpisodes(engine, SAMPLING, seed_parts=(1, 2), rid_prefix="s", token_budget=16)


async def _two_turns(shared: EngineEpisodes, index: int, first: int) -> tuple[int, ...]:
    view = shared.view(index)
    one = await view.agenerate([first], max_new_tokens=9)
    two = await view.agenerate([first, *one.token_ids, 5])
    return (*one.token_ids, *two.token_ids)


def test_concurrent_turns_share_one_generate_call_per_turn() -> None:
    engine = RecordingEngine()
    shared = _episodes(engine)

    async def main() -> list[tuple[int, ...]]:
        return list(await asyncio.gather(*(_two_turns(shared, i, 10 + i) for i in range(4))))

    assert asyncio.run(main()) == [(10 + i, 10 + i, 5, 5) for i in range(4)]
    assert engine.batches == [[f"s-{i}-0" for i in range(4)], [f"s-{i}-1" for i in range(4)]]
    assert shared.engine_calls == 2


def test_a_refused_request_fails_only_its_own_episode() -> None:
    engine = RecordingEngine()
    shared = _episodes(engine)

    async def main() -> list[object]:
        return list(await asyncio.gather(*(_two_turns(shared, i, i) for i in range(3)), return_exceptions=True))

    results = asyncio.run(main())
    assert isinstance(results[0], InvalidRequestError)
    assert results[1:] == [(1, 1, 5, 5), (2, 2, 5, 5)]


def test_an_engine_with_continuous_batching_gets_agenerate_calls() -> None:
    engine = RecordingEngine(frozenset({CONTINUOUS_BATCHING}))
    shared = _episodes(engine)
    assert asyncio.run(_two_turns(shared, 0, 7)) == (7, 7, 5, 5)
    assert engine.async_calls == 2 and engine.batches == []


def test_requests_carry_the_run_sampling_a_capped_budget_and_per_turn_seeds() -> None:
    seen: list[GenerateRequest] = []
    engine = RecordingEngine()
    original = engine.generate

    def spy(requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        seen.extend(requests)
        return original(requests)

    engine.generate = spy  # type: ignore[method-assign]
    asyncio.run(_two_turns(_episodes(engine), 3, 9))
    assert [r.sampling.max_new_tokens for r in seen] == [4, 4]  # 9 asked, capped at rollout.max_new_tokens
    assert seen[0].sampling.seed != seen[1].sampling.seed
    assert all(r.sampling.temperature == SAMPLING.temperature for r in seen)


def test_an_episode_cancelled_while_its_request_waits_does_not_stall_the_others() -> None:
    engine = RecordingEngine()
    shared = _episodes(engine)

    async def main() -> tuple[int, ...]:
        doomed = asyncio.ensure_future(shared.view(0).agenerate([1]))
        await asyncio.sleep(0)  # its request now waits for the batch
        doomed.cancel()
        survivor = await asyncio.wait_for(shared.view(1).agenerate([2]), timeout=5)
        return survivor.token_ids

    assert asyncio.run(main()) == (2, 2)
    assert engine.batches == [["s-1-0"]]
