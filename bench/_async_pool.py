"""bench/async_sim.py's model of this repository's continuous generation, as the runtime runs it.

`algorithm.async_generation: continuous` (rl_runtime/nodes/_continuous.py, _staleness_buffer.py, _train.py), per
rollout worker:
  engine       at most `slots` rows decode at once, each step of them costing `decode_step_s` whatever the rows
               (memory-bound decoding, the model's standing assumption); submitted requests queue first in, first
               out and join as rows free (HFEngine's continuous batching); a request's first-token version is the
               version the engine holds when it starts.
  take         rollout step k tops the pool up to POOL_STEPS shares of prompt groups (submitted at the step's start,
               a whole share, one loader draw, at a time: `continuous_rollouts`; after a refill took groups from the
               pool it can so hold up to one share more), waits until `share` groups are finished and takes the first
               `share` finished ones in submission order (`GenerationPool.take`): a long response holds only its own
               group.
  buffer       the taken groups enter the worker's staleness buffer, which serves the share oldest version first,
               drops a group whose oldest first-token version is more than eta behind k (`async/dropped_stale`)
               and, while short, draws a fresh share batch-at-a-time (`top_up`: its requests queue behind the
               pool's and the step waits for all of them), at most MAX_TOP_UP_DRAWS times a step. What-ifs:
               `refill="pool"` takes the pool's next groups to finish instead (a share submitted first only when the
               pool holds too few; a refill group that is itself too stale is dropped in turn): the runtime did that
               from 2026-11-27 17:10 to 18:20, reverted because it slowed bench/async.py's continuous eta = 2 run
               (bench/async_history.md); `refill="pool_submit"` submits as many groups as are short, then takes
               from the pool.
  weights      `receive_weights` then waits for version max(held, k + 2 - eta) (the rollout runs eta - 1 steps
               ahead under continuous generation, `rollout_steps_ahead`) and loads each version up to it: requests
               running then are parked for `sync_s` (load and cache recompute, `pause("keep")`) and keep their
               first-token version; requests starting later take the new version.
  training     step k starts once every worker served its share of step k and step k - 1 ended; version k + 1
               exists its training time plus `sync_s` later.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

POOL_STEPS = 2
"""Shares of groups a worker's pool holds after its top-up (rl_runtime.nodes._continuous.POOL_STEPS)."""
MAX_TOP_UP_DRAWS = 8
"""Extra draws a step may make before it fails (rl_runtime.nodes._staleness_buffer.MAX_TOP_UP_DRAWS)."""


@dataclass(eq=False)
class _Request:
    length: int
    finish: float = math.inf
    version: int = -1


@dataclass(eq=False)
class _Group:
    requests: list[_Request]
    arrival: int = 0

    def done_at(self) -> float:
        return max(request.finish for request in self.requests)

    def version(self) -> int:
        return min(request.version for request in self.requests)


@dataclass(eq=False)
class _Engine:
    """One worker's engine: rows (a heap of when each frees) and its queue of (submitted at, request)."""

    slots: int
    decode_step_s: float
    version: int = 0
    rows: list[tuple[float, int]] = field(default_factory=list)
    running: dict[int, _Request] = field(default_factory=dict)
    queue: deque[tuple[float, _Request]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.rows = [(0.0, i) for i in range(self.slots)]

    def submit(self, groups: list[_Group], at: float) -> None:
        self.queue.extend((at, request) for group in groups for request in group.requests)

    def advance(self, t: float) -> None:
        """Start every queued request a row frees for by time `t` (first in, first out)."""
        while self.queue:
            free, row = self.rows[0]
            submitted, request = self.queue[0]
            start = max(free, submitted)
            if start > t:
                return
            self.queue.popleft()
            request.version, request.finish = self.version, start + request.length * self.decode_step_s
            self.running[row] = request
            heapq.heapreplace(self.rows, (request.finish, row))

    def next_finish(self, t: float) -> float:
        """When the next running request after `t` finishes (inf when none runs)."""
        return min((free for free, _ in self.rows if free > t), default=math.inf)

    def wait(self, groups: list[_Group], count: int, t: float) -> tuple[list[_Group], float]:
        """The first `count` of `groups` (submission order) finished at the first time from `t` that `count` are."""
        self.advance(t)
        while True:
            finished = [group for group in groups if group.done_at() <= t]
            if len(finished) >= count:
                return finished[:count], t
            t = self.next_finish(t)
            if t == math.inf:
                raise RuntimeError(f"the engine cannot finish {count} of {len(groups)} groups")
            self.advance(t)

    def load(self, t: float, version: int, pause_s: float) -> float:
        """Load `version` at `t`: running requests are parked `pause_s`, idle rows start nothing before it ends."""
        self.advance(t)
        rows = []
        for free, row in self.rows:
            if free > t:
                self.running[row].finish += pause_s
                rows.append((free + pause_s, row))
            else:
                rows.append((t + pause_s, row))
        heapq.heapify(rows)
        self.rows, self.version = rows, version
        return t + pause_s


@dataclass(eq=False)
class _Worker:
    engine: _Engine
    pool: list[_Group] = field(default_factory=list)
    buffer: list[_Group] = field(default_factory=list)
    held: int = 0
    clock: float = 0.0


@dataclass
class PoolRun:
    """What a run of the model gives: samples/s, and the samples dropped as stale and drawn again."""

    samples_per_s: float
    dropped: int
    served: int
    top_up_draws: int
    staleness_max: int

    @property
    def dropped_share(self) -> float:
        """The share of finished samples dropped as stale."""
        return self.dropped / (self.served + self.dropped)


def continuous_pool(
    draw_group: Callable[[], list[int]],
    *,
    workers: int,
    share_groups: int,
    slots: int,
    eta: int,
    steps: int,
    decode_step_s: float,
    train_s: Callable[[list[int]], float],
    sync_s: float,
    pool_steps: int = POOL_STEPS,
    drop_stale: bool = True,
    refill: str = "share",
) -> PoolRun:
    """Samples/s of continuous generation as this repository runs it (module doc), over `steps` training steps.

    `draw_group()` gives the next prompt group's response lengths; `train_s(lengths)` the seconds training step k
    takes on the lengths every worker served for it; `pool_steps` the shares a pool is topped up to; `refill` how
    dropped groups are replaced: "share" the runtime's (a fresh share generated batch-at-a-time), what-ifs "pool"
    (the pool's next to finish, a share submitted first only when the pool holds too few) and "pool_submit" (submit
    as many groups as are short, then take the pool's next to finish);
    `drop_stale=False` serves stale groups instead of dropping them (a what-if)."""
    if eta < 1:
        raise ValueError(f"continuous generation runs at eta >= 1; got eta={eta}")
    pool = [_Worker(_Engine(slots, decode_step_s)) for _ in range(workers)]
    arrivals: Iterator[int] = iter(range(1 << 62))

    def new_groups(count: int) -> list[_Group]:
        return [_Group([_Request(length) for length in draw_group()], next(arrivals)) for _ in range(count)]

    version_time = [0.0]
    dropped = draws = staleness = served_samples = 0
    for k in range(steps):
        lengths: list[int] = []
        ready = 0.0
        for worker in pool:
            engine = worker.engine
            while len(worker.pool) < pool_steps * share_groups:  # whole loader draws, as `continuous_rollouts`
                fresh = new_groups(share_groups)
                engine.submit(fresh, worker.clock)
                worker.pool += fresh
            taken, t = engine.wait(worker.pool, share_groups, worker.clock)
            worker.pool = [group for group in worker.pool if group not in taken]
            worker.buffer += taken
            made = submitted = 0  # refill rounds; fresh draws among them (what MAX_TOP_UP_DRAWS bounds)
            while True:
                stale = [group for group in worker.buffer if drop_stale and k - group.version() > eta]
                dropped += sum(len(group.requests) for group in stale)
                worker.buffer = [group for group in worker.buffer if group not in stale]
                if len(worker.buffer) >= share_groups:
                    break
                if submitted == MAX_TOP_UP_DRAWS:
                    raise RuntimeError(f"step {k}: still short after {submitted} top-up draws at eta={eta}")
                short = share_groups - len(worker.buffer)
                if refill in ("pool", "pool_submit"):
                    if refill == "pool_submit" or len(worker.pool) < short:
                        fresh = new_groups(short if refill == "pool_submit" else share_groups)
                        engine.submit(fresh, t)
                        worker.pool += fresh
                        submitted += 1
                    more, t = engine.wait(worker.pool, short, t)
                    worker.pool = [group for group in worker.pool if group not in more]
                elif refill == "share":
                    more = new_groups(share_groups)
                    engine.submit(more, t)
                    _, t = engine.wait(more, share_groups, t)
                    submitted += 1
                else:
                    raise ValueError(f"refill must be 'pool', 'share' or 'pool_submit'; got {refill!r}")
                worker.buffer += more
                made += 1
            draws += made
            worker.buffer.sort(key=lambda group: (group.version(), group.arrival))
            served, worker.buffer = worker.buffer[:share_groups], worker.buffer[share_groups:]
            staleness = max(staleness, *(k - group.version() for group in served))
            lengths += [request.length for group in served for request in group.requests]
            served_samples += sum(len(group.requests) for group in served)
            worker.clock = t
            ready = max(ready, t)
        begin = max(version_time[k], ready)
        version_time.append(begin + train_s(lengths) + sync_s)
        for worker in pool:
            target = max(worker.held, k + 2 - eta)
            while worker.held < target:
                worker.held += 1
                worker.clock = worker.engine.load(max(worker.clock, version_time[worker.held]), worker.held, sync_s)
    return PoolRun(served_samples / version_time[-1], dropped, served_samples, draws, staleness)
