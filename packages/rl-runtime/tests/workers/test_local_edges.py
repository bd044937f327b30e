"""The batches a worker keeps for its own next node, keyed by (edge, step) (moved from rl-coordinator's
LocalEdgeStore, whose SampleInfo list nothing read)."""

from __future__ import annotations

import pytest
import torch

from rl_runtime.workers._errors import RoutingError
from rl_runtime.workers._local_edges import LocalEdges


def test_store_keeps_batches_by_edge_and_step_and_take_frees_them() -> None:
    store: LocalEdges[torch.Tensor] = LocalEdges()
    payload = torch.arange(6).reshape(2, 3)
    store.put("rollout", 0, payload)
    store.put("rollout", 1, payload[:1])
    store.put("reward", 0, payload[1:])
    assert len(store) == 3 and ("rollout", 1) in store
    got = store.take("rollout", 0)
    assert got is payload
    assert ("rollout", 0) not in store and len(store) == 2
    with pytest.raises(RoutingError, match=r"no local batch for edge 'rollout' step 0 \(held: 'reward' step 0"):
        store.take("rollout", 0)


def test_store_rejections() -> None:
    store: LocalEdges[None] = LocalEdges()
    store.put("e", 0, None)
    with pytest.raises(RoutingError, match=r"a batch for edge 'e' step 0 is already held"):
        store.put("e", 0, None)
    with pytest.raises(RoutingError, match=r"step must be an int >= 0, got -1"):
        store.put("e", -1, None)
    with pytest.raises(RoutingError, match=r"edge_key must be a non-empty string"):
        store.put("", 1, None)
