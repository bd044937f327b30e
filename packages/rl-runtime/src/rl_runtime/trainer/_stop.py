"""Stopping a run on SIGINT or SIGTERM without a traceback: the first signal lets the current step finish and
saves a checkpoint; a second abandons the step at once (the newest committed checkpoint stays the resume point).

The handlers are installed only while `fit` runs, and only in the main thread (Python delivers signals there).
Ray's own processes block SIGINT, so a Ctrl-C in a terminal reaches the driver alone; the workers stop when the
driver closes them (or, if the driver is killed, when `rl_runtime.workers` sees it gone).
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from rl_runtime.trainer._errors import TrainingInterrupted

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
RESUME_HINT = "run the same command again to resume (trainer.resume=auto)"


class StopOnSignal:
    """`with StopOnSignal() as stop:` records the first SIGINT/SIGTERM in `stop.signal_number` (check it between
    steps); a second one raises KeyboardInterrupt where the program is."""

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.signal_number is not None:
            raise KeyboardInterrupt  # the second signal: abandon the step now
        self.signal_number = number
        logger.warning(
            "%s: finishing the current step, then saving a checkpoint and stopping (send it again to abandon the step)",
            signal.Signals(number).name,
        )

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for number in STOP_SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}


def stopped(number: int, step: int, total: int, checkpoint: Path | None, *, abandoned: bool) -> TrainingInterrupted:
    """The TrainingInterrupted of a run stopped by signal `number` with `step` of `total` steps done."""
    name = signal.Signals(number).name
    if not abandoned and checkpoint is None:
        message = f"stopped by {name} before the first step finished: nothing to save"
    elif not abandoned:
        message = f"stopped by {name} after step {step} of {total}: saved checkpoint {checkpoint}; {RESUME_HINT}"
    elif checkpoint is None:
        message = f"stopped by {name} during step {step + 1} of {total} (abandoned): no checkpoint saved yet"
    else:
        message = (
            f"stopped by {name} during step {step + 1} of {total} (abandoned): the newest checkpoint is {checkpoint}; "
            f"{RESUME_HINT}"
        )
    return TrainingInterrupted(message, signal_number=number, step=step, checkpoint=checkpoint, abandoned=abandoned)
