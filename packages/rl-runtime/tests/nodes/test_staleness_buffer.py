"""Asynchronous training's rollout-side staleness buffer, without engines or Ray: admission order, whole groups, drop
counts, the top-up draws that refill a step, and the checkpoint round trip."""

from __future__ import annotations

import io
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
import torch

from rl_core.graph import Node, NodeRole, get_pipeline
from rl_core.schema import GROUP_ID, INPUT_IDS, POLICY_VERSION, RESPONSE_MASK, TOKEN_POLICY_VERSION, UID
from rl_runtime.nodes import _staleness_buffer
from rl_runtime.nodes._rollout_batch import concat_samples
from rl_runtime.nodes._staleness_buffer import (
    BUFFERED_METRIC,
    DROPPED_METRIC,
    REGENERATE_PARAM,
    TOP_UP_METRIC,
    RolloutBuffer,
    staleness_buffer,
)
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.trainer._split import STALENESS_BUFFER_NODE, split_pipeline
from rl_runtime.workers import NodeContext, StepData, StepDataError

GROUP = 2
"""Samples per group in these tests."""


def _groups(version: int, groups: list[int]) -> StepData:
    """`len(groups) * GROUP` samples, group g's uids g*10, g*10+1, all from policy `version`."""
    uids = [g * 10 + k for g in groups for k in range(GROUP)]
    n = len(uids)
    batch = {
        UID: torch.tensor(uids),
        GROUP_ID: torch.tensor([uid // 10 for uid in uids]),
        POLICY_VERSION: torch.full((n,), version),
        INPUT_IDS: torch.tensor([[uid, uid + 1000] for uid in uids]),
    }
    return StepData(batch, {"text": [f"s{uid}" for uid in uids]})


def _uids(data: StepData | None) -> list[int]:
    return [] if data is None else data.batch[UID].tolist()


def test_the_oldest_admissible_groups_leave_first_and_a_whole_batch_passes_through() -> None:
    buffer = RolloutBuffer(max_staleness=2)
    fresh = _groups(1, [1, 2])
    buffer.put(fresh)
    out, dropped = buffer.take(4, version=1)
    # The step's batch, taken whole and in order, is the very StepData that came in (no copy).
    assert out is not None and dropped == 0 and len(buffer) == 0
    assert all(out.batch[name] is tensor for name, tensor in fresh.batch.items())
    buffer.put(_groups(3, [5]))
    buffer.put(_groups(2, [4]))  # arrives later but is older: leaves first
    buffer.put(_groups(3, [6]))
    out, dropped = buffer.take(4, version=3)
    assert _uids(out) == [40, 41, 50, 51] and dropped == 0
    assert out is not None and out.extras["text"] == ["s40", "s41", "s50", "s51"]
    assert out.batch[INPUT_IDS].tolist() == [[40, 1040], [41, 1041], [50, 1050], [51, 1051]]
    assert len(buffer) == GROUP


def test_a_group_is_served_whole_or_waits() -> None:
    buffer = RolloutBuffer(max_staleness=1)
    buffer.put(_groups(0, [1, 2, 3]))
    out, _ = buffer.take(3, version=0)  # room for one whole group and a half: the half is not split off
    assert _uids(out) == [10, 11]
    out, _ = buffer.take(4, version=0)
    assert _uids(out) == [20, 21, 30, 31] and len(buffer) == 0


def test_groups_staler_than_eta_are_dropped_and_counted() -> None:
    buffer = RolloutBuffer(max_staleness=1)
    buffer.put(_groups(0, [1, 2]))
    buffer.put(_groups(1, [3]))
    buffer.put(_groups(2, [4]))
    out, dropped = buffer.take(4, version=2)  # version 0 is 2 behind: both of its groups go
    assert _uids(out) == [30, 31, 40, 41] and dropped == 4
    out, dropped = buffer.take(4, version=2)
    assert out is None and dropped == 0
    assert (buffer.dropped_total, buffer.served_total, len(buffer)) == (4, 4, 0)


def test_the_buffer_survives_a_checkpoint_with_its_samples_and_counts() -> None:
    buffer = RolloutBuffer(max_staleness=1)
    buffer.put(_groups(0, [1]))
    buffer.put(_groups(1, [2, 3]))
    buffer.take(2, version=2)  # drops group 1, serves group 2
    saved = io.BytesIO()
    torch.save(buffer.state_dict(), saved)  # as the rank state is written
    saved.seek(0)
    restored = RolloutBuffer.from_state(torch.load(saved, weights_only=False), max_staleness=1)
    assert (restored.dropped_total, restored.served_total, len(restored)) == (2, 2, 2)
    out, dropped = restored.take(4, version=2)
    assert _uids(out) == [30, 31] and dropped == 0
    assert out is not None and out.extras["text"] == ["s30", "s31"]
    assert RolloutBuffer.from_state(RolloutBuffer(1).state_dict(), 1).state_dict()["pending"] is None


def _context(step: int, res: Any, regenerate: bool = True) -> NodeContext[Any]:
    params = MappingProxyType({REGENERATE_PARAM: regenerate})
    node = Node("staleness_buffer", "staleness_buffer", NodeRole.ROLLOUT, ("reward",), params=params)
    return NodeContext(node, 0, DataParallelInfo(0, 1), step, res)


def _step(ctx: NodeContext[Any], data: StepData) -> StepData:
    out = staleness_buffer(ctx, {"reward": data})
    assert isinstance(out, StepData)
    return out


def _res(eta: int) -> Any:
    config = SimpleNamespace(algorithm=SimpleNamespace(max_staleness=eta, dynamic_sampling=None))
    return SimpleNamespace(config=config, plan=SimpleNamespace(samples_per_rollout_rank=4), staleness_buffer=None)


def test_the_node_draws_more_when_stale_groups_leave_the_step_short(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []

    def fresh_draw(res: Any, step: int, rank: int, draw: int, node: str) -> StepData:
        drawn.append(draw)
        return _groups(step, [7 + draw])

    monkeypatch.setattr(_staleness_buffer, "top_up", fresh_draw)
    res = _res(eta=1)
    res.staleness_buffer = RolloutBuffer(1)
    res.staleness_buffer.put(_groups(0, [1]))  # left over from an earlier step, now 3 versions behind
    out = _step(_context(3, res), _groups(2, [2]))
    # Group 1 dropped; group 2 (version 2) admissible; one extra draw (version 3) fills the step's 4 samples.
    assert _uids(out) == [20, 21, 70, 71] and drawn == [0]
    assert out.metrics == {DROPPED_METRIC: 2.0, BUFFERED_METRIC: 0.0, TOP_UP_METRIC: 1.0}
    # A pass-through step: nothing dropped, nothing drawn.
    out = _step(_context(4, res), _groups(4, [3, 4]))
    assert _uids(out) == [30, 31, 40, 41] and out.metrics[TOP_UP_METRIC] == 0.0


def test_a_top_up_under_continuous_generation_carries_token_versions_and_joins_its_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The top-up generates a batch at a time; under continuous generation the buffer also holds groups with each
    # token's version, and the step concatenates both: the top-up gets the field (all tokens its sample's version).
    def drawn(res: Any, step: int, rank: int, draw: int) -> StepData:
        data = _groups(3, [7])
        return StepData({**data.batch, RESPONSE_MASK: torch.tensor([[0, 1], [1, 0]])}, data.extras)

    monkeypatch.setattr(_staleness_buffer, "draw_rollouts", drawn)
    monkeypatch.setattr(_staleness_buffer, "score_batch", lambda res, data, node: data)
    res = _res(eta=1)
    res.config.algorithm.async_generation = "continuous"
    res.rollout = None  # no engine to wake: draw_rollouts is the stand-in above
    more = _staleness_buffer.top_up(res, 3, 0, 0, "staleness_buffer")
    assert more.batch[TOKEN_POLICY_VERSION].tolist() == [[-1, 3], [3, -1]]
    carried = _groups(2, [2])
    carried = StepData({**carried.batch, TOKEN_POLICY_VERSION: torch.tensor([[1, 2], [2, 2]])}, carried.extras)
    both = concat_samples([StepData(carried.batch, carried.extras), StepData(more.batch, more.extras)])
    assert both.batch[TOKEN_POLICY_VERSION].tolist() == [[1, 2], [2, 2], [-1, 3], [3, -1]]


def test_a_rollout_the_buffer_cannot_redraw_fails_the_short_step_naming_the_setting() -> None:
    res = _res(eta=1)
    res.staleness_buffer = RolloutBuffer(1)
    res.staleness_buffer.put(_groups(0, [1]))
    with pytest.raises(StepDataError, match=r"2 of 4 samples admissible after dropping 2 .*algorithm.max_staleness"):
        _step(_context(3, res, regenerate=False), _groups(3, [2]))


def test_split_placement_puts_the_buffer_between_the_rollout_and_training() -> None:
    graph = get_pipeline("grpo")
    plain = split_pipeline(graph)
    buffered = split_pipeline(graph, staleness_buffer=True)
    rollout = buffered.subgraphs[0]
    (source,) = {dep.upstream_node for dep in plain.cross_dependencies}
    assert rollout[STALENESS_BUFFER_NODE].dependencies == (source,)
    assert rollout[STALENESS_BUFFER_NODE].params[REGENERATE_PARAM] is True
    assert rollout["receive_weights"].dependencies == (STALENESS_BUFFER_NODE,)
    assert {dep.upstream_node for dep in buffered.cross_dependencies} == {STALENESS_BUFFER_NODE}
    assert [dep.downstream_node for dep in buffered.cross_dependencies] == [
        dep.downstream_node for dep in plain.cross_dependencies
    ]
    assert STALENESS_BUFFER_NODE not in plain.subgraphs[0]


def test_continuous_generation_swaps_the_generate_node_and_nothing_else() -> None:
    graph = get_pipeline("grpo")
    rollout = split_pipeline(graph, staleness_buffer=True, continuous=True).subgraphs[0]
    step = split_pipeline(graph, staleness_buffer=True).subgraphs[0]
    swapped = {node.id for node in rollout.nodes.values() if node.operation != step[node.id].operation}
    assert swapped == {"rollout_actor"} and rollout["rollout_actor"].operation == "generate_continuous"
    assert rollout["rollout_actor"].dependencies == step["rollout_actor"].dependencies
