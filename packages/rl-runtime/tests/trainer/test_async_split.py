"""Asynchronous training end to end: split placement on 2 CPU slots with algorithm.max_staleness=1 (one-step-off),
AReaL's decoupled PPO loss; the staleness bound, the uid accounting and the weights at the end."""

from __future__ import annotations

from pathlib import Path

from rl_runtime.nodes._seeds import sample_uid
from rl_runtime.nodes._staleness import uid_digest
from rl_runtime.trainer import Trainer

from ._task import TokenTask, tiny_config

STEPS = 3
SAMPLES_PER_STEP = 16
"""tiny_config: 4 prompts x 4 samples, all drawn by the one rollout rank."""


def test_one_step_off_split_run_bounds_staleness_and_trains_every_sample_once(
    tmp_path: Path, ray_runtime: None
) -> None:
    config = tiny_config(
        tmp_path,
        placement={"colocate": False, "strategy": "even"},
        algorithm={"max_staleness": 1, "policy_loss": "decoupled_ppo"},
        total_steps=STEPS,
    )
    history = Trainer(config, TokenTask).fit().history
    assert len(history) == STEPS
    trained: list[float] = []
    for step, metrics in enumerate(history):
        # Rollout step k samples from version max(0, k - 1) while training step k - 1 runs: staleness <= 1.
        assert metrics["rollout/policy_version"] == max(0, step - 1)
        assert metrics["async/staleness_max"] == metrics["async/staleness_mean"] == min(step, 1)
        # Step k trains exactly the samples the rollout slot drew at step k (uid = step, rank, draw, index).
        expected = [sample_uid(step, 0, 0, index) for index in range(SAMPLES_PER_STEP)]
        assert metrics["async/num_trained_samples"] == SAMPLES_PER_STEP
        assert metrics["async/uid_digest"] == uid_digest(expected)
        trained.append(metrics["async/uid_digest"])
        assert 0.0 <= metrics["async/trainer_idle_ratio"] <= 1.0
        assert 0.0 <= metrics["async/rollout_idle_ratio"] <= 1.0
        # The decoupled loss reports the proximal / behaviour weights (verl's names).
        assert metrics["rollout_corr/rollout_is_mean"] > 0 and "rollout_corr/rollout_is_eff_sample_size" in metrics
        assert "actor/behav_kl" in metrics
        assert metrics["actor/grad_norm"] > 0
    assert len(set(trained)) == STEPS
    assert [m["async/rollout_steps_ahead"] for m in history] == [1.0, 1.0, 0.0]
    # Drained at the end: the rollout engine caught up to the actor's final weights.
    last = history[-1]
    assert last["sync/weight_version"] == last["rollout/weight_version"] == STEPS
    assert last["rollout/weights_checksum"] == last["sync/weights_checksum"]
