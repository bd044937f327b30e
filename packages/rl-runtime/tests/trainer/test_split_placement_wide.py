"""Split placement on more than 2 slots (a Ray runtime of 4 logical CPUs; CI's machines have 2 cores): two rollout
slots and two training slots, so samples cross from 2 producers to 2 consumers, the actor shards over the training
slots alone, one training slot sends the weights to both rollout slots and the other only takes part in the
export's gathers; two rollout slots feeding one training slot, whose batches of different widths it stacks; and a
rollout slot, a training slot and a reward model on a third slot of its own."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from ray._private import state

from rl_engines.rollout import weights_checksum
from rl_runtime.nodes._train import checksum_metric
from rl_runtime.trainer import Trainer

from ._reward_model import save_tiny_reward_model
from ._runs import actor_weights
from ._task import HF_CONFIG, VOCAB, TokenTask, tiny_config

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


SHORT, LONG = 3, 6
"""Prompt lengths of the even and the odd rows of `_alternating_rows`."""
NEW_TOKENS = 8
"""tiny_config's responses: no EOS, so every one is `rollout.max_new_tokens` long."""


def _alternating_rows(path: Path, count: int) -> Path:
    """Even rows SHORT prompt tokens, odd rows LONG: unshuffled, rollout rank 0 of 2 reads the even rows and rank 1
    the odd ones (strided shards), so their batches are SHORT + NEW_TOKENS and LONG + NEW_TOKENS wide."""
    rows = [{"prompt_ids": [4 + i % 7] * (SHORT if i % 2 == 0 else LONG), "target": 4 + i % 8} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


CRITIC = {
    "model": {"hf_config": dict(HF_CONFIG), "init_seed": 3},
    "optimizer": {"lr": 1e-3, "weight_decay": 0.0},
    "micro_batch": {"max_tokens_per_micro_batch": 64},
}


@pytest.mark.parametrize(
    ("pipeline", "algorithm"),
    [("grpo", {}), ("grpo", {"max_staleness": 1}), ("ppo", {"adv_estimator": "gae"})],
    ids=["grpo", "grpo_one_step_off", "ppo"],
)
def test_two_rollout_slots_feed_one_training_slot_batches_of_different_widths(
    tmp_path: Path, wide_ray_runtime: None, pipeline: str, algorithm: dict[str, Any]
) -> None:
    train = _alternating_rows(tmp_path / "alternating.jsonl", 32)
    config = tiny_config(
        tmp_path,
        placement={"slots": 3, "colocate": False, "strategy": "even"},
        data={"train_files": [str(train)], "shuffle": False},
        pipeline=pipeline,
        algorithm=algorithm,
        critic=CRITIC if pipeline == "ppo" else None,
        total_steps=2,
    )
    trainer = Trainer(config, TokenTask)
    assert [(p.subgraph_id, p.ranks) for p in trainer.placement.subgraphs] == [
        (f"{pipeline}/rollout", (0, 1)),
        (f"{pipeline}/train", (2,)),
    ]
    assert (trainer.plan.rollout_dp, trainer.plan.train_dp) == (2, 1)
    result = trainer.fit()

    samples = config.batch.prompts_per_step * config.batch.samples_per_prompt
    assert len(result.history) == 2
    for metrics in result.history:
        # The training slot trained every sample of both rollout slots: half SHORT + NEW_TOKENS tokens long, half
        # LONG + NEW_TOKENS (its attention mask counts them; a padding column counted as a token would show).
        assert metrics["perf/total_num_tokens"] == samples // 2 * (SHORT + NEW_TOKENS + LONG + NEW_TOKENS)
        assert (metrics["prompt_length/min"], metrics["prompt_length/max"]) == (SHORT, LONG)
        assert metrics["prompt_length/mean"] == (SHORT + LONG) / 2
        assert metrics["response_length/mean"] == NEW_TOKENS
        assert metrics["actor/grad_norm"] > 0
        if "max_staleness" in algorithm:
            assert metrics["async/num_trained_samples"] == samples
        if pipeline == "ppo":  # the critic's values were computed and trained on the stacked batch
            assert metrics["critic/vf_loss"] > 0 and "critic/values/mean" in metrics
    # After the last step both rollout slots hold the weights the training slot sent (the mean of their checksums
    # equals the sender's only if both do), the actor's in the checkpoint.
    last = result.history[-1]
    assert last["sync/weight_version"] == last["rollout/weight_version"] == 2
    assert last["rollout/weights_checksum"] == last["sync/weights_checksum"]
    assert result.last_checkpoint is not None
    actor = checksum_metric(weights_checksum(actor_weights(result.last_checkpoint, tmp_path).items()))
    assert last["rollout/weights_checksum"] == actor


RM_WEIGHT = 2.0
RM_PIECES = string.ascii_letters + string.digits
"""62 pieces: with `<pad>` and `<eos>`, the policy's vocabulary size (`reward_model.tokenizer: same`)."""


def test_a_reward_model_on_its_own_slot_beside_split_rollout_and_training(
    tmp_path: Path, wide_ray_runtime: None
) -> None:
    assert len(RM_PIECES) + 2 == VOCAB
    folder = save_tiny_reward_model(tmp_path / "rm", RM_PIECES)
    config = tiny_config(
        tmp_path,
        placement={"slots": 3, "colocate": False, "strategy": "even"},
        algorithm={"rule_reward_weight": 0.0},  # the reward model's score is the whole reward
        reward_model={"path": str(folder), "weight": RM_WEIGHT, "placement": "slot"},
        total_steps=2,
    )
    trainer = Trainer(config, TokenTask)
    # placement.slots counts the reward model's slot: the policy's split placement gets the other two
    assert [(p.subgraph_id, p.ranks) for p in trainer.placement.subgraphs] == [
        ("grpo/rollout", (0,)),
        ("grpo/train", (1,)),
    ]
    result = trainer.fit()

    servers = [a for a in state.actors().values() if a["ActorClassName"].endswith("RewardModelServer")]
    assert len(servers) == 1  # one reward-model slot was started (and is stopped now)
    assert len(result.history) == 2
    for metrics in result.history:
        # The rollout slot scored through the reward-model slot (placement: slot has no local fallback), and the
        # training slot trained on that score alone, weighted.
        assert metrics["reward/model_min"] < metrics["reward/model_max"]
        assert metrics["reward/model_truncated_frac"] == 0.0 and metrics["timing_s/reward_model"] > 0
        assert metrics["critic/score/mean"] == pytest.approx(RM_WEIGHT * metrics["reward/model_mean"], rel=1e-5)
        assert metrics["actor/grad_norm"] > 0
