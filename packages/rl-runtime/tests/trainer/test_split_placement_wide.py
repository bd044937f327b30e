"""Split placement on 4 slots: two rollout slots and two training slots, so samples cross from 2 producers to 2
consumers, the actor shards over the training slots alone, one training slot sends the weights to both rollout
slots and the other only takes part in the export's gathers."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_engines.rollout import weights_checksum
from rl_runtime.nodes._train import checksum_metric
from rl_runtime.trainer import Trainer

from ._runs import actor_weights
from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
SLOTS = 4
PLACEMENT = {"slots": SLOTS, "colocate": False, "strategy": "even"}


def test_two_rollout_and_two_training_slots(tmp_path: Path, wide_ray_runtime: None) -> None:
    config = tiny_config(tmp_path, placement=PLACEMENT, total_steps=2, checkpoint_every=2, validate_every=2)
    trainer = Trainer(config, TokenTask)
    assert [(p.subgraph_id, p.ranks) for p in trainer.placement.subgraphs] == [
        ("grpo/rollout", (0, 1)),
        ("grpo/train", (2, 3)),
    ]
    assert (trainer.plan.rollout_dp, trainer.plan.train_dp) == (2, 2)
    result = trainer.fit()

    for step, metrics in enumerate(result.history):
        assert metrics["rollout/policy_version"] == step
        assert metrics["sync/weight_version"] == metrics["rollout/weight_version"] == step + 1
        # The mean over both rollout slots equals the sender's value only if both hold the sent weights.
        assert metrics["rollout/weights_checksum"] == metrics["sync/weights_checksum"]
        assert metrics["actor/grad_norm"] > 0
    folder = result.last_checkpoint
    assert sorted(path.name for path in (folder / "actor").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    actor = checksum_metric(weights_checksum(actor_weights(folder, tmp_path).items()))
    assert result.history[-1]["rollout/weights_checksum"] == actor
    assert result.history[-1]["val/num_prompts"] == 6  # both rollout slots evaluated their half of the 6 prompts
