"""Workers die with their driver: a daemon thread in each DAG worker ends its process as soon as the driver (or
the worker's parent, Ray's raylet) is gone, so a killed run leaves no worker writing into its run folder.

On Linux the thread blocks on process file descriptors of the two (`os.pidfd_open`), which the kernel makes
readable when the process ends: no wake-ups while both live. Elsewhere (or where pidfds are refused) it looks every
`POLL_S`, each look taking the GIL from the worker's busy threads (what that cost: bench/README.md, "Where the CPU
goes in a real step").

Ray notices a dead driver too, but only after its heartbeats time out (1-3 s here), and a worker in the middle of a
checkpoint kept writing meanwhile. The watch only works where the driver runs on the worker's host (the pid means
nothing elsewhere); on other hosts Ray's own detection remains.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
import time
from pathlib import Path

import attrs

logger = logging.getLogger(__name__)

POLL_S = 0.05
"""How often the watch looks without pidfds; the longest a worker then outlives its driver (plus the kernel's time to
end it)."""
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


def process_fds(pids: tuple[int, ...]) -> list[int] | None:
    """A pidfd for each of `pids` (readable once that process ends), or None where the OS gives none (then nothing
    stays open). A process already gone gets a pidfd of its own that is readable at once: `os.pipe` closed for
    writing."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    fds: list[int] = []
    try:
        for pid in pids:
            try:
                fds.append(opener(pid))
            except ProcessLookupError:
                read, write = os.pipe()
                os.close(write)  # a pipe without a writer reads end-of-file: "ended"
                fds.append(read)
    except OSError:  # no pidfd support in this kernel, or a sandbox refuses it
        for fd in fds:
            os.close(fd)
        return None
    return fds


def wait_any_ends(fds: list[int]) -> None:
    """Block until one of the processes behind `fds` (from `process_fds`) has ended."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    while not poller.poll():  # no timeout: returns only with an event
        pass


def _watch(driver: DriverIdentity, parent: int, fds: list[int] | None) -> None:
    if fds is not None:
        wait_any_ends(fds)
    else:
        while process_alive(driver.pid) and os.getppid() == parent:
            time.sleep(POLL_S)
    # No logging: a handler could block on a pipe whose reader died with the driver.
    os._exit(EXIT_CODE)


def watch_driver(driver: DriverIdentity | None) -> bool:
    """End this process as soon as `driver` (or this process's parent, Ray's raylet) is gone; False (no watch) when
    `driver` is None or runs on another host."""
    if driver is None or driver.host != socket.gethostname():
        return False
    parent = os.getppid()
    # The pidfds open before the liveness check, so a process that ends (and whose pid is reused) in between is seen.
    fds = process_fds((driver.pid, parent))
    if not process_alive(driver.pid) or os.getppid() != parent:
        os._exit(EXIT_CODE)
    threading.Thread(target=_watch, args=(driver, parent, fds), name="driver-watch", daemon=True).start()
    return True
