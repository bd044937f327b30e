"""`PythonSandbox`: run untrusted Python snippets in a limited, killable subprocess; the "python" tool."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rl_core.tools import ToolConfigError, ToolResult, register_tool

logger = logging.getLogger(__name__)

_BOOT = str(Path(__file__).with_name("_sandbox_boot.py"))
_GRACE_S = 0.5
_UID_BASE, _UID_SPAN = 1 << 20, 1 << 29


@dataclass(frozen=True)
class SandboxConfig:
    """The limits of one sandboxed run. Every limit is enforced by the kernel except where `SandboxRun.guards` says
    a guard fell back to the in-process audit hook (see `PythonSandbox`)."""

    timeout_s: float = 10.0
    """Wall-clock limit; past it the whole process tree is killed."""
    cpu_s: int = 5
    """CPU seconds per process (RLIMIT_CPU; SIGXCPU at the limit)."""
    memory_bytes: int = 1 << 30
    """Address space per process (RLIMIT_AS); an allocation past it raises MemoryError."""
    file_bytes: int = 16 << 20
    """Largest file a process may write (RLIMIT_FSIZE)."""
    max_processes: int = 32
    """Processes and threads of the sandbox's user (RLIMIT_NPROC), so a fork bomb stops at this many."""
    max_open_files: int = 64
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    max_output_bytes: int = 64 << 10
    """stdout+stderr past this kills the run and makes it an error (the head is kept)."""
    namespaces: bool = True
    """Enter new network, PID and IPC namespaces when the kernel allows (False: tests the fallback guard)."""
    landlock: bool = True
    """Forbid writes outside the working directory with Landlock when the kernel has it (False: fallback)."""

    def __post_init__(self) -> None:
        for name in ("timeout_s", "cpu_s", "memory_bytes", "file_bytes", "max_processes", "max_open_files",
                     "max_output_bytes"):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ToolConfigError(f"SandboxConfig.{name}: expected > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class SandboxRun:
    """What one sandboxed run did."""

    output: str
    """stdout and stderr interleaved, cut at `max_output_bytes`."""
    exit_code: int | None
    """The snippet's exit status; None when it was killed."""
    signal: int | None = None
    """The signal that ended the snippet (SIGXCPU: CPU limit; SIGKILL: wall-clock or output limit)."""
    timed_out: bool = False
    output_overflow: bool = False
    guards: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())
    """What isolation applied: {"namespaces": "netns+pidns" | "userns+netns+pidns" | None, "dropped_root": bool,
    "landlock_abi": int (0: none, the audit-hook fallback guarded writes)}."""

    @property
    def ok(self) -> bool:
        """True when the snippet ran to completion with exit status 0."""
        return self.exit_code == 0 and not (self.timed_out or self.output_overflow)


class PythonSandbox:
    """Runs Python snippets in a fresh subprocess per call, each in a fresh temporary working directory.

    Isolation, strongest available first (`SandboxRun.guards` says which applied on this machine; docs/tools.md):
    - Network: a new network namespace (only a down loopback: no network at all), entered directly as root, else
      through an unprivileged user namespace; Landlock ABI >= 4 also refuses TCP bind/connect. Without either, a
      Python audit hook refuses socket connect/bind/send/getaddrinfo (Python-level calls only).
    - Processes: a new PID namespace whose init only reaps the snippet, so when the snippet ends or is killed every
      process it started dies (even ones that called setsid); RLIMIT_NPROC caps the processes and threads a run
      may have. As root, the run gets an unused real uid of its own and loses every capability (bounding set
      emptied, capset to zero, SECBIT_NOROOT locked), because the kernel exempts root from RLIMIT_NPROC; the
      effective uid stays 0 so the interpreter's files stay readable. Without a PID namespace, only the process
      group is killed on timeout and RLIMIT_NPROC counts all processes of the worker's user.
    - Files: Landlock (Linux >= 5.13) forbids writing, creating, removing, renaming or truncating any file outside
      the working directory (and /dev/null); HOME and TMPDIR point there. Without Landlock, the audit hook refuses
      Python-level writes outside the folder, ctypes and starting other programs: a weaker, in-process guard.
    - rlimits: CPU seconds (SIGXCPU), address space (MemoryError), file size, processes, open files, no core dumps;
      a wall-clock SIGKILL of the whole tree; output past `max_output_bytes` kills the run.
    Not isolated: reading files (anything the worker can read), the host's /proc, time, CPU share and memory
    bandwidth while it runs, and kernel exploits. For adversarial users, run the worker in a container or VM too.
    """

    def __init__(self, config: SandboxConfig | None = None, *, interpreter: str = sys.executable) -> None:
        self.config = config or SandboxConfig()
        self.interpreter = interpreter

    def _child_env(self, workdir: str) -> dict[str, str]:
        threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", **threads}

    async def arun(self, code: str) -> SandboxRun:
        """Run `code` as `main.py` in a fresh directory under every limit; never raises for the snippet's behaviour."""
        workdir = tempfile.mkdtemp(prefix="rl-sandbox-")
        try:
            Path(workdir, "main.py").write_text(code, encoding="utf-8")
            return await self._spawn(workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    async def _spawn(self, workdir: str) -> SandboxRun:
        # A fresh unused real uid per run (when the worker is root): RLIMIT_NPROC then counts this run's processes.
        cfg = {**asdict(self.config), "workdir": workdir, "run_uid": _UID_BASE + secrets.randbelow(_UID_SPAN)}
        status_read, status_write = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                self.interpreter, "-I", "-u", _BOOT, json.dumps(cfg), str(status_write),
                cwd=workdir, env=self._child_env(workdir), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True, pass_fds=(status_write,),
            )  # fmt: skip
        finally:
            os.close(status_write)
        with os.fdopen(status_read, "r") as status:
            output, timed_out, overflow = await self._collect(proc)
            raw = await asyncio.to_thread(status.read)  # at EOF already: the bootstrap has exited or been killed
        lines = [json.loads(line) for line in raw.splitlines() if line.strip()]
        guards: dict[str, Any] = lines[0] if lines else {}
        ended: dict[str, Any] = lines[1] if len(lines) > 1 else {}
        code = proc.returncode
        sig = ended.get("signal") or (-code if code is not None and code < 0 else None)
        exit_code = None if (sig or timed_out or overflow) else ended.get("exit", code)
        text = output.decode("utf-8", errors="replace")
        return SandboxRun(text, exit_code, sig, timed_out, overflow, guards)

    async def _collect(self, proc: asyncio.subprocess.Process) -> tuple[bytes, bool, bool]:
        """Read output until the process exits, the output limit or the wall clock; kill the group when it must."""
        limit = self.config.max_output_bytes
        chunks: list[bytes] = []
        size = 0

        async def read() -> bool:
            nonlocal size
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    return True
            return False

        reader = asyncio.ensure_future(read())
        waiter = asyncio.ensure_future(proc.wait())
        timed_out = overflow = False
        try:
            done, _ = await asyncio.wait({reader, waiter}, timeout=self.config.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            if reader in done:
                overflow = reader.result()
                if not overflow:  # EOF: every writer closed; the process is ending
                    await asyncio.wait({waiter}, timeout=_GRACE_S)
            elif waiter in done:  # exited; drain what its leftovers already wrote, without waiting for their EOF
                await asyncio.wait({reader}, timeout=_GRACE_S)
                overflow = reader.done() and reader.result()
            else:
                timed_out = True
        finally:
            if timed_out or overflow or proc.returncode is None:
                self._kill(proc)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await proc.wait()
        return b"".join(chunks)[:limit], timed_out, overflow

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        # The group holds the bootstrap; killing it SIGKILLs the snippet's PID namespace through PDEATHSIG.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def describe(self, run: SandboxRun) -> ToolResult:
        """The run as the model reads it: the output, and for a failure what limit ended it."""
        config = self.config
        if run.ok:
            return ToolResult(run.output)
        if run.timed_out:
            reason = f"killed: wall-clock limit of {config.timeout_s:g} s exceeded"
        elif run.output_overflow:
            reason = f"killed: output exceeded {config.max_output_bytes} bytes (shown up to the limit)"
        elif run.signal == signal.SIGXCPU:
            reason = f"killed: CPU time limit of {config.cpu_s} s exceeded"
        elif run.signal is not None:
            reason = f"killed by signal {signal.Signals(run.signal).name}"
        else:
            reason = f"exit code {run.exit_code}"
        return ToolResult(f"{run.output}\n[{reason}]".lstrip("\n"), is_error=True)

    async def python(self, code: str) -> ToolResult:
        """Run a Python program in a fresh, isolated sandbox and return what it prints.

        Args:
            code: A complete Python program; use print() for anything you want to see. No network access; only
                the current working directory is writable.
        """
        return self.describe(await self.arun(code))


@register_tool("python")
async def python(code: str) -> ToolResult:
    """Run a Python program in a fresh, isolated sandbox and return what it prints.

    Args:
        code: A complete Python program; use print() for anything you want to see. No network access; only the
            current working directory is writable.
    """
    return await PythonSandbox().python(code)
