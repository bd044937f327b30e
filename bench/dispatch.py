"""Controller cost per step: by-reference dispatch (DAG workers + DataCoordinator) against gather-then-scatter.

Workload (bench/_dispatch_grpo.py): N DAG workers (`rl_runtime.workers.start_workers`, num_cpus=0 so 64 fit on two
cores) run a GRPO-shaped graph that the planner splits in two: N/2 rollout ranks build a batch of --samples
sequences of 1024 tokens each (38,944 bytes a sample: the tensors verl's actor update reads, see that module) and
score it; N/2 trainer ranks consume it and report ~40 verl-named metrics. The two halves have different
data-parallel layouts, so every sample changes worker between them. One step, seen from the controller (this
driver process):

  ours      `rl_runtime.workers.Driver.run_step`: one `run_step(step)` call per worker; rollout ranks put their
            batches in the object store and their sample infos on the DataCoordinator, trainer ranks read their
            share from it and fetch the batches themselves; the controller receives one metrics dict per rank.
  ours xk   the same, with a repetition's --steps steps in one `Driver.run_steps` call per worker (the trainer's
            `trainer.steps_per_call`): the workers go from step to step without the controller, which pays its
            per-worker calls once per call; reported per step.
  baseline  the same workers and the same functions, called through Ray's `__ray_call__`: the controller calls
            the rollout ranks, `ray.get`s every batch (numpy arrays, which Ray moves zero-copy: the cheapest
            by-value path), splits the samples into N/2 contiguous shards (copying only what must be joined) and
            calls each trainer rank with its shard as the argument, then gets their metrics: verl's single
            controller, gather, concat, chunk, scatter.

Measured per step, wall clock (perf_counter) unless said otherwise:
  controller s  seconds the controller is busy in the step: wall time minus the time it sits blocked inside
                `ray.wait` (wrapped to time it). This is the goal's metric: what a single controller pays per step,
                which caps how far one controller scales. The workers run at nice --worker-nice (10) so that, as
                on a cluster where they run on other machines, the controller gets a core when it needs one;
                with --worker-nice 0 this also counts the time the controller waits for one of the two cores
                while 64 workers compute, which stretches both paths (see bench/README.md for both figures).
  step s        the whole step, waiting included; on two shared cores this is dominated by the workers' own work.
  thread cpu s  CPU seconds of the controller's thread: its own work, free of the wait for a core.
  proc cpu s    CPU seconds of the controller process, all threads: Ray's RPC threads too, and their background
                work, which grows with the step's length.
  coord cpu s   CPU seconds of the DataCoordinator actor per step (ours only): the central work that replaces the
                controller's, sample metadata only.
  recv/sent B   bytes the controller receives (what `ray.get` returns) and sends (call arguments), as Ray
                serialises them.
ours and the baseline run the same step numbers (ours xk its own, which the baseline also runs, untimed); the integer
checksums the trainer ranks report (uids, token ids, response tokens, scores, summed over ranks) must agree, so
every path moved the same samples. At each worker count the three alternate (A, B, C, C, B, A, ...) for --repeats
repetitions of --steps steps after one warm-up each; a repetition's mean per step is one sample, and medians are
reported.

Payload size: --samples 64 per rollout rank makes 2048 sequences a step at 64 workers (256 prompts x 8 samples,
2.4 MiB per rank, 78 MiB per step through the baseline's controller each way); verl's GSM8K GRPO example moves
5120 sequences of 1536 tokens a step, so this is the small end of real runs. --samples 32 halves the baseline's
bytes and roughly its controller time; ours does not depend on it.

Cost: the 64 DAG workers import torch (about 180 MB and 3 CPU-seconds each): they are started once (2 to 5
minutes on two busy cores, about 12 GB) and serve every worker count, the first N re-running the DAGWorker
constructor with the N-worker placement and a fresh coordinator through `__ray_call__` instead of new processes.

Last lines:
    controller_s_ratio_64 with one step per call (trainer.steps_per_call=1): <baseline / ours at 64>
    RESULT dispatch controller_s_ratio_64_steps_per_call_<k>=<baseline / ours xk at 64> ratio=<same> goal=5 met|missed

Run: python bench/dispatch.py [--repeats 5] [--steps 3] [--samples 64] [--workers 2,8,32,64] [--worker-nice 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

GOAL = 5.0
OURS, MULTI, BASELINE = "ours", "ours xk", "baseline"
"""The paths: ours one step per driver call, ours all of a repetition's --steps per call, gather-then-scatter."""
MULTI_STEPS = 1_000_000
"""Where the multi-step path's step numbers start: the coordinator frees a step once it is read and refuses it again,
so that path runs its own steps; the baseline also runs them (untimed) so that their checksums are compared too."""
GOAL_WORKERS = 64
OBJECT_STORE_BYTES = 1 << 30
"""1 GiB: a baseline step at 64 workers holds its gathered batches and its shards (2 x 78 MiB); the default (30% of
RAM) is needlessly large on a shared machine."""
STEP_TIMEOUT_S = 300.0
COORDINATOR_TIMEOUT_S = 300.0
START_TIMEOUT_S = 900.0
"""64 workers importing torch on two busy cores can take minutes each to report ready."""


class BlockedClock:
    """Wraps `ray.wait` so the seconds the controller spends blocked in it add up in `seconds`."""

    def __init__(self, wait: Callable[..., Any]) -> None:
        self.wait = wait
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.wait(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def _serialized_bytes(objects: list[Any]) -> int:
    """Bytes Ray serialises for `objects` (what crosses the controller when it receives or passes them)."""
    from ray._private.worker import global_worker

    context = global_worker.get_serialization_context()
    return sum(context.serialize(obj).total_bytes for obj in objects)


def _lower_priority(actor: Any, niceness: int) -> int:
    """Run inside a worker: give every thread of its process `niceness` (on Linux a nice value is per thread)."""
    for thread_id in os.listdir("/proc/self/task"):
        os.setpriority(os.PRIO_PROCESS, int(thread_id), niceness)
    return niceness


def _reassign(actor: Any, assignment: Any, routes: Any, coordinator: Any, operations: Any) -> int:
    """Run inside a DAG worker: rebuild it, through its own constructor, for another placement and coordinator."""
    actor.__init__(assignment, routes, None, coordinator, operations, COORDINATOR_TIMEOUT_S)
    return actor.ready()


class Paths:
    """The first `n` workers set up for an `n`-worker placement, and the two ways of running a step on them."""

    def __init__(self, workers: list[Any], n: int, samples: int, clock: BlockedClock) -> None:
        import _dispatch_grpo as grpo
        import ray

        from rl_coordinator.coordinator import start_coordinator
        from rl_runtime.planning import SchedulerConfig, TaskScheduler
        from rl_runtime.workers import Driver, bind_operations, plan_routes

        placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=n, strategy="even")).schedule(
            grpo.grpo_graph(samples)
        )
        self.coordinator = start_coordinator()
        calls = []
        for assignment in placement.workers:
            routes = plan_routes(placement, assignment.rank, n // 2 * samples)
            bound = bind_operations(assignment.graph)
            operations = {assignment.graph[node_id].operation: fn for node_id, fn in bound.items()}
            calls.append(
                workers[assignment.rank].__ray_call__.remote(
                    _reassign, assignment, routes, self.coordinator, operations
                )
            )
        ray.get(calls, timeout=START_TIMEOUT_S)
        self.workers = workers[:n]
        self.driver = Driver(self.workers, STEP_TIMEOUT_S)
        owner = {node_id: sub.ranks for sub in placement.subgraphs for node_id in sub.graph.nodes}
        self.producers = [workers[rank] for rank in owner[grpo.ROLLOUT]]
        self.consumers = [workers[rank] for rank in owner[grpo.TRAIN]]
        self.samples = samples
        self.clock = clock
        self.produce, self.consume = ray.put(grpo.baseline_produce), ray.put(grpo.baseline_consume)

    def close(self) -> None:
        import ray

        ray.kill(self.coordinator)

    def step_ours(self, step: int) -> tuple[dict[str, float], list[dict[str, float]]]:
        marks = _marks(self.clock)
        result = self.driver.run_step(step)
        per_rank = list(result.per_rank)
        return _sample(marks, self.clock, per_rank, [step] * len(self.workers)), per_rank

    def steps_ours(self, steps: range) -> tuple[dict[str, float], list[list[dict[str, float]]]]:
        """All of `steps` in one `Driver.run_steps` call (`trainer.steps_per_call`); the call's figures per step."""
        marks = _marks(self.clock)
        results = self.driver.run_steps(steps)
        per_step = [list(result.per_rank) for result in results]
        sample = _sample(marks, self.clock, [m for ranks in per_step for m in ranks], [list(steps)] * len(self.workers))
        return {key: value / len(steps) for key, value in sample.items()}, per_step

    def step_baseline(self, step: int) -> tuple[dict[str, float], list[dict[str, float]]]:
        import _dispatch_grpo as grpo
        import ray

        from rl_runtime.metrics import reduce_rank_metrics

        marks = _marks(self.clock)
        calls = [w.__ray_call__.remote(self.produce, step, dp, self.samples) for dp, w in enumerate(self.producers)]
        ray.wait(calls, num_returns=len(calls))
        batches = ray.get(calls)
        shards = grpo.reshard(batches, len(self.consumers))
        calls = [w.__ray_call__.remote(self.consume, shard) for w, shard in zip(self.consumers, shards, strict=True)]
        ray.wait(calls, num_returns=len(calls))
        metrics = ray.get(calls)
        reduce_rank_metrics(metrics)
        sample = _sample(marks, self.clock, [*batches, *metrics], [*self._produce_args(step), *shards])
        return sample, metrics

    def _produce_args(self, step: int) -> list[tuple[int, int, int]]:
        return [(step, dp, self.samples) for dp in range(len(self.producers))]


def _marks(clock: BlockedClock) -> tuple[float, float, float, float]:
    """Wall clock, thread CPU, process CPU and seconds blocked in ray.wait, at the start of a step."""
    return time.perf_counter(), time.thread_time(), time.process_time(), clock.seconds


def _sample(
    marks: tuple[float, float, float, float], clock: BlockedClock, received: list[Any], sent: list[Any]
) -> dict[str, float]:
    start, thread, cpu, blocked = marks
    wall = time.perf_counter() - start
    return {
        "step": wall,
        "ctl": wall - (clock.seconds - blocked),
        "thread": time.thread_time() - thread,
        "cpu": time.process_time() - cpu,
        "recv": _serialized_bytes(received),
        "sent": _serialized_bytes(sent),
    }


def _checksums(per_rank: list[Mapping[str, float]]) -> tuple[float, ...]:
    import _dispatch_grpo as grpo

    return tuple(sum(metrics.get(name, 0.0) for metrics in per_rank) for name in grpo.CHECKSUMS)


def _coordinator_cpu(coordinator: Any) -> float:
    import ray

    return ray.get(coordinator.__ray_call__.remote(lambda actor: time.process_time()))


def _repetition(paths: Paths, path: str, steps: range, sums: dict[Any, tuple[float, ...]]) -> dict[str, float]:
    """One repetition's mean per step; checks its checksums against the other paths': step by step, and summed over
    the repetition (keyed ("steps", start, stop)), which is all the multi-step path can promise."""
    coord = _coordinator_cpu(paths.coordinator)
    runs = []
    if path == MULTI:
        sample, per_step = paths.steps_ours(steps)
        runs.append(sample)
    else:
        per_step = []
        for step in steps:
            sample, per_rank = (paths.step_ours if path == OURS else paths.step_baseline)(step)
            runs.append(sample)
            per_step.append(per_rank)
    per_step_sums = [_checksums(per_rank) for per_rank in per_step]
    if path != MULTI:
        for step, got in zip(steps, per_step_sums, strict=True):
            assert sums.setdefault(step, got) == got, f"step {step}: the paths moved different samples"
    # Several steps per call let rollout ranks run ahead; the coordinator's edge is a stream, so a step may take
    # samples a faster rank made for the next one. The same samples still move in the call: compare its totals.
    total = tuple(map(sum, zip(*per_step_sums, strict=True)))
    key = ("steps", steps.start, steps.stop)
    assert sums.setdefault(key, total) == total, f"steps {steps.start}-{steps.stop - 1}: different samples moved"
    mean = {key: statistics.fmean(run[key] for run in runs) for key in runs[0]}
    mean["coord"] = (_coordinator_cpu(paths.coordinator) - coord) / len(steps) if path != BASELINE else float("nan")
    return mean


def _median(reps: list[dict[str, float]], key: str) -> float:
    return statistics.median(rep[key] for rep in reps)


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per path and worker count (>= 5)")
    parser.add_argument("--steps", type=int, default=3, help="steps per repetition (their mean is one sample)")
    parser.add_argument("--samples", type=int, default=64, help="sequences per rollout rank per step")
    parser.add_argument("--workers", default="2,8,32,64", help="comma-separated even worker counts")
    parser.add_argument("--worker-nice", type=int, default=10, help="nice value of the workers (0: as the controller)")
    args = parser.parse_args()
    args.counts = [int(n) for n in args.workers.split(",")]
    if any(n < 2 or n % 2 for n in args.counts):
        parser.error(f"--workers: every count must be even and >= 2 (half rollout, half trainer), got {args.workers}")
    return args


def _report(n: int, reps: dict[str, list[dict[str, float]]]) -> dict[str, float]:
    for name, runs in reps.items():
        cells = [f"{_median(runs, key):>12.4f}" for key in ("ctl", "step", "thread", "cpu", "coord")]
        cells += [f"{_median(runs, key):>12,.0f}" for key in ("recv", "sent")]
        print(f"{n:>7}  {name:<8} " + " ".join(cells).replace("nan", "  -"))
    ratios = {}
    for name in (OURS, MULTI):
        ratio = {key: _median(reps[BASELINE], key) / _median(reps[name], key) for key in ("ctl", "step", "recv")}
        print(
            f"{'':>7}  baseline/{name}: controller {ratio['ctl']:.2f}x, step {ratio['step']:.2f}x, "
            f"bytes received {ratio['recv']:,.0f}x",
            flush=True,
        )
        ratios[name] = ratio["ctl"]
    return ratios


def main() -> None:
    args = _parse()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_worker_niceness", "0")  # as rl_runtime's trainer starts its workers
    import _dispatch_grpo as grpo
    import ray

    from rl_coordinator.coordinator import start_coordinator
    from rl_runtime.planning import SchedulerConfig, TaskScheduler
    from rl_runtime.workers import start_workers

    began = time.perf_counter()
    print(
        f"config: {args.samples} sequences x {grpo.PROMPT_TOKENS + grpo.RESPONSE_TOKENS} tokens per rollout rank per "
        f"step, workers {args.counts} (half rollout, half trainer; num_cpus=0 DAG workers), {args.repeats} "
        f"repetitions x {args.steps} steps per path, alternating, after 1 warm-up step each",
        flush=True,
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=OBJECT_STORE_BYTES)
    clock = BlockedClock(ray.wait)
    ray.wait = clock
    most = max(args.counts)
    placement = TaskScheduler(SchedulerConfig(num_nodes=1, slots_per_node=most, strategy="even")).schedule(
        grpo.grpo_graph(args.samples)
    )
    first = start_coordinator()
    workers = start_workers(
        placement,
        coordinator=first,
        edge_batch_sizes=most // 2 * args.samples,
        coordinator_timeout_s=COORDINATOR_TIMEOUT_S,
        actor_options={"num_cpus": 0},
        ready_timeout_s=START_TIMEOUT_S,
    )
    ray.kill(first)
    ray.get([worker.__ray_call__.remote(_lower_priority, args.worker_nice) for worker in workers])
    print(f"started {len(workers)} DAG workers in {time.perf_counter() - began:.0f} s")

    header = ("controller s", "step s", "thread cpu s", "proc cpu s", "coord cpu s", "recv B", "sent B")
    print("\nper step, medians:\n" + f"{'workers':>7}  {'path':<8} " + " ".join(f"{c:>12}" for c in header))
    ratios: dict[int, dict[str, float]] = {}
    for n in args.counts:
        paths = Paths(workers, n, args.samples, clock)
        sums: dict[Any, tuple[float, ...]] = {}
        reps: dict[str, list[dict[str, float]]] = {OURS: [], MULTI: [], BASELINE: []}
        for path in reps:  # warm-up
            _repetition(paths, path, range(MULTI_STEPS, MULTI_STEPS + args.steps) if path == MULTI else range(1), sums)
        for rep in range(args.repeats):
            steps = range(1 + rep * args.steps, 1 + (rep + 1) * args.steps)
            multi_steps = range(MULTI_STEPS + steps.start + args.steps, MULTI_STEPS + steps.stop + args.steps)
            for path in reps if rep % 2 == 0 else reversed(list(reps)):
                reps[path].append(_repetition(paths, path, multi_steps if path == MULTI else steps, sums))
            _repetition(paths, BASELINE, multi_steps, sums)  # untimed: the multi-step path's checksums
        paths.close()
        ratios[n] = _report(n, reps)

    print(f"\nwall time {time.perf_counter() - began:.0f} s")
    ray.shutdown()
    at_goal = ratios.get(GOAL_WORKERS, {})
    single, multi = at_goal.get(OURS, float("nan")), at_goal.get(MULTI, float("nan"))
    print(f"controller_s_ratio_{GOAL_WORKERS} with one step per call (trainer.steps_per_call=1): {single:.2f}")
    print(
        f"RESULT dispatch controller_s_ratio_{GOAL_WORKERS}_steps_per_call_{args.steps}={multi:.2f} ratio={multi:.2f} "
        f"goal={GOAL:.0f} {'met' if multi >= GOAL else 'missed'}"
    )


if __name__ == "__main__":
    main()
