"""The kill helper of the run-folder tests: `rl-recipes train` in its own process group, which signals that group
itself (as a terminal's Ctrl-C or a kill does) as it logs a chosen step, through rl-runtime's `signal_at_step` test
sink: where the run stops is decided by its own steps, never by how fast the machine is."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from rl_runtime.testing import SIGNAL_AT_STEP, run_signalled
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints

WAIT_S = 600.0
SINKS = f"trainer.log_sinks=[jsonl,{SIGNAL_AT_STEP}]"
"""The signalling sink after `jsonl`: a SIGKILLed run's metrics.jsonl holds the step it was killed at."""
_SIGNALLING_CLI = (
    "import signal, sys\n"
    "from rl_runtime.testing import register_signal_at_step\n"
    "register_signal_at_step(int(sys.argv[1]), signal.Signals[sys.argv[2]])\n"
    "from rl_recipes.cli._main import main\n"
    "sys.exit(main(sys.argv[3:]))\n"
)
"""`rl-recipes ARGS...` with the `signal_at_step` sink registered: `python -c _SIGNALLING_CLI STEP SIGNAL ARGS...`."""


def newest_step(run_dir: Path) -> int:
    """The step of the newest complete checkpoint under `run_dir`; 0 without one."""
    found = complete_checkpoints(checkpoint_root(run_dir))
    return found[-1][0] if found else 0


def train_and_signal(
    recipe: str, overrides: Sequence[str], sig: signal.Signals, at_step: int, log: Path
) -> tuple[int, str]:
    """Run `rl-recipes train recipe overrides...` in its own process group, which sends the group `sig` as it logs
    step `at_step` (`overrides` must log to `jsonl` only; with `trainer.checkpoint_every=1`: SIGINT stops it after
    step `at_step` with that checkpoint saved, SIGKILL leaves checkpoint `at_step - 1` the newest). Its exit status
    (negative: killed by that signal) and stderr."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    command = [sys.executable, "-c", _SIGNALLING_CLI, str(at_step), sig.name, "train", recipe, *overrides, SINKS]
    return run_signalled(command, at_step=at_step, stderr=log, timeout_s=WAIT_S, env=env)
