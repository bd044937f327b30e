"""End to end: GRPO steps of a tiny Qwen2 through real Ray DAG workers on 2 CPU slots (HF rollout, rule reward,
GRPO advantages, old and reference log-probs, FSDP2 over gloo, weight sync), and an exact resume after a kill."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.trainer import Trainer, TrainResult
from rl_runtime.trainer._checkpoints import checkpoint_root, complete_checkpoints
from rl_runtime.trainer._session import DRIVER_BYTES_METRIC

from ._runs import STRAIGHT, actor_weights, deterministic, newest_checkpoint_step, run_and_signal
from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
DRIVER_BYTES_BOUND = 8_192
"""Two ranks' metric dicts are ~3 KB; one step's sample tensors (16 samples x 16 tokens: three int64 masks/ids and
eight float32 per-token tensors) are ~14 KB, so a driver that received any batch would exceed the bound."""


def test_grpo_steps_train_write_metrics_and_keep_the_last_checkpoints(straight: TrainResult) -> None:
    # The session's STRAIGHT run (conftest): 4 steps, a checkpoint after each, keep_last=3, a validation after step 4.
    result = straight

    assert [result.start_step, result.end_step, len(result.history)] == [0, 4, 4]
    for metrics in result.history:
        assert metrics["actor/num_skipped_steps"] == 0
        assert metrics["actor/grad_norm"] > 0
        assert metrics["sync/num_tensors"] > 0  # the rollout engine got the updated weights
        assert metrics["perf/total_num_tokens"] > 0
        assert 0 <= metrics["critic/score/mean"] <= 1
        assert metrics[DRIVER_BYTES_METRIC] < DRIVER_BYTES_BOUND
        assert "actor/kl_loss" in metrics and "actor/pg_clipfrac" in metrics
    logged = read_metrics_jsonl(result.run_dir / "metrics.jsonl")
    assert sorted(logged) == [1, 2, 3, 4]
    assert "val/pass@1" in result.history[-1]
    kept = complete_checkpoints(checkpoint_root(result.run_dir))
    assert [step for step, _ in kept] == [2, 3, 4]  # keep_last=3 removed step 1


DDP_TOLERANCE = 1e-5
"""ddp sums the ranks' gradients in one all-reduce, FSDP2 by reduce-scatter: the same sums in another order; and
whole ddp replicas run the engine's functional forward where FSDP2 shards run transformers' (equal to rounding)."""
BITWISE_METRICS = ("sync/weights_checksum",)
"""A checksum of the weights' bit patterns: equal weights up to rounding give unrelated values."""


def test_ddp_replicas_train_as_fsdp_shards_do(tmp_path: Path, straight: TrainResult) -> None:
    ddp_config = tiny_config(tmp_path / "ddp", total_steps=2, checkpoint_every=2, actor={"data_parallel": "ddp"})
    ddp = Trainer(ddp_config, TokenTask).fit()
    # The FSDP2 run (tiny_config's default): the session's STRAIGHT run, whose first 2 steps are a plain 2-step run's
    # (constant learning rate, no validation before step 4), with its step-2 checkpoint.
    fsdp_history = straight.history[:2]
    fsdp_checkpoint = checkpoint_root(straight.run_dir) / "step_00000002"

    for ours, reference in zip(ddp.history, fsdp_history, strict=True):
        ours, reference = deterministic(ours), deterministic(reference)
        assert ours.keys() == reference.keys()
        assert "actor/kl_loss" in ours  # the reference policy ran replicated too
        for name, value in reference.items():
            if name not in BITWISE_METRICS:
                assert ours[name] == pytest.approx(value, rel=DDP_TOLERANCE, abs=DDP_TOLERANCE), name
    weights = actor_weights(ddp.last_checkpoint, tmp_path)
    expected = actor_weights(fsdp_checkpoint, tmp_path)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, atol=DDP_TOLERANCE, rtol=DDP_TOLERANCE, msg=name)


def test_killed_run_resumes_to_the_uninterrupted_metrics_and_weights(tmp_path: Path, straight: TrainResult) -> None:
    resumed_dir = tmp_path / "resumed"
    run_and_signal(resumed_dir, at_step=3, trainer=STRAIGHT)  # SIGKILLed in step 3, after step 2's checkpoint
    assert newest_checkpoint_step(resumed_dir) == 2
    resumed = Trainer(tiny_config(resumed_dir, **STRAIGHT), TokenTask).fit()

    assert (resumed.start_step, len(resumed.history)) == (2, 2)
    lines = (resumed_dir / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]  # the replayed steps are not logged twice
    tail = len(resumed.history)
    for ours, reference in zip(resumed.history, straight.history[-tail:], strict=True):
        assert deterministic(ours) == deterministic(reference)
    weights = actor_weights(resumed.last_checkpoint, tmp_path)
    expected = actor_weights(straight.last_checkpoint, tmp_path)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(weights[name], tensor), name


def test_several_steps_per_call_train_exactly_as_one_per_call(tmp_path: Path, straight: TrainResult) -> None:
    single = straight  # one step per call
    config = tiny_config(tmp_path / "chunked", total_steps=4, validate_every=4, checkpoint_every=3, steps_per_call=4)
    chunked = Trainer(config, TokenTask).fit()  # calls of 3 steps (cut at the checkpoint), then 1

    assert [done for done, _ in chunked.validations] == [4]
    assert [deterministic(m) for m in chunked.history] == [deterministic(m) for m in single.history]
    weights = actor_weights(chunked.last_checkpoint, tmp_path)
    for name, tensor in actor_weights(single.last_checkpoint, tmp_path).items():
        assert torch.equal(weights[name], tensor), name
    kept = complete_checkpoints(checkpoint_root(tmp_path / "chunked" / "run"))
    assert [step for step, _ in kept] == [3, 4]
