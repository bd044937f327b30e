"""Run folders that cannot be silently corrupted, on real runs: a locked folder refuses a second run, a flipped
byte in any checkpoint file is caught and `resume: auto` falls back to the previous checkpoint (to the same
weights), truncated and missing files name themselves, and SIGINT stops a run into a folder that resumes exactly."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rl_runtime.trainer import CheckpointCorruptError, RunLockedError, Trainer, TrainResult
from rl_runtime.trainer._checkpoints import checkpoint_root, newest_verified_checkpoint, verify_checkpoint
from rl_runtime.trainer._lock import LOCK_FILE

from ._runs import STRAIGHT, actor_weights, deterministic, run_and_signal
from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
FILE_KINDS = ("actor/__0_0.distcp", "actor/__1_0.distcp", "actor/.metadata", "actor/engine.json", "rank_0.pt",
              "rank_1.pt", "trainer_state.json", "manifest.json")  # fmt: skip
"""One file of every kind a colocated GRPO checkpoint holds."""


def _copy_run(straight: TrainResult, folder: Path) -> Path:
    """A copy of the straight run's checkpoints in a fresh run folder under `folder`; its checkpoint root."""
    root = checkpoint_root(folder / "run")
    shutil.copytree(checkpoint_root(straight.run_dir), root)
    return root


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.write_bytes(bytes(data))


def test_every_kind_of_file_is_in_the_manifest(straight: TrainResult) -> None:
    last = checkpoint_root(straight.run_dir) / "step_00000004"
    assert verify_checkpoint(last)["step"] == 4
    assert all((last / name).is_file() for name in FILE_KINDS)


@pytest.mark.parametrize("name", FILE_KINDS)
def test_a_flipped_byte_in_any_checkpoint_file_falls_back_to_the_previous(
    tmp_path: Path, straight: TrainResult, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = _copy_run(straight, tmp_path)
    _flip(root / "step_00000004" / name)
    with caplog.at_level(logging.WARNING):
        assert newest_verified_checkpoint(root) == root / "step_00000003"
    expected = "manifest.json" if name == "manifest.json" else name.split("/")[-1]
    assert "skipping checkpoint step_00000004" in caplog.text and expected in caplog.text


def test_a_damaged_newest_checkpoint_resumes_from_the_previous_to_the_same_weights(
    tmp_path: Path, straight: TrainResult, caplog: pytest.LogCaptureFixture
) -> None:
    root = _copy_run(straight, tmp_path)
    _flip(root / "step_00000004" / "actor/__0_0.distcp")
    with caplog.at_level(logging.WARNING):
        resumed = Trainer(tiny_config(tmp_path, **STRAIGHT), TokenTask).fit()
    assert "__0_0.distcp has CRC-32" in caplog.text and "the newest checkpoint that verifies" in caplog.text
    assert resumed.start_step == 3
    assert [deterministic(m) for m in resumed.history] == [deterministic(straight.history[-1])]
    expected = actor_weights(straight.last_checkpoint, tmp_path)
    for name, tensor in actor_weights(resumed.last_checkpoint, tmp_path).items():
        assert torch.equal(tensor, expected[name]), name


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", r"actor/__1_0.distcp has 7 bytes, the manifest recorded \d+ \(truncated"),
        ("delete", r"rank_1.pt is missing \(the manifest lists it\)"),
    ],
)
def test_a_truncated_or_missing_file_names_itself(
    tmp_path: Path, straight: TrainResult, damage: str, message: str
) -> None:
    root = _copy_run(straight, tmp_path)
    folder = root / "step_00000004"
    if damage == "truncate":
        (folder / "actor/__1_0.distcp").write_bytes(b"trunc..")
    else:
        (folder / "rank_1.pt").unlink()
    with pytest.raises(CheckpointCorruptError, match=message):
        Trainer(tiny_config(tmp_path, **STRAIGHT, resume=str(folder)), TokenTask)


def test_a_second_run_into_a_locked_folder_is_refused_naming_the_holder(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, total_steps=1)
    holder_script = (
        "import sys, time\nfrom pathlib import Path\nfrom rl_runtime.trainer import RunLock\n"
        "with RunLock(Path(sys.argv[1])):\n    print('locked', flush=True)\n    time.sleep(120)\n"
    )
    command = [sys.executable, "-c", holder_script, str(config.trainer.output_dir)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        try:
            with pytest.raises(
                RunLockedError, match=rf"in use by another run \(pid {holder.pid} on host .*{LOCK_FILE}"
            ):
                Trainer(config, TokenTask).fit()
        finally:
            holder.kill()
    assert not checkpoint_root(config.trainer.output_dir).exists()  # refused before anything was written


def test_sigint_mid_run_saves_a_checkpoint_and_resumes_exactly(tmp_path: Path, straight: TrainResult) -> None:
    folder = tmp_path / "interrupted"
    status, stderr = run_and_signal(folder, at_step=2, trainer=STRAIGHT, sig=signal.SIGINT)  # Ctrl-C in step 2
    assert status != 0 and "Traceback" in stderr  # the bare Trainer raises; the CLI turns it into one line
    assert "TrainingInterrupted: stopped by SIGINT after step 2 of 4" in stderr and "saved checkpoint" in stderr
    stopped_at = newest_verified_checkpoint(checkpoint_root(folder / "run"))
    assert stopped_at is not None and stopped_at.name == "step_00000002"
    resumed = Trainer(tiny_config(folder, **STRAIGHT), TokenTask).fit()
    assert resumed.start_step == 2
    tail = len(resumed.history)
    for ours, reference in zip(resumed.history, straight.history[-tail:], strict=True):
        assert deterministic(ours) == deterministic(reference)
    lines = (folder / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]  # each step once
    expected = actor_weights(straight.last_checkpoint, tmp_path)
    for name, tensor in actor_weights(resumed.last_checkpoint, tmp_path).items():
        assert torch.equal(tensor, expected[name]), name


_SESSION_SCRIPT = """
import os, sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
import ray
from _task import TokenTask, tiny_config
from rl_runtime.trainer import Trainer
with Trainer(tiny_config(Path({folder!r}), total_steps=4), TokenTask).session() as run:
    pids = ray.get([worker.__ray_call__.remote(lambda self: os.getpid()) for worker in run.slots._workers])
    print(*pids, flush=True)
    time.sleep(600)
"""
WORKER_DEATH_S = 1.0
"""Within this of a SIGKILL of the driver's process group every DAG worker is gone (Ray alone took 1-3 s)."""


def test_workers_die_with_their_killed_driver(tmp_path: Path) -> None:
    from rl_runtime.workers._driver_watch import process_alive

    script = _SESSION_SCRIPT.format(tests=str(Path(__file__).parent), folder=str(tmp_path))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    command = [sys.executable, "-c", script]
    with subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE, text=True) as driver:
        assert driver.stdout is not None
        workers = [int(pid) for pid in driver.stdout.readline().split()]
        assert len(workers) == 2 and all(process_alive(pid) for pid in workers)
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    killed = time.monotonic()
    while any(process_alive(pid) for pid in workers):
        assert time.monotonic() - killed < WORKER_DEATH_S, "a DAG worker outlived its killed driver"
        time.sleep(0.01)
