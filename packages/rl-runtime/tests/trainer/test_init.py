"""The public names of rl_runtime.trainer are pinned."""

from __future__ import annotations

from pathlib import Path

import pytest

import rl_runtime.trainer as trainer

from ._task import TokenTask, tiny_config


def test_public_api_is_pinned() -> None:
    assert sorted(trainer.__all__) == sorted(
        [
            "CheckpointCorruptError", "CheckpointStateError", "ExtrasFactory", "Launch", "RunLock", "RunLockedError",
            "TrainResult", "Trainer", "TrainerError", "TrainingInterrupted", "build_actor", "launch_from_env",
            "read_state", "resolve_launch", "spmd_barrier", "verify_checkpoint",
        ]
    )  # fmt: skip


def test_a_missing_validation_file_stops_the_trainer_before_any_worker(tmp_path: Path) -> None:
    config = tiny_config(tmp_path)
    (tmp_path / "val.jsonl").unlink()
    with pytest.raises(trainer.TrainerError, match=r"data.val_files: '.*val.jsonl' is not a file; give jsonl"):
        trainer.Trainer(config, TokenTask)
