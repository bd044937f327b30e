"""`rl-recipes train` run as a user runs it (a subprocess): bad input ends with one line naming the field and the
fix and exit status 2; the traceback only with --debug and in the run's log file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
EXIT_USAGE = 2
TIMEOUT_S = 300
PROMPT_ROWS = 16
CLI = Path(sys.executable).parent / "rl-recipes"
"""The console script the package installs, next to this interpreter."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    row = json.dumps({"question": "What is 1 + 1?", "answer": "#### 2"})
    (tmp_path / "train.jsonl").write_text(f"{row}\n" * PROMPT_ROWS)
    (tmp_path / "val.jsonl").write_text(f"{row}\n")
    (tmp_path / "model").mkdir()  # a folder is all the driver checks before the workers would load it
    (tmp_path / "bad_reward.py").write_text("def reward(response_text):\n    return 1.0\n")
    return tmp_path


def _train(workspace: Path, *overrides: str, debug: bool = False) -> subprocess.CompletedProcess[str]:
    base = [
        "warm_start=null",
        "data.train_files=[train.jsonl]",
        "data.val_files=[val.jsonl]",
        "actor.model.path=model",
        "batch.prompts_per_step=8",
        "trainer.output_dir=run",
    ]
    command = [str(CLI), *(["--debug"] if debug else []), "train", "grpo"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(
        [*command, *base, *overrides], cwd=workspace, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def _error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == EXIT_USAGE, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("rl-recipes train: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    return errors[0]


def test_a_missing_validation_file_is_one_line_and_the_traceback_goes_to_the_log(workspace: Path) -> None:
    done = _train(workspace, "data.val_files=[missing.jsonl]")

    line = _error_line(done)
    assert "data.val_files: 'missing.jsonl' is not a file; give jsonl or parquet files that exist" in line
    assert f"(traceback: --debug or {Path('run') / 'train.log'})" in line
    assert "Traceback" not in done.stderr
    log = (workspace / "run" / "train.log").read_text()
    assert "ERROR rl-recipes train stopped:" in log and "Traceback (most recent call last):" in log
    assert "TrainerError: data.val_files" in log


def test_a_reward_file_with_a_wrong_signature_is_one_line(workspace: Path) -> None:
    done = _train(workspace, "task.reward=bad_reward.py:reward")

    line = _error_line(done)
    assert "task.reward: reward function spec 'bad_reward.py:reward' has signature (response_text)" in line
    assert "expected fn(response_text: str, ground_truth: str) -> float" in line
    assert "Traceback" not in done.stderr


def test_a_config_error_is_one_line_and_debug_adds_the_traceback(workspace: Path) -> None:
    plain = _train(workspace, "trainer.total_step=3")
    line = _error_line(plain)
    assert "trainer.total_step" in line and "did you mean 'trainer.total_steps'" in line
    assert "(traceback: --debug)" in line and "Traceback" not in plain.stderr

    debug = _train(workspace, "trainer.total_step=3", debug=True)
    assert "Traceback (most recent call last):" in debug.stderr
    assert "trainer.total_step" in _error_line(debug)
