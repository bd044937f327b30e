"""Asynchronous training's rollout schedule and the staleness metrics of a trained batch, without engines."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

from rl_core.schema import POLICY_VERSION, UID
from rl_runtime.nodes import NodeResources
from rl_runtime.nodes._staleness import staleness_metrics, uid_digest
from rl_runtime.nodes._train import next_rollout_version
from rl_runtime.workers import StepDataError


def _resources(eta: int, version: int = 0) -> Any:
    algorithm = SimpleNamespace(max_staleness=eta, async_generation="step")
    config = SimpleNamespace(algorithm=algorithm, placement=SimpleNamespace(colocate=False))
    return SimpleNamespace(config=config, policy_version=version)


@pytest.mark.parametrize("eta", [0, 1, 2, 4])
def test_rollout_versions_keep_every_trained_sample_within_eta(eta: int) -> None:
    res = _resources(eta)
    used = []
    for step in range(10):
        used.append(res.policy_version)  # the version rollout step `step` samples from
        res.policy_version = next_rollout_version(cast(NodeResources, res), step)
    # Training step k consumes rollout step k: k - version is its staleness, at most eta and exactly eta once filled.
    assert [step - version for step, version in enumerate(used)] == [min(step, eta) for step in range(10)]
    # Versions only grow, one at a time: each one the training slots publish is received once, in order.
    assert all(0 <= later - earlier <= 1 for earlier, later in itertools.pairwise(used))


def test_after_a_drain_the_schedule_restarts_from_the_held_version() -> None:
    # Drained at step 5 (the rollout caught up to version 5): the next eta steps sample from 5, none older.
    res = _resources(2, version=5)
    used = []
    for step in range(5, 9):
        used.append(res.policy_version)
        res.policy_version = next_rollout_version(cast(NodeResources, res), step)
    assert used == [5, 5, 5, 6]


def _batch(versions: list[int], uids: list[int]) -> dict[str, torch.Tensor]:
    return {POLICY_VERSION: torch.tensor(versions), UID: torch.tensor(uids)}


def test_staleness_metrics_by_hand() -> None:
    metrics = staleness_metrics(_batch([3, 3, 2, 2], [10, 11, 12, 13]), trainer_version=4, max_staleness=2)
    assert metrics == {
        "async/staleness_mean": 1.5,
        "async/staleness_max": 2.0,
        "async/num_trained_samples": 4.0,
        "async/uid_digest": uid_digest([13, 12, 11, 10]),
    }
    assert uid_digest([10, 11]) != uid_digest([10, 12])


@pytest.mark.parametrize(("versions", "found"), [([1, 4], "0..3"), ([5, 4], "-1..0")])
def test_samples_outside_the_bound_are_refused(versions: list[int], found: str) -> None:
    with pytest.raises(StepDataError, match=rf"samples {found} policy versions behind .*max_staleness=2 allows 0..2"):
        staleness_metrics(_batch(versions, [1, 2]), trainer_version=4, max_staleness=2)
