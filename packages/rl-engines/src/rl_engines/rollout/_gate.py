"""Admission, pause, abort and exclusive access for an engine that serves concurrent generate calls.

The engine-independent state machine behind `pause`/`resume`, `sleep`/`wake_up` and weight updates:

- `admit` lets a generate call in, waiting (bounded) while the engine is paused or an update runs, and
  refusing at once when it is asleep, stopped, or its weights are unversioned or not loaded.
- Generation loops call `checkpoint` between decoding steps. It returns the rids to abort now and, under
  `pause("keep")`, parks the loop until `resume`.
- `exclusive` is held by weight updates, sleep, wake-up and version changes. It blocks new admissions and
  waits until every admitted call has finished or is parked, so no decoding step overlaps a weight
  change, and a parked request can resume with the new weights (its tokens then carry two versions).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from rl_engines.rollout._errors import (
    EngineAsleepError,
    EngineShutdownError,
    EngineTimeoutError,
    InvalidRequestError,
    UnversionedWeightsError,
    WeightsNotLoadedError,
)
from rl_engines.rollout._types import EngineStatus, PauseMode

_PAUSE_MODES = ("abort", "wait", "keep")


@dataclass(eq=False)
class Ticket:
    """One admitted generate call: its rids and the aborts addressed to it."""

    rids: frozenset[str]
    abort_all: bool = False
    aborted: set[str] = field(default_factory=set)
    parked: bool = False


class RequestGate:
    """Thread-safe admission control; see the module doc. Timeouts raise `EngineTimeoutError`."""

    def __init__(self, *, admission_timeout_s: float, drain_timeout_s: float, initial_version: int) -> None:
        self.admission_timeout_s = admission_timeout_s
        self.drain_timeout_s = drain_timeout_s
        self._cond = threading.Condition()
        self._active: list[Ticket] = []
        self._waiting: list[Ticket] = []
        """Calls waiting for admission: `abort(rids)` marks them too, so a request aborted (cancelled) while it
        waits ends "abort" as soon as it is admitted."""
        self._pause_mode: PauseMode | None = None
        self._exclusive = False
        self._stopped = False
        self._dirty = False
        self._version = initial_version
        self.asleep: frozenset[str] = frozenset()
        self.weights_loaded = True

    # ---- request side ------------------------------------------------------------------------------
    def admit(self, rids: Iterable[str]) -> Ticket:
        """Admit a generate call for `rids`, waiting at most `admission_timeout_s` while paused or updating."""
        deadline = time.monotonic() + self.admission_timeout_s
        ticket = Ticket(frozenset(rids))
        with self._cond:
            self._waiting.append(ticket)
            try:
                while True:
                    if self._stopped:
                        raise EngineShutdownError("the engine was shut down; build a new one")
                    if self.asleep:
                        raise EngineAsleepError(
                            f"the engine is asleep (released {sorted(self.asleep)}); call wake_up() first"
                        )
                    if self._pause_mode is None and not self._exclusive:
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        why = f"paused (mode {self._pause_mode!r}); call resume()" if self._pause_mode else "updating"
                        raise EngineTimeoutError(
                            f"generate waited {self.admission_timeout_s} s for admission while the engine was {why}"
                        )
                    self._cond.wait(remaining)
                # Checked only now: while paused, a sync may be halfway through loading and labelling weights.
                self._raise_if_unversioned()
            finally:
                self._waiting.remove(ticket)
            self._active.append(ticket)
            return ticket

    def _raise_if_unversioned(self) -> None:
        if not self.weights_loaded:
            raise WeightsNotLoadedError(
                "the engine discarded its weights (sleep level 2); send a full weight update before generating"
            )
        if self._dirty:
            raise UnversionedWeightsError(
                f"weights changed since version {self._version!r} was set; call set_weight_version(...) "
                "after updating (the sync protocol does this before resume)"
            )

    def checkpoint(self, ticket: Ticket) -> frozenset[str] | None:
        """Between decoding steps: the rids aborted so far, or None for all; parks under pause("keep")."""
        with self._cond:
            if ticket.abort_all or self._stopped:
                return None
            if self._pause_mode == "keep" and not self._park(ticket):
                return None
            # Cumulative: a call split into several batches checks every batch against the same set.
            return frozenset(ticket.aborted)

    def _park(self, ticket: Ticket) -> bool:
        """Wait while paused with "keep"; False when the ticket must abort (timeout, abort, unservable)."""
        ticket.parked = True
        self._cond.notify_all()
        deadline = time.monotonic() + self.admission_timeout_s
        try:
            while (self._pause_mode == "keep" or self._exclusive) and not (ticket.abort_all or self._stopped):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        finally:
            ticket.parked = False
        unservable = self._stopped or self.asleep or not self.weights_loaded or self._dirty
        return not (ticket.abort_all or unservable)

    def join(self, ticket: Ticket, rids: Iterable[str]) -> bool:
        """Add `rids` to the admitted `ticket` (requests joining a running batch) if the engine admits now; False
        while paused or updating (they wait); raises as `admit` when it is asleep, stopped or unversioned."""
        with self._cond:
            if self._stopped:
                raise EngineShutdownError("the engine was shut down; build a new one")
            if self.asleep:
                raise EngineAsleepError(f"the engine is asleep (released {sorted(self.asleep)}); call wake_up() first")
            if self._pause_mode is not None or self._exclusive or ticket.abort_all:
                return False
            self._raise_if_unversioned()
            ticket.rids = ticket.rids | frozenset(rids)
            return True

    def leave(self, ticket: Ticket, rids: Iterable[str]) -> None:
        """Requests `rids` of `ticket` have ended: forget them (and aborts addressed to them)."""
        gone = frozenset(rids)
        with self._cond:
            ticket.rids = ticket.rids - gone
            ticket.aborted -= gone

    def release(self, ticket: Ticket) -> None:
        """The generate call of `ticket` has returned."""
        with self._cond:
            self._active.remove(ticket)
            self._cond.notify_all()

    # ---- control side ------------------------------------------------------------------------------
    def pause(self, mode: PauseMode, timeout_s: float | None = None) -> None:
        """Stop admitting; then abort, drain or park the in-flight calls, returning when that is done."""
        if mode not in _PAUSE_MODES:
            raise InvalidRequestError(f"pause mode must be one of {_PAUSE_MODES}, got {mode!r}")
        with self._cond:
            if self._stopped:
                raise EngineShutdownError("the engine was shut down; build a new one")
            self._pause_mode = mode
            if mode == "abort":
                for ticket in self._active:
                    ticket.abort_all = True
            self._cond.notify_all()
            done = (lambda: not self._active) if mode != "keep" else self._all_parked
            self._wait_for(done, timeout_s, f"pause({mode!r}) to take effect on {len(self._active)} in-flight calls")

    def resume(self) -> None:
        """Admit requests again and let parked ones continue."""
        with self._cond:
            self._pause_mode = None
            self._cond.notify_all()

    def abort(self, rids: Collection[str] | None) -> int:
        """Abort the in-flight requests in `rids` (None: all), and those in `rids` still waiting for admission (they
        end "abort" once admitted); returns how many generate calls were hit."""
        hit = 0
        with self._cond:
            for ticket in self._waiting:
                if rids is not None and ticket.rids & set(rids):
                    ticket.aborted |= ticket.rids & set(rids)
                    hit += 1
            for ticket in self._active:
                if rids is None:
                    ticket.abort_all = True
                    hit += 1
                elif ticket.rids & set(rids):
                    ticket.aborted |= ticket.rids & set(rids)
                    hit += 1
            self._cond.notify_all()
        return hit

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the engine with no decoding step running: new calls wait, in-flight ones finish or stay parked."""
        with self._cond:
            if self._stopped:
                raise EngineShutdownError("the engine was shut down; build a new one")
            self._wait_for(lambda: not self._exclusive, self.drain_timeout_s, "another update to finish")
            self._exclusive = True
            try:
                self._wait_for(self._all_parked, self.drain_timeout_s, "in-flight requests to finish or park")
            except EngineTimeoutError:
                self._exclusive = False
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def _all_parked(self) -> bool:
        return all(ticket.parked for ticket in self._active)

    def _wait_for(self, predicate: Callable[[], bool], timeout_s: float | None, what: str) -> None:
        timeout = self.drain_timeout_s if timeout_s is None else timeout_s
        if not self._cond.wait_for(predicate, timeout):
            raise EngineTimeoutError(f"waited {timeout} s for {what}; raise the timeout or pause with mode='abort'")

    # ---- weights and lifecycle ---------------------------------------------------------------------
    @property
    def version(self) -> int:
        """The version of the weights currently loaded."""
        return self._version

    def weights_changed(self) -> None:
        """Weights were modified: refuse new requests until `set_version`."""
        self._dirty = True

    def set_version(self, version: int) -> None:
        """Label the current weights `version` (call inside `exclusive`)."""
        self._version = version
        self._dirty = False

    def stop(self) -> None:
        """Abort everything in flight and refuse all further calls."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def status(self) -> EngineStatus:
        """A snapshot of the gate's state."""
        with self._cond:
            if self._stopped:
                state = "stopped"
            elif self.asleep:
                state = "asleep"
            elif self._pause_mode is not None:
                state = "paused"
            else:
                state = "serving"
            return EngineStatus(
                state=state,
                weight_version=self._version,
                in_flight=len(self._active),
                pause_mode=self._pause_mode,
                asleep=self.asleep,
                weights_loaded=self.weights_loaded,
            )
