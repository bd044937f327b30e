"""Split placement's weight sync: the training slots publish the actor's weights to the rollout slots' engines.

The wire is an `rl_engines.rollout.WeightGroup` (gloo, its own TCP store, apart from the training world): the
training slot of data-parallel rank 0 is its rank 0, rollout slot `i` its rank `1 + i`. A sync is a few messages,
each two broadcasts: its lengths (an int64 pair: header bytes, message bytes), then the message as one uint8 buffer,
a JSON header followed by the tensors' bytes, each at a multiple of MESSAGE_ALIGN bytes in header order:

    per bucket of the actor's export: {"version": v, "names": [...], "dtypes": [...], "shapes": [...]} + its tensors,
                                      cast to the engine dtype
    then the trailer:                 {"version": v, "checksum": <weights_checksum of every tensor as sent>}

A rollout slot feeds the buckets as they arrive (views into each message's buffer) into an in-process
`rl_engines.sync.WeightSync` (pause, update, flush, set version, verify the engine's checksum against the tensors
received, resume), then checks the received checksum against the sender's, so a sync that returns proves the engine
holds exactly the actor's weights. Training slots of other data-parallel ranks take part in the export's gathers
and send nothing.

One buffer per bucket rather than a broadcast per tensor and header: each gloo broadcast wakes both sides' gloo
threads, and the embedded model's 20 tensors and three headers took 26 broadcasts a sync, ~11 ms of CPU over the two
processes against ~4 ms for one buffer (bench/README.md, "Where the CPU goes").
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from rl_engines.rollout import WeightGroup, WeightGroupSpec, WeightsMeta, parse_dtype, weights_checksum
from rl_engines.sync import Bucket, SyncError, SyncReport, WeightPublisher
from rl_runtime.planning._rendezvous import LOCALHOST, Exchange, rendezvous

logger = logging.getLogger(__name__)

SENDER_RANK = 0
"""The training slot's rank in the weight group; rollout slot `i` is `1 + i`."""
GROUP_NAME = "split_weight_sync"
_VERSION, _NAMES, _DTYPES, _SHAPES, _CHECKSUM = "version", "names", "dtypes", "shapes", "checksum"
MESSAGE_ALIGN = 64
"""Each tensor of a message starts at a multiple of this many bytes, so its view of the buffer is aligned for any
dtype."""


def join_weight_group(
    exchange: Exchange, rank: int, rollout_ranks: int, timeout_s: float, *, host: str = LOCALHOST
) -> WeightGroup:
    """Join the weight group as `rank` (SENDER_RANK hosts it and publishes its address through `exchange`).

    `timeout_s` bounds joining and every broadcast; a rollout slot waits up to that long for each sync, so give it
    the step timeout."""
    address = rendezvous(rank, exchange, host=host, timeout_s=timeout_s)
    spec = WeightGroupSpec(address.host, address.port, 1, 1 + rollout_ranks, GROUP_NAME, "gloo", timeout_s)
    return WeightGroup(spec, rank)


def _offsets(header_bytes: int, nbytes: Iterable[int]) -> tuple[list[int], int]:
    """Where each tensor of `nbytes` bytes starts in a message whose header is `header_bytes` long (every start a
    multiple of MESSAGE_ALIGN), and the message's length."""
    offsets, end = [], header_bytes
    for size in nbytes:
        end = -(-end // MESSAGE_ALIGN) * MESSAGE_ALIGN
        offsets.append(end)
        end += size
    return offsets, end


def _send_message(group: WeightGroup, header: dict[str, Any], tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Broadcast `header` and `tensors` (described by the header's names, dtypes and shapes) as one message; the
    tensors as sent (views of the message)."""
    encoded = json.dumps(header).encode()
    offsets, length = _offsets(len(encoded), (t.numel() * t.dtype.itemsize for t in tensors))
    buffer = torch.empty(length, dtype=torch.uint8)
    buffer[: len(encoded)] = torch.frombuffer(bytearray(encoded), dtype=torch.uint8)
    sent = []
    for tensor, offset in zip(tensors, offsets, strict=True):
        view = buffer[offset : offset + tensor.numel() * tensor.dtype.itemsize].view(tensor.dtype).view(tensor.shape)
        view.copy_(tensor)
        sent.append(view)
    group.broadcast(torch.tensor([len(encoded), length], dtype=torch.int64), src=SENDER_RANK)
    group.broadcast(buffer, src=SENDER_RANK)
    return sent


def _receive_message(group: WeightGroup) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """The next message: its header and its tensors (views of the message's buffer)."""
    lengths = torch.zeros(2, dtype=torch.int64)
    group.broadcast(lengths, src=SENDER_RANK)
    header_bytes, length = (int(n) for n in lengths.tolist())
    buffer = torch.empty(length, dtype=torch.uint8)
    group.broadcast(buffer, src=SENDER_RANK)
    header = json.loads(buffer[:header_bytes].numpy().tobytes())
    if _NAMES not in header:
        return header, []
    meta = WeightsMeta(tuple(header[_NAMES]), tuple(header[_DTYPES]), tuple(map(tuple, header[_SHAPES])))
    dtypes = [parse_dtype(dtype) for dtype in meta.dtypes]
    sizes = [math.prod(shape) * dtype.itemsize for dtype, shape in zip(dtypes, meta.shapes, strict=True)]
    offsets, expected = _offsets(header_bytes, sizes)
    if expected != length:
        raise SyncError(f"a weight message of {length} bytes does not hold the {expected} its header describes")
    return header, [
        buffer[offset : offset + size].view(dtype).view(shape)
        for dtype, shape, offset, size in zip(dtypes, meta.shapes, offsets, sizes, strict=True)
    ]


class WeightSender:
    """The training side: publishes each export to the rollout slots (`group`), or, on a training slot that is not
    the sender (`group=None`), only drains the export, whose gathers are collective over the training ranks."""

    def __init__(self, group: WeightGroup | None, dtype: str) -> None:
        self._group = group
        self._dtype = parse_dtype(dtype)

    def _cast(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` in the wire dtype, where it is (the message's copy brings it to the CPU: gloo moves CPU tensors)."""
        tensor = tensor.detach()
        if tensor.is_floating_point() and tensor.dtype != self._dtype:
            tensor = tensor.to(self._dtype)
        return tensor

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Broadcast every bucket as weight `version` (see the module doc); what was sent."""
        start = time.perf_counter()
        if self._group is None:
            for _ in buckets:
                pass
            return SyncReport(version, 0, 0, 0, None, {"drain": time.perf_counter() - start})
        counts = {"tensors": 0, "buckets": 0, "bytes": 0}
        checksum = weights_checksum(self._stream(buckets, version, counts))
        _send_message(self._group, {_VERSION: version, _CHECKSUM: checksum}, [])
        seconds = {"send": time.perf_counter() - start}
        logger.info("sent weight version %s: %d tensors, %.1f MiB", version, counts["tensors"], counts["bytes"] / 2**20)
        return SyncReport(version, counts["tensors"], counts["buckets"], counts["bytes"], checksum, seconds)

    def _stream(
        self, buckets: Iterable[Bucket], version: int, counts: dict[str, int]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Each tensor as it was broadcast, bucket by bucket (the checksum reads them as they go)."""
        assert self._group is not None
        for bucket in buckets:
            tensors = [(name, self._cast(tensor)) for name, tensor in bucket]
            meta = WeightsMeta.of(tensors)
            header = {_VERSION: version, _NAMES: list(meta.names), _DTYPES: list(meta.dtypes), _SHAPES: meta.shapes}
            sent = _send_message(self._group, header, [tensor for _, tensor in tensors])
            for name, tensor in zip(meta.names, sent, strict=True):
                counts["tensors"] += 1
                counts["bytes"] += tensor.nbytes
                yield name, tensor
            counts["buckets"] += 1

    def close(self) -> None:
        """Leave the weight group."""
        if self._group is not None:
            self._group.close()


class WeightReceiver:
    """A rollout slot's side: `receive` loads the next published version into the engine behind `sync` (a
    `WeightSync`, or a server fleet's `FleetWeightSync`)."""

    def __init__(self, group: WeightGroup, sync: WeightPublisher) -> None:
        self._group = group
        self._sync = sync

    def receive(self) -> SyncReport:
        """Wait for the next sync, load it through the local WeightSync (verified), and check it against the sender's
        checksum; SyncError when the engine's weights differ from the actor's."""
        first = _receive_message(self._group)
        version = int(first[0][_VERSION])
        trailer: dict[str, Any] = {}
        report = self._sync.sync(self._buckets(first, trailer), version)
        sent = trailer[_CHECKSUM]
        if report.checksum != sent:
            raise SyncError(
                f"weight version {version}: the rollout engine holds checksum {report.checksum}, the training slot "
                f"sent {sent}; the weights were corrupted on the way"
            )
        return report

    def _buckets(self, first: tuple[dict[str, Any], list[torch.Tensor]], trailer: dict[str, Any]) -> Iterator[Bucket]:
        """Buckets as they arrive, from the sync's `first` message until the trailer (whose fields go into
        `trailer`)."""
        header, tensors = first
        while _CHECKSUM not in header:
            yield list(zip(header[_NAMES], tensors, strict=True))
            header, tensors = _receive_message(self._group)
        trailer.update(header)

    def close(self) -> None:
        """Stop the local sync's threads and leave the weight group."""
        self._sync.close()
        self._group.close()
