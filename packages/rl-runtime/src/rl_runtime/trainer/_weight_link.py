"""Split placement's weight sync: the training slots publish the actor's weights to the rollout slots' engines.

The wire is an `rl_engines.rollout.WeightGroup` (gloo, its own TCP store, apart from the training world): the
training slot of data-parallel rank 0 is its rank 0, rollout slot `i` its rank `1 + i`. One sync broadcasts

    header {"version": v}                                  then, per bucket of the actor's export:
    header {"names": [...], "dtypes": [...], "shapes": [...]}  and each of its tensors, cast to the engine dtype
    header {"checksum": <weights_checksum of every tensor as sent>}

where a header is an int64 length and the JSON bytes as uint8 tensors. A rollout slot feeds the buckets as they
arrive into an in-process `rl_engines.sync.WeightSync` (pause, update, flush, set version, verify the engine's
checksum against the tensors received, resume), then checks the received checksum against the sender's, so a sync
that returns proves the engine holds exactly the actor's weights. Training slots of other data-parallel ranks take
part in the export's gathers and send nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
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


def join_weight_group(
    exchange: Exchange, rank: int, rollout_ranks: int, timeout_s: float, *, host: str = LOCALHOST
) -> WeightGroup:
    """Join the weight group as `rank` (SENDER_RANK hosts it and publishes its address through `exchange`).

    `timeout_s` bounds joining and every broadcast; a rollout slot waits up to that long for each sync, so give it
    the step timeout."""
    address = rendezvous(rank, exchange, host=host, timeout_s=timeout_s)
    spec = WeightGroupSpec(address.host, address.port, 1, 1 + rollout_ranks, GROUP_NAME, "gloo", timeout_s)
    return WeightGroup(spec, rank)


def _send_header(group: WeightGroup, header: dict[str, Any]) -> None:
    payload = torch.frombuffer(bytearray(json.dumps(header).encode()), dtype=torch.uint8)
    group.broadcast(torch.tensor([payload.numel()], dtype=torch.int64), src=SENDER_RANK)
    group.broadcast(payload, src=SENDER_RANK)


def _receive_header(group: WeightGroup) -> dict[str, Any]:
    length = torch.zeros(1, dtype=torch.int64)
    group.broadcast(length, src=SENDER_RANK)
    payload = torch.empty(int(length.item()), dtype=torch.uint8)
    group.broadcast(payload, src=SENDER_RANK)
    return json.loads(bytes(payload.tolist()))


class WeightSender:
    """The training side: publishes each export to the rollout slots (`group`), or, on a training slot that is not
    the sender (`group=None`), only drains the export, whose gathers are collective over the training ranks."""

    def __init__(self, group: WeightGroup | None, dtype: str) -> None:
        self._group = group
        self._dtype = parse_dtype(dtype)

    def _cast(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        if tensor.is_floating_point() and tensor.dtype != self._dtype:
            tensor = tensor.to(self._dtype)
        return tensor.to("cpu").contiguous()  # gloo moves CPU tensors

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Broadcast every bucket as weight `version` (see the module doc); what was sent."""
        start = time.perf_counter()
        if self._group is None:
            for _ in buckets:
                pass
            return SyncReport(version, 0, 0, 0, None, {"drain": time.perf_counter() - start})
        counts = {"tensors": 0, "buckets": 0, "bytes": 0}
        _send_header(self._group, {_VERSION: version})
        checksum = weights_checksum(self._stream(buckets, counts))
        _send_header(self._group, {_CHECKSUM: checksum})
        seconds = {"send": time.perf_counter() - start}
        logger.info("sent weight version %s: %d tensors, %.1f MiB", version, counts["tensors"], counts["bytes"] / 2**20)
        return SyncReport(version, counts["tensors"], counts["buckets"], counts["bytes"], checksum, seconds)

    def _stream(self, buckets: Iterable[Bucket], counts: dict[str, int]) -> Iterator[tuple[str, torch.Tensor]]:
        """Each tensor as it was broadcast, bucket by bucket (the checksum reads them as they go)."""
        assert self._group is not None
        for bucket in buckets:
            tensors = [(name, self._cast(tensor)) for name, tensor in bucket]
            meta = WeightsMeta.of(tensors)
            _send_header(
                self._group, {_NAMES: list(meta.names), _DTYPES: list(meta.dtypes), _SHAPES: list(meta.shapes)}
            )
            for name, tensor in tensors:
                self._group.broadcast(tensor, src=SENDER_RANK)
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
        version = int(_receive_header(self._group)[_VERSION])
        trailer: dict[str, Any] = {}
        report = self._sync.sync(self._buckets(trailer), version)
        sent = trailer[_CHECKSUM]
        if report.checksum != sent:
            raise SyncError(
                f"weight version {version}: the rollout engine holds checksum {report.checksum}, the training slot "
                f"sent {sent}; the weights were corrupted on the way"
            )
        return report

    def _buckets(self, trailer: dict[str, Any]) -> Iterator[Bucket]:
        """Buckets as they arrive, until the trailer (whose fields go into `trailer`)."""
        while True:
            header = _receive_header(self._group)
            if _CHECKSUM in header:
                trailer.update(header)
                return
            meta = WeightsMeta(tuple(header[_NAMES]), tuple(header[_DTYPES]), tuple(map(tuple, header[_SHAPES])))
            bucket: Bucket = []
            for name, dtype, shape in zip(meta.names, meta.dtypes, meta.shapes, strict=True):
                buffer = torch.empty(shape, dtype=parse_dtype(dtype))
                self._group.broadcast(buffer, src=SENDER_RANK)
                bucket.append((name, buffer))
            yield bucket

    def close(self) -> None:
        """Stop the local sync's threads and leave the weight group."""
        self._sync.close()
        self._group.close()
