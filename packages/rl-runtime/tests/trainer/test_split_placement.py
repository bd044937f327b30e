"""End to end with split placement: GRPO steps of a tiny Qwen2 through real Ray DAG workers on 2 CPU slots, slot 0
sampling (HF rollout, rule reward) and slot 1 training (GRPO advantages, old and reference log-probs, FSDP2
update), the actor's weights broadcast to the rollout slot after every update; and an exact resume after a kill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rl_core.graph import NodeRole
from rl_engines.rollout import weights_checksum
from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.nodes._train import checksum_metric
from rl_runtime.trainer import Trainer, TrainResult, read_state
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints
from rl_runtime.trainer._session import DRIVER_BYTES_METRIC

from ._runs import actor_weights, deterministic, newest_checkpoint_step, run_and_signal
from ._task import TokenTask, tiny_config

SPLIT = {"colocate": False, "strategy": "even"}
DRIVER_BYTES_BOUND = 8_192
"""As in test_e2e: the ranks' metric dicts are a few KB, one step's sample tensors ~14 KB."""
KILL_AFTER = 2
STRAIGHT_SPLIT: dict[str, Any] = {"total_steps": 4, "checkpoint_every": 1, "validate_every": 2}
"""The uninterrupted split run both tests read: a checkpoint after every step (the killed run resumes from step 2's),
a validation after steps 2 and 4 (validation draws its own seeds, so it changes no training step)."""
KEEP_LAST = 2


@pytest.fixture(scope="module")
def straight_split(tmp_path_factory: pytest.TempPathFactory, ray_runtime: None) -> tuple[Trainer, TrainResult, Path]:
    """One uninterrupted 4-step split run for the module, keeping the last KEEP_LAST checkpoints: its trainer, result
    and folder (the first test once trained 2 steps of its own, the resume test 4)."""
    folder = tmp_path_factory.mktemp("straight_split")
    trainer = Trainer(tiny_config(folder, placement=SPLIT, keep_last=KEEP_LAST, **STRAIGHT_SPLIT), TokenTask)
    return trainer, trainer.fit(), folder


def test_split_grpo_steps_give_the_rollout_slot_the_actors_weights_after_each_update(
    straight_split: tuple[Trainer, TrainResult, Path], tmp_path: Path
) -> None:
    trainer, result, folder = straight_split
    assert [(w.rank, w.subgraph.subgraph_id, w.subgraph.roles) for w in trainer.placement.workers] == [
        (0, "grpo/rollout", (NodeRole.ROLLOUT, NodeRole.REWARD)),
        (1, "grpo/train", (NodeRole.ADVANTAGE, NodeRole.ACTOR, NodeRole.REFERENCE)),
    ]

    for step, metrics in enumerate(result.history):
        # Step s samples from the weights of s updates and leaves the rollout slot holding those of s + 1.
        assert metrics["rollout/policy_version"] == step
        assert metrics["sync/weight_version"] == metrics["rollout/weight_version"] == step + 1
        assert metrics["rollout/weights_checksum"] == metrics["sync/weights_checksum"]
        assert metrics["actor/grad_norm"] > 0 and metrics["actor/num_skipped_steps"] == 0
        assert "actor/kl_loss" in metrics and 0 <= metrics["critic/score/mean"] <= 1
        assert metrics[DRIVER_BYTES_METRIC] < DRIVER_BYTES_BOUND
    kept = complete_checkpoints(checkpoint_root(folder / "run"))
    assert [done for done, _ in kept] == [3, 4]  # keep_last=2
    for done, checkpoint in kept:
        # What the rollout engine holds, what the training slot sent, and the actor in the checkpoint agree.
        actor = checksum_metric(weights_checksum(actor_weights(checkpoint, tmp_path).items()))
        assert result.history[done - 1]["rollout/weights_checksum"] == actor
        # The actor was sharded over the training slot alone, which wrote the whole checkpoint; the rollout slot
        # keeps the prompt loader.
        assert sorted(path.name for path in (checkpoint / "actor").glob("*.distcp")) == ["__0_0.distcp"]
        assert torch.load(checkpoint / "rank_0.pt", weights_only=False)["loader"] is not None
        assert torch.load(checkpoint / "rank_1.pt", weights_only=False)["loader"] is None
        assert read_state(checkpoint)["colocate"] is False
    checksums = [metrics["rollout/weights_checksum"] for metrics in result.history]
    assert len(set(checksums)) == len(checksums)  # every update changed the weights the rollout slot holds
    logged = read_metrics_jsonl(folder / "run" / "metrics.jsonl")
    assert sorted(logged) == [1, 2, 3, 4]
    assert [logged[done]["rollout/weights_checksum"] for done in (1, 2, 3, 4)] == checksums
    assert "val/pass@1" in logged[2] and "val/pass@1" in logged[4]


def test_a_killed_split_run_resumes_to_the_uninterrupted_metrics_and_weights(
    straight_split: tuple[Trainer, TrainResult, Path], tmp_path: Path
) -> None:
    _, straight, _ = straight_split

    resumed_dir = tmp_path / "resumed"
    # SIGKILLed by itself in the step after KILL_AFTER, so its newest checkpoint is KILL_AFTER's on any machine.
    run_and_signal(resumed_dir, at_step=KILL_AFTER + 1, placement=SPLIT, trainer=STRAIGHT_SPLIT)
    assert newest_checkpoint_step(resumed_dir) == KILL_AFTER
    resumed_config = tiny_config(resumed_dir, placement=SPLIT, **STRAIGHT_SPLIT)
    resumed = Trainer(resumed_config, TokenTask).fit()

    assert (resumed.start_step, len(resumed.history)) == (KILL_AFTER, 2)
    for ours, reference in zip(resumed.history, straight.history[KILL_AFTER:], strict=True):
        assert deterministic(ours) == deterministic(reference)
    assert [m["rollout/policy_version"] for m in resumed.history] == [2.0, 3.0]
    weights = actor_weights(resumed.last_checkpoint, tmp_path)
    expected = actor_weights(straight.last_checkpoint, tmp_path)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(weights[name], tensor), name
