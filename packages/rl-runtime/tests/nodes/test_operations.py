"""Node operations against test-double resources: reward placement, overlong shaping, GRPO advantages by hand,
dynamic sampling's group selection, and the errors for missing inputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from rl_core.graph import get_pipeline
from rl_engines.rollout import GenerateOutput
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, PromptItem, ResponseSample, ScoreResult, with_fields
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._dynamic_sampling import first_groups, informative_groups
from rl_runtime.nodes._log_probs import compute_old_log_prob, is_on_policy
from rl_runtime.nodes._reward import compute_reward
from rl_runtime.nodes._rollout_batch import build_rollout_batch
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import NodeContext, StepData, StepDataError


class LengthTask:
    """Test double of a task: a response scores its own length."""

    def encode(self, row: dict[str, Any], where: str) -> PromptItem:
        return PromptItem(tuple(row["ids"]))

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(float(len(s.response_ids)) for s in samples), {"reward/calls": 1.0})

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""


def _config(tmp_path: Path, batch: dict[str, int] | None = None, pipeline: str = "grpo", **algorithm: Any) -> RunConfig:
    (tmp_path / "train.jsonl").write_text('{"ids": [1]}\n' * 4)
    return config_from_dict(
        RunConfig,
        {
            "data": {"train_files": [str(tmp_path / "train.jsonl")], "max_response_length": 4},
            "batch": {"prompts_per_step": 2, "samples_per_prompt": 2, **(batch or {})},
            "actor": {"model": {"hf_config": {"model_type": "qwen2"}}},
            "algorithm": {"kl": {"mode": "none"}, **algorithm},
            "pipeline": pipeline,
        },
    )


def _context(config: RunConfig, operation: str) -> NodeContext[NodeResources]:
    node = next(n for n in get_pipeline("grpo").nodes.values() if n.operation == operation)
    resources = NodeResources(config, None, LengthTask(), None, None, None)  # engines unused by these ops
    return NodeContext(node, 0, DataParallelInfo(0, 1), 0, resources)


def _rollouts(lengths: list[int], groups: list[int]) -> StepData:
    prompts = [PromptItem((1, 2)) for _ in lengths]
    outputs = [GenerateOutput(str(i), (3,) * n, (0.0,) * n, "stop", "0", 2) for i, n in enumerate(lengths)]
    return build_rollout_batch(prompts, outputs, list(range(len(lengths))), groups, policy_version=0)


def test_reward_sits_on_the_last_response_token(tmp_path: Path) -> None:
    ctx = _context(_config(tmp_path), "compute_reward")
    out = compute_reward(ctx, {"rollout": _rollouts([1, 3], [0, 0])})
    assert out.batch["token_level_scores"].tolist() == [[0, 0, 1.0, 0, 0], [0, 0, 0, 0, 3.0]]
    assert out.metrics["reward/calls"] == 1.0 and "timing_s/reward" in out.metrics


def test_overlong_shaping_adds_dapo_ramp(tmp_path: Path) -> None:
    # max_response_length 4, buffer 2: length 3 is 1 token into the ramp -> -0.5; length 4 -> -1.
    ctx = _context(_config(tmp_path, overlong={"buffer_length": 2}), "compute_reward")
    out = compute_reward(ctx, {"rollout": _rollouts([1, 3, 4], [0, 0, 0])})
    assert out.batch["token_level_scores"].sum(dim=-1).tolist() == [1.0, 2.5, 3.0]


def test_grpo_advantages_match_the_hand_computation(tmp_path: Path) -> None:
    ctx = _context(_config(tmp_path), "compute_advantage")
    scored = compute_reward(_context(_config(tmp_path), "compute_reward"), {"r": _rollouts([1, 3, 2, 2], [0, 0, 1, 1])})
    out = compute_advantage(ctx, {"reward": scored})
    # group 0 scores 1 and 3: mean 2, unbiased std sqrt(2) -> -1/sqrt(2), +1/sqrt(2); group 1 ties -> 0.
    first_tokens = out.batch["advantages"][:, 2].tolist()
    expected = [-(2**-0.5), 2**-0.5, 0.0, 0.0]
    assert first_tokens == pytest.approx(expected, abs=1e-5)
    assert (out.batch["advantages"][out.batch["response_mask"] == 0] == 0).all()


def test_advantage_without_scores_names_the_missing_field(tmp_path: Path) -> None:
    ctx = _context(_config(tmp_path), "compute_advantage")
    with pytest.raises(StepDataError, match="token_level_scores"):
        compute_advantage(ctx, {"rollout": _rollouts([1], [0])})


def test_in_reward_kl_without_a_controller_names_the_fix(tmp_path: Path) -> None:
    config = _config(tmp_path, pipeline="grpo", kl={"mode": "in_reward", "coef": 0.01})
    scored = compute_reward(_context(config, "compute_reward"), {"r": _rollouts([1, 3], [0, 0])})
    logps = torch.zeros_like(scored.batch["token_level_scores"])
    scored = with_fields(scored, ref_log_probs=logps, old_log_probs=logps)
    with pytest.raises(StepDataError, match=r"needs a KL controller.*NodeResources\.kl_controller is None"):
        compute_advantage(_context(config, "compute_advantage"), {"reward": scored})


def test_old_log_probs_on_a_worker_without_the_actor_name_the_node(tmp_path: Path) -> None:
    config = _config(tmp_path, recompute_old_log_prob="always")
    with pytest.raises(
        StepDataError, match=r"node 'actor_old_log_prob' needs the actor, which this worker does not hold"
    ):
        compute_old_log_prob(_context(config, "compute_old_log_prob"), {"r": _rollouts([1, 3], [0, 0])})


def test_an_operation_with_two_upstream_batches_is_refused(tmp_path: Path) -> None:
    ctx = _context(_config(tmp_path), "compute_reward")
    with pytest.raises(StepDataError, match="exactly one upstream node"):
        compute_reward(ctx, {"a": _rollouts([1], [0]), "b": _rollouts([1], [0])})


def test_informative_groups_keep_varying_groups_and_first_groups_truncates(tmp_path: Path) -> None:
    scored = compute_reward(
        _context(_config(tmp_path), "compute_reward"), {"r": _rollouts([1, 2, 2, 2, 1, 3], [5, 5, 6, 6, 7, 7])}
    )
    kept = informative_groups(scored, epsilon=0.0)
    assert kept.batch["group_id"].tolist() == [5, 5, 7, 7]
    assert first_groups(kept, 1).batch["group_id"].tolist() == [5, 5]


@pytest.mark.parametrize(
    ("batch", "expected"),
    [({}, True), ({"ppo_epochs": 2}, False), ({"mini_batches_per_step": 2}, False)],
)
def test_on_policy_means_one_update_per_step(tmp_path: Path, batch: dict[str, int], expected: bool) -> None:
    assert is_on_policy(_config(tmp_path, batch).batch) is expected


def test_on_policy_old_log_probs_are_left_to_the_actor(tmp_path: Path) -> None:
    # The context has no actor engine: an on-policy step must not run a forward pass.
    rollouts = _rollouts([1, 3], [0, 0])
    out = compute_old_log_prob(_context(_config(tmp_path), "compute_old_log_prob"), {"rollout": rollouts})
    assert "old_log_probs" not in out.batch and out.batch.keys() == rollouts.batch.keys()
