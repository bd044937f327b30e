"""One run per output folder: a second process is refused naming the holder, a killed holder's lock is stale at
once, an explicit take-over starts anyway, and the lock is re-entrant within a process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rl_runtime.trainer._lock import LOCK_FILE, RunLock, RunLockedError, acquire_run_lock, release_run_lock

_TRY = """
import sys
from pathlib import Path
from rl_runtime.trainer._lock import RunLockedError, acquire_run_lock
try:
    acquire_run_lock(Path(sys.argv[1]), take_over=sys.argv[2] == "1")
except RunLockedError as error:
    print(error)
    sys.exit(2)
print("locked")
"""
_TRY_EACH = """
import json, sys
from pathlib import Path
from rl_runtime.trainer._lock import RunLockedError, acquire_run_lock, release_run_lock
for line in sys.stdin:
    run_dir, take_over = json.loads(line)
    try:
        acquire_run_lock(Path(run_dir), take_over=take_over)
    except RunLockedError as error:
        print(json.dumps([2, str(error)]), flush=True)
        continue
    release_run_lock(Path(run_dir))  # as _TRY's exit would
    print(json.dumps([0, "locked"]), flush=True)
"""
"""_TRY as a service: one other process tries the lock once per line it reads, then lets it go; importing the
runtime in a fresh interpreter costs seconds, once per module instead of once per try."""


class _OtherProcess:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def try_lock(self, run_dir: Path, take_over: bool = False) -> tuple[int, str]:
        """(2 and RunLockedError's message) when refused, else (0, "locked") after taking and releasing it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([str(run_dir), take_over]) + "\n")
        self.process.stdin.flush()
        returncode, stdout = json.loads(self.process.stdout.readline())
        return returncode, stdout


@pytest.fixture(scope="module")
def other() -> Iterator[_OtherProcess]:
    """Another process than this one, trying locks on demand."""
    command = [sys.executable, "-c", _TRY_EACH]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        try:
            yield _OtherProcess(process)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=60)


def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path, other: _OtherProcess) -> None:
    with RunLock(tmp_path):
        returncode, stdout = other.try_lock(tmp_path)
    assert returncode == 2
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in stdout
    assert "trainer.take_over=true" in stdout
    assert other.try_lock(tmp_path)[0] == 0  # released on leaving the block


def test_the_lock_of_a_killed_holder_is_stale_at_once(tmp_path: Path) -> None:
    script = _TRY + "import time; time.sleep(60)\n"
    with subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path), "0"], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=rf"pid {holder.pid} on host"):
            acquire_run_lock(tmp_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    acquire_run_lock(tmp_path)
    release_run_lock(tmp_path)


def test_take_over_starts_beside_a_live_holder(tmp_path: Path, other: _OtherProcess) -> None:
    with RunLock(tmp_path):
        taken = other.try_lock(tmp_path, take_over=True)
    assert taken == (0, "locked")
    assert (tmp_path / LOCK_FILE).is_file()


def test_the_lock_is_reentrant_within_a_process(tmp_path: Path, other: _OtherProcess) -> None:
    with RunLock(tmp_path), RunLock(tmp_path):
        pass
    with RunLock(tmp_path):
        with RunLock(tmp_path):
            pass
        assert other.try_lock(tmp_path)[0] == 2  # the outer block still holds it
    assert other.try_lock(tmp_path)[0] == 0
