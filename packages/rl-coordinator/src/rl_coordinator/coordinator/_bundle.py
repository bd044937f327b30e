"""Several producer batches in one object-store entry, with their CPU tensors carried as raw bytes.

One `ray.put` costs a fixed round trip to the object store whatever the size, so the client puts the batches
that queue up while its previous put is acknowledged as one PayloadBundle. Tensors do not go through torch's own
pickling (a `torch.save` per tensor, slow to unpickle for small tensors; bench/README.md has the figures): each CPU
tensor becomes an out-of-band byte buffer that Ray writes to the object store without another copy, and is
rebuilt as a private, writable tensor when a consumer first indexes its batch.
"""

from __future__ import annotations

import bisect
import io
import pickle
from typing import Any, NamedTuple

import torch
from ray import cloudpickle

from rl_coordinator._errors import CoordinatorInputError
from rl_coordinator.coordinator._staging import NO_STAGING, Slot, StagingArena

_PROTOCOL = 5
"""Pickle protocol 5 is the one that hands buffers out of band (PEP 574)."""


class EncodedBatch(NamedTuple):
    """A batch payload snapshotted at put time: its pickle with tensors out of band, and those tensors' bytes.

    Attributes:
        meta: the pickled payload; each CPU tensor in it refers to the next buffer.
        buffers: one PickleBuffer per CPU tensor over a copy of its bytes (so later writes to the producer's
            tensors are not sent).
        length: samples in the batch (the payload's len()).
        staged: the arena slots holding copies, to release once the batch is in the object store.
    """

    meta: bytes
    buffers: list[Any]
    length: int
    staged: list[Slot]

    @property
    def nbytes(self) -> int:
        """Bytes the batch adds to a bundle."""
        return len(self.meta) + sum(buffer.raw().nbytes for buffer in self.buffers)


def _tensor_from_bytes(buffer: Any, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """A writable tensor of `dtype` and `shape` holding a copy of `buffer` (read-only object-store memory)."""
    if not memoryview(buffer).nbytes:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(buffer), dtype=torch.uint8).view(dtype).reshape(shape)


def _carries_raw(obj: Any) -> bool:
    # Plain dense CPU tensors only; subclasses, autograd leaves and other devices keep torch's own pickling.
    return (
        type(obj) is torch.Tensor
        and obj.device.type == "cpu"
        and obj.layout == torch.strided
        and not obj.requires_grad
        and not obj.is_quantized
    )


# ray.cloudpickle does not re-export CloudPickler explicitly, which the checker takes for a private name.
class _RawTensorPickler(cloudpickle.CloudPickler):  # pyright: ignore[reportPrivateImportUsage]
    # cloudpickle's, as ray.put uses: lambdas, closures and local classes in a payload pickle as they did there.
    def __init__(self, out: io.BytesIO, buffers: list[Any], arena: StagingArena) -> None:
        super().__init__(out, protocol=_PROTOCOL, buffer_callback=buffers.append)
        self.arena = arena
        self.staged: list[Slot] = []

    def reducer_override(self, obj: Any) -> Any:
        if not _carries_raw(obj):
            return super().reducer_override(obj)
        flat = obj.resolve_conj().resolve_neg().contiguous().reshape(-1)
        raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
        copy, slot = self.arena.snapshot(raw)
        if slot is not None:
            self.staged.append(slot)
        return _tensor_from_bytes, (pickle.PickleBuffer(copy), obj.dtype, tuple(obj.shape))


def encode_batch(payload: Any, length: int, arena: StagingArena = NO_STAGING) -> EncodedBatch:
    """Snapshot a batch payload of `length` samples for a bundle, its tensors' bytes copied into `arena` where
    they fit (else into fresh memory); CoordinatorInputError if it cannot be pickled."""
    buffers: list[pickle.PickleBuffer] = []
    out = io.BytesIO()
    pickler = _RawTensorPickler(out, buffers, arena)
    try:
        pickler.dump(payload)
    except BaseException as exc:  # interrupts too: a slot kept by a batch never sent would stall the ring
        arena.release(pickler.staged)
        if not isinstance(exc, Exception):
            raise
        raise CoordinatorInputError(
            f"payload of {type(payload).__name__} cannot be pickled ({exc}); put tensors, TensorDicts, lists or "
            "dicts of them, or other objects cloudpickle can pickle"
        ) from exc
    return EncodedBatch(out.getvalue(), buffers, length, pickler.staged)


class PayloadBundle:
    """The batches of one `ray.put`, indexed as one sequence: `bundle[i]` is sample i of their concatenation.

    Samples keep the positions the client gave them (a batch's samples follow the previous batch's), so a
    consumer indexes a bundle the way it indexes a single batch. A batch is decoded the first time one of its
    samples is read, and only that batch.
    """

    def __init__(self, metas: list[bytes], buffers: list[list[Any]], starts: list[int]) -> None:
        self._metas, self._buffers, self._starts = metas, buffers, starts
        self._decoded: dict[int, Any] = {}

    @classmethod
    def of(cls, batches: list[EncodedBatch]) -> PayloadBundle:
        """The bundle of `batches`, in order."""
        starts = [0]
        for batch in batches:
            starts.append(starts[-1] + batch.length)
        return cls([batch.meta for batch in batches], [batch.buffers for batch in batches], starts)

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is outside a bundle of {len(self)} samples")
        batch = bisect.bisect_right(self._starts, index) - 1
        payload = self._decoded.get(batch)
        if payload is None:
            payload = self._decoded[batch] = pickle.loads(self._metas[batch], buffers=self._buffers[batch])
        return payload[index - self._starts[batch]]

    def __reduce__(self) -> tuple[Any, ...]:
        return PayloadBundle, (self._metas, self._buffers, self._starts)
