"""Stopping on SIGINT/SIGTERM: the first signal is recorded for the loop to finish its step, a second abandons
at once, the previous handlers come back, and the one-line messages say what was saved and how to resume."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from rl_runtime.trainer import TrainingInterrupted
from rl_runtime.trainer._stop import StopOnSignal, stopped


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_is_recorded_and_a_second_abandons(number: signal.Signals) -> None:
    before = signal.getsignal(number)
    with StopOnSignal() as stop:
        os.kill(os.getpid(), number)
        assert stop.signal_number == number  # the loop sees it between steps; nothing was raised
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), number)
    assert signal.getsignal(number) is before


def test_the_messages_say_what_was_saved_and_how_to_resume() -> None:
    saved = Path("/runs/x/checkpoints/step_00000007")
    graceful = stopped(signal.SIGINT, 7, 500, saved, abandoned=False)
    assert isinstance(graceful, TrainingInterrupted) and not graceful.abandoned and graceful.step == 7
    assert str(graceful) == (
        f"stopped by SIGINT after step 7 of 500: saved checkpoint {saved}; run the same command again to resume "
        "(trainer.resume=auto)"
    )
    abandoned = stopped(signal.SIGTERM, 7, 500, saved, abandoned=True)
    assert abandoned.signal_number == signal.SIGTERM and "during step 8 of 500 (abandoned)" in str(abandoned)
    assert f"the newest checkpoint is {saved}" in str(abandoned)
    assert "nothing to save" in str(stopped(signal.SIGINT, 0, 500, None, abandoned=False))
    assert "no checkpoint saved yet" in str(stopped(signal.SIGINT, 0, 500, None, abandoned=True))
    assert "\n" not in str(graceful) + str(abandoned)  # one line on the console
