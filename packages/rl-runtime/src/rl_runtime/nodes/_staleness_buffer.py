"""Asynchronous training's sample buffer on a rollout slot (`algorithm.max_staleness` eta > 0, split placement).

Split placement with eta > 0 ends the rollout sub-graph's sample path in a `staleness_buffer` node (`split_pipeline`
adds it): every group the rollout makes enters this rank's `RolloutBuffer` (rl-coordinator's group-aware
`StalenessBuffer`: a GRPO group enters and leaves whole), and each step sends the training slots the oldest
admissible groups, exactly this rank's share of a step. Training step `step` trains with policy version `step`, so a
group whose first token came from a version more than eta behind it is dropped and counted (`async/dropped_stale`),
and the node replaces it until the share is full: under step-at-a-time generation by a fresh draw of prompts
(`top_up`, from the version the engine holds), under continuous generation by the next groups to finish in the slot's
GenerationPool (`refill_from_pool`: already in flight, so the step waits for no fresh share; a refill group that is
itself too stale is dropped and counted in turn). Groups left over (more than a step needs) wait for the next step;
the buffer and its counts go into the rank's checkpoint (`state_dict`), and at a checkpoint under continuous
generation the pool's groups are run to the end and put into the buffer first (`flush_into_buffer`).

With step-at-a-time generation (today's `generate`) every group of rollout step k comes from version
`max(start, k - eta)` (`next_rollout_version`), so none is ever stale and the buffer passes each step's batch
through unchanged; groups go stale when a sample can start under an older policy than its step's, as partial
rollouts across weight updates do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rl_coordinator import SampleInfo
from rl_coordinator.staleness import BufferEntry, StalenessBuffer
from rl_core.schema import GROUP_ID, POLICY_VERSION, UID
from rl_runtime.nodes._batching import single_input
from rl_runtime.nodes._continuous import slot_pool, submit_draw
from rl_runtime.nodes._dynamic_sampling import informative_groups
from rl_runtime.nodes._generate import draw_rollouts
from rl_runtime.nodes._resources import NodeResources
from rl_runtime.nodes._reward import score_batch
from rl_runtime.nodes._rollout_batch import concat_samples, select_samples
from rl_runtime.nodes._seeds import DRAW_BITS
from rl_runtime.workers import NodeContext, StepData, StepDataError, register_operation

logger = logging.getLogger(__name__)

STALENESS_BUFFER_OPERATION = "staleness_buffer"
CONTINUOUS = "continuous"
"""`algorithm.async_generation` under which dropped groups are replaced from the slot's GenerationPool."""
FLUSH_NODE = "checkpoint flush"
"""How a flush names itself in a scoring error."""
REGENERATE_PARAM = "regenerate"
"""The buffer node's param: whether its rollout sub-graph is one `top_up` can redo (generate, reward, dynamic
sampling); otherwise a step that runs short fails naming the reason."""
DROPPED_METRIC = "async/dropped_stale"
"""Samples dropped this step because their first token's version was more than eta behind the training step."""
BUFFERED_METRIC = "async/buffered_samples"
"""Samples left in the rank's buffer after the step took its share."""
TOP_UP_METRIC = "async/top_up_draws"
"""Extra rounds this step made to replace dropped samples: fresh prompt draws (`top_up`), or refills from the slot's
GenerationPool under continuous generation (`refill_from_pool`)."""
MAX_TOP_UP_DRAWS = 8
"""A step that is still short after this many extra draws of prompts fails (the rollout cannot keep up with eta);
refills that only take groups already in the pool do not count (each takes at least one, so they end)."""
TOP_UP_FIRST_DRAW = (1 << DRAW_BITS) - MAX_TOP_UP_DRAWS
"""Top-up draws number their samples from here down to the id layout's last draw, clear of dynamic sampling's."""
_EDGE = "rollout"


class RolloutBuffer:
    """A rollout rank's finished groups, served oldest first under the staleness bound `max_staleness` (eta).

    `put` adds a StepData of whole groups (it needs `uid`, and `group_id` and `policy_version` when it has them);
    `take(n, version)` drops the groups older than `version - eta` and returns up to `n` samples of the oldest
    remaining whole groups. Not thread-safe beyond what StalenessBuffer is: one node operation uses it.
    """

    def __init__(self, max_staleness: int) -> None:
        self.max_staleness = max_staleness
        self._buffer = StalenessBuffer(max_staleness, policy="drop", group_aware=True, on_drop=self._forget)
        self._parts: dict[int, StepData] = {}
        self._left: dict[int, int] = {}
        self._where: dict[str, tuple[int, int]] = {}  # uid -> (part, row), in arrival order
        self._next_part = 0
        self._dropped_now = 0
        self.dropped_total = 0
        self.served_total = 0

    def __len__(self) -> int:
        return len(self._where)

    def put(self, data: StepData) -> None:
        """Add the samples of `data` (whole groups); their uids must be new to the buffer."""
        if data.num_samples == 0:
            return
        if UID not in data.batch:
            raise StepDataError(f"the staleness buffer needs batch[{UID!r}] (B,) sample ids; got {sorted(data.batch)}")
        uids = [str(uid) for uid in data.batch[UID].tolist()]
        groups = data.batch[GROUP_ID].tolist() if GROUP_ID in data.batch else [int(uid) for uid in uids]
        versions = data.batch[POLICY_VERSION].tolist() if POLICY_VERSION in data.batch else [0] * len(uids)
        part = self._next_part
        infos = [
            SampleInfo(uid, int(group), prompt_tokens=0, response_tokens=1, policy_version=int(version), edge=_EDGE)
            for uid, group, version in zip(uids, groups, versions, strict=True)
        ]
        self._buffer.put(infos, uids)
        self._next_part += 1
        self._parts[part] = data
        self._left[part] = len(uids)
        for row, uid in enumerate(uids):
            self._where[uid] = (part, row)

    def take(self, n: int, version: int) -> tuple[StepData | None, int]:
        """Up to `n` samples (whole groups, oldest version first) admissible at trainer `version`, and how many samples
        this call dropped as staler than eta. None when none is admissible."""
        self._dropped_now = 0
        served = self._buffer.take(n, version)
        self.served_total += len(served)
        return self._gather([entry.ref for entry in served]), self._dropped_now

    def _forget(self, dropped: list[BufferEntry]) -> None:
        self._dropped_now += len(dropped)
        self.dropped_total += len(dropped)
        logger.info("dropped %d stale samples (max_staleness=%d)", len(dropped), self.max_staleness)
        self._gather([entry.ref for entry in dropped])

    def _gather(self, uids: list[str]) -> StepData | None:
        """The rows of `uids` as one StepData (in that order), removed from the buffer."""
        if not uids:
            return None
        runs: list[tuple[int, list[int]]] = []
        for uid in uids:
            part, row = self._where.pop(uid)
            if runs and runs[-1][0] == part:
                runs[-1][1].append(row)
            else:
                runs.append((part, [row]))
            self._left[part] -= 1
        pieces = []
        for part, rows in runs:
            data = self._parts[part]
            # A whole batch taken in order passes through unchanged (the common case: no copy, nothing re-checked).
            whole = rows == list(range(data.num_samples))
            pieces.append(StepData(data.batch, data.extras) if whole else select_samples(data, rows))
        for part in {part for part, _ in runs}:
            if self._left[part] == 0:
                del self._parts[part], self._left[part]
        return pieces[0] if len(pieces) == 1 else concat_samples(pieces)

    def state_dict(self) -> dict[str, Any]:
        """The buffered samples (one StepData's batch and extras, arrival order) and the counts, for a checkpoint."""
        pending = self._pending()
        return {
            "max_staleness": self.max_staleness,
            "dropped_total": self.dropped_total,
            "served_total": self.served_total,
            # Plain dicts and lists: torch.save cannot pickle StepData's read-only mapping views.
            "pending": None
            if pending is None
            else {
                "batch": dict(pending.batch),
                "extras": {name: list(values) for name, values in pending.extras.items()},
            },
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], max_staleness: int) -> RolloutBuffer:
        """A buffer holding what `state_dict` saved, bounded by this run's `max_staleness`."""
        buffer = cls(max_staleness)
        buffer.dropped_total, buffer.served_total = int(state["dropped_total"]), int(state["served_total"])
        pending = state["pending"]
        if pending is not None:
            buffer.put(StepData(pending["batch"], pending["extras"]))
        return buffer

    def _pending(self) -> StepData | None:
        if not self._where:
            return None
        pieces = [select_samples(self._parts[part], [row]) for part, row in self._where.values()]
        return concat_samples(pieces)


def top_up(res: NodeResources, step: int, rank: int, draw: int, node: str) -> StepData:
    """One more draw of this rank's prompts, scored (and filtered to informative groups under dynamic sampling), from
    the version the engine holds: what replaces dropped stale groups under step-at-a-time generation."""
    rollout = res.rollout
    if rollout is not None and "sleep" in rollout.capabilities and rollout.status().state == "asleep":
        rollout.wake_up()
    return _scored(res, draw_rollouts(res, step, rank, draw=TOP_UP_FIRST_DRAW + draw), node)


def refill_from_pool(
    res: NodeResources, step: int, rank: int, draw: int, groups: int, node: str
) -> tuple[StepData, bool]:
    """What replaces dropped stale groups under continuous generation: the next `groups` prompt groups to finish in
    this slot's GenerationPool, already in flight, scored and filtered as `top_up`, and whether a new loader draw
    (numbered `draw` among the top-ups) had to be submitted first, which happens only when the pool holds fewer. The
    next step's top-up restores the pool."""
    pool = slot_pool(res)
    drew = len(pool) < groups
    if drew:
        submit_draw(res, pool, step, rank, TOP_UP_FIRST_DRAW + draw)
    return _scored(res, pool.take(groups, res.config.trainer.step_timeout_s), node), drew


def flush_into_buffer(res: NodeResources) -> int:
    """Continuous generation, at a checkpoint: run the slot's pool to the end and put its groups, scored (and filtered
    under dynamic sampling), into the staleness buffer, so the checkpoint holds them: the samples flushed."""
    pool = res.generation_pool
    if pool is None or len(pool) == 0:
        return 0
    data = pool.flush(res.config.trainer.step_timeout_s)
    assert data is not None
    if res.staleness_buffer is None:
        res.staleness_buffer = RolloutBuffer(res.config.algorithm.max_staleness)
    res.staleness_buffer.put(_scored(res, data, FLUSH_NODE))
    logger.info("flushed %d in-flight samples into the staleness buffer", data.num_samples)
    return data.num_samples


def _scored(res: NodeResources, data: StepData, node: str) -> StepData:
    """`data` scored, and filtered to informative groups under dynamic sampling (what its rollout sub-graph does)."""
    scored = score_batch(res, data, node)
    settings = res.config.algorithm.dynamic_sampling
    return scored if settings is None else informative_groups(scored, settings.epsilon)


@register_operation(STALENESS_BUFFER_OPERATION)
def staleness_buffer(ctx: NodeContext[NodeResources], inputs: Mapping[str, StepData]) -> StepData:
    """This rank's share of the step from its `RolloutBuffer`: the step's new groups enter, the oldest admissible whole
    groups leave (stale ones dropped, more drawn until the share is full). Metrics: `async/dropped_stale`,
    `async/buffered_samples`, `async/top_up_draws`."""
    res = ctx.resources
    data = single_input(ctx, inputs)
    eta = res.config.algorithm.max_staleness
    if res.staleness_buffer is None:
        res.staleness_buffer = RolloutBuffer(eta)
    buffer = res.staleness_buffer
    buffer.put(data)
    target = res.plan.samples_per_rollout_rank
    parts: list[StepData] = []
    got = dropped = draws = rounds = 0
    while True:
        served, lost = buffer.take(target - got, ctx.step)
        dropped += lost
        if served is not None:
            parts.append(served)
            got += served.num_samples
        if got >= target:
            break
        if draws >= MAX_TOP_UP_DRAWS or not ctx.node.params.get(REGENERATE_PARAM, False):
            raise StepDataError(
                f"node {ctx.node.id!r}, step {ctx.step}: {got} of {target} samples admissible after "
                f"dropping {dropped} staler than algorithm.max_staleness={eta} and {draws} extra draw(s) (at most "
                f"{MAX_TOP_UP_DRAWS}, only for generate/compute_reward/dynamic_sampling rollouts); raise "
                "algorithm.max_staleness"
            )
        if res.config.algorithm.async_generation == CONTINUOUS:
            short = -(-(target - got) // res.config.batch.samples_per_prompt)  # whole groups
            more, drew = refill_from_pool(res, ctx.step, ctx.dp.rank, draws, short, ctx.node.id)
            buffer.put(more)
            draws += drew
        else:
            buffer.put(top_up(res, ctx.step, ctx.dp.rank, draws, ctx.node.id))
            draws += 1
        rounds += 1
    out = parts[0] if len(parts) == 1 else concat_samples(parts)
    metrics = {DROPPED_METRIC: float(dropped), BUFFERED_METRIC: float(len(buffer)), TOP_UP_METRIC: float(rounds)}
    return StepData(out.batch, out.extras, metrics)
