"""siiRL 0.2.0's DataCoordinator on the workload of bench/coordinator.py, in siiRL's own interpreter and Ray.

Used the way siiRL's workers use it: one ray.put per sample, put_batch of a producer batch's infos + refs; a
rank's get_batch with balance_partitions = ranks (through its filter path, the one that caches a partition for
the other ranks); ray.get of the refs. Its cache is not keyed by step, so it runs in lockstep (each step: puts,
gets, fetches, reset_cache). Its counts are scaled down (SIIRL_STEPS) because one ray.put per sample makes a full
run take minutes.

`SiirlRunner` (in the benchmark's process) starts `python _coordinator_siirl.py` under siiRL's interpreter: a
long-lived worker that answers one repetition per "run <steps>" line on stdin with a JSON line of per-sample
microseconds and bytes through its coordinator.
siiRL venv: python -m venv V && V/bin/pip install --no-deps siirl==0.2.0 loguru pydantic, plus a .pth file in
V's site-packages naming this environment's site-packages (ray, torch, tensordict).
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from typing import Any

import ray
from _coordinator_workload import (
    CONSUMER_ACTORS,
    MAIN_RANKS,
    PRODUCERS,
    PROMPT_TOKENS,
    SAMPLES_PER_BATCH,
    SIIRL_STEPS,
    STEP_BATCH,
    batch_payloads,
    consumer_ranks,
)

WORKER_START_S = 120.0
"""How long the worker may take to start Ray and its actors, or to exit."""


def _take_all(_: Any) -> bool:
    """siiRL's filter path is the one that caches a step's partition for the other ranks."""
    return True


def _worker() -> None:
    """Runs under siiRL's interpreter: one lockstep repetition per 'run' line on stdin, a JSON line back."""
    from siirl.data_coordinator.data_buffer import DataCoordinator
    from siirl.data_coordinator.sample import SampleInfo

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    per_step = STEP_BATCH // SAMPLES_PER_BATCH // PRODUCERS  # batches per producer per step

    @ray.remote(num_cpus=0)
    class SiirlProducer:
        def __init__(self, index: int) -> None:
            self.node = ray.get_runtime_context().get_node_id()
            self.batches = []
            for b, (lengths, payload) in enumerate(batch_payloads(index, SIIRL_STEPS * per_step)):
                infos = [
                    SampleInfo(
                        sum_tokens=n,
                        prompt_length=PROMPT_TOKENS,
                        response_length=n - PROMPT_TOKENS,
                        uid=f"p{index}-b{b}-s{s}",
                    )
                    for s, n in enumerate(lengths)
                ]
                self.batches.append((infos, payload))
            gc.freeze()  # as the actors of bench/_coordinator_harness.py do (freeze_startup_heap)

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
            gc.freeze()  # as the actors of bench/_coordinator_harness.py do (freeze_startup_heap)

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
    ranks = consumer_ranks(MAIN_RANKS)
    ray.get([p.put.remote(coordinator, -1) for p in producers] + [c.fetch.remote() for c in consumers])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "run":
            break
        print(json.dumps(_repetition(coordinator, producers, consumers, ranks, int(words[1]))), flush=True)


def _repetition(
    coordinator: Any, producers: list[Any], consumers: list[Any], ranks: list[list[int]], steps: int
) -> dict[str, float]:
    """One lockstep run of `steps` steps: microseconds per sample of each phase, and bytes per sample."""
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
    return run


class SiirlRunner:
    """The long-lived siiRL worker process, or `proc` None with the reason it could not start."""

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
            [python, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errors,
            text=True,
            env=dict(os.environ, RAY_AUTH_MODE="disabled"),
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if '"ready"' not in first:
            self.proc.kill()
            self.proc.wait(timeout=WORKER_START_S)
            self.proc = None
            self.errors.seek(0)
            last = [line.strip() for line in self.errors.read().splitlines() if line.strip()][-1:] or ["no output"]
            self.reason = f"the siiRL worker did not start under {python}: {last[0]}"
            self.errors.close()

    def run(self, steps: int = SIIRL_STEPS) -> dict[str, float]:
        """One repetition of `steps` lockstep steps in the worker."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"run {steps}\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        """Stop the worker (it ends on the closed stdin) and drop its stderr file."""
        if self.proc is not None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=WORKER_START_S)
            self.proc = None
        if self.errors is not None:
            self.errors.close()


if __name__ == "__main__":
    _worker()
