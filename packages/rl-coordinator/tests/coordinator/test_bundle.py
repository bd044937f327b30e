"""PayloadBundle: batches round-trip through pickle and the object store, tensors as private writable copies."""

from __future__ import annotations

import itertools
import pickle
import threading
from typing import Any

import pytest
import ray
import torch
from hypothesis import given
from hypothesis import strategies as st
from tensordict import TensorDict

from rl_coordinator import CoordinatorInputError
from rl_coordinator.coordinator._bundle import EncodedBatch, PayloadBundle, encode_batch
from rl_coordinator.coordinator._sender import bundle_groups
from rl_coordinator.coordinator._staging import StagingArena


def mixed_batches() -> list[tuple[Any, int]]:
    """(payload, samples) of every kind a producer may put, tensors of several dtypes and layouts included."""
    td = TensorDict(
        {
            "ids": torch.arange(6).reshape(3, 2),
            "mask": torch.tensor([[True, False], [False, True], [True, True]]),
            "logp": torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).bfloat16(),
        },
        [3],
    )
    strided = torch.arange(12, dtype=torch.float64).reshape(3, 4)[:, ::2]  # not contiguous
    grads = torch.ones(2, 2, requires_grad=True)  # keeps torch's own pickling
    return [
        (td, 3),
        ([{"text": "x", "empty": torch.zeros(0)}, {"text": "y", "scalar": torch.tensor(2.5)}], 2),
        (strided, 3),
        (torch.complex(torch.ones(2), torch.arange(2.0)).conj(), 2),
        (grads, 2),
    ]


def expected_samples() -> list[Any]:
    return [payload[i] for payload, n in mixed_batches() for i in range(n)]


def assert_same(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.detach().resolve_conj(), want.detach().resolve_conj())
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            assert_same(got[key], want[key])
    elif hasattr(want, "batch_size"):  # a TensorDict row
        assert_same(got.to_dict(), want.to_dict())
    else:
        assert got == want


def make_bundle() -> PayloadBundle:
    return PayloadBundle.of([encode_batch(payload, n) for payload, n in mixed_batches()])


def test_samples_follow_one_another_across_batches() -> None:
    bundle = pickle.loads(pickle.dumps(make_bundle(), protocol=5))
    want = expected_samples()
    assert len(bundle) == len(want) == 12
    for i, sample in enumerate(want):
        assert_same(bundle[i], sample)
    with pytest.raises(IndexError, match=r"sample 12 is outside a bundle of 12 samples"):
        bundle[12]


def test_object_store_round_trip_gives_writable_private_tensors(ray_runtime: None) -> None:
    bundle = ray.get(ray.put(make_bundle()))
    row = bundle[0]["ids"]
    row.add_(100)  # decoded tensors are copies: writing one leaves the stored object alone
    again = ray.get(ray.put(make_bundle()))
    assert torch.equal(again[0]["ids"], torch.tensor([0, 1]))
    assert torch.equal(bundle[0]["ids"], torch.tensor([100, 101]))
    for i, sample in enumerate(expected_samples()):
        assert_same(again[i], sample)


def test_encoding_snapshots_the_payload() -> None:
    payload = torch.zeros(2, 3)
    batch = encode_batch(payload, 2)
    payload.fill_(7.0)
    assert torch.equal(PayloadBundle.of([batch])[1], torch.zeros(3))


def test_closures_pickle_as_ray_put_would_and_unpicklable_payloads_are_refused() -> None:
    offset = 3
    bundle = pickle.loads(pickle.dumps(PayloadBundle.of([encode_batch([lambda x: x + offset], 1)])))
    assert bundle[0](1) == 4
    with pytest.raises(CoordinatorInputError, match=r"payload of list cannot be pickled \(.*lock.*\); put tensors"):
        encode_batch([threading.Lock()], 1)


class _Interrupting:
    def __reduce__(self) -> Any:
        raise KeyboardInterrupt


def test_encoding_into_an_arena_copies_there_and_a_failed_encoding_gives_its_slots_back() -> None:
    arena = StagingArena(1 << 16)
    payload = torch.arange(6).reshape(3, 2)
    batch = encode_batch(payload, 3, arena)
    assert len(batch.staged) == 1 and arena.held_bytes > 0
    payload.fill_(0)
    assert torch.equal(PayloadBundle.of([batch])[2], torch.tensor([4, 5]))
    arena.release(batch.staged)
    with pytest.raises(CoordinatorInputError, match="cannot be pickled"):
        encode_batch([torch.ones(4), threading.Lock()], 2, arena)
    with pytest.raises(KeyboardInterrupt):  # an interrupt is not turned into an input error
        encode_batch([torch.ones(4), _Interrupting()], 2, arena)
    assert arena.held_bytes == 0


def sized(nbytes: int) -> EncodedBatch:
    return EncodedBatch(b"", [pickle.PickleBuffer(bytearray(nbytes))], 1, [])


@given(st.lists(st.integers(0, 100), max_size=30), st.integers(1, 120))
def test_bundle_groups_cover_the_batches_in_order_under_the_cap(sizes: list[int], cap: int) -> None:
    groups = bundle_groups([sized(n) for n in sizes], cap)
    assert [i for group in groups for i in group] == list(range(len(sizes)))
    for group in groups:
        assert group and (len(group) == 1 or sum(sizes[i] for i in group) <= cap)
    for before, after in itertools.pairwise(groups):  # a group closes only when the next batch overflows it
        assert sum(sizes[i] for i in before) + sizes[after[0]] > cap
