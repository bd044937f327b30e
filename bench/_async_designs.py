"""bench/async_sim.py's designs: the synchronous and pipelined loops, this repository's continuous generation
(bench/_async_pool.py) at W workers and on the 2-slot run, the previous model and the sensitivity what-ifs; each
returns samples/s or a speed-up over sync (bench/async_sim.py's module doc describes them)."""

from __future__ import annotations

import heapq
import math
import random
import statistics

from _async_pool import POOL_STEPS, PoolRun, continuous_pool
from _async_workload import (
    BENCH_GROUPS,
    BENCH_SHAPE,
    GROUP_SIZE,
    ISSUE_SHAPE,
    PER_WORKER,
    Costs,
    Shape,
    draw_step,
    draw_steps,
    group_stream,
    train_seconds,
)


def pipeline(gens: list[float], trains: list[float], sync_s: float, eta: int) -> float:
    """When the last training step ends, for per-step generation and training seconds: rollout step k starts once
    rollout step k - 1 ended and the weights it samples from are synced (version k - eta, or k when eta = 0);
    training step k starts once step k - 1 ended and rollout step k's samples exist, and ends with the sync."""
    rollout_end: list[float] = []
    train_end: list[float] = []
    for k, (gen, train) in enumerate(zip(gens, trains, strict=True)):
        lag = k - 1 if eta == 0 else k - eta - 1
        weights_ready = train_end[lag] if lag >= 0 else 0.0
        rollout_end.append(max(rollout_end[-1] if rollout_end else 0.0, weights_ready) + gen)
        train_end.append(max(train_end[-1] if train_end else 0.0, rollout_end[k]) + train + sync_s)
    return train_end[-1]


def sync_and_pipelined(costs: Costs, steps: list[list[list[int]]], workers: int, eta: int) -> float:
    """Samples/s of the batch-at-a-time loop (eta = 0: synchronous; eta >= 1: this repository's pipelined loop);
    a worker's generation time is its share's longest response in decode steps."""
    gens, trains, samples = [], [], 0
    for groups in steps:
        lengths = [length for group in groups for length in group]
        samples += len(lengths)
        share = math.ceil(len(lengths) / workers)
        gens.append(max(costs.decode_step_s * max(lengths[i : i + share]) for i in range(0, len(lengths), share)))
        trains.append(train_seconds(costs, lengths, workers))
    return samples / pipeline(gens, trains, costs.sync_s, eta)


def previous_model(costs: Costs, steps: list[list[list[int]]], workers: int, eta: int) -> float:
    """Samples/s of the model's continuous design before 2026-11-27 16:40, now a labelled what-if (async_sim.py's
    doc): AReaL's admission count, but each training batch waits for the whole of its submission-order batch.

    Samples start in order on whichever worker slot frees first; sample i (of rollout batch i // B) may start once
    version i // B - eta exists. Training step v takes batch v (its groups whole) once all its samples finished and
    step v - 1 ended, and makes version v + 1 after training and the sync."""
    batches = [[length for group in groups for length in group] for groups in steps]
    batch = len(batches[0])
    free = [0.0] * (workers * math.ceil(batch / workers))  # when each worker slot frees
    heapq.heapify(free)
    version_time = [0.0]
    batch_done = [0.0] * len(batches)

    def train_to(version: int) -> None:
        while len(version_time) <= version:
            v = len(version_time) - 1
            begin = max(version_time[v], batch_done[v])
            version_time.append(begin + train_seconds(costs, batches[v], workers) + costs.sync_s)

    for b, lengths in enumerate(batches):
        needed = max(0, b - eta)
        train_to(needed)
        for length in lengths:
            start = max(heapq.heappop(free), version_time[needed])
            end = start + costs.decode_step_s * length
            heapq.heappush(free, end)
            batch_done[b] = max(batch_done[b], end)
    train_to(len(batches))
    return len(batches) * batch / version_time[-1]


def runtime_continuous(
    costs: Costs,
    workers: int,
    eta: int,
    seed: int,
    count: int,
    shape: Shape = ISSUE_SHAPE,
    pool_steps: int = 0,
    drop_stale: bool = True,
    refill: str = "share",
) -> PoolRun:
    """Samples/s (and drops) of this repository's continuous generation (bench/_async_pool.py) at `workers`
    workers, each with PER_WORKER rows and a share of PER_WORKER samples a step; what-ifs: `pool_steps` > 0 replaces
    the runtime's POOL_STEPS, `drop_stale=False` serves stale groups instead of dropping them, `refill` "pool" or
    "pool_submit" replaces dropped groups otherwise than the runtime (bench/_async_pool.py's `continuous_pool`)."""
    return continuous_pool(
        group_stream(seed, shape),
        workers=workers,
        share_groups=PER_WORKER // GROUP_SIZE,
        slots=PER_WORKER,
        eta=eta,
        steps=count,
        decode_step_s=costs.decode_step_s,
        train_s=lambda lengths: train_seconds(costs, lengths, workers),
        sync_s=costs.sync_s,
        pool_steps=pool_steps or POOL_STEPS,
        drop_stale=drop_stale,
        refill=refill,
    )


def two_slot_continuous(
    costs: Costs, train_s: float, eta: int, seed: int, count: int, rows: int
) -> tuple[float, PoolRun]:
    """The model's continuous generation over sync for the 2-slot split run (one rollout worker, bench/async.py's
    workload, `train_s` a step), and the run: `rows` engine rows, the decode step cost set so the sync loop's
    generation is the calibration's (`decode_step_s` x the step's longest response when every row of the share
    decodes at once)."""
    rng = random.Random(seed)
    steps = [draw_step(rng, BENCH_GROUPS, GROUP_SIZE, BENCH_SHAPE) for _ in range(count)]
    lengths = [[length for group in groups for length in group] for groups in steps]
    made = [_makespan(step, rows) for step in lengths]
    decode_step_s = costs.decode_step_s * statistics.median(map(max, lengths)) / statistics.median(made)
    gens = [decode_step_s * steps_ for steps_ in made]
    base = sum(map(len, lengths)) / pipeline(gens, [train_s] * count, costs.sync_s, 0)
    run = continuous_pool(
        group_stream(seed, BENCH_SHAPE),
        workers=1,
        share_groups=BENCH_GROUPS,
        slots=rows,
        eta=eta,
        steps=count,
        decode_step_s=decode_step_s,
        train_s=lambda _: train_s,
        sync_s=costs.sync_s,
    )
    return run.samples_per_s / base, run


def _makespan(lengths: list[int], rows: int) -> float:
    """Decode steps `rows` rows take for `lengths` submitted together (first in, first out)."""
    free = [0] * rows
    for length in lengths:
        heapq.heappush(free, heapq.heappop(free) + length)
    return max(free)


SENSITIVITY = (
    ("as calibrated", {}, ISSUE_SHAPE),
    ("train_token_s x0", {"train_token_s": 0.0}, ISSUE_SHAPE),
    ("train_token_s x4", {"train_token_s": 4.0}, ISSUE_SHAPE),
    ("decode_step_s x4", {"decode_step_s": 4.0}, ISSUE_SHAPE),
    ("sync_s x100", {"sync_s": 100.0}, ISSUE_SHAPE),
    ("sample sigma 0.3", {}, Shape(sample_sigma=0.3)),
    ("sample sigma 0.9", {}, Shape(sample_sigma=0.9)),
    ("group sigma 0", {}, Shape(group_sigma=0.0)),
    ("cap 1024", {}, Shape(max_len=1024)),
    ("cap 4096", {}, Shape(max_len=4096)),
)
"""What-ifs of the model's inputs, one changed at a time: cost factors, or the workload's shape."""


def sensitivity(costs: Costs, workers: int, eta: int, seed: int, count: int) -> list[tuple[str, float]]:
    """Continuous generation's speed-up over sync at `workers` and `eta` with each of SENSITIVITY's inputs changed
    alone (this repository's continuous generation, `runtime_continuous`): which input decides the figure."""
    out = []
    for label, factors, shape in SENSITIVITY:
        scaled = costs._replace(**{name: getattr(costs, name) * factor for name, factor in factors.items()})
        base = sync_and_pipelined(scaled, draw_steps(seed, workers, count, shape), workers, 0)
        out.append((label, runtime_continuous(scaled, workers, eta, seed, count, shape).samples_per_s / base))
    return out
