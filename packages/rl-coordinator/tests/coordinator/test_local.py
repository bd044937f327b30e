"""The local fast path: when it applies, and the per-worker store keyed by (edge, step)."""

from __future__ import annotations

import pytest
import torch

from rl_coordinator import CoordinatorInputError, SampleInfo
from rl_coordinator.coordinator import LocalEdgeStore, use_local_path


@pytest.mark.parametrize(
    ("producer", "consumer", "balance", "expected"),
    [(4, 4, False, True), (4, 4, True, False), (4, 2, False, False), (1, 8, False, False), (1, 1, False, True)],
)
def test_use_local_path(producer: int, consumer: int, balance: bool, expected: bool) -> None:
    assert use_local_path(producer, consumer, balance=balance) is expected


@pytest.mark.parametrize(
    ("producer", "consumer", "balance", "message"),
    [
        (0, 4, False, r"producer_dp_size must be an int >= 1, got 0"),
        (4, 2.0, False, r"consumer_dp_size must be an int >= 1, got 2.0"),
        (4, 4, None, r"balance must be a bool, got None"),
    ],
)
def test_use_local_path_rejects(producer: object, consumer: object, balance: object, message: str) -> None:
    with pytest.raises(CoordinatorInputError, match=message):
        use_local_path(producer, consumer, balance=balance)  # type: ignore[arg-type]


def test_store_keeps_batches_by_edge_and_step_and_take_frees_them() -> None:
    store = LocalEdgeStore()
    infos = [SampleInfo("a", 0, 1, 2), SampleInfo("b", 0, 1, 3)]
    payload = torch.arange(6).reshape(2, 3)
    store.put("rollout", 0, infos, payload)
    store.put("rollout", 1, infos[:1], payload[:1])
    store.put("reward", 0, infos[1:], payload[1:])
    assert len(store) == 3 and ("rollout", 1) in store
    got_infos, got = store.take("rollout", 0)
    assert got_infos == infos and got is payload
    assert ("rollout", 0) not in store and len(store) == 2
    with pytest.raises(
        CoordinatorInputError, match=r"no local batch for edge 'rollout' step 0 \(held: 'reward' step 0"
    ):
        store.take("rollout", 0)


def test_store_rejections() -> None:
    store = LocalEdgeStore()
    store.put("e", 0, [], None)
    with pytest.raises(CoordinatorInputError, match=r"a batch for edge 'e' step 0 is already held"):
        store.put("e", 0, [], None)
    with pytest.raises(CoordinatorInputError, match=r"step must be an int >= 0, got -1"):
        store.put("e", -1, [], None)
    with pytest.raises(CoordinatorInputError, match=r"infos must be a list of SampleInfo"):
        store.put("e", 1, ["a"], None)  # type: ignore[list-item]
    with pytest.raises(CoordinatorInputError, match=r"edge_key must be a non-empty string"):
        store.put("", 1, [], None)
