"""Workers die with their driver: a daemon thread in each DAG worker ends its process within `POLL_S` of the
driver's death, so a killed run leaves no worker writing into its run folder.

Ray notices a dead driver too, but only after its heartbeats time out (1-3 s here), and a worker in the middle of a
checkpoint kept writing meanwhile. The watch only works where the driver runs on the worker's host (the pid means
nothing elsewhere); on other hosts Ray's own detection remains.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from pathlib import Path

import attrs

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the watch looks; the longest a worker outlives its driver (plus the kernel's time to end it)."""
EXIT_CODE = 70
"""What a worker exits with when its driver is gone."""


@attrs.frozen
class DriverIdentity:
    """The driver process a worker watches: its pid and host."""

    pid: int
    host: str

    @classmethod
    def of_this_process(cls) -> DriverIdentity:
        """This process as the driver."""
        return cls(os.getpid(), socket.gethostname())


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (a killed process its parent has not reaped yet)."""
    stat = Path(f"/proc/{pid}/stat")
    try:
        text = stat.read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel, which counts a zombie as alive
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return text[text.rindex(")") + 2] not in "ZX"


def _watch(driver: DriverIdentity, parent: int) -> None:
    while process_alive(driver.pid) and os.getppid() == parent:
        time.sleep(POLL_S)
    # No logging: a handler could block on a pipe whose reader died with the driver.
    os._exit(EXIT_CODE)


def watch_driver(driver: DriverIdentity | None) -> bool:
    """End this process as soon as `driver` (or this process's parent, Ray's raylet) is gone; False (no watch) when
    `driver` is None or runs on another host."""
    if driver is None or driver.host != socket.gethostname():
        return False
    if not process_alive(driver.pid):
        os._exit(EXIT_CODE)
    threading.Thread(target=_watch, args=(driver, os.getppid()), name="driver-watch", daemon=True).start()
    return True
