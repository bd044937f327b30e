"""Shared tensor buckets: JSON form, validation, same-process views, and an unrelated process opening them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from rl_engines.rollout import (
    SLOT_ALIGNMENT,
    InvalidRequestError,
    SharedTensorBucket,
    TensorSlot,
    open_shared_bucket,
    weights_checksum,
)
from rl_engines.sync import SharedMemoryTransport

_CHILD = """
import json, sys
from rl_engines.rollout import SharedTensorBucket, open_shared_bucket, weights_checksum
bucket = SharedTensorBucket.from_json(json.loads(sys.stdin.read()))
print(weights_checksum(open_shared_bucket(bucket)))
"""


def _bucket() -> list[tuple[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        ("a", torch.randn(3, 5, generator=generator)),
        ("b", torch.randn(7, generator=generator).bfloat16()),
        ("c", torch.arange(10, dtype=torch.int64)),
        ("d", torch.zeros(0)),
    ]


def test_pack_and_open_in_process_round_trips_values_and_aligns_slots() -> None:
    transport = SharedMemoryTransport()
    [(_, shared)] = transport.pack(_bucket())
    assert shared.kind == "cpu_shm" and all(slot.offset % SLOT_ALIGNMENT == 0 for slot in shared.slots)
    opened = open_shared_bucket(SharedTensorBucket.from_json(json.loads(json.dumps(shared.to_json()))))
    for (name, sent), (got_name, got) in zip(_bucket(), opened, strict=True):
        assert name == got_name and torch.equal(sent, got)


@pytest.mark.slow
def test_an_unrelated_process_opens_the_bucket() -> None:
    transport = SharedMemoryTransport()
    [(buffer, shared)] = transport.pack(_bucket())
    buffer.message_ref()
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], input=json.dumps(shared.to_json()), capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip().splitlines()[-1] == weights_checksum(_bucket())


def test_bucket_validation() -> None:
    slot = TensorSlot("a", "float32", (4,), 0)
    with pytest.raises(InvalidRequestError, match="kind must be 'cpu_shm' or 'cuda_ipc'"):
        SharedTensorBucket("rdma", {}, (slot,), 16)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="has no tensors"):
        SharedTensorBucket("cpu_shm", {}, (), 16)
    with pytest.raises(InvalidRequestError, match=r"\(8\+16 bytes\) is outside the 16-byte buffer"):
        SharedTensorBucket("cpu_shm", {}, (TensorSlot("a", "float32", (4,), 8),), 16)
    with pytest.raises(InvalidRequestError, match="unknown dtype 'f32'"):
        SharedTensorBucket("cpu_shm", {}, (TensorSlot("a", "f32", (4,), 0),), 16)
    with pytest.raises(InvalidRequestError, match="malformed SharedTensorBucket JSON"):
        SharedTensorBucket.from_json({"kind": "cpu_shm", "slots": [["a", "float32", [4]]], "handle": {}, "nbytes": 16})
    with pytest.raises(InvalidRequestError, match="cannot open the shared cpu_shm buffer"):
        open_shared_bucket(SharedTensorBucket("cpu_shm", {"manager": "", "handle": "eA=="}, (slot,), 16))
