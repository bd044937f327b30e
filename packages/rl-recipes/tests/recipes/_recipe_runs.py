"""The kill helper of the run-folder tests: `rl-recipes train` in its own process group, signalled once it commits a
checkpoint newer than its folder's newest (as a terminal's Ctrl-C or a kill does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints

WAIT_S = 600.0
CLI = [sys.executable, "-m", "rl_recipes.cli._main", "train"]


def newest_step(run_dir: Path) -> int:
    """The step of the newest complete checkpoint under `run_dir`; 0 without one."""
    found = complete_checkpoints(checkpoint_root(run_dir))
    return found[-1][0] if found else 0


def train_until_checkpoint(
    recipe: str, overrides: Sequence[str], run_dir: Path, sig: signal.Signals, log: Path
) -> tuple[int, str]:
    """Start `rl-recipes train recipe overrides...` writing `run_dir`; once it commits a checkpoint newer than the
    folder's newest, send its process group `sig`. Its exit status and stderr."""
    before = newest_step(run_dir)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    with log.open("w") as err:
        process = subprocess.Popen([*CLI, recipe, *overrides], env=env, start_new_session=True, stderr=err)
        deadline = time.monotonic() + WAIT_S
        try:
            while newest_step(run_dir) <= before:
                assert process.poll() is None, f"the run exited with {process.returncode}: {log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "no new checkpoint in time"
                time.sleep(0.1)
        finally:
            os.killpg(process.pid, sig)
            process.wait(timeout=WAIT_S)
    return process.returncode, log.read_text()
