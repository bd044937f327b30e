"""The run's log file and the one-line error a CLI user sees; the traceback goes to the log file or `--debug`."""

from __future__ import annotations

import logging
import time
from pathlib import Path

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
RUN_LOG_FILE = "train.log"
"""The log file of `rl-recipes train` in the run folder (`trainer.output_dir`): the driver's log and, on an error,
its traceback."""
_TRACEBACK_MARK = "Traceback (most recent call last):"


RANK_LOG_FILE = "train.rank{rank}.log"
"""The log file of torchrun rank `rank` > 0 (rank 0 writes `train.log`)."""


def attach_run_log(run_dir: Path, rank: int = 0) -> Path:
    """Copy the root logger's records to `run_dir/train.log` (appended across runs; a torchrun rank `rank` > 0
    to `train.rank<rank>.log`); its path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / (RANK_LOG_FILE.format(rank=rank) if rank else RUN_LOG_FILE)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    return path


def append_traceback(path: Path, command: str, trace: str) -> None:
    """Append `trace` (a formatted traceback) to the log file `path`, stamped with the time and the command."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with path.open("a", encoding="utf-8") as log:
        log.write(f"{stamp} ERROR rl-recipes {command} stopped:\n{trace}\n")


def one_line(message: str) -> str:
    """`message` on one line: a message that embeds a traceback (a Ray worker's error) keeps its own first line
    and the traceback's last one (the exception that ended it); line breaks become spaces."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if _TRACEBACK_MARK in message and len(lines) > 1:
        head = message.split(_TRACEBACK_MARK, 1)[0].splitlines()[0].strip()
        return f"{head} ... {lines[-1]}"
    return " ".join(lines)
