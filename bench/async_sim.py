"""Discrete-event model of synchronous vs asynchronous RL training (max_staleness eta = 0..4), calibrated from a run.

Calibration (from a run folder's metrics.jsonl, steps after the first, medians):
  decode_step_s = timing_s/gen / response_length/max    seconds per decode step of one rollout worker's batch
                                                         (batch-at-a-time generation is memory-bound: a step of the
                                                         whole batch costs about what a step of one sequence does)
  train_token_s = timing_s/update_actor x slots / perf/total_num_tokens   seconds per trained token on one slot
  sync_s        = timing_s/update_weights                           one weight sync

Workload (stated here, the same for every row): steps of B = W x PER_WORKER samples in groups of GROUP_SIZE (the
batch grows with the workers, each holding PER_WORKER concurrent sequences); grouped lognormal response lengths:
each group draws a log-median from Normal(log(MEDIAN_LEN), GROUP_SIGMA), each sample LogNormal(that, SAMPLE_SIGMA),
clipped to [1, MAX_LEN]; PROMPT_LEN prompt tokens per sample. W rollout workers and W training slots (a 1:1 split,
as the 2-slot split placement).

Designs:
  sync        (eta = 0)  every step: all workers generate their share of the batch (a worker's time is its longest
                         response), then the trainer trains, then the weights sync.
  pipelined   (eta >= 1) this repository's loop (PipelinedDriver): the same batch-at-a-time generation per step, but
                         rollout step k may start once the weights of version k - eta are synced, so generation of
                         step k overlaps training of steps k-eta .. k-1.
  continuous  (eta >= 1) this repository's continuous generation (`algorithm.async_generation: continuous`) as the
                         runtime runs it, modelled in bench/_async_pool.py: each worker's engine decodes PER_WORKER
                         rows at once with a first-in-first-out queue; each rollout step tops the worker's pool up to
                         POOL_STEPS (2) shares of groups and takes the first share of groups to finish; partial
                         rollouts carry the rest across the weight update; the staleness buffer drops a group whose
                         first token is more than eta versions behind the training step and draws a fresh share
                         batch-at-a-time in its place (`top_up`); the rollout runs eta - 1 steps ahead.
Why the refill is a what-if (2026-11-27 18:20): from 17:10 the runtime replaced a dropped group by the pool's next
groups to finish (`refill_from_pool`), which this model put at 1.93x for W = 64, eta = 1 against 1.40x for the
fresh share; on the real 2-slot run (bench/async.py) it kept dropping a sixth of every step at continuous eta = 2
(the refilled pool groups were themselves near the bound) and took that mode from 1.72x to 0.75-0.94x, which the
model, dropping nothing at 2 slots, did not foresee. The runtime went back to the fresh share; the pool refill is
printed as a labelled what-if ("pool refill"), beside the one that submitted as many groups as were short first.
Why continuous changed (2026-11-27 16:40): until then it modelled AReaL's admission count (a sample may start only
while fewer than (version + eta + 1) x B have started) with training step k waiting for the whole of batch k in
submission order, so each batch was held by its longest response and the speed-up stayed near eta + 1. Neither
system does that: AReaL's trainer takes the first B results to finish (areal/infra/workflow_executor.py,
`wait_results`), and so does this runtime (`GenerationPool.take`: the first share of groups to finish, from a pool of
two shares submitted, i.e. rollout concurrency above the batch), whose partial rollouts let the long responses run on
across weight updates; but the runtime also enforces eta per sample (drops, then a batch-at-a-time top-up draw),
which AReaL does not (its bound is the admission count only). The old model is still printed, labelled as a what-if
("previous model"), beside what-ifs of the pool's size, of serving stale groups instead of dropping them, and of the
two other refills.

Prints the calibration, then for W = 8, 64, 512 the samples/s of each design and eta, the speed-up over sync and the
continuous design's share of samples dropped as stale, then the model's 2-slot predictions (W = 1: the pipelined
loop with the calibration's own batch, and continuous generation on bench/async.py's workload) beside the measured
ratios, then the W = 64, eta = 1 continuous speed-up with one input changed at a time (costs scaled, the workload's
sigmas and cap) and the labelled what-ifs. Last line:
RESULT async_sim speedup_eta1_w64=<continuous> pipelined=<pipelined> previous_model=<old model>
pool_refill=<the reverted pool refill, a what-if> goal=2.5 met|missed
Run: python bench/async_sim.py --metrics <run folder>/metrics.jsonl [--slots 2] [--steps 40] [--measured-ratio R]
     [--measured-continuous-ratio C]   (about 15 s; calibrate from bench/async.py's eta = 0 run with `--slots 1`: in
     split placement one slot trains every token; R and C its steady eta = 1 step and continuous ratios)
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from _async_pool import POOL_STEPS, PoolRun, continuous_pool

GROUP_SIZE, PER_WORKER = 8, 16
"""Samples per group; concurrent sequences per rollout worker (its share of a step's batch: B = W x PER_WORKER)."""
MEDIAN_LEN, GROUP_SIGMA, SAMPLE_SIGMA, MAX_LEN, PROMPT_LEN = 256, 0.5, 0.6, 2048, 128
WORKERS = (8, 64, 512)
ETAS = (0, 1, 2, 3, 4)
GOAL = 2.5


class Shape(NamedTuple):
    """The response lengths' distribution (module doc)."""

    group_sigma: float = GROUP_SIGMA
    sample_sigma: float = SAMPLE_SIGMA
    max_len: int = MAX_LEN
    median: int = MEDIAN_LEN


ISSUE_SHAPE = Shape()
"""The workload stated in the module doc."""


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
    """One step's response lengths, group by group (grouped lognormal, see the module doc)."""
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


def _train_s(costs: Costs, lengths: list[int], slots: int) -> float:
    return costs.train_token_s * sum(length + PROMPT_LEN for length in lengths) / slots


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
        trains.append(_train_s(costs, lengths, workers))
    return samples / pipeline(gens, trains, costs.sync_s, eta)


def previous_model(costs: Costs, steps: list[list[list[int]]], workers: int, eta: int) -> float:
    """Samples/s of the model's continuous design before 2026-11-27 16:40, now a labelled what-if (module doc): AReaL's
    admission count, but each training batch waits for the whole of its submission-order batch.

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
            version_time.append(begin + _train_s(costs, batches[v], workers) + costs.sync_s)

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


def group_stream(seed: int, shape: Shape = ISSUE_SHAPE) -> Callable[[], list[int]]:
    """An endless stream of prompt groups' response lengths (the workload of the module doc), from `seed`."""
    rng = random.Random(seed)
    return lambda: draw_step(rng, 1, GROUP_SIZE, shape)[0]


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
        train_s=lambda lengths: _train_s(costs, lengths, workers),
        sync_s=costs.sync_s,
        pool_steps=pool_steps or POOL_STEPS,
        drop_stale=drop_stale,
        refill=refill,
    )


BENCH_SHAPE, BENCH_GROUPS = Shape(median=12, max_len=96), 64
"""bench/async.py's workload: median 12, cap 96, the same sigmas; 64 prompt groups of GROUP_SIZE a step (one rollout
slot)."""
ENGINE_ROWS = 256
"""HFEngineConfig.max_batch_size's default: the rows the 2-slot run's rollout engine decoded at once."""


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", type=Path, required=True, help="a run folder's metrics.jsonl to calibrate from")
    parser.add_argument("--slots", type=int, default=2, help="colocated slots of the calibration run (embedded: 2)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measured-ratio", type=float, default=None, help="bench/async.py's eta=1 / eta=0 ratio")
    parser.add_argument(
        "--measured-continuous-ratio", type=float, default=None, help="bench/async.py's continuous eta=1 / eta=0 ratio"
    )
    args = parser.parse_args()
    costs, med = calibrate(args.metrics, args.slots)
    print(f"calibration from {args.metrics}:")
    for key, value in med.items():
        print(f"  median {key} = {value:.6g}")
    print(
        f"  decode_step_s={costs.decode_step_s:.4g} train_token_s={costs.train_token_s:.4g} sync_s={costs.sync_s:.4g}"
    )
    print(
        f"workload: W x {PER_WORKER} samples a step in groups of {GROUP_SIZE}, lengths grouped lognormal median "
        f"{MEDIAN_LEN} sigma {GROUP_SIGMA}/{SAMPLE_SIGMA} cap {MAX_LEN}, prompts {PROMPT_LEN}; {args.steps} steps; "
        f"continuous: {PER_WORKER} engine rows a worker, pool of {POOL_STEPS} shares"
    )
    result: dict[tuple[str, int, int], float] = {}
    for workers in WORKERS:
        steps = draw_steps(args.seed, workers, args.steps)
        base = sync_and_pipelined(costs, steps, workers, 0)
        print(f"W={workers:4d}  sync {base:10.2f} samples/s")
        for eta in ETAS[1:]:
            piped = sync_and_pipelined(costs, steps, workers, eta)
            run = runtime_continuous(costs, workers, eta, args.seed, args.steps)
            held = previous_model(costs, steps, workers, eta)
            result[("pipelined", workers, eta)] = piped / base
            result[("continuous", workers, eta)] = run.samples_per_s / base
            result[("previous", workers, eta)] = held / base
            print(
                f"        eta={eta}  pipelined {piped:10.2f} ({piped / base:4.2f}x)  continuous "
                f"{run.samples_per_s:10.2f} ({run.samples_per_s / base:4.2f}x; dropped {run.dropped_share:5.1%} of the "
                f"samples made, {run.top_up_draws} top-up draws, staleness max {run.staleness_max})  "
                f"[previous model: {held / base:4.2f}x]"
            )
    # The 2-slot split run: the rollout slot generates the calibration's whole batch (memory-bound decoding: in the
    # time one slot took for its share), the training slot trains all of its tokens.
    gens = [med["timing_s/gen"]] * args.steps
    trains = [med["timing_s/update_actor"] * args.slots] * args.steps
    two = pipeline(gens, trains, costs.sync_s, 0) / pipeline(gens, trains, costs.sync_s, 1)
    measured = "not given" if args.measured_ratio is None else f"{args.measured_ratio:.2f}x"
    print(f"2 slots split, eta=1 over eta=0 with the calibration's batch: model {two:.2f}x; measured {measured}")
    train_s = med["timing_s/update_actor"] * args.slots
    whole, whole_run = two_slot_continuous(costs, train_s, 1, args.seed, args.steps, BENCH_GROUPS * GROUP_SIZE)
    rows, _ = two_slot_continuous(costs, train_s, 1, args.seed, args.steps, ENGINE_ROWS)
    measured_c = "not given" if args.measured_continuous_ratio is None else f"{args.measured_continuous_ratio:.2f}x"
    print(
        f"2 slots split, continuous eta=1 over eta=0 (bench/async.py's workload): model {whole:.2f}x with the share's "
        f"{BENCH_GROUPS * GROUP_SIZE} rows decoding at once (as the calibration assumes), {rows:.2f}x with the "
        f"engine's {ENGINE_ROWS} rows (HFEngine's max_batch_size, what the run had); measured {measured_c}; the model "
        f"drops {whole_run.dropped} samples in {args.steps} steps"
    )
    what_ifs = sensitivity(costs, 64, 1, args.seed, args.steps)
    print("W=64 eta=1 continuous speed-up, one input changed: " + ", ".join(f"{k} {v:.2f}x" for k, v in what_ifs))
    base64 = sync_and_pipelined(costs, draw_steps(args.seed, 64, args.steps), 64, 0)
    pools = [
        (shares, runtime_continuous(costs, 64, 1, args.seed, args.steps, pool_steps=shares).samples_per_s / base64)
        for shares in (1, 3, 4, 8)
    ]
    print(
        "what-if, not what the runtime does: W=64 eta=1 continuous with a pool of N shares instead of "
        f"{POOL_STEPS}: " + ", ".join(f"N={n} {v:.2f}x" for n, v in pools)
    )
    kept = runtime_continuous(costs, 64, 1, args.seed, args.steps, drop_stale=False)
    print(
        "what-if, not what the runtime does: W=64 eta=1 continuous serving stale groups instead of dropping them "
        f"(no per-sample bound, as AReaL's admission rule alone): {kept.samples_per_s / base64:.2f}x, staleness max "
        f"{kept.staleness_max}"
    )
    refills = {
        refill: [(eta, runtime_continuous(costs, 64, eta, args.seed, args.steps, refill=refill)) for eta in (1, 2)]
        for refill in ("pool", "pool_submit")
    }
    labels = {
        "pool": "by the pool's next groups to finish (the pool refill, in the runtime 2026-11-27 17:10-18:20, "
        "reverted after the 2-slot bench)",
        "pool_submit": "from the pool after submitting as many groups as are short (the earlier what-if)",
    }
    for refill, runs in refills.items():
        print(
            f"what-if, not what the runtime does: W=64 continuous replacing dropped groups {labels[refill]}: "
            + ", ".join(
                f"eta={eta} {run.samples_per_s / base64:.2f}x (dropped {run.dropped_share:.1%}, {run.top_up_draws} "
                f"top-up draws, staleness max {run.staleness_max})"
                for eta, run in runs
            )
        )
    print(
        f"what-if, not what the runtime does: the previous model (AReaL's admission count, each batch trained whole "
        f"in submission order, so held by its longest response) at W=64: {result[('previous', 64, 1)]:.2f}x at eta=1, "
        f"{result[('previous', 64, 2)]:.2f}x at eta=2"
    )
    speedup = result[("continuous", 64, 1)]
    status = "met" if speedup >= GOAL else "missed"
    print(
        f"RESULT async_sim speedup_eta1_w64={speedup:.2f} pipelined={result[('pipelined', 64, 1)]:.2f} "
        f"previous_model={result[('previous', 64, 1)]:.2f} "
        f"pool_refill={refills['pool'][0][1].samples_per_s / base64:.2f} goal={GOAL} {status}"
    )


if __name__ == "__main__":
    main()
