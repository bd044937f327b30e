"""Asynchronous training's sample buffer on a rollout slot (`algorithm.max_staleness` eta > 0, split placement).

Split placement with eta > 0 ends the rollout sub-graph's sample path in a `staleness_buffer` node (`split_pipeline`
adds it): every group the rollout makes enters this rank's `RolloutBuffer` (rl-coordinator's group-aware
`StalenessBuffer`: a GRPO group enters and leaves whole), and each step sends the training slots the oldest
admissible groups, exactly this rank's share of a step. Training step `step` trains with policy version `step`, so a
group whose first token came from a version more than eta behind it is dropped and counted (`async/dropped_stale`),
and the node draws more prompts (`top_up`, fresh from the version the engine holds) until the share is full. Groups
left over (more than a step needs) wait for the next step; the buffer and its counts go into the rank's checkpoint
(`state_dict`).

With step-at-a-time generation (today's `generate`) every group of rollout step k comes from version
`max(start, k - eta)` (`next_rollout_version`), so none is ever stale and the buffer passes each step's batch
through unchanged; groups go stale when a sample can start under an older policy than its step's, as partial
rollouts across weight updates do.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from rl_coordinator import SampleInfo
from rl_coordinator.staleness import BufferEntry, StalenessBuffer
from rl_core.schema import GROUP_ID, POLICY_VERSION, RESPONSE_MASK, TOKEN_POLICY_VERSION, UID
from rl_core.workflows import NO_VERSION
from rl_runtime.nodes._batching import single_input
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
"""`algorithm.async_generation` under which the rollout's groups carry each token's version."""
REGENERATE_PARAM = "regenerate"
"""The buffer node's param: whether its rollout sub-graph is one `top_up` can redo (generate, reward, dynamic
sampling); otherwise a step that runs short fails naming the reason."""
DROPPED_METRIC = "async/dropped_stale"
"""Samples dropped this step because their first token's version was more than eta behind the training step."""
BUFFERED_METRIC = "async/buffered_samples"
"""Samples left in the rank's buffer after the step took its share."""
TOP_UP_METRIC = "async/top_up_draws"
"""Extra prompt draws this step made to replace dropped samples."""
MAX_TOP_UP_DRAWS = 8
"""A step that is still short after this many extra draws fails (the rollout cannot keep up with eta)."""
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
    the version the engine holds: what replaces dropped stale groups."""
    rollout = res.rollout
    if rollout is not None and "sleep" in rollout.capabilities and rollout.status().state == "asleep":
        rollout.wake_up()
    more = score_batch(res, draw_rollouts(res, step, rank, draw=TOP_UP_FIRST_DRAW + draw), node)
    if res.config.algorithm.async_generation == CONTINUOUS and TOKEN_POLICY_VERSION not in more.batch:
        more = with_token_versions(more)  # the fields continuous generation's groups carry, so the two concatenate
    settings = res.config.algorithm.dynamic_sampling
    return more if settings is None else informative_groups(more, settings.epsilon)


def with_token_versions(data: StepData) -> StepData:
    """`data` with `TOKEN_POLICY_VERSION` `(B, T)`: each response token's version, its sample's `POLICY_VERSION` (a
    sample generated under one version), `NO_VERSION` outside the response."""
    response = data.batch[RESPONSE_MASK].bool()
    per_sample = data.batch[POLICY_VERSION].to(torch.int64).unsqueeze(1).expand(response.shape)
    versions = torch.where(response, per_sample, torch.full_like(per_sample, NO_VERSION))
    return StepData({**data.batch, TOKEN_POLICY_VERSION: versions}, data.extras, data.metrics)


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
    got = dropped = draws = 0
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
        buffer.put(top_up(res, ctx.step, ctx.dp.rank, draws, ctx.node.id))
        draws += 1
    out = parts[0] if len(parts) == 1 else concat_samples(parts)
    metrics = {DROPPED_METRIC: float(dropped), BUFFERED_METRIC: float(len(buffer)), TOP_UP_METRIC: float(draws)}
    return StepData(out.batch, out.extras, metrics)
