"""`LocalServer`: our rollout server (`python -m rl_engines.server`) as a child process on this host.

The child binds a free port on 127.0.0.1, serves a random model of the given transformers config (its weights are
the trainer's after the first sync) and exits when its parent does (`--parent-pid`), so a killed trainer worker
leaves no server behind. `start` returns once `/health` answers; a child that dies first, or does not answer within
`start_timeout_s`, raises `ServerStartError` quoting the end of its log.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rl_engines.remote._errors import RemoteError
from rl_engines.sync import free_port

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_PORT_IN_USE = "address already in use"
_PORT_ATTEMPTS = 3
"""A free port may be taken between choosing it and the child binding it: try another this many times."""
_POLL_S = 0.2
_LOG_TAIL_CHARS = 4000
_STOP_WAIT_S = 10.0


class ServerStartError(RemoteError):
    """A rollout server child process exited or did not become healthy in time; the message quotes its log."""


def _healthy(url: str) -> bool:
    """True once `url` answers `/health` with 200. Anything else is not (yet) our server: nothing listening, or
    another process that took the port first and speaks another protocol (`HTTPException`: a bad status line)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False


class LocalServer:
    """One rollout server child process; `url` is where it serves, `stop()` ends it."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, folder: Path) -> None:
        self.process = process
        self.url = url
        self._folder = folder

    @classmethod
    def start(
        cls,
        hf_config: Any,
        *,
        dtype: str = "float32",
        device: str = "cpu",
        seed: int = 0,
        weight_version: int = 0,
        start_timeout_s: float = 300.0,
        extra_args: tuple[str, ...] = (),
    ) -> LocalServer:
        """Start a server of a random model of `hf_config` (a transformers config) and wait until it is healthy.

        Raises:
            ServerStartError: the child exited, or was not healthy within `start_timeout_s`.
        """
        folder = Path(tempfile.mkdtemp(prefix="rl-rollout-server-"))
        model = folder / "config.json"
        model.write_text(json.dumps(hf_config.to_dict()))
        try:
            for attempt in range(_PORT_ATTEMPTS):
                port = free_port(LOOPBACK)
                command = [
                    sys.executable, "-m", "rl_engines.server", "--model", str(model), "--host", LOOPBACK,
                    "--port", str(port), "--dtype", dtype, "--device", device, "--seed", str(seed),
                    "--weight-version", str(weight_version), "--parent-pid", str(os.getpid()),
                    "--log-level", "WARNING", *extra_args,
                ]  # fmt: skip
                log = (folder / f"server-{attempt}.log").open("wb")
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
                log.close()
                server = cls(process, f"http://{LOOPBACK}:{port}", folder)
                if server._wait_healthy(start_timeout_s, folder / f"server-{attempt}.log"):
                    logger.info("rollout server %s started (pid %d)", server.url, process.pid)
                    return server
            raise ServerStartError(f"no free port for a rollout server after {_PORT_ATTEMPTS} tries")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def _wait_healthy(self, timeout_s: float, log: Path) -> bool:
        """True once healthy; False if the port was taken (try another); raises on any other failure."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                text = log.read_text(errors="replace")[-_LOG_TAIL_CHARS:]
                if _PORT_IN_USE in text.lower():
                    return False
                raise ServerStartError(f"the rollout server for {self.url} exited with code {code}:\n{text}")
            if _healthy(self.url):
                return True
            time.sleep(_POLL_S)
        self._end()
        text = log.read_text(errors="replace")[-_LOG_TAIL_CHARS:]
        raise ServerStartError(
            f"the rollout server for {self.url} was not healthy within {timeout_s} s (raise "
            f"rollout.engine_kwargs.start_timeout_s on a slow machine):\n{text}"
        )

    def _end(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=_STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=_STOP_WAIT_S)

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s), reap it and remove its folder."""
        self._end()
        shutil.rmtree(self._folder, ignore_errors=True)
