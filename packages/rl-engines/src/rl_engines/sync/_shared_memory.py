"""Weights through shared memory on one host: pack each bucket into a shared buffer, send handles.

On CPU the buffers are POSIX shared-memory files created through torch's `file_system` sharing strategy
(`torch.multiprocessing.reductions`), so engines in unrelated processes on the host can map them; on CUDA
they are device memory shared by CUDA IPC (same GPU). Buffers are allocated (and their pages faulted in)
once and reused, because fresh memory costs far more than a copy.

Lending (CPU, default): the trainer copies a bucket into a free buffer once and lends it; an engine that
supports it keeps the slots as its weights (no second copy) and reports which lent buffers it still
holds. A buffer is rewritten only when no engine holds it and no delivery is reading it, so the pool
settles at about one model's worth of buffers (which *are* the engines' weights) plus a bucket or two.
Engines that copy (or CUDA buckets) free the buffer as soon as their call returns.

Packing bucket `i + 1` overlaps the delivery of bucket `i`; at most one delivery is in flight. A bucket's
tensors should share one device; a mixed bucket is split into one shared bucket per device.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef, shared_cache

from rl_engines.rollout import SLOT_ALIGNMENT, RolloutError, SharedTensorBucket, TensorSlot, dtype_name
from rl_engines.rollout._copy import copy_into
from rl_engines.rollout._handles import b64
from rl_engines.sync._transport import Bucket, SyncContext

logger = logging.getLogger(__name__)


def _align(offset: int) -> int:
    return (offset + SLOT_ALIGNMENT - 1) // SLOT_ALIGNMENT * SLOT_ALIGNMENT


class _SharedBuffer:
    """One shared uint8 buffer on a device, plus the handle fields engines need to map it."""

    def __init__(self, nbytes: int, device: torch.device) -> None:
        self.device = device
        self.tensor = torch.zeros(nbytes, dtype=torch.uint8, device=device)  # zeros: fault the pages in now
        if device.type == "cpu":
            storage = self.tensor.untyped_storage()
            manager, handle, _ = storage._share_filename_cpu_()
            # Same-process receivers find the mapping in torch's cache instead of mapping the file again.
            shared_cache[handle] = StorageWeakRef(storage)
            self.tensor = torch.empty(0, dtype=torch.uint8).set_(storage, 0, (nbytes,), (1,))
            self.handle: dict[str, Any] = {"manager": b64(manager), "handle": b64(handle)}
        else:
            self.handle = self._cuda_handle()
        self.key: str = self.handle["handle"]
        """The buffer's shared-memory handle, which names it in the busy and held sets."""

    def _cuda_handle(self) -> dict[str, Any]:
        storage = self.tensor.untyped_storage()
        (device, handle, size, offset, ref_handle, ref_offset, event, event_sync) = storage._share_cuda_()
        return {
            "device": int(device),
            "handle": b64(handle),
            "storage_size_bytes": int(size),
            "storage_offset_bytes": int(offset),
            "ref_counter_handle": b64(ref_handle),
            "ref_counter_offset": int(ref_offset),
            "event_handle": None if event is None else b64(event),
            "event_sync_required": bool(event_sync),
        }

    @property
    def nbytes(self) -> int:
        return self.tensor.numel()

    def message_ref(self) -> None:
        """Add the reference one receiver's `open_shared_bucket` consumes (torch's file_system protocol)."""
        if self.device.type == "cpu":
            self.tensor.untyped_storage()._shared_incref()


class SharedMemoryTransport:
    """Packs buckets into shared buffers and calls `update_weights_from_tensors(SharedTensorBucket)`."""

    name = "shared_memory"
    capability = "tensor"

    def __init__(self, *, lend: bool = True) -> None:
        self.lend = lend
        self._pool: dict[torch.device, list[_SharedBuffer]] = {}
        self._largest: dict[torch.device, int] = {}
        self._held: dict[str, set[int]] = {}  # buffer id -> indexes of engines that still hold it
        self._busy: set[str] = set()  # buffers a delivery in flight may still read
        self._pending: list[tuple[int, str, concurrent.futures.Future]] = []

    def begin(self, ctx: SyncContext) -> None:
        """Buffers persist across syncs; nothing to prepare."""

    def _free_buffer(self, device: torch.device, nbytes: int) -> _SharedBuffer:
        pool = self._pool.setdefault(device, [])
        for buffer in pool:
            key = buffer.key
            if buffer.nbytes >= nbytes and key not in self._busy and not self._held.get(key):
                return buffer
        # Every buffer gets the largest bucket size seen, so any free buffer fits any later bucket.
        size = max(nbytes, self._largest.get(device, 0))
        self._largest[device] = size
        logger.info("allocating shared buffer %d (%.1f MiB) on %s", len(pool), size / 2**20, device)
        buffer = _SharedBuffer(size, device)
        pool.append(buffer)
        return buffer

    def pack(self, bucket: Bucket) -> list[tuple[_SharedBuffer, SharedTensorBucket]]:
        """Copy the bucket into free shared buffers (one `SharedTensorBucket` per device) and mark them busy
        until the next delivery completes."""
        by_device: dict[torch.device, list[tuple[str, torch.Tensor]]] = {}
        for name, tensor in bucket:
            by_device.setdefault(tensor.device, []).append((name, tensor.detach()))
        out = []
        for device, named in by_device.items():
            slots, offset = [], 0
            for name, tensor in named:
                slots.append(TensorSlot(name, dtype_name(tensor.dtype), tuple(tensor.shape), offset))
                offset = _align(offset + tensor.nbytes)
            buffer = self._free_buffer(device, max(offset, 1))
            self._busy.add(buffer.key)
            for slot, (_, tensor) in zip(slots, named, strict=True):
                view = buffer.tensor[slot.offset : slot.offset + tensor.nbytes]
                copy_into(view.view(tensor.dtype).view(tensor.shape), tensor)
            if device.type == "cuda":
                torch.cuda.current_stream(device).synchronize()  # the receiver reads on its own stream
            kind = "cpu_shm" if device.type == "cpu" else "cuda_ipc"
            lend = self.lend and kind == "cpu_shm"
            out.append((buffer, SharedTensorBucket(kind, buffer.handle, tuple(slots), buffer.nbytes, lend=lend)))
        return out

    def _wait_pending(self, ctx: SyncContext) -> None:
        """Wait for the delivery in flight and record which buffers each engine still holds."""
        pending, self._pending = self._pending, []
        errors = []
        for index, key, future in pending:
            try:
                held = set(ctx.caller.wait(future, ctx.timeout_s, "update_weights_from_tensors") or ())
            except RolloutError as error:  # the engine rejected the bucket before changing anything
                errors.append(error)
                self._busy.discard(key)
                continue
            except Exception as error:
                errors.append(error)
                held = None
            self._busy.discard(key)
            if held is None:  # unknown whether the engine kept it (e.g. a timeout): never rewrite it
                self._held.setdefault(key, set()).add(index)
                continue
            for buffer_id in set(self._held) | held:
                engines = self._held.setdefault(buffer_id, set())
                engines.add(index) if buffer_id in held else engines.discard(index)
                if not engines:
                    del self._held[buffer_id]
        if errors:
            raise errors[0]

    def send(self, ctx: SyncContext, bucket: Bucket) -> None:
        """Pack the bucket, wait for the previous delivery, then start this one on every engine."""
        packed = self.pack(bucket)
        self._wait_pending(ctx)
        for buffer, shared in packed:
            for index, engine in enumerate(ctx.engines):
                buffer.message_ref()
                future = ctx.caller.submit(engine.update_weights_from_tensors, shared)
                self._pending.append((index, shared.buffer_id, future))

    def finish(self, ctx: SyncContext) -> None:
        """Wait for the last delivery."""
        self._wait_pending(ctx)

    def cancel(self, ctx: SyncContext) -> None:
        """Wait out a delivery still reading a buffer (errors are the failing sync's business)."""
        try:
            self._wait_pending(ctx)
        except Exception as error:
            logger.warning("a shared-memory delivery also failed while cancelling: %s", error)

    def close(self, ctx: SyncContext | None = None) -> None:
        """Drop the trainer's references to the buffers; lent ones live on in the engines that hold them."""
        self._pool.clear()
        self._held.clear()
        self._busy.clear()
