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
Every calibration and round so far, with the designs tried and reverted: bench/async_history.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _async_designs import (
    pipeline,
    previous_model,
    runtime_continuous,
    sensitivity,
    sync_and_pipelined,
    two_slot_continuous,
)
from _async_pool import POOL_STEPS
from _async_workload import (
    BENCH_GROUPS,
    ENGINE_ROWS,
    GROUP_SIGMA,
    GROUP_SIZE,
    MAX_LEN,
    MEDIAN_LEN,
    PER_WORKER,
    PROMPT_LEN,
    SAMPLE_SIGMA,
    calibrate,
    draw_steps,
)

WORKERS = (8, 64, 512)
ETAS = (0, 1, 2, 3, 4)
GOAL = 2.5


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
