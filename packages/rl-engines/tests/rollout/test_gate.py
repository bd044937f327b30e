"""The admission / pause / exclusive state machine, driven by threads standing in for generation loops."""

from __future__ import annotations

import threading
import time

import pytest

from rl_engines.rollout import (
    EngineAsleepError,
    EngineShutdownError,
    EngineTimeoutError,
    InvalidRequestError,
    RequestGate,
    UnversionedWeightsError,
)

SHORT = 0.2
HOLD_S = 60.0  # how long the exclusive holder waits for leave(); set as soon as the test has looked
EVENT_S = 30.0  # a bound on a wait that should end now (a thread, an admission); only a failing run waits it out


def _gate(timeout: float = EVENT_S) -> RequestGate:
    return RequestGate(admission_timeout_s=timeout, drain_timeout_s=timeout, initial_version=1)


def _in_thread(fn, *args):
    result: dict = {}

    def run() -> None:
        try:
            result["value"] = fn(*args)
        except BaseException as error:
            result["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def test_admission_waits_for_resume() -> None:
    gate = _gate()
    gate.pause("abort")
    thread, result = _in_thread(gate.admit, ["a"])
    time.sleep(SHORT)
    assert thread.is_alive()
    gate.resume()
    thread.join(EVENT_S)
    assert result["value"].rids == {"a"}


def test_admission_times_out_naming_the_pause() -> None:
    gate = _gate(timeout=SHORT)
    gate.pause("keep")
    with pytest.raises(EngineTimeoutError, match=r"paused \(mode 'keep'\)"):
        gate.admit(["a"])


def test_refusals() -> None:
    gate = _gate()
    gate.asleep = frozenset({"weights"})
    with pytest.raises(EngineAsleepError, match=r"released \['weights'\]"):
        gate.admit(["a"])
    gate.asleep = frozenset()
    gate.weights_changed()
    with pytest.raises(UnversionedWeightsError, match="since version 1 was set"):
        gate.admit(["a"])
    gate.set_version(2)
    assert gate.version == 2
    gate.admit(["a"])
    with pytest.raises(InvalidRequestError, match="pause mode must be one of"):
        gate.pause("drain")  # type: ignore[arg-type]
    gate.stop()
    with pytest.raises(EngineShutdownError):
        gate.admit(["b"])


def test_pause_keep_parks_until_resume_and_abort_mode_aborts() -> None:
    gate = _gate()
    ticket = gate.admit(["a"])
    parked, result = _in_thread(lambda: [gate.checkpoint(ticket) for _ in range(3)])
    time.sleep(SHORT)  # the loop has spun through checkpoints freely
    parked.join(EVENT_S)
    assert result["value"] == [frozenset()] * 3
    pauser, _ = _in_thread(gate.pause, "keep")
    time.sleep(SHORT)
    assert pauser.is_alive()  # waits for the running ticket to reach a checkpoint
    loop, loop_result = _in_thread(gate.checkpoint, ticket)
    pauser.join(EVENT_S)
    assert not pauser.is_alive() and loop.is_alive() and gate.status().state == "paused"
    gate.resume()
    loop.join(EVENT_S)
    assert loop_result["value"] == frozenset()
    keep, _ = _in_thread(gate.pause, "keep")  # parks again...
    loop, loop_result = _in_thread(gate.checkpoint, ticket)
    keep.join(EVENT_S)
    abort, _ = _in_thread(gate.pause, "abort")  # ...and an abort pause ends the parked ticket
    loop.join(EVENT_S)
    assert loop_result["value"] is None
    gate.release(ticket)
    abort.join(EVENT_S)
    assert not abort.is_alive()


def test_abort_by_rid_reaches_only_that_ticket() -> None:
    gate = _gate()
    first, second = gate.admit(["a", "b"]), gate.admit(["c"])
    assert gate.abort(["b"]) == 1
    assert gate.checkpoint(first) == {"b"} and gate.checkpoint(second) == frozenset()
    assert gate.checkpoint(first) == {"b"}  # cumulative, for calls split into several batches
    assert gate.abort(None) == 2 and gate.checkpoint(second) is None


def test_exclusive_drains_blocks_admission_and_times_out() -> None:
    gate = _gate(timeout=SHORT)
    ticket = gate.admit(["a"])
    with pytest.raises(EngineTimeoutError, match="in-flight requests to finish or park"), gate.exclusive():
        pass
    assert gate.admit(["b"])  # the failed exclusive released its hold
    gate = _gate()
    ticket = gate.admit(["a"])
    entered, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with gate.exclusive():
            entered.set()
            leave.wait(HOLD_S)

    holder = threading.Thread(target=hold)
    holder.start()
    assert not entered.wait(SHORT)  # waits for the in-flight ticket
    gate.release(ticket)
    assert entered.wait(EVENT_S)
    waiter, result = _in_thread(gate.admit, ["c"])
    time.sleep(SHORT)
    assert waiter.is_alive() and gate.status().in_flight == 0
    leave.set()
    waiter.join(EVENT_S)
    assert result["value"].rids == {"c"}
