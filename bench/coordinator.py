"""Moving samples between stages: our DataCoordinator (by reference) against a gather-then-scatter actor and siiRL.

Workload: 8 producers x batches x 8 samples; a sample is a 1024-token int64 payload (8 KiB, one row of a
producer's `(8, 1024)` batch tensor) plus a SampleInfo with a token count drawn per sample (balancing has
something to do). The consumer takes steps of 128 samples, split over the ranks with Karmarkar–Karp balancing.

Implementations, each measured in three phases (all puts, then all gets, then all fetches) whose wall times
are divided by the samples moved; end to end is their sum:
  ours     put:   every producer calls CoordinatorClient.put_batch per batch (one ray.put of the batch, then
                  infos + refs to the actor, acknowledgements awaited at the end);
           get:   every rank calls get_refs for every step (infos, refs, positions back);
           fetch: every rank fetches its payloads (fetch_payloads: one ray.get over the distinct refs).
  ours kb  the same with keep_batches=True (whole producer batches balanced across ranks, no over-fetch).
  gather   a driver-style actor that receives the payloads themselves (put) and returns each rank's rows,
           stacked, for every step (get; the data comes back with the reply, so fetch is 0).
  siiRL    siiRL 0.2.0's DataCoordinator used the way its workers use it: one ray.put per sample, put_batch of
           a producer batch's infos + refs; a rank's get_batch with balance_partitions = ranks (through its
           filter path, the one that caches a partition for the other ranks); ray.get of the refs. Its cache is
           not keyed by step, so it runs in lockstep (each step: puts, gets, fetches, reset_cache). It runs in
           its own interpreter and Ray instance (--siirl-python, default $SIIRL_PYTHON), a long-lived worker
           that runs one repetition per request, alternating with ours. Its counts are scaled down (see the
           printed config) because one ray.put per sample makes a full run take minutes.
Ranks are emulated by 4 consumer actors (rank r on actor r % 4), so 32 ranks are 32 sequential callers spread
over 4 processes; producers are 8 actors. All actors run on one Ray instance with 2 CPUs.

Runs alternate (ours, ours kb, siiRL, ours, ...; ours, gather, ours, ...) for --repeats repetitions after one
warm-up each; medians are reported. Counts are scaled down from 8 x 200 x 8 (printed at the start): per-sample
figures do not depend on them, and the machines these run on are 2 shared cores.
"Bytes through the coordinator" is the actor's own estimate (pickled size of the infos, refs and positions
crossing it, in and out, per sample); for the gather actor it is the payload plus info, in and out.

Last lines:
    bytes through coordinator per sample: <ours> goal=1024 met|missed
    RESULT coordinator us_per_sample=<ours, 4 ranks> ratio=<gather_us / ours_us at 8 ranks> goal=50 met|missed

Run: python bench/coordinator.py [--repeats 5] [--siirl-python PATH]   (about 3 minutes on 2 CPU cores)
siiRL venv: python -m venv V && V/bin/pip install --no-deps siirl==0.2.0 loguru pydantic, plus a .pth file in
V's site-packages naming this environment's site-packages (ray, torch, tensordict).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from typing import Any

# The siiRL worker runs this file under siiRL's interpreter, where rl_coordinator is not installed: rl_coordinator
# is imported inside the functions that use it. RAY_AUTH_MODE: a local benchmark cluster needs no token.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
import ray
import torch

PRODUCERS, BATCHES, SAMPLES_PER_BATCH, TOKENS = 8, 200, 8, 1024
TOTAL_SAMPLES = PRODUCERS * BATCHES * SAMPLES_PER_BATCH
STEP_BATCH, MAIN_RANKS, SWEEP_RANKS = 128, 4, (2, 8, 32)
CONSUMER_ACTORS = 4
MAIN_BATCHES, SWEEP_BATCHES = 64, 32
"""Batches per producer actually run (4 ranks; rank sweep): scaled from 200 to keep the whole run near 3
minutes on 2 busy cores."""
SIIRL_STEPS = 4
"""siiRL runs 4 lockstep steps of 128 (512 samples) per repetition, not 100: one ray.put per sample."""
GOAL_US, GOAL_BYTES = 50.0, 1024.0
WARMUP_BATCHES = 16
VOCAB, SEED = 32000, 0


def _make_batches(producer: int, batches: int) -> list[tuple[list[Any], Any]]:
    """(infos, payload) per batch: uids unique per producer, token counts spread between 64 and 1024."""
    from rl_coordinator import SampleInfo

    gen = torch.Generator().manual_seed(SEED + producer)
    out = []
    for b in range(batches):
        lengths = torch.randint(64, TOKENS + 1, (SAMPLES_PER_BATCH,), generator=gen).tolist()
        infos = [
            SampleInfo(f"p{producer}-b{b}-s{s}", producer * batches + b, 32, n - 32) for s, n in enumerate(lengths)
        ]
        out.append((infos, torch.randint(0, VOCAB, (SAMPLES_PER_BATCH, TOKENS), generator=gen)))
    return out


@ray.remote(num_cpus=0)
class Producer:
    """Holds its batches (built before any timing) and puts them on request."""

    def __init__(self, index: int, batches: int) -> None:
        self.batches = _make_batches(index, batches)

    def put_ours(self, coordinator: Any, edge: str, count: int) -> int:
        from rl_coordinator.coordinator import CoordinatorClient

        client = CoordinatorClient(coordinator)
        ray.get([client.put_batch(edge, infos, payload, wait=False) for infos, payload in self.batches[:count]])
        return count * SAMPLES_PER_BATCH

    def put_gather(self, gather: Any, count: int) -> int:
        ray.get([gather.put.remote(infos, payload) for infos, payload in self.batches[:count]])
        return count * SAMPLES_PER_BATCH


@ray.remote(num_cpus=0)
class Consumer:
    """Plays the ranks r with r % CONSUMER_ACTORS == its index, one after another."""

    def __init__(self) -> None:
        self.selections: list[Any] = []

    def get_ours(
        self, coordinator: Any, edge: str, ranks: list[int], dp_size: int, steps: int, keep_batches: bool
    ) -> list[list[int]]:
        """Get every step's share of each rank; returns the token load per [step][rank of this actor]."""
        from rl_coordinator.coordinator import CoordinatorClient

        client = CoordinatorClient(coordinator, timeout_s=120.0)
        loads = []
        for step in range(steps):
            shares = [
                client.get_refs(edge, step, rank, dp_size, batch_size=STEP_BATCH, keep_batches=keep_batches)
                for rank in ranks
            ]
            self.selections.extend(shares)
            loads.append([sum(info.total_tokens for info in share.infos) for share in shares])
        return loads

    def fetch_ours(self) -> tuple[int, int]:
        """Samples fetched and distinct batch payloads fetched (to report the over-fetch)."""
        from rl_coordinator.coordinator import fetch_payloads

        samples = sum(len(fetch_payloads(selection)) for selection in self.selections)
        distinct = sum(len(set(selection.refs)) for selection in self.selections)
        self.selections = []
        return samples, distinct

    def get_gather(self, gather: Any, ranks: list[int], dp_size: int, steps: int) -> int:
        got = 0
        for step in range(steps):
            for rank in ranks:
                _, rows = ray.get(gather.get.remote(step, rank, dp_size))
                got += rows.shape[0]
        return got


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
        from rl_coordinator.balancing import balance_across_ranks

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


class Harness:
    """Actors shared by every repetition; each repetition of ours uses a fresh edge."""

    def __init__(self) -> None:
        from rl_coordinator.coordinator import start_coordinator

        self.producers = [Producer.remote(p, BATCHES) for p in range(PRODUCERS)]
        self.consumers = [Consumer.remote() for _ in range(CONSUMER_ACTORS)]
        self.coordinator = start_coordinator()
        self.gather = GatherScatter.remote()
        self.runs = 0
        ray.get([p.put_gather.remote(self.gather, 0) for p in self.producers])  # wait for the actors to start

    def _ranks(self, dp_size: int) -> list[list[int]]:
        return [list(range(c, dp_size, CONSUMER_ACTORS)) for c in range(CONSUMER_ACTORS)]

    def run_ours(self, dp_size: int, batches: int, keep_batches: bool = False) -> dict[str, float]:
        self.runs += 1
        edge = f"bench-{self.runs}"
        samples = PRODUCERS * batches * SAMPLES_PER_BATCH
        steps = samples // STEP_BATCH
        used = self._used(dp_size)
        start = time.perf_counter()
        ray.get([p.put_ours.remote(self.coordinator, edge, batches) for p in self.producers])
        put_s = time.perf_counter() - start
        start = time.perf_counter()
        loads = ray.get([c.get_ours.remote(self.coordinator, edge, r, dp_size, steps, keep_batches) for c, r in used])
        get_s = time.perf_counter() - start
        start = time.perf_counter()
        fetched = ray.get([c.fetch_ours.remote() for c, _ in used])
        fetch_s = time.perf_counter() - start
        moved = steps * STEP_BATCH
        assert sum(f[0] for f in fetched) == moved, fetched
        step_loads = [[load for actor in loads for load in actor[step]] for step in range(steps)]
        return {
            "put": put_s / samples * 1e6,
            "get": get_s / moved * 1e6,
            "fetch": fetch_s / moved * 1e6,
            "overfetch": sum(f[1] for f in fetched) * SAMPLES_PER_BATCH / moved,
            "max_over_mean": statistics.median(max(x) * len(x) / sum(x) for x in step_loads),
        }

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
        return {"put": put_s / samples * 1e6, "get": get_s / (steps * STEP_BATCH) * 1e6, "fetch": 0.0}

    def _used(self, dp_size: int) -> list[tuple[Any, list[int]]]:
        return [(c, r) for c, r in zip(self.consumers, self._ranks(dp_size), strict=True) if r]

    def bytes_through(self) -> float:
        from rl_coordinator.coordinator import METRIC_BYTES_THROUGH

        return ray.get(self.coordinator.metrics.remote())[METRIC_BYTES_THROUGH]


def _total(run: dict[str, float]) -> float:
    return run["put"] + run["get"] + run["fetch"]


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(_total(r) if key == "total" else r[key] for r in runs)


def _row(name: str, runs: list[dict[str, float]]) -> str:
    cells = "  ".join(f"{key}={_median(runs, key):8.1f}" for key in ("put", "get", "fetch", "total"))
    return f"  {name:<8} {cells}   (us per sample, median of {len(runs)})"


# ---------------------------------------------------------------------------------------------------- siiRL


def _siirl_worker() -> None:
    """Runs under siiRL's interpreter: one lockstep repetition per 'run' line on stdin, a JSON line back."""
    from siirl.data_coordinator.data_buffer import DataCoordinator
    from siirl.data_coordinator.sample import SampleInfo

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    per_step = STEP_BATCH // SAMPLES_PER_BATCH // PRODUCERS  # batches per producer per step

    @ray.remote(num_cpus=0)
    class SiirlProducer:
        def __init__(self, index: int) -> None:
            gen = torch.Generator().manual_seed(SEED + index)
            self.node = ray.get_runtime_context().get_node_id()
            self.batches = []
            for b in range(SIIRL_STEPS * per_step):
                lengths = torch.randint(64, TOKENS + 1, (SAMPLES_PER_BATCH,), generator=gen).tolist()
                infos = [
                    SampleInfo(sum_tokens=n, prompt_length=32, response_length=n - 32, uid=f"p{index}-b{b}-s{s}")
                    for s, n in enumerate(lengths)
                ]
                self.batches.append((infos, torch.randint(0, VOCAB, (SAMPLES_PER_BATCH, TOKENS), generator=gen)))

        def put(self, coordinator: Any, step: int) -> int:
            """Put this producer's batches of a step; returns the pickled bytes sent to the coordinator."""
            sent = 0
            for infos, payload in self.batches[step * per_step : (step + 1) * per_step]:
                refs = [ray.put(payload[i].clone()) for i in range(len(infos))]  # siiRL: one object per sample
                sent += len(pickle.dumps((infos, refs)))
                ray.get(coordinator.put_batch.remote(infos, refs, self.node))
            return sent

    @ray.remote(num_cpus=0)
    class SiirlConsumer:
        def __init__(self) -> None:
            self.refs: list[Any] = []

        def get(self, coordinator: Any, ranks: list[int], dp_size: int) -> tuple[int, int]:
            """Get the ranks' refs of a step; returns (samples, pickled bytes received)."""
            per_rank = STEP_BATCH // dp_size
            self.refs = [ray.get(coordinator.get_batch.remote(per_rank, r, _take_all, dp_size)) for r in ranks]
            return sum(len(r) for r in self.refs), sum(len(pickle.dumps(r)) for r in self.refs)

        def fetch(self) -> int:
            return sum(len(ray.get(refs)) for refs in self.refs)

    coordinator = DataCoordinator.remote(nnodes=1, ppo_mini_batch_size=STEP_BATCH, world_size=MAIN_RANKS)
    producers = [SiirlProducer.remote(p) for p in range(PRODUCERS)]
    consumers = [SiirlConsumer.remote() for _ in range(CONSUMER_ACTORS)]
    ranks = [list(range(c, MAIN_RANKS, CONSUMER_ACTORS)) for c in range(CONSUMER_ACTORS)]
    ray.get([p.put.remote(coordinator, -1) for p in producers] + [c.fetch.remote() for c in consumers])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "run":
            break
        steps = int(words[1])
        put_s = get_s = fetch_s = 0.0
        sent = received = 0
        for step in range(steps):
            start = time.perf_counter()
            sent += sum(ray.get([p.put.remote(coordinator, step) for p in producers]))
            put_s += time.perf_counter() - start
            start = time.perf_counter()
            got = ray.get([c.get.remote(coordinator, r, MAIN_RANKS) for c, r in zip(consumers, ranks, strict=True)])
            get_s += time.perf_counter() - start
            start = time.perf_counter()
            fetched = ray.get([c.fetch.remote() for c in consumers])
            fetch_s += time.perf_counter() - start
            assert sum(g[0] for g in got) == sum(fetched) == STEP_BATCH, (got, fetched)
            received += sum(g[1] for g in got)
            ray.get(coordinator.reset_cache.remote())
        moved = steps * STEP_BATCH
        run = {"put": put_s / moved * 1e6, "get": get_s / moved * 1e6, "fetch": fetch_s / moved * 1e6}
        run["bytes"] = (sent + received) / moved
        print(json.dumps(run), flush=True)


def _take_all(_: Any) -> bool:
    """siiRL's filter path is the one that caches a step's partition for the other ranks."""
    return True


class SiirlRunner:
    """The long-lived siiRL worker process, or None with the reason it could not start."""

    def __init__(self, python: str) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.errors: Any = None
        self.reason = ""
        if not python:
            self.reason = "no siiRL interpreter given (--siirl-python or $SIIRL_PYTHON)"
            return
        # The worker's stderr, read back if it fails to start; it lives as long as the worker (see close).
        self.errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [python, __file__, "--siirl-worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
            env=dict(os.environ, RAY_AUTH_MODE="disabled"),
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if '"ready"' not in first:
            self.proc.kill()
            self.proc.wait(timeout=120)
            self.proc = None
            self.errors.seek(0)
            last = [line.strip() for line in self.errors.read().splitlines() if line.strip()][-1:] or ["no output"]
            self.reason = f"the siiRL worker did not start under {python}: {last[0]}"
            self.errors.close()

    def run(self, steps: int = SIIRL_STEPS) -> dict[str, float]:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"run {steps}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=120)
            self.proc = None
        if self.errors is not None:
            self.errors.close()


# ----------------------------------------------------------------------------------------------------- main


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per implementation (>= 5 for the report)")
    parser.add_argument("--siirl-python", default=os.environ.get("SIIRL_PYTHON", ""), help="interpreter with siirl")
    parser.add_argument("--siirl-worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def _report_main(ours: list[dict[str, float]], local: list[dict[str, float]], theirs: list[dict[str, float]]) -> None:
    print(f"\n{MAIN_RANKS} ranks, {PRODUCERS * MAIN_BATCHES * SAMPLES_PER_BATCH} samples:")
    print(_row("ours", ours))
    print(_row("ours kb", local) + "   (keep_batches=True: whole producer batches per rank)")
    for name, runs in (("ours", ours), ("ours kb", local)):
        overfetch = statistics.median(r["overfetch"] for r in runs)
        balance = statistics.median(r["max_over_mean"] for r in runs)
        print(f"  {name:<8} fetches {overfetch:.2f}x the samples it uses; token load max/mean per step {balance:.4f}")
    if theirs:
        print(_row("siiRL", theirs) + f"   ({SIIRL_STEPS * STEP_BATCH} samples, lockstep)")
        print(f"  siiRL bytes through its coordinator per sample: {statistics.median(r['bytes'] for r in theirs):.0f}")
        print(f"  siiRL / ours end to end: {_median(theirs, 'total') / _median(ours, 'total'):.1f}x (same run)")


def main() -> None:
    args = _parse()
    if args.siirl_worker:
        _siirl_worker()
        return
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
    siirl = SiirlRunner(args.siirl_python)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    harness = Harness()
    harness.run_ours(MAIN_RANKS, WARMUP_BATCHES)
    harness.run_gather(MAIN_RANKS, WARMUP_BATCHES)
    if siirl.proc is not None:
        siirl.run(steps=1)  # warm-up

    ours: list[dict[str, float]] = []
    local: list[dict[str, float]] = []
    theirs: list[dict[str, float]] = []
    for _ in range(args.repeats):
        ours.append(harness.run_ours(MAIN_RANKS, MAIN_BATCHES))
        local.append(harness.run_ours(MAIN_RANKS, MAIN_BATCHES, keep_batches=True))
        if siirl.proc is not None:
            theirs.append(siirl.run())
    siirl.close()
    _report_main(ours, local, theirs)
    if not theirs:
        print(f"  siiRL was not measured in this run: {siirl.reason}")

    ratios: dict[int, float] = {}
    print(f"\nrank sweep, {PRODUCERS * SWEEP_BATCHES * SAMPLES_PER_BATCH} samples:")
    for dp_size in SWEEP_RANKS:
        a: list[dict[str, float]] = []
        b: list[dict[str, float]] = []
        for _ in range(args.repeats):
            a.append(harness.run_ours(dp_size, SWEEP_BATCHES))
            b.append(harness.run_gather(dp_size, SWEEP_BATCHES))
        ratios[dp_size] = _median(b, "total") / _median(a, "total")
        print(f" {dp_size} ranks:")
        print(_row("ours", a))
        print(_row("gather", b) + f"   gather/ours = {ratios[dp_size]:.2f}x")

    bytes_ours = harness.bytes_through()
    info_bytes = len(pickle.dumps(_make_batches(0, 1)[0][0])) / SAMPLES_PER_BATCH
    print(f"\ngather actor bytes through per sample (payload + info, in and out): {2 * (TOKENS * 8 + info_bytes):.0f}")
    print(f"wall time {time.perf_counter() - began:.0f} s")
    ray.shutdown()
    us = _median(ours, "total")
    bytes_verdict = "met" if bytes_ours <= GOAL_BYTES else "missed"
    print(f"bytes through coordinator per sample: {bytes_ours:.0f} goal={GOAL_BYTES:.0f} {bytes_verdict}")
    verdict = "met" if us <= GOAL_US else "missed"
    print(f"RESULT coordinator us_per_sample={us:.1f} ratio={ratios[8]:.2f} goal={GOAL_US:.0f} {verdict}")


if __name__ == "__main__":
    main()
