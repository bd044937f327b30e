"""End to end: GRPO steps of a tiny Qwen2 through real Ray DAG workers on 2 CPU slots (HF rollout, rule reward,
GRPO advantages, old and reference log-probs, FSDP2 over gloo, weight sync), and an exact resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from rl_runtime.metrics import read_metrics_jsonl
from rl_runtime.trainer import DRIVER_BYTES_METRIC, Trainer, checkpoint_root, complete_checkpoints

from ._task import TokenTask, tiny_config

pytestmark = pytest.mark.slow
DRIVER_BYTES_BOUND = 8_192
"""Two ranks' metric dicts are ~3 KB; one step's sample tensors (16 samples x 16 tokens: three int64 masks/ids and
eight float32 per-token tensors) are ~14 KB, so a driver that received any batch would exceed the bound."""
KILL_WAIT_S = 300.0
_NON_DETERMINISTIC = ("timing_s/", "timing_per_token_ms/", "perf/throughput", "perf/time_per_step")


def _deterministic(metrics: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in metrics.items() if not name.startswith(_NON_DETERMINISTIC)}


def _actor_weights(checkpoint: Path, scratch: Path) -> dict[str, torch.Tensor]:
    target = scratch / f"{checkpoint.parent.parent.parent.name}_{checkpoint.name}.pt"
    dcp_to_torch_save(checkpoint / "actor", target)
    state = torch.load(target, weights_only=False)
    return {name: value for name, value in state["model"].items() if isinstance(value, torch.Tensor)}


def test_two_grpo_steps_train_and_write_metrics(tmp_path: Path, ray_runtime: None) -> None:
    config = tiny_config(tmp_path, total_steps=2, checkpoint_every=1, keep_last=1, validate_every=2)
    result = Trainer(config, TokenTask).fit()

    assert [result.start_step, result.end_step, len(result.history)] == [0, 2, 2]
    for metrics in result.history:
        assert metrics["actor/num_skipped_steps"] == 0
        assert metrics["actor/grad_norm"] > 0
        assert metrics["sync/num_tensors"] > 0  # the rollout engine got the updated weights
        assert metrics["perf/total_num_tokens"] > 0
        assert 0 <= metrics["critic/score/mean"] <= 1
        assert metrics[DRIVER_BYTES_METRIC] < DRIVER_BYTES_BOUND
        assert "actor/kl_loss" in metrics and "actor/pg_clipfrac" in metrics
    logged = read_metrics_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert sorted(logged) == [1, 2]
    assert "val/pass@1" in result.history[-1]
    kept = complete_checkpoints(checkpoint_root(tmp_path / "run"))
    assert [step for step, _ in kept] == [2]  # keep_last=1 removed step 1


def test_killed_run_resumes_to_the_uninterrupted_metrics_and_weights(tmp_path: Path, ray_runtime: None) -> None:
    straight = Trainer(tiny_config(tmp_path / "straight", total_steps=4, checkpoint_every=1), TokenTask).fit()

    resumed_dir = tmp_path / "resumed"
    _run_and_kill_after(resumed_dir, step=2)
    resumed = Trainer(tiny_config(resumed_dir, total_steps=4, checkpoint_every=1), TokenTask).fit()

    assert resumed.start_step >= 2
    tail = len(resumed.history)
    for ours, reference in zip(resumed.history, straight.history[-tail:], strict=True):
        assert _deterministic(ours) == _deterministic(reference)
    weights = _actor_weights(resumed.last_checkpoint, tmp_path)
    expected = _actor_weights(straight.last_checkpoint, tmp_path)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(weights[name], tensor), name


def test_several_steps_per_call_train_exactly_as_one_per_call(tmp_path: Path, ray_runtime: None) -> None:
    single = Trainer(tiny_config(tmp_path / "single", total_steps=4, validate_every=4), TokenTask).fit()
    config = tiny_config(tmp_path / "chunked", total_steps=4, validate_every=4, checkpoint_every=3, steps_per_call=4)
    chunked = Trainer(config, TokenTask).fit()  # calls of 3 steps (cut at the checkpoint), then 1

    assert [done for done, _ in chunked.validations] == [4]
    assert [_deterministic(m) for m in chunked.history] == [_deterministic(m) for m in single.history]
    weights = _actor_weights(chunked.last_checkpoint, tmp_path)
    for name, tensor in _actor_weights(single.last_checkpoint, tmp_path).items():
        assert torch.equal(weights[name], tensor), name
    kept = complete_checkpoints(checkpoint_root(tmp_path / "chunked" / "run"))
    assert [step for step, _ in kept] == [3, 4]


def _run_and_kill_after(folder: Path, step: int) -> None:
    """Start a 4-step run in its own process group and SIGKILL it once checkpoint `step` is committed."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from _task import TokenTask, tiny_config
        from pathlib import Path
        from rl_runtime.trainer import Trainer
        Trainer(tiny_config(Path({str(folder)!r}), total_steps=4, checkpoint_every=1), TokenTask).fit()
        """
    )
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    process = subprocess.Popen([sys.executable, "-c", script], env=env, start_new_session=True)
    root = checkpoint_root(folder / "run")
    deadline = time.monotonic() + KILL_WAIT_S
    try:
        while not any(done >= step for done, _ in complete_checkpoints(root)):
            assert process.poll() is None, f"the run exited with {process.returncode} before checkpoint {step}"
            assert time.monotonic() < deadline, f"no checkpoint {step} within {KILL_WAIT_S} s"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    state = json.loads((complete_checkpoints(root)[-1][1] / "trainer_state.json").read_text())
    assert state["step"] >= step
