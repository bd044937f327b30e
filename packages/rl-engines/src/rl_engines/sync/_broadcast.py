"""Weights by broadcast over a dedicated process group: gloo for CPU tensors, NCCL for CUDA tensors.

The trainer is rank 0 and hosts the group's store; engine `i` joins at rank `1 + i`. Per bucket the trainer
asks every engine to receive (`update_weights_from_distributed(meta)`, on worker threads) and broadcasts
each tensor in `meta.names` order; both sides time out after `timeout_s`. The group is separate from the
training world and survives across syncs until `close`; after a timeout it is torn down and re-created on
the next sync.
"""

from __future__ import annotations

import logging
import socket

import torch

from rl_engines.rollout import DEFAULT_GROUP_NAME, WeightGroup, WeightGroupSpec, WeightsMeta
from rl_engines.rollout._weight_types import DEFAULT_GROUP_TIMEOUT_S, GroupBackend
from rl_engines.sync._errors import SyncConfigError
from rl_engines.sync._transport import Bucket, SyncContext

logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class BroadcastTransport:
    """Broadcasts every tensor from the trainer (rank 0) to the engines' ranks of a weight-update group."""

    name = "broadcast"
    capability = "distributed"

    def __init__(
        self,
        *,
        master_address: str = "127.0.0.1",
        master_port: int | None = None,
        backend: GroupBackend = "gloo",
        group_name: str = DEFAULT_GROUP_NAME,
        timeout_s: float = DEFAULT_GROUP_TIMEOUT_S,
    ) -> None:
        if backend not in ("gloo", "nccl"):
            raise SyncConfigError(f"BroadcastTransport backend must be 'gloo' or 'nccl', got {backend!r}")
        if not timeout_s > 0:
            raise SyncConfigError(f"BroadcastTransport timeout_s must be > 0, got {timeout_s!r}")
        self.master_address = master_address
        self.master_port = master_port
        self.backend: GroupBackend = backend
        self.group_name = group_name
        self.timeout_s = timeout_s
        self._group: WeightGroup | None = None
        self._members: tuple[int, ...] = ()

    def _device(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else torch.device("cpu")

    def begin(self, ctx: SyncContext) -> None:
        """Open the group (trainer rank 0 + one rank per engine) unless it is already open for these engines."""
        if self._group is not None and self._members == tuple(id(e) for e in ctx.engines):
            return
        self.close(ctx)
        port = self.master_port or free_port(self.master_address)
        world = 1 + len(ctx.engines)
        specs = [
            WeightGroupSpec(self.master_address, port, 1 + i, world, self.group_name, self.backend, self.timeout_s)
            for i in range(len(ctx.engines))
        ]
        futures = [ctx.caller.submit(e.init_weights_update_group, s) for e, s in zip(ctx.engines, specs, strict=True)]
        group = WeightGroup(
            WeightGroupSpec(self.master_address, port, 1, world, self.group_name, self.backend, self.timeout_s), 0
        )
        self._group, self._members = group, tuple(id(e) for e in ctx.engines)
        try:
            for index, future in enumerate(futures):
                ctx.caller.wait(future, ctx.timeout_s, f"init_weights_update_group on engine {index}")
        except BaseException:
            self._teardown(ctx)
            raise

    def send(self, ctx: SyncContext, bucket: Bucket) -> None:
        """Start every engine's receive, broadcast the bucket's tensors in order, then wait for the engines."""
        if self._group is None:
            raise SyncConfigError("BroadcastTransport.send before begin; WeightSync calls begin first")
        device = self._device()
        tensors = [(name, t.detach().to(device).contiguous()) for name, t in bucket]
        meta = WeightsMeta.of(tensors)
        futures = [ctx.caller.submit(engine.update_weights_from_distributed, meta) for engine in ctx.engines]
        try:
            for _, tensor in tensors:
                self._group.broadcast(tensor, src=0)
        except BaseException:
            self._teardown(ctx)
            raise
        errors = []
        for index, future in enumerate(futures):
            try:
                ctx.caller.wait(future, ctx.timeout_s, f"update_weights_from_distributed on engine {index}")
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def finish(self, ctx: SyncContext) -> None:
        """Nothing staged: every bucket was delivered by `send`."""

    def cancel(self, ctx: SyncContext) -> None:
        """Keep the group: a rejected bucket was still received in full, so every rank is in step (a broken
        group was already torn down by `send`)."""

    def _teardown(self, ctx: SyncContext) -> None:
        """After a failure: best-effort close on every side, so the next `begin` starts clean."""
        try:
            self.close(ctx)
        except Exception as error:
            logger.warning("closing the weight group after a failure also failed: %s", error)
            self._group, self._members = None, ()

    def close(self, ctx: SyncContext) -> None:
        """Have the engines leave the group, then leave it too."""
        group, self._group, self._members = self._group, None, ()
        if group is None:
            return
        try:
            ctx.call_each(lambda engine: engine.destroy_weights_update_group(), "destroy_weights_update_group")
        finally:
            group.close()
