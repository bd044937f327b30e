"""Workers die with their driver: a process watching a driver ends as soon as the driver dies, and the watch does not
wake while the driver lives (Linux: it blocks on pidfds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rl_runtime.workers._driver_watch import (
    EXIT_CODE,
    DriverIdentity,
    process_alive,
    process_fds,
    wait_any_ends,
    watch_driver,
)

_DRIVER = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
print(child.pid, flush=True)
child.wait()
"""
_WORKER = """
import os, socket, sys, time
from pathlib import Path
from rl_runtime.workers._driver_watch import DriverIdentity, watch_driver
assert watch_driver(DriverIdentity(os.getppid(), socket.gethostname()))
while True:  # a worker that would keep writing
    Path(sys.argv[1]).write_text(str(time.time()))
    time.sleep(0.01)
"""


def test_a_worker_ends_within_a_poll_of_its_drivers_death(tmp_path: Path) -> None:
    beacon = tmp_path / "beacon"
    with subprocess.Popen(
        [sys.executable, "-c", _DRIVER, _WORKER, str(beacon)], stdout=subprocess.PIPE, text=True
    ) as driver:
        assert driver.stdout is not None
        worker = int(driver.stdout.readline())
        deadline = time.monotonic() + 120
        while not beacon.exists():
            assert time.monotonic() < deadline, "the worker never started writing"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    killed = time.monotonic()
    while process_alive(worker):
        assert time.monotonic() - killed < 2.0, "the worker outlived its driver"
        time.sleep(0.01)
    last_write = beacon.stat().st_mtime
    time.sleep(0.3)
    assert beacon.stat().st_mtime == last_write  # nothing written after it ended


def test_no_watch_for_a_driver_on_another_host_or_none() -> None:
    assert not watch_driver(None)
    assert not watch_driver(DriverIdentity(os.getpid(), "another-host.invalid"))
    assert process_alive(os.getpid()) and EXIT_CODE != 0


def _voluntary_switches(tid: int) -> int:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return int(status.split("voluntary_ctxt_switches:")[1].split()[0])


@pytest.mark.skipif(
    not hasattr(os, "pidfd_open") or not Path("/proc/self/task").exists(), reason="pidfds and /proc are Linux's"
)
def test_the_watch_sleeps_until_a_process_ends_without_waking() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    fds = process_fds((sleeper.pid, os.getpid()))
    assert fds is not None
    ended, tid = threading.Event(), []

    def watch() -> None:
        tid.append(threading.get_native_id())
        wait_any_ends(fds)
        ended.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        assert not ended.wait(0.2) and tid
        before = _voluntary_switches(tid[0])
        assert not ended.wait(0.5)  # both alive: a 50 ms poll would have woken ~10 times by now
        assert _voluntary_switches(tid[0]) == before
        assert sleeper.stdin is not None
        sleeper.stdin.close()
        sleeper.wait()
        assert ended.wait(10)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfds are Linux's")
def test_a_process_gone_before_the_watch_starts_counts_as_ended() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    fds = process_fds((gone.pid,))
    assert fds is not None
    try:
        wait_any_ends(fds)  # returns at once
    finally:
        os.close(fds[0])
