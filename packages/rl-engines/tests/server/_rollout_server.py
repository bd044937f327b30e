"""`ServerProcess`: our rollout server as a real subprocess on 127.0.0.1 and a free port, for tests."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

import httpx

from rl_engines.sync import free_port

STARTUP_TIMEOUT_S = 180.0
"""Importing torch + transformers and building the model takes seconds, longer on a loaded 2-core machine."""
PORT_ATTEMPTS = 3
"""A free port can be taken by another process (a parallel test session) in the seconds the server spends building
before it binds; the server then exits with "address already in use" and is started again on another port."""
_BIND_FAILED = "address already in use"


class ServerProcess:
    """`python -m rl_engines.server --model <model>` running until `stop()`; `url` once healthy."""

    def __init__(self, model: str, *args: str, weight_version: str = "1") -> None:
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in stop()
            command = [sys.executable, "-m", "rl_engines.server", "--model", model, "--port", str(self.port)]
            command += ["--weight-version", weight_version, "--log-level", "WARNING", *args]
            self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
            try:
                self._wait_healthy()
                return
            except RuntimeError:
                taken = _BIND_FAILED in self.log()
                self.stop()
                if not taken or attempt == PORT_ATTEMPTS:
                    raise
            except BaseException:
                self.stop()
                raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server was not healthy within {STARTUP_TIMEOUT_S} s:\n{self.log()}")

    def log(self) -> str:
        """What the server printed so far."""
        self._log.flush()
        self._log.seek(0)
        return self._log.read()[-5000:]

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within 10 s) and reap it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()
