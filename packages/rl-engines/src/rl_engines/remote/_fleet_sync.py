"""`FleetWeightSync`: weight updates into a `ServerFleet`'s servers that skip the dead ones.

A fleet is synced server by server (each server one engine of a `WeightSync`, so shared-memory buffers and broadcast
ranks are per server and each server's weights are verified on their own). Before each update the fleet says which
servers answer (`ServerFleet.weight_targets`); when that set changed since the last update, the sync is rebuilt over
it with a fresh transport (the old one closed: its broadcast group or buffers named the old set). The update's
`SyncReport.skipped` names the servers left out, which the fleet keeps out of generation until an update reaches
them again (`ServerFleet.readmit`). A server that dies during an update fails that update, as any engine would.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence

from rl_engines.remote._fleet import ServerFleet
from rl_engines.rollout import InferenceEngine
from rl_engines.sync import SyncReport, WeightSync
from rl_engines.sync._transport import Bucket

logger = logging.getLogger(__name__)


class FleetWeightSync:
    """Syncs `fleet`'s live servers; `make_sync(servers)` builds a `WeightSync` over them with a fresh transport."""

    def __init__(self, fleet: ServerFleet, make_sync: Callable[[Sequence[InferenceEngine]], WeightSync]) -> None:
        self.fleet = fleet
        self._make_sync = make_sync
        self._targets = tuple(range(len(fleet.members)))
        self._sync = make_sync(list(fleet.members))

    @property
    def engines(self) -> list[InferenceEngine]:
        """The servers the next update goes to unless their health changes."""
        return self._sync.engines

    def sync(self, buckets: Iterable[Bucket], version: int) -> SyncReport:
        """Push `buckets` as weight `version` into every server that answers (see the module doc); the report's
        `skipped` names the others. `ServerConnectionError` naming every address when none answers."""
        targets = tuple(self.fleet.weight_targets())
        if targets != self._targets:
            self._retarget(targets)
        report = self._sync.sync(buckets, version)
        self.fleet.readmit(targets)
        skipped = tuple(address for index, address in enumerate(self.fleet.addresses) if index not in targets)
        if skipped:
            logger.warning("weight version %d skipped the rollout servers that do not answer: %s", version, skipped)
        return dataclasses.replace(report, skipped=skipped)

    def _retarget(self, targets: tuple[int, ...]) -> None:
        try:
            self._sync.close()
        except Exception as error:  # a dead server cannot leave its group; the live ones were told
            logger.warning("closing the weight sync of the previous rollout servers: %s", error)
        self._sync = self._make_sync([self.fleet.members[index] for index in targets])
        self._targets = targets
        logger.info("weight sync now addresses rollout servers %s", [self.fleet.addresses[i] for i in targets])

    def close(self) -> None:
        """Release the transport's resources and threads."""
        self._sync.close()
