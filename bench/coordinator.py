"""Moving samples between stages: our DataCoordinator (by reference) against a gather-then-scatter actor and siiRL.

Workload (bench/_coordinator_workload.py): 8 producers x batches x 8 samples; a sample is a 1024-token int64
payload (8 KiB, one row of a producer's `(8, 1024)` batch tensor) plus a SampleInfo with a token count drawn per
sample. The consumer takes steps of 128 samples, split over the ranks with Karmarkar–Karp balancing.

Implementations, each measured in three phases (all puts, then all gets, then all fetches) whose wall times
are divided by the samples moved; end to end is their sum:
  ours     put:   every producer calls CoordinatorClient.put_batch(wait=False) per batch, then flush(), on the
                  one client it keeps for all runs (as a pipeline worker keeps one); the client snapshots each
                  batch into its staging ring (reused memory) and coalesces (a lone batch goes at once, the
                  batches queued while it is unacknowledged go together: one actor call, payloads in ray.puts of
                  up to 4 MiB);
           get:   every rank calls get_refs(ReadRequest) for every step (infos, refs, positions back);
           fetch: every rank fetches its payloads (fetch_payloads: one ray.get over the distinct refs).
           Defaults: keep_batches=True (runs of samples sharing a ref balanced whole, then single-sample
           exchanges).
  ours ps  the same with keep_batches=False (balanced sample by sample).
  stream   ours, every rank taking its shares of all steps from one CoordinatorClient.stream_refs call instead of
           a get_refs call per step: the coordinator sends each share when its step is partitioned, with the next
           shares ready then (up to MAX_SHARES_PER_ITEM); here every step is ready when the ranks start.
  per-batch  the Ray operations of a by-reference design that puts each batch on its own, and nothing else:
           per batch a ray.put and an actor call carrying its ref, per rank and step an actor call returning
           refs to whole batches (as many samples as the rank's share) and a ray.get of them; no infos, no
           balancing. What coalescing saves against.
  gather   a driver-style actor that receives the payloads themselves (put) and returns each rank's rows,
           stacked, for every step (get; the data comes back with the reply, so fetch is 0).
  siiRL    siiRL 0.2.0's DataCoordinator in its own interpreter and Ray instance (bench/_coordinator_siirl.py,
           --siirl-python, default $SIIRL_PYTHON), lockstep, one ray.put per sample, scaled-down counts.
Ranks are emulated by 4 consumer actors (rank r on actor r % 4), so 32 ranks are 32 sequential callers spread
over 4 processes; producers are 8 actors. All our actors run on one Ray instance with 2 CPUs.

Three blocks, each alternating its implementations (A, B, ..., then the reverse order, ...) for --repeats
repetitions after one warm-up each, a second's pause before every run; medians are reported:
  1. ours, ours ps, stream, per-batch (the figures the goals are judged on);
  2. the rank sweep, ours against gather at each rank count;
  3. siiRL against stream. siiRL's worker brings its own Ray instance (an idle one with a dozen actors used
     about 8 % of one core here), started for this block only: the other blocks run on one Ray instance, as a
     deployment does, and both sides of this comparison share the second instance's load.
Counts are scaled down from 8 x 200 x 8 (printed at the start) to keep the run short on 2 shared cores; the full
count was no cheaper per sample (one run: 78 us against 62 at 64 batches per producer).
"Bytes through the coordinator" is the actor's own estimate (pickled size of the infos, refs and positions
crossing it, in and out, per sample); for the gather actor it is the payload plus info, in and out.

Last lines (the rank sweep compares gather with ours reading by get, a call per rank and step each):
    ours reading by a get per rank and step: <ours, 4 ranks> goal=50 met|missed
    bytes through coordinator per sample: <ours> goal=1024 met|missed
    RESULT coordinator us_per_sample=<stream, 4 ranks> ratio=<gather_us / ours_us at 8 ranks> goal=50 met|missed

Run: python bench/coordinator.py [--repeats 5] [--siirl-python PATH]   (2 to 3 minutes on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import ray
import torch
from _coordinator_siirl import SiirlRunner
from _coordinator_workload import (
    BATCHES,
    CONSUMER_ACTORS,
    MAIN_BATCHES,
    MAIN_RANKS,
    PRODUCERS,
    PROMPT_TOKENS,
    SAMPLES_PER_BATCH,
    SIIRL_STEPS,
    STEP_BATCH,
    SWEEP_BATCHES,
    SWEEP_RANKS,
    TOKENS,
    TOTAL_SAMPLES,
    WARMUP_BATCHES,
    batch_payloads,
    consumer_ranks,
)

from rl_coordinator import SampleInfo
from rl_coordinator.balancing import balance_across_ranks
from rl_coordinator.coordinator import (
    METRIC_BYTES_THROUGH,
    CoordinatorClient,
    ReadRequest,
    StepSpec,
    fetch_payloads,
    start_coordinator,
)

GOAL_US, GOAL_BYTES = 50.0, 1024.0
GET_TIMEOUT_S = 120.0
SETTLE_S = 1.0
"""Pause before every run: Ray frees the previous run's objects and references asynchronously, and that work
landed in the next run's put phase (one A/B: ours' put 28.7 us/sample right after per-batch's run, 23.2 after
a pause)."""


def _make_batches(producer: int, batches: int) -> list[tuple[list[SampleInfo], torch.Tensor]]:
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
        self.batches = _make_batches(index, batches)
        self.client: CoordinatorClient | None = None

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

    def read_ours(
        self, coordinator: Any, edge: str, ranks: list[int], spec: StepSpec, steps: int, stream: bool
    ) -> list[list[int]]:
        """Every step's share of each rank, by a get_refs call per step or, with `stream`, from one stream_refs call
        per rank; returns the token load per [step][rank of this actor]."""
        client = CoordinatorClient(coordinator, timeout_s=GET_TIMEOUT_S)
        streams = [client.stream_refs(ReadRequest(edge, 0, rank, spec), steps) for rank in ranks] if stream else []
        loads = []
        for step in range(steps):
            if stream:
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

    def run_ours(self, dp_size: int, batches: int, keep_batches: bool = True, stream: bool = False) -> dict[str, float]:
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
        loads = ray.get([c.read_ours.remote(self.coordinator, edge, r, spec, steps, stream) for c, r in used])
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


def _verdict(us: float) -> str:
    return "met" if us <= GOAL_US else "missed"


def _total(run: dict[str, float]) -> float:
    return run["put"] + run["get"] + run["fetch"]


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(_total(r) if key == "total" else r[key] for r in runs)


def _row(name: str, runs: list[dict[str, float]]) -> str:
    cells = "  ".join(f"{key}={_median(runs, key):8.1f}" for key in ("put", "get", "fetch", "total"))
    return f"  {name:<8} {cells}   (us per sample, median of {len(runs)})"


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per implementation (>= 5 for the report)")
    parser.add_argument("--siirl-python", default=os.environ.get("SIIRL_PYTHON", ""), help="interpreter with siirl")
    return parser.parse_args()


def _alternate(measure: dict[str, Callable[[], dict[str, float]]], repeats: int) -> dict[str, list[dict[str, float]]]:
    """`repeats` runs of each, a pause before every run, every other repetition in reverse order (so none
    always follows the same one)."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in measure}
    for repetition in range(repeats):
        for name in list(measure)[:: -1 if repetition % 2 else 1]:
            time.sleep(SETTLE_S)
            runs[name].append(measure[name]())
    return runs


def _report_main(runs: dict[str, list[dict[str, float]]]) -> None:
    print(f"\n{MAIN_RANKS} ranks, {PRODUCERS * MAIN_BATCHES * SAMPLES_PER_BATCH} samples:")
    print(_row("ours", runs["ours"]) + "   (keep_batches=True, the default)")
    print(_row("ours ps", runs["ours ps"]) + "   (keep_batches=False: balanced sample by sample)")
    print(_row("stream", runs["stream"]) + "   (ours, each rank's shares from one stream_refs call)")
    print(_row("per-batch", runs["per-batch"]) + "   (Ray's operations of one put per batch; see the docstring)")
    for name in ("ours", "ours ps", "stream"):
        overfetch = statistics.median(r["overfetch"] for r in runs[name])
        balance = statistics.median(r["max_over_mean"] for r in runs[name])
        print(
            f"  {name:<8} reads objects holding {overfetch:.2f}x the samples it uses; "
            f"token load max/mean per step {balance:.5f}"
        )
    print(f"  ours / per-batch end to end: {_median(runs['ours'], 'total') / _median(runs['per-batch'], 'total'):.2f}x")


def _compare_siirl(harness: Harness, siirl_python: str, repeats: int) -> None:
    """siiRL against the stream path, alternating, while both Ray instances are up (each slows the other a
    little: that is why the main figures are taken before siiRL's instance starts)."""
    siirl = SiirlRunner(siirl_python)
    if siirl.proc is None:
        print(f"\nsiiRL was not measured in this run: {siirl.reason}")
        return
    siirl.run(steps=1)  # warm-up
    runs = _alternate(
        {"stream": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, stream=True), "siiRL": siirl.run}, repeats
    )
    siirl.close()
    print("\nsiiRL beside ours, both Ray instances up:")
    print(_row("stream", runs["stream"]))
    print(_row("siiRL", runs["siiRL"]) + f"   ({SIIRL_STEPS * STEP_BATCH} samples, lockstep)")
    print(
        f"  siiRL bytes through its coordinator per sample: {statistics.median(r['bytes'] for r in runs['siiRL']):.0f}"
    )
    ratio = _median(runs["siiRL"], "total") / _median(runs["stream"], "total")
    print(f"  siiRL / ours (stream) end to end: {ratio:.1f}x (same run)")


def main() -> None:
    args = _parse()
    began = time.perf_counter()
    print(
        f"config: {PRODUCERS} producers x {BATCHES} batches x {SAMPLES_PER_BATCH} samples of {TOKENS} int64 tokens "
        f"({SAMPLES_PER_BATCH * TOKENS * 8 // 1024} KiB per batch), steps of {STEP_BATCH}, {MAIN_RANKS} ranks, "
        f"KK balancing; ranks on {CONSUMER_ACTORS} consumer actors; {args.repeats} repetitions, alternating"
    )
    print(
        f"scaled: {MAIN_BATCHES} batches per producer at {MAIN_RANKS} ranks and {SWEEP_BATCHES} in the rank sweep "
        f"{SWEEP_RANKS} (not {BATCHES}); siiRL {SIIRL_STEPS} lockstep steps ({SIIRL_STEPS * STEP_BATCH} samples, "
        f"not {TOTAL_SAMPLES})"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    harness = Harness()
    harness.run_ours(MAIN_RANKS, WARMUP_BATCHES)
    harness.run_per_batch(MAIN_RANKS, WARMUP_BATCHES)
    harness.run_gather(MAIN_RANKS, WARMUP_BATCHES)

    runs = _alternate(
        {
            "ours": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES),
            "ours ps": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, keep_batches=False),
            "stream": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, stream=True),
            "per-batch": lambda: harness.run_per_batch(MAIN_RANKS, MAIN_BATCHES),
        },
        args.repeats,
    )
    _report_main(runs)

    ratios: dict[int, float] = {}
    print(f"\nrank sweep, {PRODUCERS * SWEEP_BATCHES * SAMPLES_PER_BATCH} samples:")
    for dp_size in SWEEP_RANKS:
        sweep = _alternate(
            {
                "ours": lambda dp_size=dp_size: harness.run_ours(dp_size, SWEEP_BATCHES),
                "gather": lambda dp_size=dp_size: harness.run_gather(dp_size, SWEEP_BATCHES),
            },
            args.repeats,
        )
        ratios[dp_size] = _median(sweep["gather"], "total") / _median(sweep["ours"], "total")
        print(f" {dp_size} ranks:")
        print(_row("ours", sweep["ours"]))
        print(_row("gather", sweep["gather"]) + f"   gather/ours = {ratios[dp_size]:.2f}x")

    _compare_siirl(harness, args.siirl_python, args.repeats)
    bytes_ours = harness.bytes_through()
    info_bytes = len(pickle.dumps(_make_batches(0, 1)[0][0])) / SAMPLES_PER_BATCH
    print(f"\ngather actor bytes through per sample (payload + info, in and out): {2 * (TOKENS * 8 + info_bytes):.0f}")
    print(f"wall time {time.perf_counter() - began:.0f} s")
    ray.shutdown()
    by_get, us = _median(runs["ours"], "total"), _median(runs["stream"], "total")
    print(f"ours reading by a get per rank and step: {by_get:.1f} us/sample goal={GOAL_US:.0f} {_verdict(by_get)}")
    bytes_verdict = "met" if bytes_ours <= GOAL_BYTES else "missed"
    print(f"bytes through coordinator per sample: {bytes_ours:.0f} goal={GOAL_BYTES:.0f} {bytes_verdict}")
    print(f"RESULT coordinator us_per_sample={us:.1f} ratio={ratios[8]:.2f} goal={GOAL_US:.0f} {_verdict(us)}")


if __name__ == "__main__":
    main()
