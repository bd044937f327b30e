"""The sandboxed Python tool against hostile snippets: each must come back as an error result, leaving the worker
(this test process) and the machine unharmed; and the in-process fallback guard where the kernel's is switched off."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from rl_core.tools import TOOLS, ToolConfigError, ToolingEnvConfig, ToolResult, make_tooling_env
from rl_recipes.tools import PythonSandbox, SandboxConfig, SandboxRun

FAST = SandboxConfig(timeout_s=3.0, cpu_s=1, memory_bytes=1 << 30, max_output_bytes=4096)
WEAK = SandboxConfig(timeout_s=3.0, cpu_s=1, namespaces=False, landlock=False)

FORK_BOMB = """
import os
print(os.getcwd(), flush=True)
while True:
    try:
        os.fork()
    except OSError:
        pass
"""

COUNT_FORKS = """
import os, time
n = 0
for _ in range(100):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError:
        break
print(n)
"""


def _run(code: str, config: SandboxConfig = FAST) -> tuple[SandboxRun, ToolResult]:
    sandbox = PythonSandbox(config)
    run = asyncio.run(sandbox.arun(code))
    return run, sandbox.describe(run)


def _survivors(marker: str) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_plain_snippet_runs_in_a_fresh_folder_and_reports_its_guards() -> None:
    run, result = _run("import os\nopen('out.txt', 'w').write('kept here')\nprint(open('out.txt').read(), os.getcwd())")
    assert run.ok and not result.is_error
    text, cwd = result.content.split()[:2], result.content.split()[-1]
    assert " ".join(text) == "kept here" and Path(cwd).name.startswith("rl-sandbox-")
    assert not Path(cwd).exists()  # the folder is removed after the run
    assert set(run.guards) >= {"namespaces", "dropped_root", "landlock_abi"}
    failed, error = _run("raise ValueError('bad input')")
    assert failed.exit_code == 1 and error.is_error
    assert 'main.py", line 1' in error.content and "ValueError: bad input" in error.content
    assert error.content.endswith("[exit code 1]") and "_sandbox_boot" not in error.content


def test_infinite_loop_is_stopped_by_the_cpu_limit_or_the_wall_clock() -> None:
    started = time.monotonic()
    run, result = _run("while True:\n    pass")
    assert time.monotonic() - started < FAST.timeout_s + 2
    assert result.is_error and run.exit_code is None
    assert "CPU time limit of 1 s exceeded" in result.content or "wall-clock limit of 3 s" in result.content


def test_fork_bomb_is_capped_and_every_process_dies_with_the_run() -> None:
    code = FORK_BOMB
    started = time.monotonic()
    run, result = _run(code)
    assert time.monotonic() - started < FAST.timeout_s + 3
    assert result.is_error and run.exit_code is None
    workdir = run.output.split()[0]
    assert workdir.startswith("/") and "rl-sandbox-" in workdir
    deadline = time.monotonic() + 2
    while _survivors(workdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(workdir) == []


def test_10_gb_allocation_fails_inside_the_sandbox() -> None:
    _, result = _run("x = bytearray(10 * 1024**3)\nprint('allocated')")
    assert result.is_error and "MemoryError" in result.content and "allocated" not in result.content


def test_fork_count_is_capped_by_the_process_limit() -> None:
    run, _ = _run(COUNT_FORKS, SandboxConfig(timeout_s=5.0, max_processes=8))
    assert run.ok and 0 <= int(run.output.split()[-1]) < 8


@pytest.mark.parametrize("config", [FAST, WEAK], ids=["strongest", "fallback"])
def test_writing_outside_the_folder_is_refused(tmp_path: Path, config: SandboxConfig) -> None:
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o777)  # so file permissions alone would allow it
    victim = target / "pwned.txt"
    run, result = _run(f"open({str(victim)!r}, 'w').write('x')", config)
    assert result.is_error and "PermissionError" in result.content
    assert not victim.exists()
    if config is WEAK:
        assert run.guards["namespaces"] is None and run.guards["landlock_abi"] == 0


def test_fallback_guard_refuses_signals_to_other_processes() -> None:
    _, result = _run(f"import os\nos.kill({os.getpid()}, 0)", WEAK)
    assert result.is_error and "signalling other processes is disabled" in result.content


@pytest.mark.parametrize("config", [FAST, WEAK], ids=["strongest", "fallback"])
def test_network_connections_are_refused(config: SandboxConfig) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        run, result = _run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)", config)
        assert result.is_error and run.exit_code == 1
        assert any(name in result.content for name in ("PermissionError", "ConnectionRefusedError", "OSError"))
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the worker's own loopback


def test_printing_100_mb_is_cut_and_killed() -> None:
    started = time.monotonic()
    run, result = _run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))")
    assert time.monotonic() - started < FAST.timeout_s
    assert result.is_error and run.output_overflow
    assert len(run.output) == FAST.max_output_bytes
    assert result.content.endswith(f"[killed: output exceeded {FAST.max_output_bytes} bytes (shown up to the limit)]")


def test_python_tool_through_the_local_env_and_bad_config() -> None:
    async def run() -> tuple[ToolResult, ToolResult]:
        env = await make_tooling_env(ToolingEnvConfig(name="local", tools=("python", "calculator"), timeout_s=20))
        names = [schema["function"]["name"] for schema in env.list_tools()]
        assert names == ["python", "calculator"]
        good = await env.aexecute("python", {"code": "print(sum(range(10)))"})
        bad = await env.aexecute("python", {"code": "print(1/0)"})
        await env.aclose()
        return good, bad

    good, bad = asyncio.run(run())
    assert TOOLS["python"].__name__ == "python"
    assert good == ToolResult("45\n")
    assert bad.is_error and "ZeroDivisionError" in bad.content
    with pytest.raises(ToolConfigError, match=r"SandboxConfig.cpu_s: expected > 0, got 0"):
        SandboxConfig(cpu_s=0)
