"""ReMax's greedy-baseline node against a recording test-double engine: one greedy request per prompt group, its
score shared by the group as `baseline_rewards`, and the remax advantages that subtract it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rl_core.graph import get_pipeline
from rl_engines.rollout import GenerateOutput, GenerateRequest
from rl_runtime.config import RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, PromptItem
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._greedy_baseline import compute_greedy_baseline
from rl_runtime.nodes._reward import compute_reward
from rl_runtime.nodes._rollout_batch import build_rollout_batch
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.workers import NodeContext, StepData, StepDataError

from .test_operations import LengthTask


class PromptLengthEngine:
    """Test double of a rollout engine: answers each request with as many tokens as its prompt has."""

    capabilities = frozenset()

    def __init__(self) -> None:
        self.requests: list[GenerateRequest] = []

    def generate(self, requests: Sequence[GenerateRequest]) -> list[GenerateOutput]:
        self.requests.extend(requests)
        return [
            GenerateOutput(r.rid, (9,) * len(r.input_ids), (0.0,) * len(r.input_ids), "stop", 0, len(r.input_ids))
            for r in requests
        ]


def _config(tmp_path: Path) -> RunConfig:
    (tmp_path / "train.jsonl").write_text('{"ids": [1]}\n' * 4)
    return config_from_dict(
        RunConfig,
        {
            "data": {"train_files": [str(tmp_path / "train.jsonl")], "max_response_length": 4},
            "batch": {"prompts_per_step": 2, "samples_per_prompt": 2},
            "actor": {"model": {"hf_config": {"model_type": "qwen2"}}},
            "algorithm": {"adv_estimator": "remax", "kl": {"mode": "none"}},
            "pipeline": "remax",
        },
    )


def _context(config: RunConfig, operation: str, engine: PromptLengthEngine | None) -> NodeContext[NodeResources]:
    node = next(n for n in get_pipeline("remax").nodes.values() if n.operation == operation)
    resources = NodeResources(config, None, LengthTask(), None, engine, None)  # type: ignore[arg-type]
    return NodeContext(node, 0, DataParallelInfo(0, 1), 0, resources)


def _rollouts() -> StepData:
    # Two groups: prompt (1, 2) answered with 1 and 3 tokens, prompt (5, 6, 7) with 2 and 2.
    prompts = [PromptItem((1, 2)), PromptItem((1, 2)), PromptItem((5, 6, 7)), PromptItem((5, 6, 7))]
    lengths = [1, 3, 2, 2]
    outputs = [GenerateOutput(str(i), (3,) * n, (0.0,) * n, "stop", 0, 2) for i, n in enumerate(lengths)]
    return build_rollout_batch(prompts, outputs, [0, 1, 2, 3], [10, 10, 11, 11], policy_version=0)


def test_one_greedy_response_per_group_is_the_baseline_of_its_samples(tmp_path: Path) -> None:
    config, engine = _config(tmp_path), PromptLengthEngine()
    scored = compute_reward(_context(config, "compute_reward", None), {"rollout": _rollouts()})
    out = compute_greedy_baseline(_context(config, "compute_greedy_baseline", engine), {"reward": scored})

    assert [r.input_ids for r in engine.requests] == [(1, 2), (5, 6, 7)]
    assert all(r.sampling.temperature == 0.0 for r in engine.requests)
    assert all(r.sampling.max_new_tokens == 4 for r in engine.requests)
    # LengthTask scores a response by its length: the greedy answers have 2 and 3 tokens.
    assert out.batch["baseline_rewards"].tolist() == [2.0, 2.0, 3.0, 3.0]
    assert out.metrics["reward/greedy_baseline/mean"] == pytest.approx(2.5)
    assert "timing_s/greedy" in out.metrics

    advantages = compute_advantage(_context(config, "compute_advantage", None), {"baseline": out})
    # Undiscounted reward-to-go (the sample's score on every response token) minus its group's greedy score.
    starts = advantages.batch["prompt_len"].tolist()
    first_response_token = [advantages.batch["advantages"][row, start].item() for row, start in enumerate(starts)]
    assert first_response_token == pytest.approx([1 - 2, 3 - 2, 2 - 3, 2 - 3])


def test_a_worker_without_a_rollout_engine_names_the_node(tmp_path: Path) -> None:
    config = _config(tmp_path)
    scored = compute_reward(_context(config, "compute_reward", None), {"rollout": _rollouts()})
    with pytest.raises(StepDataError, match=r"node 'greedy_baseline' samples greedy responses.*no rollout engine"):
        compute_greedy_baseline(_context(config, "compute_greedy_baseline", None), {"reward": scored})
