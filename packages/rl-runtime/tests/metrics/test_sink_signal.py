"""The `signal_at_step` test double: it signals the process group its run leads as the chosen step is logged, once,
and refuses a process that does not lead its group (its signal would reach the test runner)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rl_runtime.testing import register_signal_at_step

_CHILD = textwrap.dedent(
    """
    import os, signal
    from rl_runtime.metrics import MetricsLogger, SinkContext
    from rl_runtime.testing import SIGNAL_AT_STEP, register_signal_at_step

    register_signal_at_step(2, signal.SIGUSR1)
    try:
        MetricsLogger.from_names([SIGNAL_AT_STEP], SinkContext(run_dir="."))
    except RuntimeError as refused:
        print("refused:", refused)
    os.setsid()  # now it leads its own group, as a run started with start_new_session=True does
    seen = []
    signal.signal(signal.SIGUSR1, lambda number, frame: seen.append(number))
    with MetricsLogger.from_names([SIGNAL_AT_STEP], SinkContext(run_dir=".")) as sinks:
        for step in (1, 2, 2, 3):
            sinks.log(step, {"x": 1.0})
            print("step", step, "signals", len(seen))
    """
)


def test_it_signals_its_group_at_the_chosen_step_once_and_refuses_a_process_in_another_group() -> None:
    child = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    lines = child.stdout.splitlines()
    assert lines[0].startswith("refused: log sink 'signal_at_step': expected a process that leads its own process")
    assert "start_new_session=True" in lines[0]
    assert lines[1:] == ["step 1 signals 0", "step 2 signals 1", "step 2 signals 1", "step 3 signals 1"]


@pytest.mark.parametrize(
    ("step", "number", "message"),
    [(0, 2, "expected a training step >= 1, found 0"), (True, 2, "found True"), (1, 999, "999 is not a valid")],
)
def test_a_step_before_the_first_or_an_unknown_signal_is_refused(step: int, number: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        register_signal_at_step(step, number)
