"""A bucket of tensors packed into one shared buffer and described by handles, not bytes.

On CPU the buffer is a POSIX shared-memory file (torch's `file_system` sharing strategy, which any
process on the host can open, unlike the default `file_descriptor` one); on CUDA it is a CUDA IPC
handle to the sender's allocation (same host and GPU only). The description is plain JSON — no pickle
crosses the wire, so a server decoding it runs no code from the sender.

The sender keeps the buffer alive and unchanged until the receiving engine's update call returns; the
receiver therefore copies out of the views `open_shared_bucket` returns and never keeps them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
from torch.multiprocessing.reductions import rebuild_cuda_tensor, rebuild_storage_filename

from rl_engines.rollout._errors import InvalidRequestError
from rl_engines.rollout._weight_types import parse_dtype

BucketKind = Literal["cpu_shm", "cuda_ipc"]
SLOT_ALIGNMENT = 64
"""Byte alignment of each tensor in the buffer, so every dtype's view is aligned (and cache-line friendly)."""


@dataclass(frozen=True)
class TensorSlot:
    """Where one named tensor lives in the shared buffer: a contiguous row-major block at `offset` bytes."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int

    def nbytes(self) -> int:
        """Size of the block in bytes."""
        numel = 1
        for d in self.shape:
            numel *= d
        return numel * parse_dtype(self.dtype).itemsize


@dataclass(frozen=True)
class SharedTensorBucket:
    """Handles to a shared buffer of `nbytes` bytes plus the slots of the named tensors packed in it.

    `handle` is `{"manager", "handle"}` (base64) for "cpu_shm" and the CUDA IPC fields for "cuda_ipc".
    With `lend=True` (CPU only) the sender hands the buffer over: the engine may keep the slots as its
    weights instead of copying them, and reports which lent buffers it still holds (see
    `InferenceEngine.update_weights_from_tensors`); the sender rewrites only buffers no engine holds.
    """

    kind: BucketKind
    handle: Mapping[str, Any]
    slots: tuple[TensorSlot, ...]
    nbytes: int
    lend: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("cpu_shm", "cuda_ipc"):
            raise InvalidRequestError(f"SharedTensorBucket.kind must be 'cpu_shm' or 'cuda_ipc', got {self.kind!r}")
        if not self.slots:
            raise InvalidRequestError("SharedTensorBucket has no tensors; send at least one")
        for slot in self.slots:
            if slot.offset < 0 or slot.offset + slot.nbytes() > self.nbytes:
                raise InvalidRequestError(
                    f"slot {slot.name!r} ({slot.offset}+{slot.nbytes()} bytes) is outside the {self.nbytes}-byte buffer"
                )

    @property
    def names(self) -> tuple[str, ...]:
        """The tensor names in packing order."""
        return tuple(slot.name for slot in self.slots)

    @property
    def buffer_id(self) -> str:
        """Identifies the shared buffer (the same for every bucket packed into it)."""
        return str(self.handle.get("handle"))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_json` inverts it."""
        return {
            "kind": self.kind,
            "handle": dict(self.handle),
            "nbytes": self.nbytes,
            "slots": [[s.name, s.dtype, list(s.shape), s.offset] for s in self.slots],
            "lend": self.lend,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SharedTensorBucket:
        """Rebuild a bucket description from `to_json` output; raises `InvalidRequestError` if malformed."""
        try:
            slots = tuple(TensorSlot(str(n), str(d), tuple(int(x) for x in s), int(o)) for n, d, s, o in data["slots"])
            return cls(
                kind=data["kind"],
                handle=dict(data["handle"]),
                slots=slots,
                nbytes=int(data["nbytes"]),
                lend=bool(data.get("lend", False)),
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, InvalidRequestError):
                raise
            raise InvalidRequestError(f"malformed SharedTensorBucket JSON: {error!r}") from None


def b64(data: bytes) -> str:
    """Base64 text of `data`."""
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _open_cpu(bucket: SharedTensorBucket) -> torch.Tensor:
    manager, handle = _unb64(bucket.handle["manager"]), _unb64(bucket.handle["handle"])
    # rebuild_storage_filename consumes the reference the sender added for this message (torch's protocol).
    # It returns an instance of the class it is given.
    storage = cast(torch.UntypedStorage, rebuild_storage_filename(torch.UntypedStorage, manager, handle, bucket.nbytes))
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (bucket.nbytes,), (1,))


def _open_cuda(bucket: SharedTensorBucket) -> torch.Tensor:
    h = bucket.handle
    return rebuild_cuda_tensor(
        torch.Tensor,
        torch.Size([bucket.nbytes]),
        (1,),
        0,
        torch.storage.TypedStorage,
        torch.uint8,
        int(h["device"]),
        _unb64(h["handle"]),
        int(h["storage_size_bytes"]),
        int(h["storage_offset_bytes"]),
        False,
        _unb64(h["ref_counter_handle"]),
        int(h["ref_counter_offset"]),
        _unb64(h.get("event_handle")),
        bool(h["event_sync_required"]),
    )


def open_shared_bucket(bucket: SharedTensorBucket) -> list[tuple[str, torch.Tensor]]:
    """Map the bucket's buffer and return `(name, view)` pairs; the views alias the sender's memory."""
    try:
        buffer = _open_cpu(bucket) if bucket.kind == "cpu_shm" else _open_cuda(bucket)
    except (KeyError, RuntimeError, TypeError, ValueError) as error:
        raise InvalidRequestError(f"cannot open the shared {bucket.kind} buffer: {error}") from error
    out = []
    for slot in bucket.slots:
        block = buffer[slot.offset : slot.offset + slot.nbytes()]
        out.append((slot.name, block.view(parse_dtype(slot.dtype)).view(slot.shape)))
    return out
