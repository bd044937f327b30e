"""The public names of rl_runtime.trainer are pinned."""

from __future__ import annotations

import rl_runtime.trainer as trainer


def test_public_api_is_pinned() -> None:
    assert sorted(trainer.__all__) == sorted(
        [
            "CheckpointCorruptError", "CheckpointStateError", "ExtrasFactory", "RunLock", "RunLockedError",
            "TrainResult", "Trainer", "TrainerError", "TrainingInterrupted", "build_actor",
            "read_state", "verify_checkpoint",
        ]
    )  # fmt: skip
