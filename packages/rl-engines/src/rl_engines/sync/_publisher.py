"""`WeightPublisher`: what a train engine is connected to and publishes its weights through.

A train engine pushes its own weights (AReaL's `TrainEngine.connect_engine` / `update_weights`): connected once to
a publisher (`TrainEngine.connect_weight_sync`), each `update_weights(version)` exports its buckets and hands them
to `publisher.sync(buckets, version)`. `WeightSync` (into engines this process reaches), a server fleet's
`rl_engines.remote.FleetWeightSync`, or any sender of the caller's own (the runtime's split-placement sender to
the rollout slots) is one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rl_engines.sync._transport import Bucket
from rl_engines.sync._weight_sync import SyncReport


class WeightPublisher(Protocol):
    """Where a train engine's weights go after an update (see the module docstring)."""

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Deliver the exported `buckets` as weight `version`; what was moved. It takes every bucket, even when it
        sends none (a training rank that only takes part in the export's gathers): the export is a collective."""
        ...

    def close(self) -> None:
        """Release groups and threads."""
        ...
