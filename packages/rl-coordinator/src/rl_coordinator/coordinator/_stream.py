"""A rank's shares of consecutive steps, pushed by the coordinator: one streaming call instead of a call per step.

Every actor call costs a fixed round trip of CPU in both processes (bench/README.md, "Figures behind the
docstrings"), and a rank reading an edge step after step pays it every step. On a streaming call the coordinator
sends each share as a generator item the moment its step is partitioned, together with the following shares
that are ready then (a rank that fell behind catches up in one item); an item costs the two processes about
half of what a call costs. What a rank gives up is asking: the coordinator opens the rank's next step as
soon as the previous item is sent, so the wait for a step (its timeout) runs from then, and a consumer that
stops early closes the stream to release its claim on the step it no longer wants.
"""

from __future__ import annotations

from collections import deque
from types import TracebackType
from typing import Any

import ray

from rl_coordinator._sample_info import SampleInfo
from rl_coordinator.coordinator._fetch import fetch_payloads
from rl_coordinator.coordinator._requests import (
    MAX_SHARES_PER_ITEM,
    ReadRequest,
    RefSelection,
    check_max_shares,
    check_read_request,
    check_steps,
)


class ShareStream:
    """A rank's shares of an edge's steps `request.step`, `request.step + 1`, ..., in step order.

    Built by `CoordinatorClient.stream_refs`. Iterate it for RefSelections, or call `next_batch` for the
    samples themselves. Close it (or use it as a context manager) to stop early: that cancels the
    coordinator's wait for the next step and releases this rank's claim on it; shares already sent and not
    taken are dropped (their steps count as read by this rank).

    Args:
        coordinator: the DataCoordinator actor handle.
        request: the first step to read, this rank, the StepSpec and filter of every step, and the timeout of
            each step's wait, counted from the previous item's sending (None: DEFAULT_TIMEOUT_S).
        steps: how many steps to read; None reads until closed.
        max_shares_per_item: shares the coordinator sends in one item at most (MAX_SHARES_PER_ITEM).
    """

    def __init__(
        self,
        coordinator: Any,
        request: ReadRequest,
        steps: int | None = None,
        max_shares_per_item: int = MAX_SHARES_PER_ITEM,
    ) -> None:
        check_read_request(request)
        checked_steps = check_steps(steps)
        self._end = None if checked_steps is None else request.step + checked_steps
        self.edge_key = request.edge_key
        self.next_step = request.step
        self._items: Any = coordinator.stream.remote(request, steps, check_max_shares(max_shares_per_item))
        self._received: deque[RefSelection] = deque()

    def __iter__(self) -> ShareStream:
        return self

    def __next__(self) -> RefSelection:
        if self._end is not None and self.next_step >= self._end:
            raise StopIteration
        if not self._received:
            if self._items is None:
                raise StopIteration
            try:
                self._received.extend(ray.get(next(self._items)))
            except BaseException:  # a refused or timed-out step ends the stream on the coordinator too
                self.close()
                raise
        self.next_step += 1
        return self._received.popleft()

    def next_batch(self) -> tuple[list[SampleInfo], list[Any]]:
        """The next step's share with its payloads: (infos, samples), samples in info order."""
        selection = next(self)
        return selection.infos, fetch_payloads(selection)

    def close(self) -> None:
        """Stop the stream: the coordinator stops waiting for this rank's next step. Idempotent."""
        self._received.clear()
        if self._items is not None:
            ray.cancel(self._items)
            self._items = None

    def __enter__(self) -> ShareStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
