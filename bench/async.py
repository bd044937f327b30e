"""Asynchronous vs synchronous training, measured: the embedded GRPO recipe on 2 CPU slots in split placement.

Runs `rl-recipes train grpo placement.colocate=false algorithm.max_staleness=<eta>` for eta = 0, 1, 2 with batch
generation (`algorithm.async_generation=step`) and eta = 1, 2 with continuous generation
(`algorithm.async_generation=continuous`), alternating (that order, then reversed, ... for
`--rounds`), each run `--steps` steps with no validation or checkpoint in between (the pipeline drains only at the
end), in one work folder whose short SFT warm start is made once. Every run keeps the recipe's
`policy_loss: auto`, as a user's would: `decoupled_ppo` at eta > 0, `ppo` at eta = 0. One setting is pinned for
every run: `algorithm.skip_inert_rows=false` (the recipe sets true). The workload's forced lengths cut most answers
short, so most groups score alike (`inert` in the balance line: the share of rows with advantage 0); skipping their
forward, which only the eta = 0 step can (its ppo ratio is 1 whatever they give, docs/algorithms.md), would leave the
training side a fraction of its real cost on that side alone, and the runs would no longer compare the loops on the
same training work.

Workload (issue 25's heavy-tailed one): the embedded recipe's model, prompts and reward, 64 prompts x 8 samples a
step, but each response's length is drawn, not left to the model: each group draws a log-median from
Normal(log(MEDIAN_LEN), GROUP_SIGMA), each of its samples a length from LogNormal(that, SAMPLE_SIGMA), rounded and
clipped to [1, MAX_LEN], and is generated to exactly that length (`ignore_eos`). The lengths depend only on the run
seed, the step, the draw and the sample, so every run sees the same workload (continuous generation draws a second
batch of prompts on the first step). This bench replaces the `generate` and `generate_continuous` operations by
`heavy_tailed_generate` and `heavy_tailed_generate_continuous` below in its own process (the Trainer ships the
operations it binds to the workers); the runs execute in this process, one after another. Under continuous
generation a group the staleness buffer drops is replaced by a batch-at-a-time top-up (`top_up`, `draw_rollouts`),
which generates at the model's own lengths, not the heavy-tailed ones: continuous runs that drop (eta = 2 here) are
somewhat optimistic. (From 2026-11-27 17:10 to 18:20 the runtime refilled from the slot's pool instead, whose draws
followed the workload; reverted, bench/async_history.md.) The step mode drops nothing here (each group comes from
the version its step allows), so its batch top-up does not run.

Per run, from its metrics.jsonl: `timing_s/step` is the wall time of the driver call that ran the step, shared
evenly over that call's steps (`trainer.steps_per_call`, set to STEPS_PER_CALL here), so a step's own time is not
recorded and the first call's figure carries the first step (pipeline fill, first-step warm-up). Two figures:
  steady    samples/s over the calls after the first and before the last (the default 21 steps: steps 5-19, three
            whole calls with the pipeline full on entry and no drain): the throughput of the running loop;
  whole     samples/s over every step after the first, as the rounds before 2026-11-27 13:30 printed it (steps 1-4
            share the first call's time, step 0 included; the last call includes the drain): run-length dependent.
The training slot's idle ratio = `timing_s/wait_coordinator_inputs` over its nodes' time, the rollout slot's =
`timing_s/receive_weights` (plus the final catch-up) over its nodes' time, both over the steady steps; the balance
line gives, per run, the medians over the steady steps of the rollout slot's generation (`timing_s/gen`) and the
training slot's nodes less its input wait (`t`), and the longest `timing_s/gc` (a garbage collection's stall).
Prints the medians per run kind over the rounds and the ratios to eta = 0 (compare them with bench/async_sim.py's
2-slot prediction), then each round's own ratios to that round's eta = 0 run.
Why 21 steps and 3 rounds by default (2026-11-28): with 11 steps the steady window is one call of 5 steps, about
one second of training, and one round's eta = 1 ratio moved between 1.31x and 1.74x from run to run on the quiet
machine (docs/async.md, "What to expect"; earlier rounds in bench/async_history.md); 15 steady steps in each of
three alternated rounds, medians, move much less.
Last line: RESULT async samples_per_s_eta1=<steady x> ratio_eta1=<steady r> continuous_ratio_eta1=<steady c>
whole_ratio_eta1=<r> whole_continuous_ratio_eta1=<c> goal=1.6 met|missed (met when a steady ratio at eta = 1 reaches
it)
Run: python bench/async.py [--workdir DIR] [--steps 21] [--rounds 3]   (about 75 s a round quiet, 10+ min loaded)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from rl_engines.rollout import InferenceEngine, SamplingParams
from rl_recipes.cli import main as cli_main
from rl_runtime.nodes import NodeResources, PromptItem
from rl_runtime.nodes._continuous import GenerationPool, continuous_rollouts
from rl_runtime.nodes._generate import PromptRequests, generate_groups, next_prompts, prompt_requests
from rl_runtime.workers import NODE_OPERATIONS, NodeContext, StepData

RUNS = (("step", 0), ("step", 1), ("step", 2), ("continuous", 1), ("continuous", 2))
"""(algorithm.async_generation, algorithm.max_staleness) of the runs of a round."""
GOAL = 1.6
PROMPTS_PER_STEP, GROUP_SIZE = 64, 8
SAMPLES_PER_STEP = PROMPTS_PER_STEP * GROUP_SIZE
STEPS_PER_CALL = 5
"""`trainer.steps_per_call` of every run (the recipe's own): the steady window is whole calls of this many steps."""
RECIPE_SEED = 0
"""The grpo recipe's `trainer.seed`, which the drawn lengths follow."""
MEDIAN_LEN, GROUP_SIGMA, SAMPLE_SIGMA, MAX_LEN = 12, 0.5, 0.6, 96
"""The grouped lognormal response lengths (tokens): cap 8x the median, as bench/async_sim.py's 256 / 2048."""
ROLLOUT_NODES = ("rollout_actor", "function_reward", "staleness_buffer", "receive_weights")
TRAIN_NODES = ("calculate_advantages", "actor_old_log_prob", "reference_log_prob", "actor_train")


def response_lengths(seed: int, step: int, rank: int, groups: int, per_group: int, draw: int = 0) -> list[int]:
    """The drawn lengths of a rank's `groups` x `per_group` samples of a step's draw (group-major), from the run
    seed."""
    rng = random.Random(f"{seed}-{step}-{rank}" if draw == 0 else f"{seed}-{step}-{rank}-{draw}")
    lengths = []
    for _ in range(groups):
        log_median = rng.gauss(math.log(MEDIAN_LEN), GROUP_SIGMA)
        lengths += [min(MAX_LEN, max(1, round(rng.lognormvariate(log_median, SAMPLE_SIGMA)))) for _ in range(per_group)]
    return lengths


def heavy_tailed_generate(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """`generate` with each response's length drawn from the heavy-tailed workload (see the module doc)."""
    res, config = ctx.resources, ctx.resources.config
    assert res.rollout is not None and res.prompts is not None, "runs on the rollout slots"
    start = time.perf_counter()
    items = next_prompts(res)
    n = config.batch.samples_per_prompt
    groups = prompt_requests(
        items,
        n,
        SamplingParams(max_new_tokens=1, temperature=config.rollout.temperature),
        seed_parts=(config.trainer.seed, ctx.step, ctx.dp.rank, 0),
        uid_of=(ctx.step, ctx.dp.rank, 0),
    )
    lengths = response_lengths(config.trainer.seed, ctx.step, ctx.dp.rank, len(items), n)
    data = generate_groups(res.rollout, with_lengths(groups, lengths), res.policy_version)
    metrics = {"rollout/policy_version": float(res.policy_version), "timing_s/gen": time.perf_counter() - start}
    return StepData(data.batch, data.extras, metrics)


def with_lengths(groups: list[PromptRequests], lengths: list[int]) -> list[PromptRequests]:
    """`groups` whose requests generate exactly the drawn `lengths` (group-major) tokens (`ignore_eos`)."""
    drawn = iter(lengths)
    return [
        dataclasses.replace(
            group,
            requests=tuple(
                dataclasses.replace(
                    request,
                    sampling=dataclasses.replace(request.sampling, max_new_tokens=next(drawn), ignore_eos=True),
                )
                for request in group.requests
            ),
        )
        for group in groups
    ]


class HeavyTailedPool(GenerationPool):
    """Continuous generation's pool with each request's length drawn from the workload (`ignore_eos`)."""

    def submit(
        self,
        engine: InferenceEngine,
        items: list[PromptItem],
        samples_per_prompt: int,
        sampling: SamplingParams,
        *,
        seed_parts: tuple[int, ...],
        uid_of: tuple[int, int, int],
    ) -> None:
        step, rank, draw = uid_of
        lengths = response_lengths(seed_parts[0], step, rank, len(items), samples_per_prompt, draw)
        groups = prompt_requests(items, samples_per_prompt, sampling, seed_parts=seed_parts, uid_of=uid_of)
        self.submit_groups(engine, with_lengths(groups, lengths))


def heavy_tailed_generate_continuous(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """`generate_continuous` with the workload's drawn lengths (see the module doc)."""
    res = ctx.resources
    if res.generation_pool is None:
        res.generation_pool = HeavyTailedPool()
    start = time.perf_counter()
    data = continuous_rollouts(res, ctx.step, ctx.dp.rank)
    metrics = {
        "rollout/policy_version": float(res.policy_version),
        "timing_s/gen": time.perf_counter() - start,
        "rollout/in_flight_groups": float(len(res.generation_pool)),
    }
    return StepData(data.batch, data.extras, metrics)


def _cli(workdir: Path, *args: str) -> None:
    previous = Path.cwd()
    os.chdir(workdir)
    try:
        status = cli_main(list(args))
    finally:
        os.chdir(previous)
    if status:
        raise SystemExit(f"rl-recipes {' '.join(args)} exited with {status}")


def _run(workdir: Path, mode: str, eta: int, steps: int, index: int) -> Path:
    out = workdir / "runs" / f"async_{index}_{mode}_eta{eta}"
    overrides = [
        f"algorithm.async_generation={mode}",
        "placement.colocate=false",
        f"algorithm.max_staleness={eta}",
        f"trainer.total_steps={steps}",
        "trainer.validate_before_train=false",
        "trainer.validate_every=0",
        "trainer.checkpoint_every=0",
        "trainer.resume=never",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={out}",
        f"data.max_response_length={MAX_LEN}",
        f"rollout.max_new_tokens={MAX_LEN}",
        "warm_start=null",
        f"trainer.steps_per_call={STEPS_PER_CALL}",
        "algorithm.skip_inert_rows=false",  # the same training work on every run (module doc)
    ]
    _cli(workdir, "train", "grpo", *overrides)
    found = sorted(out.rglob("metrics.jsonl"))
    if not found:
        raise SystemExit(f"no metrics.jsonl under {out}")
    return found[-1]


def _ratio(row: dict[str, float], waited: float, nodes: tuple[str, ...]) -> float:
    total = sum(row.get(f"timing_s/{node}", 0.0) for node in nodes) + row.get("timing_s/catch_up_weights", 0.0)
    return waited / total if total > 0 else 0.0


def steady_rows(count: int, per_call: int = STEPS_PER_CALL) -> range:
    """The row indices of the steady window of a run of `count` steps: the calls after the first and before the
    last (empty when the run has fewer than three calls)."""
    calls = math.ceil(count / per_call)
    return range(per_call, per_call * (calls - 1)) if calls >= 3 else range(0)


def _rates(rows: list[dict[str, float]]) -> dict[str, float]:
    seconds = statistics.mean(row["timing_s/step"] for row in rows)
    trainer = [_ratio(row, row.get("timing_s/wait_coordinator_inputs", 0.0), TRAIN_NODES) for row in rows]
    rollout = [
        _ratio(row, row.get("timing_s/receive_weights", 0.0) + row.get("timing_s/catch_up_weights", 0.0), ROLLOUT_NODES)
        for row in rows
    ]
    train_s = [
        sum(row.get(f"timing_s/{node}", 0.0) for node in TRAIN_NODES) - row.get("timing_s/wait_coordinator_inputs", 0.0)
        for row in rows
    ]
    return {
        "samples_per_s": SAMPLES_PER_STEP / seconds,
        "trainer_idle": statistics.mean(trainer),
        "rollout_idle": statistics.mean(rollout),
        "gen_s": statistics.median(row.get("timing_s/gen", 0.0) for row in rows),
        "train_s": statistics.median(train_s),
        "staleness_max": max(row.get("async/staleness_max", 0.0) for row in rows),
        "gc_max_s": max(row.get("timing_s/gc", 0.0) for row in rows),
        "inert": statistics.mean(row.get("actor/inert_row_fraction", math.nan) for row in rows),
    }


def _measure(path: Path) -> dict[str, float]:
    """The steady window's figures (`steady_rows`; nan without one) and the whole run's `samples_per_s` after its
    first step, as `whole_samples_per_s` (see the module doc)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    window = steady_rows(len(rows))
    steady = _rates([rows[i] for i in window]) if window else dict.fromkeys(_rates(rows[1:]), math.nan)
    return {**steady, "whole_samples_per_s": _rates(rows[1:])["samples_per_s"]}


def workload_line(seed: int, steps: int) -> str:
    """The drawn response lengths of the first `steps` steps' main draws (rank 0), summarised."""
    per_step = [response_lengths(seed, step, 0, PROMPTS_PER_STEP, GROUP_SIZE) for step in range(steps)]
    flat = [length for lengths in per_step for length in lengths]
    return (
        f"workload: {PROMPTS_PER_STEP} prompts x {GROUP_SIZE} samples a step (group size {GROUP_SIZE}), response "
        f"lengths grouped lognormal: group log-median ~ Normal(log {MEDIAN_LEN}, {GROUP_SIGMA}), sample ~ "
        f"LogNormal(that, {SAMPLE_SIGMA}), clipped to [1, {MAX_LEN}], generated to length; drawn over {steps} steps: "
        f"mean {statistics.mean(flat):.1f}, median {statistics.median(flat):.0f}, p99 "
        f"{sorted(flat)[int(0.99 * len(flat))]}, each step's longest "
        f"{min(map(max, per_step))}-{max(map(max, per_step))}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=21)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not steady_rows(args.steps):
        parser.error(f"--steps must be at least {2 * STEPS_PER_CALL + 1}: the steady window is a call after the first")
    # The workload (module doc): these replace the built-in operations in this process, bound and shipped per run.
    NODE_OPERATIONS["generate"] = heavy_tailed_generate
    NODE_OPERATIONS["generate_continuous"] = heavy_tailed_generate_continuous
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="async_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "runs/embedded/sft/model").exists():
        _cli(workdir, "sft", "steps=20")
    print(workload_line(RECIPE_SEED, args.steps), flush=True)
    order = [run for r in range(args.rounds) for run in (RUNS if r % 2 == 0 else RUNS[::-1])]
    results: dict[tuple[str, int], list[dict[str, float]]] = {run: [] for run in RUNS}
    for index, (mode, eta) in enumerate(order):
        start = time.perf_counter()
        measured = _measure(_run(workdir, mode, eta, args.steps, index))
        results[mode, eta].append(measured)
        elapsed = time.perf_counter() - start
        print(f"run {index}: {mode} eta={eta} {measured} ({elapsed:.0f} s with start-up)", flush=True)
    for mode, eta in RUNS[1:]:
        paired = [
            f"{m['samples_per_s'] / m0['samples_per_s']:.2f}"
            for m, m0 in zip(results[mode, eta], results["step", 0], strict=True)
        ]
        print(f"{mode:10s} eta={eta}: steady ratio to the same round's eta=0, round by round: {', '.join(paired)}")
    base = statistics.median(m["samples_per_s"] for m in results["step", 0])
    whole_base = statistics.median(m["whole_samples_per_s"] for m in results["step", 0])
    for mode, eta in RUNS:
        med = {key: statistics.median(m[key] for m in results[mode, eta]) for key in results[mode, eta][0]}
        print(
            f"{mode:10s} eta={eta}: steady {med['samples_per_s']:.1f} samples/s ({med['samples_per_s'] / base:.2f}x), "
            f"whole {med['whole_samples_per_s']:.1f} ({med['whole_samples_per_s'] / whole_base:.2f}x), trainer idle "
            f"{med['trainer_idle']:.2f}, rollout idle {med['rollout_idle']:.2f}, staleness max "
            f"{med['staleness_max']:.0f}; gen {med['gen_s']:.3f} s, t {med['train_s']:.3f} s a step, longest GC "
            f"{med['gc_max_s']:.3f} s, inert {med['inert']:.2f}"
        )

    def ratio(mode: str, eta: int, key: str, over: float) -> float:
        return statistics.median(m[key] for m in results[mode, eta]) / over

    steady1, cont1 = ratio("step", 1, "samples_per_s", base), ratio("continuous", 1, "samples_per_s", base)
    status = "met" if max(steady1, cont1) >= GOAL else "missed"
    print(
        f"RESULT async samples_per_s_eta1={steady1 * base:.1f} ratio_eta1={steady1:.2f} "
        f"continuous_ratio_eta1={cont1:.2f} whole_ratio_eta1={ratio('step', 1, 'whole_samples_per_s', whole_base):.2f} "
        f"whole_continuous_ratio_eta1={ratio('continuous', 1, 'whole_samples_per_s', whole_base):.2f} goal={GOAL} "
        f"{status}"
    )


if __name__ == "__main__":
    main()
