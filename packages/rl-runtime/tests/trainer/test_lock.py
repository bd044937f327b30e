"""One run per output folder: a second process is refused naming the holder, a killed holder's lock is stale at
once, an explicit take-over starts anyway, and the lock is re-entrant within a process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
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


def _try_in_another_process(run_dir: Path, take_over: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _TRY, str(run_dir), "1" if take_over else "0"], capture_output=True, text=True
    )


def test_a_second_process_is_refused_naming_the_holder(tmp_path: Path) -> None:
    with RunLock(tmp_path):
        other = _try_in_another_process(tmp_path)
    assert other.returncode == 2
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in other.stdout
    assert "trainer.take_over=true" in other.stdout
    assert _try_in_another_process(tmp_path).returncode == 0  # released on leaving the block


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


def test_take_over_starts_beside_a_live_holder(tmp_path: Path) -> None:
    with RunLock(tmp_path):
        taken = _try_in_another_process(tmp_path, take_over=True)
    assert taken.returncode == 0 and taken.stdout.strip() == "locked"
    assert (tmp_path / LOCK_FILE).is_file()


def test_the_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    with RunLock(tmp_path), RunLock(tmp_path):
        pass
    with RunLock(tmp_path):
        with RunLock(tmp_path):
            pass
        assert _try_in_another_process(tmp_path).returncode == 2  # the outer block still holds it
    assert _try_in_another_process(tmp_path).returncode == 0
