"""One run per output folder: an OS file lock on `<output_dir>/.run.lock`, held by the driver while it runs.

The lock is `flock`'s: the kernel drops it when the holding process exits, however it exits, so a lock left by a
killed run is stale at once and the next run takes it without asking. The file names its holder (pid and host) so a
refused run can say who holds the folder. Within one process the lock is re-entrant: a recipe holds it around the
whole run and the Trainer inside takes it again for free.

`take_over=True` starts even though a live run holds the folder: the old lock file is unlinked and a new one
locked, so the old holder keeps a lock on a file no one else can open. Both runs then write into the folder; stop
the other run first.

Under torchrun only rank 0 takes the lock (`launch_from_env`); the other ranks of the job write into the folder
under it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
from pathlib import Path
from types import TracebackType

from rl_runtime.trainer._errors import TrainerError
from rl_runtime.trainer._launch import launch_from_env

logger = logging.getLogger(__name__)

LOCK_FILE = ".run.lock"
TAKE_OVER_FIELD = "trainer.take_over"


class RunLockedError(TrainerError):
    """Another live process holds the run folder's lock."""


_HELD: dict[Path, tuple[int, int]] = {}
"""Locks this process holds: resolved lock path -> (file descriptor, nesting count)."""


def _holder(path: Path) -> str:
    try:
        record = json.loads(path.read_text())
        return f"pid {record['pid']} on host {record['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its pid yet"


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    try:
        current = os.stat(path).st_ino
    except FileNotFoundError:
        current = -1
    if os.fstat(fd).st_ino != current:
        # A take-over unlinked the file between our open and our lock: we locked a file no one else sees.
        os.close(fd)
        return _try_lock(path)
    return fd


def _write_holder(fd: int) -> None:
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, record + b"\n", 0)


def acquire_run_lock(run_dir: Path, *, take_over: bool = False) -> Path:
    """Lock run folder `run_dir` for this process (re-entrant); RunLockedError naming the holder when another live
    process holds it, unless `take_over`. Returns the lock file; pair every call with `release_run_lock`."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = (run_dir / LOCK_FILE).resolve()
    if not launch_from_env().is_leader:
        return path  # a torchrun rank other than 0: rank 0 holds the folder for the whole job
    if path in _HELD:
        fd, count = _HELD[path]
        _HELD[path] = (fd, count + 1)
        return path
    fd = _try_lock(path)
    if fd is None:
        holder = _holder(path)
        if not take_over:
            raise RunLockedError(
                f"trainer.output_dir {run_dir} is in use by another run ({holder}, lock file {path}); wait for it to "
                f"finish or stop it, use another output_dir, or set {TAKE_OVER_FIELD}=true (rl-recipes train "
                "--take-over) to start anyway"
            )
        logger.warning(
            "taking over %s from %s (%s=true): both runs now write into this folder", run_dir, holder, TAKE_OVER_FIELD
        )
        path.unlink(missing_ok=True)
        fd = _try_lock(path)
        if fd is None:
            raise RunLockedError(f"could not take over {path}: another run locked it again; stop the other run")
    _write_holder(fd)
    _HELD[path] = (fd, 1)
    return path


def release_run_lock(run_dir: Path) -> None:
    """Undo one `acquire_run_lock` of `run_dir`; the last one unlocks the folder."""
    path = (Path(run_dir) / LOCK_FILE).resolve()
    if path not in _HELD:
        return
    fd, count = _HELD.pop(path)
    if count > 1:
        _HELD[path] = (fd, count - 1)
        return
    os.close(fd)  # closing the only descriptor drops the flock; the file stays, naming no live holder


class RunLock:
    """`with RunLock(run_dir):` holds the run folder's lock for the block (see `acquire_run_lock`)."""

    def __init__(self, run_dir: Path, *, take_over: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.take_over = take_over

    def __enter__(self) -> Path:
        return acquire_run_lock(self.run_dir, take_over=self.take_over)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        release_run_lock(self.run_dir)
