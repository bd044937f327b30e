"""bench/async_sim.py's inputs: the costs calibrated from a run's metrics.jsonl and the workload every design runs
(grouped lognormal response lengths; bench/async_sim.py's module doc states both)."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

GROUP_SIZE, PER_WORKER = 8, 16
"""Samples per group; concurrent sequences per rollout worker (its share of a step's batch: B = W x PER_WORKER)."""
MEDIAN_LEN, GROUP_SIGMA, SAMPLE_SIGMA, MAX_LEN, PROMPT_LEN = 256, 0.5, 0.6, 2048, 128


class Shape(NamedTuple):
    """The response lengths' distribution (bench/async_sim.py's module doc)."""

    group_sigma: float = GROUP_SIGMA
    sample_sigma: float = SAMPLE_SIGMA
    max_len: int = MAX_LEN
    median: int = MEDIAN_LEN


ISSUE_SHAPE = Shape()
"""The workload stated in bench/async_sim.py's module doc."""


class Costs(NamedTuple):
    decode_step_s: float
    train_token_s: float
    sync_s: float


def calibrate(path: Path, slots: int) -> tuple[Costs, dict[str, float]]:
    """The costs from a metrics.jsonl of a run on `slots` colocated slots (medians over the steps after the first;
    `perf/total_num_tokens` is over all slots, each slot trained its share) and the medians they came from."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = rows[1:] if len(rows) > 1 else rows
    keys = ("timing_s/gen", "response_length/max", "timing_s/update_actor", "perf/total_num_tokens")
    missing = [key for key in keys if not all(key in row for row in rows)]
    if missing:
        raise SystemExit(f"{path}: rows lack {', '.join(missing)}; pass the metrics.jsonl of a GRPO run")
    med = {
        key: statistics.median(row[key] for row in rows)
        for key in (*keys, "timing_s/update_weights")
        if all(key in row for row in rows)
    }
    costs = Costs(
        med["timing_s/gen"] / med["response_length/max"],
        med["timing_s/update_actor"] * slots / med["perf/total_num_tokens"],
        med.get("timing_s/update_weights", 0.0),
    )
    return costs, med


def draw_step(rng: random.Random, groups: int, size: int, shape: Shape = ISSUE_SHAPE) -> list[list[int]]:
    """One step's response lengths, group by group (grouped lognormal, bench/async_sim.py's module doc)."""
    out = []
    for _ in range(groups):
        centre = rng.gauss(math.log(shape.median), shape.group_sigma)
        out.append(
            [max(1, min(shape.max_len, round(rng.lognormvariate(centre, shape.sample_sigma)))) for _ in range(size)]
        )
    return out


def draw_steps(seed: int, workers: int, count: int, shape: Shape = ISSUE_SHAPE) -> list[list[list[int]]]:
    """`count` steps of W x PER_WORKER samples in groups of GROUP_SIZE."""
    rng = random.Random(seed)
    return [draw_step(rng, workers * PER_WORKER // GROUP_SIZE, GROUP_SIZE, shape) for _ in range(count)]


def group_stream(seed: int, shape: Shape = ISSUE_SHAPE) -> Callable[[], list[int]]:
    """An endless stream of prompt groups' response lengths (bench/async_sim.py's workload), from `seed`."""
    rng = random.Random(seed)
    return lambda: draw_step(rng, 1, GROUP_SIZE, shape)[0]


def train_seconds(costs: Costs, lengths: list[int], slots: int) -> float:
    """Seconds `slots` training slots take for the samples of response `lengths` (and their prompts)."""
    return costs.train_token_s * sum(length + PROMPT_LEN for length in lengths) / slots


BENCH_SHAPE, BENCH_GROUPS = Shape(median=12, max_len=96), 64
"""bench/async.py's workload: median 12, cap 96, the same sigmas; 64 prompt groups of GROUP_SIZE a step (one rollout
slot)."""
ENGINE_ROWS = 256
"""HFEngineConfig.max_batch_size's default: the rows the 2-slot run's rollout engine decoded at once."""
