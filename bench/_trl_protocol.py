"""The line protocol between `grpo_vs_trl.py` and its two kinds of worker process (standard library only, so the
TRL venv imports it too).

The driver writes one JSON object a line to a worker's stdin: `{"cmd": "run", "steps": K}` runs K training steps
and is answered by one JSON line (a window report), `{"cmd": "stop"}` ends the worker. A worker's first line is
`{"ready": {...}}` once its model is loaded and it waits at the start of training. Everything else a worker or its
libraries print goes to stderr (`claim_stdout`), which the driver sends to a log file.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

RUN = "run"
STOP = "stop"
STOP_WAIT_S = 60.0
"""A stopped worker gets this long to exit before it is killed."""
LOG_TAIL_CHARS = 4000


def claim_stdout() -> IO[str]:
    """Keep the process's stdout for protocol lines and point file descriptor 1 at stderr, so that prints and
    logs of the libraries (Ray forwards its workers' output to stdout) cannot break the protocol."""
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return protocol


def send(stream: IO[str], message: dict[str, Any]) -> None:
    """Write `message` as one JSON line."""
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def receive_command() -> dict[str, Any]:
    """The driver's next command from stdin; end of input reads as a stop."""
    line = sys.stdin.readline()
    return json.loads(line) if line.strip() else {"cmd": STOP}


class WorkerProcess:
    """A worker subprocess driven over the protocol; its stderr goes to `log_path`."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
        )

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], 1.0)
            if ready:
                line = self.process.stdout.readline()
                if line:
                    return json.loads(line)
            if self.process.poll() is not None or time.monotonic() > deadline:
                code = self.process.returncode
                what = "timed out" if code is None else f"exited with code {code}"
                tail = self.log_tail()
                self.close()
                raise RuntimeError(f"{self.name} worker {what}; the end of {self.log_path}:\n{tail}")

    def log_tail(self) -> str:
        """The last characters of the worker's log."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]

    def ready(self, timeout_s: float) -> dict[str, Any]:
        """Wait for the worker's ready line; its description of itself."""
        return self._read(timeout_s)["ready"]

    def run(self, steps: int, timeout_s: float) -> dict[str, Any]:
        """Run `steps` training steps; the worker's window report."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"cmd": RUN, "steps": steps}) + "\n")
        self.process.stdin.flush()
        return self._read(timeout_s)

    def close(self) -> None:
        """Ask the worker to stop, and kill it if it does not exit in time."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"cmd": STOP}) + "\n")
                self.process.stdin.close()
                self.process.wait(STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        if not self._log.closed:
            self._log.close()
