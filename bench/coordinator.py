"""Moving samples between stages: our DataCoordinator (by reference) against a gather-then-scatter actor and siiRL.

Workload (bench/_coordinator_workload.py): 8 producers x batches x 8 samples; a sample is a 1024-token int64
payload (8 KiB, one row of a producer's `(8, 1024)` batch tensor) plus a SampleInfo with a token count drawn per
sample. The consumer takes steps of 128 samples, split over the ranks with Karmarkar–Karp balancing. The actors
and the timed runs are in bench/_coordinator_harness.py.

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
           shares ready then (up to MAX_SHARES_PER_ITEM). Here every step is put before the ranks start, so the
           ranks catch up: nearly every item carries 16 shares.
  stream 1 the same with max_shares_per_item=1: one item per share, what a rank that keeps pace with its
           producers gets (its next step is never ready when a share is sent).
  per-batch  the Ray operations of a by-reference design that puts each batch on its own, and nothing else:
           per batch a ray.put and an actor call carrying its ref, per rank and step an actor call returning
           refs to whole batches (as many samples as the rank's share) and a ray.get of them; no infos, no
           balancing. What coalescing saves against.
  gather   a driver-style actor that receives the payloads themselves (put) and returns each rank's rows,
           stacked, for every step (get; the data comes back with the reply, so fetch is 0).
  siiRL    siiRL 0.2.0's DataCoordinator in its own interpreter and Ray instance (bench/_coordinator_siirl.py,
           --siirl-python, default $SIIRL_PYTHON), lockstep, one ray.put per sample, scaled-down counts.
Every actor freezes its import-time heap once built (gc.freeze, as the coordinator actor does; see
bench/_coordinator_harness.py's freeze_startup_heap), siiRL's too.
Ranks are emulated by 4 consumer actors (rank r on actor r % 4), so 32 ranks are 32 sequential callers spread
over 4 processes; producers are 8 actors. All our actors run on one Ray instance with 2 CPUs.

Three blocks, each alternating its implementations (A, B, ..., then the reverse order, ...) for --repeats
repetitions after one warm-up each, a second's pause before every run; medians are reported:
  1. ours, ours ps, stream, stream 1, per-batch (the figures the goals are judged on);
  2. the rank sweep, ours against gather at each rank count;
  3. siiRL against stream. siiRL's worker brings its own Ray instance (an idle one with a dozen actors used
     about 8 % of one core here), started for this block only: the other blocks run on one Ray instance, as a
     deployment does, and both sides of this comparison share the second instance's load.
Blocks 1 and 3 run the issue's full count (8 x 200 x 8, 12,800 samples, 100 steps); the rank sweep runs 32
batches per producer to keep the whole run short on 2 shared cores; siiRL runs scaled-down lockstep steps.
"Bytes through the coordinator" is the actor's own estimate (pickled size of the infos, refs and positions
crossing it, in and out, per sample); for the gather actor it is the payload plus info, in and out.

Last lines (the rank sweep compares gather with ours reading by get, a call per rank and step each):
    ours reading by a get per rank and step: <ours, 4 ranks> goal=50 met|missed
    ours by a stream of one share an item: <stream 1, 4 ranks> goal=50 met|missed
    bytes through coordinator per sample: <ours> goal=1024 met|missed
    RESULT coordinator us_per_sample=<stream, 4 ranks> ratio=<gather_us / ours_us at 8 ranks> goal=50 met|missed

Run: python bench/coordinator.py [--repeats 5] [--siirl-python PATH]   (about 3 minutes on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import time
from collections.abc import Callable

import ray
from _coordinator_harness import Harness, make_batches
from _coordinator_siirl import SiirlRunner
from _coordinator_workload import (
    BATCHES,
    CONSUMER_ACTORS,
    MAIN_BATCHES,
    MAIN_RANKS,
    PRODUCERS,
    SAMPLES_PER_BATCH,
    SIIRL_STEPS,
    STEP_BATCH,
    SWEEP_BATCHES,
    SWEEP_RANKS,
    TOKENS,
    TOTAL_SAMPLES,
    WARMUP_BATCHES,
)

from rl_coordinator.coordinator import MAX_SHARES_PER_ITEM

GOAL_US, GOAL_BYTES = 50.0, 1024.0
SETTLE_S = 1.0
"""Pause before every run: Ray frees the previous run's objects and references asynchronously, and that work
landed in the next run's put phase (one A/B: ours' put 28.7 us/sample right after per-batch's run, 23.2 after
a pause)."""


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
    print(_row("stream 1", runs["stream 1"]) + "   (the same, one share an item: a rank keeping pace with producers)")
    print(_row("per-batch", runs["per-batch"]) + "   (Ray's operations of one put per batch; see the docstring)")
    for name in ("ours", "ours ps", "stream", "stream 1"):
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
        {
            "stream": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, shares_per_item=MAX_SHARES_PER_ITEM),
            "siiRL": siirl.run,
        },
        repeats,
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
        f"counts: {MAIN_BATCHES} batches per producer at {MAIN_RANKS} ranks, {SWEEP_BATCHES} in the rank sweep "
        f"{SWEEP_RANKS}; siiRL {SIIRL_STEPS} lockstep steps ({SIIRL_STEPS * STEP_BATCH} samples, not {TOTAL_SAMPLES})"
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    harness = Harness()
    harness.run_ours(MAIN_RANKS, WARMUP_BATCHES)
    harness.run_ours(MAIN_RANKS, WARMUP_BATCHES, shares_per_item=MAX_SHARES_PER_ITEM)
    harness.run_per_batch(MAIN_RANKS, WARMUP_BATCHES)
    harness.run_gather(MAIN_RANKS, WARMUP_BATCHES)

    runs = _alternate(
        {
            "ours": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES),
            "ours ps": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, keep_batches=False),
            "stream": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, shares_per_item=MAX_SHARES_PER_ITEM),
            "stream 1": lambda: harness.run_ours(MAIN_RANKS, MAIN_BATCHES, shares_per_item=1),
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
    info_bytes = len(pickle.dumps(make_batches(0, 1)[0][0])) / SAMPLES_PER_BATCH
    print(f"\ngather actor bytes through per sample (payload + info, in and out): {2 * (TOKENS * 8 + info_bytes):.0f}")
    print(f"wall time {time.perf_counter() - began:.0f} s")
    ray.shutdown()
    by_get, us = _median(runs["ours"], "total"), _median(runs["stream"], "total")
    print(f"ours reading by a get per rank and step: {by_get:.1f} us/sample goal={GOAL_US:.0f} {_verdict(by_get)}")
    one_each = _median(runs["stream 1"], "total")
    print(f"ours by a stream of one share an item: {one_each:.1f} us/sample goal={GOAL_US:.0f} {_verdict(one_each)}")
    bytes_verdict = "met" if bytes_ours <= GOAL_BYTES else "missed"
    print(f"bytes through coordinator per sample: {bytes_ours:.0f} goal={GOAL_BYTES:.0f} {bytes_verdict}")
    print(f"RESULT coordinator us_per_sample={us:.1f} ratio={ratios[8]:.2f} goal={GOAL_US:.0f} {_verdict(us)}")


if __name__ == "__main__":
    main()
