"""Test double of a user's Ctrl-C or a kill at a known step: a metrics sink that signals its own run.

Kill-and-resume tests used to watch a run's folder from outside and signal it once a checkpoint appeared; how far
the run got before the signal landed then depended on how fast the machine was that day (a step can take 0.1 s).
A run that lists this sink in `trainer.log_sinks` sends the signal itself, as it logs a chosen step, so the step it
stops at is decided by the run's own events:

    register_signal_at_step(5, signal.SIGINT)  # in the run's process, which leads its own process group
    ... trainer.log_sinks=[jsonl, signal_at_step] ...

The trainer logs a step before it saves that step's checkpoint, so with `checkpoint_every=1` and `jsonl` listed
first: SIGINT (or SIGTERM) at step N stops the run after step N with checkpoint N saved; SIGKILL at step N leaves
checkpoint N-1 the newest and step N's record in `metrics.jsonl` (which the resumed run replaces).
`run_signalled` starts such a run as the sink needs (its own process group) and waits for it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from rl_runtime.metrics import SinkContext, register_sink

SIGNAL_AT_STEP = "signal_at_step"
"""The log sink name `register_signal_at_step` registers."""


class SignalAtStep:
    """A metrics sink that sends the process group it leads `number` as it logs step `step`, once."""

    def __init__(self, step: int, number: int) -> None:
        if os.getpgrp() != os.getpid():
            raise RuntimeError(
                f"log sink {SIGNAL_AT_STEP!r}: expected a process that leads its own process group (its signal "
                f"reaches the whole group), found pid {os.getpid()} in group {os.getpgrp()}; start the run with "
                "subprocess.Popen(..., start_new_session=True)"
            )
        self.step, self.number = step, number
        self._sent = False

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Signal the group (this process, its Ray workers) when `step` is the chosen one."""
        if step == self.step and not self._sent:
            self._sent = True
            os.killpg(os.getpgrp(), self.number)

    def close(self) -> None:
        """Nothing to flush."""


def register_signal_at_step(step: int, number: int) -> None:
    """Register log sink `SIGNAL_AT_STEP`: a run listing it in `trainer.log_sinks` sends its process group signal
    `number` as it logs step `step` (see the module doc for where each signal leaves the run). Once per process."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"register_signal_at_step step: expected a training step >= 1, found {step!r}")
    signal.Signals(number)  # an unknown number raises ValueError naming it

    def build(context: SinkContext) -> SignalAtStep:
        return SignalAtStep(step, number)

    register_sink(SIGNAL_AT_STEP)(build)


def run_signalled(
    command: Sequence[str], *, at_step: int, stderr: Path, timeout_s: float, env: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """Run `command` (a run that lists `SIGNAL_AT_STEP`, registered for step `at_step`) in a process group of its own,
    as the sink needs, with its stderr written to `stderr`; its exit status (negative: killed by that signal) and
    stderr. An AssertionError when it hangs past `timeout_s` (the whole group is killed) or exits 0, having
    finished before the step was signalled."""
    with stderr.open("w") as sink:
        process = subprocess.Popen(
            list(command), env=None if env is None else dict(env), start_new_session=True, stderr=sink
        )
    try:
        status = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # it hung: take the whole group down
        process.wait()
        raise AssertionError(f"the run neither finished nor signalled step {at_step} in {timeout_s} s") from None
    if status == 0:
        raise AssertionError(f"the run finished before step {at_step} was signalled: {stderr.read_text()[-3000:]}")
    return status, stderr.read_text()
