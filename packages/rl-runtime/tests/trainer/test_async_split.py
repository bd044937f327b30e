"""Asynchronous training end to end: split placement on 2 CPU slots with algorithm.max_staleness=1 (one-step-off)
and AReaL's decoupled PPO loss (what the default algorithm.policy_loss=auto runs there), SIGKILLed after its
checkpoint at step 2 and resumed: the staleness bound, every sample trained exactly once across the kill (uid
accounting), the idle ratios and the weights at the end."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import pytest
import torch

from rl_core.schema import POLICY_VERSION, UID
from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.nodes._seeds import sample_uid
from rl_runtime.nodes._staleness import uid_digest
from rl_runtime.trainer import Trainer
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints

from ._runs import newest_checkpoint_step, run_and_signal
from ._task import TokenTask, tiny_config

SPLIT = {"colocate": False, "strategy": "even"}
ASYNC = {"max_staleness": 1}
"""The default algorithm.policy_loss (auto) resolves to decoupled_ppo here: `_check_step` sees its metrics."""
STEPS, CHECKPOINT_EVERY = 4, 2
SAMPLES_PER_STEP = 16
"""tiny_config: 4 prompts x 4 samples, all drawn by the one rollout rank."""
DRAWS = ((0, 0), (0, 1), (1, 0))
"""Continuous generation's draws (step, draw) over 2 steps: the pool fills to 2 steps' worth, then tops up one."""


def _check_step(step: int, metrics: dict[str, float]) -> None:
    # The pipeline drains at each checkpoint (every 2 steps): the first step after one samples from the trainer's
    # own version, the next from one version back while that step trains. Staleness <= 1 throughout.
    start = step - step % CHECKPOINT_EVERY
    assert metrics["rollout/policy_version"] == max(start, step - 1)
    assert metrics["async/staleness_max"] == metrics["async/staleness_mean"] == step - max(start, step - 1) <= 1
    assert metrics["async/num_trained_samples"] == SAMPLES_PER_STEP
    # Every sample went through the rollout slot's staleness buffer: none stale, none dropped or left behind.
    assert metrics["async/dropped_stale"] == metrics["async/buffered_samples"] == metrics["async/top_up_draws"] == 0
    assert 0.0 <= metrics["async/trainer_idle_ratio"] <= 1.0
    assert 0.0 <= metrics["async/rollout_idle_ratio"] <= 1.0
    assert metrics["async/rollout_steps_ahead"] == (1.0 if step % CHECKPOINT_EVERY == 0 else 0.0)
    # The decoupled loss (policy_loss=auto at eta > 0) reports the proximal / behaviour weights under verl's names.
    assert metrics["rollout_corr/rollout_is_mean"] > 0 and "rollout_corr/rollout_is_eff_sample_size" in metrics
    assert "actor/behav_kl" in metrics and metrics["actor/grad_norm"] > 0
    # Drained at the checkpoint: the rollout engine caught up to the actor's weights.
    if step % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
        assert metrics["sync/weight_version"] == metrics["rollout/weight_version"] == step + 1
        assert metrics["rollout/weights_checksum"] == metrics["sync/weights_checksum"]


def test_a_killed_one_step_off_run_resumes_training_every_sample_exactly_once(
    tmp_path: Path, ray_runtime: None, caplog: pytest.LogCaptureFixture
) -> None:
    trainer = {"checkpoint_every": CHECKPOINT_EVERY}
    # SIGKILLed by itself as it logs the step after its checkpoint, so that checkpoint is the newest on any machine.
    run_and_signal(tmp_path, at_step=CHECKPOINT_EVERY + 1, placement=SPLIT, trainer=trainer, algorithm=ASYNC)
    assert newest_checkpoint_step(tmp_path) == CHECKPOINT_EVERY
    before = read_metrics_jsonl(tmp_path / "run" / "metrics.jsonl")
    config = tiny_config(
        tmp_path, placement=SPLIT, algorithm=ASYNC, total_steps=STEPS, checkpoint_every=CHECKPOINT_EVERY
    )
    with caplog.at_level(logging.INFO, logger="rl_runtime.trainer._session"):
        resumed = Trainer(config, TokenTask).fit()
    assert (resumed.start_step, len(resumed.history)) == (CHECKPOINT_EVERY, STEPS - CHECKPOINT_EVERY)
    assert "policy loss: decoupled_ppo (algorithm.policy_loss=auto: algorithm.max_staleness=1" in caplog.text

    # Each step trained exactly the samples the rollout slot drew for it (uid = step, rank, draw, index): the
    # killed run's steps before its checkpoint, then the resumed run's; none twice, none lost.
    trained = {done - 1: before[done] for done in range(1, CHECKPOINT_EVERY + 1)}
    trained.update({CHECKPOINT_EVERY + i: metrics for i, metrics in enumerate(resumed.history)})
    assert sorted(trained) == list(range(STEPS))
    for step, metrics in trained.items():
        expected = [sample_uid(step, 0, 0, index) for index in range(SAMPLES_PER_STEP)]
        assert metrics["async/uid_digest"] == uid_digest(expected), step
        _check_step(step, metrics)
    assert len({metrics["async/uid_digest"] for metrics in trained.values()}) == STEPS


@pytest.mark.parametrize("eta", [1, 2])
def test_continuous_generation_trains_whole_groups_and_checkpoints_the_ones_in_flight(
    tmp_path: Path, ray_runtime: None, eta: int
) -> None:
    # Continuous: each step tops the pool up to 2 steps' worth of groups and trains the 4 that finished first; the
    # groups still in the pool at the checkpoint after step 2 are run to the end and saved in the buffer. At eta=1
    # the rollout slot runs no step ahead (rollout step 1 samples from version 1); at eta=2 it runs one step ahead
    # (the pipelined driver submits rollout steps 0 and 1 before training step 0; rollout step 1 samples from 0).
    algorithm = {"max_staleness": eta, "async_generation": "continuous"}  # policy_loss=auto: decoupled_ppo
    config = tiny_config(tmp_path, placement=SPLIT, algorithm=algorithm, total_steps=2, checkpoint_every=2)
    history = Trainer(config, TokenTask).fit().history
    for step, metrics in enumerate(history):
        assert metrics["async/num_trained_samples"] == SAMPLES_PER_STEP
        assert 0 <= metrics["async/staleness_max"] <= 1 and metrics["async/dropped_stale"] == 0
        assert metrics["rollout/in_flight_groups"] == 4
        assert metrics["rollout/policy_version"] == (step if eta == 1 else 0)
        assert metrics.get("async/rollout_steps_ahead", 0.0) == (eta - 1 if step == 0 else 0)
    state = torch.load(complete_checkpoints(checkpoint_root(tmp_path / "run"))[-1][1] / "rank_0.pt", weights_only=False)
    pending = state["staleness_buffer"]["pending"]["batch"]
    buffered = {int(uid) for uid in pending[UID].tolist()}
    assert len(buffered) == SAMPLES_PER_STEP and (pending[POLICY_VERSION] <= 2).all()
    # Uid accounting: step 0 drew 2 x 16 samples, step 1 drew 16; each trained set is 4 whole groups, the buffer holds
    # the rest: some choice of step 0's groups has step 0's digest, and what neither it nor the buffer holds step 1's.
    drawn = {(step, draw): [sample_uid(step, 0, draw, i) for i in range(SAMPLES_PER_STEP)] for step, draw in DRAWS}
    everything = {uid for uids in drawn.values() for uid in uids}
    step0_groups = [uids[g * 4 : g * 4 + 4] for key in ((0, 0), (0, 1)) for uids in [drawn[key]] for g in range(4)]
    matches = [
        chosen
        for chosen in itertools.combinations(step0_groups, 4)
        if uid_digest([uid for group in chosen for uid in group]) == history[0]["async/uid_digest"]
    ]
    assert len(matches) == 1
    first = {uid for group in matches[0] for uid in group}
    assert uid_digest(sorted(everything - first - buffered)) == history[1]["async/uid_digest"]
    assert not (first & buffered)
