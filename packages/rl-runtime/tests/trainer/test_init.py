"""The public names of rl_runtime.trainer are pinned."""

from __future__ import annotations

import rl_runtime.trainer as trainer


def test_public_api_is_pinned() -> None:
    assert sorted(trainer.__all__) == sorted(
        [
            "CHECKPOINTS_DIR", "DRIVER_BYTES_METRIC", "PASS_SCORE", "RECEIVE_WEIGHTS_NODE", "STATE_FILE",
            "CheckpointStateError", "ConcatSource", "RunHooks", "RunResourcesFactory", "SlotEngines",
            "TrainResult", "Trainer", "TrainerError", "TrainingSession", "WeightReceiver", "WeightSender",
            "build_actor", "build_critic", "build_reference", "build_rollout", "checkpoint_root",
            "complete_checkpoints", "evaluate_shard", "latest_checkpoint", "load_pipeline", "open_files",
            "plan_placement", "prune_checkpoints", "read_state", "reduce_validation", "split_pipeline",
            "steps_per_epoch", "uses_reference",
        ]
    )  # fmt: skip
