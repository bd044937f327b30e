"""A recipe's run folder across kills, Ctrl-C and resumes, through the real command line: `metrics.jsonl` holds
each step once, `summary.json` keeps the held-out reward before training and its lift, SIGINT prints one line and
leaves a folder that resumes, and a second run into a folder in use is refused naming the holder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _recipe_runs import newest_step, train_and_signal

from rl_recipes.recipes import CURVE_FILE, SUMMARY_FILE
from rl_runtime.trainer import RunLock
from rl_runtime.trainer._checkpoints import checkpoint_root, newest_verified_checkpoint

pytestmark = pytest.mark.slow
TOTAL_STEPS = 6
HELDOUT = "val/reward/mean@1"
CLI = [sys.executable, "-m", "rl_recipes.cli._main", "train", "grpo"]


def _overrides(workspace: Path) -> list[str]:
    sft = workspace / "sft"
    return [
        f"warm_start.output_dir={sft}",
        "warm_start.steps=5",
        f"data.train_files=[{sft}/data/train.jsonl]",
        f"data.val_files=[{sft}/data/heldout.jsonl]",
        f"actor.model.path={sft}/model",
        "batch.prompts_per_step=4",
        "batch.samples_per_prompt=4",
        "rollout.max_new_tokens=8",
        f"trainer.total_steps={TOTAL_STEPS}",
        f"trainer.validate_every={TOTAL_STEPS // 2}",
        "trainer.checkpoint_every=1",
        "trainer.steps_per_call=1",
        "trainer.keep_last=3",
        "trainer.log_sinks=[jsonl]",
        f"trainer.output_dir={workspace}/grpo",
    ]


def _run_and_signal(workspace: Path, sig: signal.Signals, at_step: int, log: Path) -> tuple[int, str]:
    """`rl-recipes train grpo` into `workspace/grpo`, which sends itself `sig` as it logs step `at_step`."""
    return train_and_signal("grpo", _overrides(workspace), sig, at_step, log)


def test_two_kills_a_ctrl_c_and_resumes_report_the_whole_run(tmp_path: Path) -> None:
    # Each run is signalled at a step of its own (not when a watcher sees a checkpoint), so where it stops does
    # not depend on the machine's speed: killed during step 2, then during step 4 (each after the previous step's
    # checkpoint, with its step's metrics line written), then a Ctrl-C during step 5, which it finishes and saves.
    run_dir = tmp_path / "grpo"
    status, _ = _run_and_signal(tmp_path, signal.SIGKILL, 2, tmp_path / "first.log")
    assert status == -signal.SIGKILL and newest_step(run_dir) == 1
    before = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert before["step"] == 0 and HELDOUT in before  # the validation before training, by the first process only
    status, _ = _run_and_signal(tmp_path, signal.SIGKILL, 4, tmp_path / "second.log")
    assert status == -signal.SIGKILL and newest_step(run_dir) == 3

    status, stderr = _run_and_signal(tmp_path, signal.SIGINT, 5, tmp_path / "third.log")
    assert status == 128 + signal.SIGINT
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("rl-recipes train:")]
    assert len(lines) == 1 and f"stopped by SIGINT after step 5 of {TOTAL_STEPS}" in lines[0], lines
    assert "resume" in lines[0]
    saved = newest_verified_checkpoint(checkpoint_root(run_dir))
    assert saved is not None and saved.name == "step_00000005" and str(saved) in lines[0]

    finished = subprocess.run(
        [*CLI, *_overrides(tmp_path)], env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(TOTAL_STEPS + 1))  # each step once, the replayed ones included
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert summary["heldout_reward_before"] == before[HELDOUT]
    assert summary["heldout_reward_after"] == last[HELDOUT]
    assert summary["heldout_lift"] == pytest.approx(last[HELDOUT] - before[HELDOUT])
    assert (run_dir / CURVE_FILE).stat().st_size > 0


def test_a_second_cli_run_into_a_folder_in_use_exits_2_naming_the_holder(tmp_path: Path) -> None:
    run_dir = tmp_path / "grpo"
    with RunLock(run_dir):
        refused = subprocess.run(
            [*CLI, f"trainer.output_dir={run_dir}"], env={**os.environ, "RAY_AUTH_MODE": "disabled"},
            capture_output=True, text=True,
        )  # fmt: skip
    assert refused.returncode == 2
    assert f"in use by another run (pid {os.getpid()} on host {socket.gethostname()}" in refused.stderr
    assert "--take-over" in refused.stderr
    assert not (run_dir / "config.yaml").exists()  # refused before it wrote anything
