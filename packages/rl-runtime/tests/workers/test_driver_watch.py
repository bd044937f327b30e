"""Workers die with their driver: a process watching a driver ends within a poll of the driver's death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rl_runtime.workers._driver_watch import EXIT_CODE, DriverIdentity, process_alive, watch_driver

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
