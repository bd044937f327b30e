"""SharedMemoryTransport: buffer reuse, lending, growth and mixed dtypes (the cross-process path runs in
the conformance suite against ProcessEngine)."""

from __future__ import annotations

import torch

from rl_engines.rollout import HFEngine, HFEngineConfig, open_shared_bucket
from rl_engines.sync import SharedMemoryTransport, WeightSync, as_buckets
from rl_engines.testing import ConformanceModels


def test_buffers_are_reused_once_delivered_and_sized_for_the_largest_bucket() -> None:
    transport = SharedMemoryTransport(lend=False)
    [(first, shared)] = transport.pack([("a", torch.ones(100))])
    [(second, _)] = transport.pack([("b", torch.full((50,), 2.0))])
    assert second is not first  # the first is still marked busy: no delivery has completed
    transport._busy.clear()
    [(third, _)] = transport.pack([("c", torch.full((50,), 3.0))])
    assert third is first
    transport._busy.clear()
    [(grown, bigger)] = transport.pack([("d", torch.arange(1000.0))])
    assert grown not in (first, second) and grown.nbytes >= 4000 and bigger.buffer_id != shared.buffer_id
    [(name, view)] = open_shared_bucket(bigger)
    assert name == "d" and torch.equal(view, torch.arange(1000.0))
    transport.close()


def test_mixed_dtypes_in_one_bucket() -> None:
    named = [("f", torch.randn(5)), ("h", torch.randn(3).half()), ("i", torch.arange(7)), ("m", torch.eye(3) > 0)]
    [(_, shared)] = SharedMemoryTransport().pack(named)
    for (name, sent), (_, got) in zip(named, open_shared_bucket(shared), strict=True):
        assert torch.equal(sent, got), name


def _sync_all(sync: WeightSync, state: dict[str, torch.Tensor], version: int, names: list[str] | None = None) -> None:
    chosen = sorted(state) if names is None else names
    sync.sync(as_buckets(((n, state[n]) for n in chosen), 2**14), version)


def test_lent_buffers_become_the_weights_and_are_never_rewritten_while_held(models: ConformanceModels) -> None:
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir)))
    transport = SharedMemoryTransport()
    sync = WeightSync([engine], transport)  # verifies version and checksum after every sync
    v1, v2 = models.state(1), models.state(2)
    layer = [n for n in v1 if ".layers.1." in n]
    expected = dict(v1)
    for version, state, names in [(3, v2, None), (4, v1, layer), (5, v1, None), (6, v2, layer),
                                  (7, v2, None), (8, v1, None), (9, v2, None)]:  # fmt: skip
        _sync_all(sync, state, version, names)
        expected.update({n: state[n] for n in (names or state)})
        assert engine.weights_checksum() == models.checksum(expected), version
    pool = transport._pool[torch.device("cpu")]
    settled = len(pool)
    for version in (10, 11, 12):
        _sync_all(sync, v1 if version == 11 else v2, version)
    assert len(pool) == settled  # steady state: buffers the engine released are rewritten, none added
    norm = engine.model.model.norm.weight
    held = {b.handle["handle"]: b.tensor for b in pool}
    assert any(norm.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() for t in held.values())
    sync.close()


def test_without_lending_the_engine_copies_and_holds_nothing(models: ConformanceModels) -> None:
    engine = HFEngine.from_config(HFEngineConfig(model_path=str(models.v1_dir)))
    transport = SharedMemoryTransport(lend=False)
    sync = WeightSync([engine], transport)
    for version in (2, 1, 2):
        _sync_all(sync, models.state(version), version)
    assert not transport._held and engine._weights.lent_buffers() == frozenset()
    assert len(transport._pool[torch.device("cpu")]) == 2  # one being packed, one being delivered
