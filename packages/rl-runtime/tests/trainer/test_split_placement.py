"""End to end with split placement: GRPO steps of a tiny Qwen2 through real Ray DAG workers on 2 CPU slots, slot 0
sampling (HF rollout, rule reward) and slot 1 training (GRPO advantages, old and reference log-probs, FSDP2
update), the actor's weights broadcast to the rollout slot after every update; and an exact resume after a kill."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from rl_core.graph import NodeRole
from rl_engines.rollout import weights_checksum
from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.nodes._train import checksum_metric
from rl_runtime.trainer import Trainer, read_state
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints
from rl_runtime.trainer._session import DRIVER_BYTES_METRIC

from ._runs import actor_weights, deterministic, run_and_kill_after
from ._task import TokenTask, tiny_config

SPLIT = {"colocate": False, "strategy": "even"}
DRIVER_BYTES_BOUND = 8_192
"""As in test_e2e: the ranks' metric dicts are a few KB, one step's sample tensors ~14 KB."""
KILL_AFTER = 2


def test_two_split_grpo_steps_give_the_rollout_slot_the_actors_weights_after_each_update(
    tmp_path: Path, ray_runtime: None
) -> None:
    config = tiny_config(tmp_path, placement=SPLIT, total_steps=2, checkpoint_every=1, keep_last=2, validate_every=2)
    trainer = Trainer(config, TokenTask)
    assert [(w.rank, w.subgraph.subgraph_id, w.subgraph.roles) for w in trainer.placement.workers] == [
        (0, "grpo/rollout", (NodeRole.ROLLOUT, NodeRole.REWARD)),
        (1, "grpo/train", (NodeRole.ADVANTAGE, NodeRole.ACTOR, NodeRole.REFERENCE)),
    ]
    result = trainer.fit()

    kept = complete_checkpoints(checkpoint_root(tmp_path / "run"))
    assert [step for step, _ in kept] == [1, 2]
    for step, (metrics, (_, folder)) in enumerate(zip(result.history, kept, strict=True)):
        # Step s samples from the weights of s updates and leaves the rollout slot holding those of s + 1.
        assert metrics["rollout/policy_version"] == step
        assert metrics["sync/weight_version"] == metrics["rollout/weight_version"] == step + 1
        # What the rollout engine holds, what the training slot sent, and the actor in the checkpoint agree.
        actor = checksum_metric(weights_checksum(actor_weights(folder, tmp_path).items()))
        assert metrics["rollout/weights_checksum"] == metrics["sync/weights_checksum"] == actor
        assert metrics["actor/grad_norm"] > 0 and metrics["actor/num_skipped_steps"] == 0
        assert "actor/kl_loss" in metrics and 0 <= metrics["critic/score/mean"] <= 1
        assert metrics[DRIVER_BYTES_METRIC] < DRIVER_BYTES_BOUND
        # The actor was sharded over the training slot alone, which wrote the whole checkpoint; the rollout slot
        # keeps the prompt loader.
        assert sorted(path.name for path in (folder / "actor").glob("*.distcp")) == ["__0_0.distcp"]
        assert torch.load(folder / "rank_0.pt", weights_only=False)["loader"] is not None
        assert torch.load(folder / "rank_1.pt", weights_only=False)["loader"] is None
        assert read_state(folder)["colocate"] is False
    assert result.history[0]["rollout/weights_checksum"] != result.history[1]["rollout/weights_checksum"]
    logged = read_metrics_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert sorted(logged) == [1, 2]
    assert logged[2]["rollout/weights_checksum"] == result.history[1]["rollout/weights_checksum"]
    assert "val/pass@1" in logged[2]


def test_a_killed_split_run_resumes_to_the_uninterrupted_metrics_and_weights(tmp_path: Path, ray_runtime: None) -> None:
    straight_config = tiny_config(tmp_path / "straight", placement=SPLIT, total_steps=4, checkpoint_every=1)
    straight = Trainer(straight_config, TokenTask).fit()

    resumed_dir = tmp_path / "resumed"
    run_and_kill_after(resumed_dir, step=KILL_AFTER, placement=SPLIT)
    # The kill may land a step later; drop what came after step 2, as if it had landed right after it.
    for done, folder in complete_checkpoints(checkpoint_root(resumed_dir / "run")):
        if done > KILL_AFTER:
            shutil.rmtree(folder)
    resumed_config = tiny_config(resumed_dir, placement=SPLIT, total_steps=4, checkpoint_every=1)
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
