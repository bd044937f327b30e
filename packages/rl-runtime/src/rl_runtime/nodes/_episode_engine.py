"""The rollout engine seen by workflows: `rl_core.workflows.EpisodeEngine` over an `rl_engines` InferenceEngine.

Each episode gets its own view (`EngineEpisodes.view(index)`) whose requests carry the run's sampling settings and
a seed of (run seed, step, rank, draw, episode, turn), so an episode's draws depend neither on its batchmates nor
on the order the event loop interleaves episodes. Requests go to the engine's `agenerate` when the engine
declares the "continuous_batching" capability (its concurrent requests then share decode steps); otherwise the
requests all waiting episodes made in one pass of the event loop are sent as one batched `generate` call, so
concurrent episodes still share engine batches (HFEngine's `agenerate` today runs each request on its own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rl_core.workflows import Completion
from rl_engines.rollout import GenerateOutput, GenerateRequest, InferenceEngine, SamplingParams
from rl_runtime.nodes._seeds import sample_seed

CONTINUOUS_BATCHING = "continuous_batching"
"""The engine capability under which episodes call `agenerate` directly instead of the batched `generate`."""
_TURN_STRIDE = 1 << 16
"""Seed index of turn t of episode i: i * stride + t (an episode has far fewer turns)."""


class EngineEpisodes:
    """Shared by one draw's episodes: the engine, the sampling settings, the batch of requests waiting."""

    def __init__(
        self,
        engine: InferenceEngine,
        sampling: SamplingParams,
        *,
        seed_parts: tuple[int, ...],
        rid_prefix: str,
        token_budget: int,
    ) -> None:
        self.engine = engine
        self.sampling = sampling
        self.seed_parts = seed_parts
        self.rid_prefix = rid_prefix
        self.token_budget = token_budget
        self.engine_calls = 0
        self._pending: list[tuple[GenerateRequest, asyncio.Future[GenerateOutput]]] = []

    def view(self, index: int) -> EpisodeView:
        """The `EpisodeEngine` of episode `index`."""
        return EpisodeView(self, index)

    async def submit(self, request: GenerateRequest) -> GenerateOutput:
        """`request`'s output: through the engine's `agenerate`, or batched with the other waiting requests."""
        if CONTINUOUS_BATCHING in self.engine.capabilities:
            self.engine_calls += 1
            return await self.engine.agenerate(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GenerateOutput] = loop.create_future()
        self._pending.append((request, future))
        if len(self._pending) == 1:
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        """Send every waiting request as one `generate` call (this blocks the loop: every episode is waiting).

        When the engine refuses the batch (one request overflows the context, say), each request is retried alone,
        so the refusal fails only its own episode. Requests of episodes cancelled meanwhile (`episode_timeout_s`)
        are dropped."""
        batch = [(request, future) for request, future in self._pending if not future.done()]
        self._pending = []
        if not batch:
            return
        try:
            outputs = self._generate([request for request, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], error=exc)
                return
            for request, future in batch:
                try:
                    _settle(future, self._generate([request])[0])
                except Exception as single:
                    _settle(future, error=single)
            return
        for (_, future), output in zip(batch, outputs, strict=True):
            _settle(future, output)

    def _generate(self, requests: list[GenerateRequest]) -> list[GenerateOutput]:
        self.engine_calls += 1
        return list(self.engine.generate(requests))


def _settle(
    future: asyncio.Future[GenerateOutput], output: GenerateOutput | None = None, *, error: Exception | None = None
) -> None:
    """Resolve `future` unless its episode was cancelled meanwhile."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(output)  # pyright: ignore[reportArgumentType]  # output is given when error is not


class EpisodeView:
    """One episode's `EpisodeEngine`: its turns are numbered for their seeds and request ids."""

    def __init__(self, shared: EngineEpisodes, index: int) -> None:
        self._shared = shared
        self._index = index
        self._turn = 0

    @property
    def token_budget(self) -> int:
        """Tokens the episode may add after its prompt (`data.max_response_length`)."""
        return self._shared.token_budget

    async def agenerate(
        self, prompt_ids: Sequence[int], *, max_new_tokens: int | None = None, stop_token_ids: Sequence[int] = ()
    ) -> Completion:
        """A continuation of `prompt_ids`; `max_new_tokens` is capped at `rollout.max_new_tokens`."""
        shared, turn = self._shared, self._turn
        self._turn += 1
        budget = shared.sampling.max_new_tokens
        params = SamplingParams(
            max_new_tokens=budget if max_new_tokens is None else max(1, min(budget, max_new_tokens)),
            temperature=shared.sampling.temperature,
            top_p=shared.sampling.top_p,
            top_k=shared.sampling.top_k,
            seed=sample_seed(*shared.seed_parts, self._index * _TURN_STRIDE + turn),
            stop_token_ids=tuple(stop_token_ids),
        )
        rid = f"{shared.rid_prefix}-{self._index}-{turn}"
        return (await shared.submit(GenerateRequest(rid, tuple(prompt_ids), params))).completion()
