"""A `ServerFleet`'s health bookkeeping: which servers are out of generation, why, and when they come back.

`FleetHealth` tracks the servers marked down (unreachable at a call or a probe, or dropped from a weight update)
and those that missed a weight update: a down server is probed again every `health_interval_s` and serves again
once it answers, unless it missed an update, when only a later update that reaches it (`readmit`) brings it back,
never with old weights. `Streamed` counts the tokens a request streamed, and `refuse_restream` stops the retry of
one that streamed some before its server died (a retry elsewhere would stream them again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from rl_engines.remote._errors import ServerConnectionError
from rl_engines.rollout import TokenCallback

logger = logging.getLogger(__name__)


class FleetHealth:
    """Which members of a fleet of servers at `addresses` are down, and which of those missed a weight update."""

    def __init__(self, addresses: Sequence[str], health_interval_s: float) -> None:
        self.addresses = list(addresses)
        self.health_interval_s = health_interval_s
        self.down: dict[int, float] = {}
        """Member index -> when it was last found unreachable."""
        self.missed_update: set[int] = set()
        """Members down during a weight update: back only through `readmit`."""
        self._lock = threading.Lock()

    def usable(self, probe: Callable[[int], bool]) -> list[int]:
        """Indexes of the members to use now: those not down, and those down whose re-probe (`probe(index)`, at most
        every `health_interval_s`) succeeds; a member that missed an update is not probed."""
        now = time.monotonic()
        usable = []
        for index, address in enumerate(self.addresses):
            since = self.down.get(index)
            if since is None:
                usable.append(index)
            elif index in self.missed_update:
                continue  # it holds old weights: the next weight update brings it back (`readmit`)
            elif now - since >= self.health_interval_s:
                if probe(index):
                    logger.info("rollout server %s answers again", address)
                    self.down.pop(index, None)
                    usable.append(index)
                else:
                    self.down[index] = now
        return usable

    def live(self) -> list[int]:
        """Indexes of the members not marked down (no probe)."""
        return [index for index in range(len(self.addresses)) if index not in self.down]

    def mark_down(self, index: int, error: object) -> None:
        """Member `index` could not be reached (`error` says how): out of generation until a probe answers."""
        with self._lock:
            self.down[index] = time.monotonic()
        logger.warning("rollout server %s is down, serving from the others: %s", self.addresses[index], error)

    def down_addresses(self) -> list[str]:
        """The addresses of the members marked down now."""
        return [self.addresses[index] for index in sorted(self.down)]

    def weight_targets(self, answers: Sequence[bool]) -> list[int]:
        """The members whose health check answered (`answers`, one per member) take the next weight update; the
        others are marked down and miss it. `ServerConnectionError` naming every address when none answered."""
        targets = [index for index, alive in enumerate(answers) if alive]
        if not targets:
            raise ServerConnectionError(
                f"no rollout server of the fleet answers its health check: {', '.join(self.addresses)}; restart "
                "them, or fix rollout.servers"
            )
        for index, alive in enumerate(answers):
            if not alive:
                if index not in self.down:
                    self.mark_down(index, "no answer to its health check before a weight update")
                self.missed_update.add(index)
        return targets

    def exclude(self, indexes: Collection[int]) -> None:
        """The members `indexes` missed a weight update (they died or hung during it): out of generation until a later
        update reaches them (`readmit`)."""
        with self._lock:
            for index in indexes:
                self.down.setdefault(index, time.monotonic())
                self.missed_update.add(index)

    def readmit(self, indexes: Collection[int]) -> None:
        """The members `indexes` hold the latest weights (a weight update reached them): serve from them again."""
        with self._lock:
            for index in indexes:
                if index in self.down:
                    logger.info("rollout server %s is back with the latest weights", self.addresses[index])
                self.down.pop(index, None)
                self.missed_update.discard(index)


class Streamed:
    """An `on_tokens` callback that counts the tokens it passed on."""

    def __init__(self, on_tokens: TokenCallback) -> None:
        self._on_tokens = on_tokens
        self.tokens = 0

    def __call__(self, tokens: Any) -> None:
        self.tokens += len(tokens)
        self._on_tokens(tokens)


def refuse_restream(stream: Streamed | None, address: str, error: ServerConnectionError) -> None:
    """Raise when the call that failed with `error` on the server at `address` had streamed tokens through `stream`:
    a retry elsewhere would stream them again."""
    if stream is not None and stream.tokens:
        raise ServerConnectionError(
            f"rollout server {address} was lost after streaming {stream.tokens} tokens; the request is not retried "
            f"on another server, which would stream them again: {error}"
        ) from error
