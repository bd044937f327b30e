"""How weights travel from trainer to engines: the `WeightTransport` protocol and the by-reference transport."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from rl_engines.rollout import InferenceEngine
from rl_engines.sync._calls import EngineCaller

Bucket = list[tuple[str, torch.Tensor]]
"""One bucket of the train engine's export: `(HF name, full tensor)` pairs."""


@dataclass
class SyncContext:
    """What a transport needs during one sync: the engines, the timed caller and the version being sent."""

    engines: Sequence[InferenceEngine]
    caller: EngineCaller
    timeout_s: float
    version: int

    def call_each(self, call: Callable[[InferenceEngine], Any], what: str) -> list[Any]:
        """Run `call(engine)` for every engine concurrently, each bounded by `timeout_s`."""
        return self.caller.call_all([(call, (engine,)) for engine in self.engines], self.timeout_s, what)


@runtime_checkable
class WeightTransport(Protocol):
    """Moves buckets into engines. `begin` once per sync, `send` per bucket, `finish` at the end."""

    name: str
    capability: str
    """The engine capability this transport needs ("disk", "tensor" or "distributed")."""

    def begin(self, ctx: SyncContext) -> None:
        """Prepare a sync (open groups, staging directories)."""
        ...

    def send(self, ctx: SyncContext, bucket: Bucket) -> None:
        """Deliver one bucket (or stage it, for transports that deliver in `finish`)."""
        ...

    def finish(self, ctx: SyncContext) -> None:
        """Deliver whatever was staged; after it returns every engine holds the sent tensors."""
        ...

    def cancel(self, ctx: SyncContext) -> None:
        """A sync failed: discard what it staged, keep resources later syncs reuse (groups, buffers)."""
        ...

    def close(self, ctx: SyncContext) -> None:
        """Release transport resources (groups, buffers); the next `begin` re-creates them."""
        ...


class ReferenceTransport:
    """Hands each bucket's tensors to in-process engines by reference; the engine copies them.

    For colocated engines in the trainer's process. Zero serialisation, one copy (into the engine's weights).
    """

    name = "reference"
    capability = "tensor"

    def begin(self, ctx: SyncContext) -> None:
        """Nothing to prepare."""

    def send(self, ctx: SyncContext, bucket: Bucket) -> None:
        """Call `update_weights_from_tensors(bucket)` on every engine."""
        ctx.call_each(lambda engine: engine.update_weights_from_tensors(bucket), "update_weights_from_tensors")

    def finish(self, ctx: SyncContext) -> None:
        """Nothing staged."""

    def cancel(self, ctx: SyncContext) -> None:
        """Nothing staged."""

    def close(self, ctx: SyncContext) -> None:
        """Nothing held."""
