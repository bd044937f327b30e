"""The actors and runs of bench/coordinator.py: producers, consumers, the per-batch and gather baselines, and the
Harness that times one run of each (all puts, then all gets, then all fetches)."""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections import deque
from typing import Any

import ray
import torch
from _coordinator_workload import (
    BATCHES,
    CONSUMER_ACTORS,
    PRODUCERS,
    PROMPT_TOKENS,
    SAMPLES_PER_BATCH,
    STEP_BATCH,
    batch_payloads,
    consumer_ranks,
)

from rl_coordinator import SampleInfo
from rl_coordinator.coordinator import (
    METRIC_BYTES_THROUGH,
    CoordinatorClient,
    ReadRequest,
    StepSpec,
    fetch_payloads,
    start_coordinator,
)
from rl_core.balancing import balance_across_ranks

# Ray worker processes cannot import bench/ modules by name; ship this module's actors by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

GET_TIMEOUT_S = 120.0


def freeze_startup_heap() -> None:
    """What every actor of the benchmark does once built, as the coordinator actor and long-running workers should:
    `gc.freeze()`, which leaves the objects that exist now (Ray's and torch's, ~215k per process) out of every
    later collection. A full collection scanned them all (270 ms in one consumer on 2 cores) whenever enough
    new objects had survived, so an actor paid it every few runs in whichever phase it fell.
    """
    gc.freeze()


def make_batches(producer: int, batches: int) -> list[tuple[list[SampleInfo], torch.Tensor]]:
    """(infos, payload) per batch: uids unique per producer, token counts from the shared workload."""
    return [
        (
            [
                SampleInfo(f"p{producer}-b{b}-s{s}", producer * batches + b, PROMPT_TOKENS, n - PROMPT_TOKENS)
                for s, n in enumerate(lengths)
            ],
            payload,
        )
        for b, (lengths, payload) in enumerate(batch_payloads(producer, batches))
    ]


@ray.remote(num_cpus=0)
class Producer:
    """Holds its batches (built before any timing) and puts them on request."""

    def __init__(self, index: int, batches: int) -> None:
        self.batches = make_batches(index, batches)
        self.client: CoordinatorClient | None = None
        freeze_startup_heap()

    def put_ours(self, coordinator: Any, edge: str, count: int) -> int:
        # One client for the producer's life, as a pipeline worker keeps one: its staging memory stays warm.
        if self.client is None:
            self.client = CoordinatorClient(coordinator)
        client = self.client
        done = [client.put_batch(edge, infos, payload, wait=False) for infos, payload in self.batches[:count]]
        client.flush()
        assert all(isinstance(future.result(), int) for future in done)
        return count * SAMPLES_PER_BATCH

    def put_per_batch(self, per_batch: Any, count: int) -> int:
        ray.get([per_batch.put.remote([ray.put(payload)]) for _, payload in self.batches[:count]])
        return count * SAMPLES_PER_BATCH

    def put_gather(self, gather: Any, count: int) -> int:
        ray.get([gather.put.remote(infos, payload) for infos, payload in self.batches[:count]])
        return count * SAMPLES_PER_BATCH


@ray.remote(num_cpus=0)
class Consumer:
    """Plays the ranks r with r % CONSUMER_ACTORS == its index, one after another."""

    def __init__(self) -> None:
        self.selections: list[Any] = []
        self.refs: list[list[Any]] = []
        freeze_startup_heap()

    def read_ours(
        self, coordinator: Any, edge: str, ranks: list[int], spec: StepSpec, steps: int, shares_per_item: int | None
    ) -> list[list[int]]:
        """Every step's share of each rank, by a get_refs call per step (`shares_per_item` None) or from one
        stream_refs call per rank, up to `shares_per_item` shares an item; returns the token load per [step][rank
        of this actor]."""
        client = CoordinatorClient(coordinator, timeout_s=GET_TIMEOUT_S)
        streams = []
        if shares_per_item is not None:
            streams = [
                client.stream_refs(ReadRequest(edge, 0, rank, spec), steps, max_shares_per_item=shares_per_item)
                for rank in ranks
            ]
        loads = []
        for step in range(steps):
            if streams:
                shares = [next(shares_of_rank) for shares_of_rank in streams]
            else:
                shares = [client.get_refs(ReadRequest(edge, step, rank, spec)) for rank in ranks]
            self.selections.extend(shares)
            loads.append([sum(info.total_tokens for info in share.infos) for share in shares])
        return loads

    def fetch_ours(self) -> int:
        """Samples fetched."""
        return sum(len(fetch_payloads(selection)) for selection in self.selections)

    def objects_read(self) -> int:
        """Samples held by the objects the last fetch read (untimed; to report the over-fetch)."""
        held = sum(len(ray.get(ref)) for selection in self.selections for ref in set(selection.refs))
        self.selections = []
        return held

    def get_per_batch(self, per_batch: Any, ranks: list[int], dp_size: int, steps: int) -> None:
        self.refs = [ray.get(per_batch.get.remote(step, rank, dp_size)) for step in range(steps) for rank in ranks]

    def fetch_per_batch(self) -> int:
        fetched = sum(len(payload) for refs in self.refs for payload in ray.get(refs))
        self.refs = []
        return fetched

    def get_gather(self, gather: Any, ranks: list[int], dp_size: int, steps: int) -> int:
        got = 0
        for step in range(steps):
            for rank in ranks:
                _, rows = ray.get(gather.get.remote(step, rank, dp_size))
                got += rows.shape[0]
        return got


@ray.remote(num_cpus=0, max_concurrency=1024)
class PerBatch:
    """Keeps batch refs in arrival order and hands each rank of a step whole batches: Ray's cost, no bookkeeping."""

    def __init__(self) -> None:
        self.refs: list[Any] = []
        freeze_startup_heap()

    async def put(self, refs: list[Any]) -> None:
        self.refs.extend(refs)

    async def get(self, step: int, rank: int, dp_size: int) -> list[Any]:
        per_rank = STEP_BATCH // dp_size // SAMPLES_PER_BATCH or 1
        start = step * STEP_BATCH // SAMPLES_PER_BATCH + rank * per_rank
        return self.refs[start : start + per_rank]


@ray.remote(num_cpus=0, max_concurrency=1024)
class GatherScatter:
    """The baseline: payloads travel through this one process, in and out, with the same balancing."""

    def __init__(self) -> None:
        import asyncio

        self.samples: deque[tuple[Any, Any]] = deque()
        self.steps: dict[int, list[Any]] = {}
        self.more = asyncio.Condition()
        freeze_startup_heap()

    async def put(self, infos: list[Any], payload: Any) -> None:
        self.samples.extend(zip(infos, payload, strict=True))
        async with self.more:
            self.more.notify_all()

    async def get(self, step: int, rank: int, dp_size: int) -> tuple[list[Any], Any]:
        async with self.more:
            await self.more.wait_for(lambda: step in self.steps or len(self.samples) >= STEP_BATCH)
        if step not in self.steps:
            taken = [self.samples.popleft() for _ in range(STEP_BATCH)]
            parts = balance_across_ranks([info.total_tokens for info, _ in taken], dp_size)
            self.steps[step] = [taken, parts, 0]
        entry = self.steps[step]
        mine = [entry[0][i] for i in entry[1][rank]]
        entry[2] += 1
        if entry[2] == dp_size:
            del self.steps[step]
        return [info for info, _ in mine], torch.stack([row for _, row in mine])

    async def reset(self) -> None:
        self.samples.clear()
        self.steps.clear()


def _per_sample(put_s: float, get_s: float, fetch_s: float, samples: int, moved: int) -> dict[str, float]:
    return {"put": put_s / samples * 1e6, "get": get_s / moved * 1e6, "fetch": fetch_s / moved * 1e6}


class Harness:
    """Actors shared by every repetition; each repetition of ours uses a fresh edge, of per-batch a fresh actor."""

    def __init__(self) -> None:
        self.producers = [Producer.remote(p, BATCHES) for p in range(PRODUCERS)]
        self.consumers = [Consumer.remote() for _ in range(CONSUMER_ACTORS)]
        self.coordinator = start_coordinator()
        self.gather = GatherScatter.remote()
        self.runs = 0
        ray.get([p.put_gather.remote(self.gather, 0) for p in self.producers])  # wait for the actors to start

    def _used(self, dp_size: int) -> list[tuple[Any, list[int]]]:
        return [(c, r) for c, r in zip(self.consumers, consumer_ranks(dp_size), strict=True) if r]

    def run_ours(
        self, dp_size: int, batches: int, keep_batches: bool = True, shares_per_item: int | None = None
    ) -> dict[str, float]:
        """One run of ours: ranks read by a get per step, or by streams of up to `shares_per_item` shares an item."""
        self.runs += 1
        edge = f"bench-{self.runs}"
        samples = PRODUCERS * batches * SAMPLES_PER_BATCH
        steps = samples // STEP_BATCH
        spec = StepSpec(dp_size, STEP_BATCH, keep_batches=keep_batches)
        used = self._used(dp_size)
        start = time.perf_counter()
        ray.get([p.put_ours.remote(self.coordinator, edge, batches) for p in self.producers])
        put_s = time.perf_counter() - start
        start = time.perf_counter()
        loads = ray.get([c.read_ours.remote(self.coordinator, edge, r, spec, steps, shares_per_item) for c, r in used])
        get_s = time.perf_counter() - start
        start = time.perf_counter()
        fetched = ray.get([c.fetch_ours.remote() for c, _ in used])
        fetch_s = time.perf_counter() - start
        moved = steps * STEP_BATCH
        assert sum(fetched) == moved, fetched
        held = sum(ray.get([c.objects_read.remote() for c, _ in used]))
        step_loads = [[load for actor in loads for load in actor[step]] for step in range(steps)]
        run = _per_sample(put_s, get_s, fetch_s, samples, moved)
        run["overfetch"] = held / moved
        run["max_over_mean"] = statistics.median(max(x) * len(x) / sum(x) for x in step_loads)
        return run

    def run_per_batch(self, dp_size: int, batches: int) -> dict[str, float]:
        per_batch = PerBatch.remote()
        samples = PRODUCERS * batches * SAMPLES_PER_BATCH
        steps = samples // STEP_BATCH
        used = self._used(dp_size)
        start = time.perf_counter()
        ray.get([p.put_per_batch.remote(per_batch, batches) for p in self.producers])
        put_s = time.perf_counter() - start
        start = time.perf_counter()
        ray.get([c.get_per_batch.remote(per_batch, r, dp_size, steps) for c, r in used])
        get_s = time.perf_counter() - start
        start = time.perf_counter()
        fetched = sum(ray.get([c.fetch_per_batch.remote() for c, _ in used]))
        fetch_s = time.perf_counter() - start
        ray.kill(per_batch)
        return _per_sample(put_s, get_s, fetch_s, samples, fetched)

    def run_gather(self, dp_size: int, batches: int) -> dict[str, float]:
        ray.get(self.gather.reset.remote())
        samples = PRODUCERS * batches * SAMPLES_PER_BATCH
        steps = samples // STEP_BATCH
        start = time.perf_counter()
        ray.get([p.put_gather.remote(self.gather, batches) for p in self.producers])
        put_s = time.perf_counter() - start
        start = time.perf_counter()
        got = ray.get([c.get_gather.remote(self.gather, r, dp_size, steps) for c, r in self._used(dp_size)])
        get_s = time.perf_counter() - start
        assert sum(got) == steps * STEP_BATCH, got
        return _per_sample(put_s, get_s, 0.0, samples, steps * STEP_BATCH)

    def bytes_through(self) -> float:
        return ray.get(self.coordinator.metrics.remote())[METRIC_BYTES_THROUGH]
