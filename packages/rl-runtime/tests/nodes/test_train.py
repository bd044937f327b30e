"""`train_actor` with real engines: an on-policy step that takes its old log-probs from the training forward
equals the step with the separate `compute_old_log_prob` pass, and off-policy steps still run that pass."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from rl_coordinator.loading import ShardedLoader
from rl_core.graph import get_pipeline
from rl_runtime.config import BatchPlan, RunConfig, config_from_dict
from rl_runtime.nodes import NodeResources, PromptItem, PromptTable, ResponseSample, ScoreResult
from rl_runtime.nodes._advantage import compute_advantage
from rl_runtime.nodes._generate import generate
from rl_runtime.nodes._log_probs import compute_old_log_prob, skips_old_log_prob_pass
from rl_runtime.nodes._reward import compute_reward
from rl_runtime.nodes._train import sync_rollout_weights, train_actor
from rl_runtime.planning._placement import DataParallelInfo
from rl_runtime.trainer import build_actor
from rl_runtime.trainer._data import open_files
from rl_runtime.trainer._engines import build_reference, build_rollout
from rl_runtime.workers import NodeContext, StepData, StepDataError

VOCAB = 64
SCORE_MODULUS = 5
"""Scores are the response's token-id sum modulo this: they vary within a group, so advantages are not all 0."""
FORWARD_METRICS = ("actor/entropy", "training/rollout_probs_diff_mean", "training/rollout_probs_diff_max")


class SumTask:
    """Test double of a task: rows hold prompt token ids; a response scores its token-id sum mod 5."""

    def encode(self, row: Mapping[str, Any], where: str) -> PromptItem:
        return PromptItem(tuple(row["ids"]))

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        return ScoreResult(tuple(float(sum(s.response_ids) % SCORE_MODULUS) for s in samples), {})

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""


def _config(
    tmp_path: Path, *, batch: Mapping[str, Any] | None = None, pipeline: str = "grpo", **algorithm: Any
) -> RunConfig:
    rng = random.Random(0)
    rows = [{"ids": [rng.randrange(4, VOCAB) for _ in range(rng.randint(2, 5))]} for _ in range(8)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    hf_config = {
        "model_type": "qwen2",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": VOCAB,
        "max_position_embeddings": 32,
    }
    return config_from_dict(
        RunConfig,
        {
            "data": {"train_files": [str(tmp_path / "train.jsonl")], "max_prompt_length": 8, "max_response_length": 6},
            "batch": {
                "prompts_per_step": 2,
                "samples_per_prompt": 4,
                **(batch or {}),
            },
            "actor": {
                "model": {"hf_config": hf_config, "init_seed": 3},
                "optimizer": {"lr": 1e-2},
                "micro_batch": {"max_tokens_per_micro_batch": 40},
            },
            "algorithm": {"kl": {"mode": "none", "coef": 0.0}, **algorithm},
            "rollout": {"temperature": 0.9},
            "placement": {"slots": 1, "device": "cpu"},
            "pipeline": pipeline,
        },
    )


def _resources(config: RunConfig, task: SumTask | None = None) -> NodeResources:
    torch.manual_seed(0)
    plan = BatchPlan.from_config(config, rollout_dp=1, train_dp=1)
    actor = build_actor(config, total_steps=4)
    rollout, weight_sync = build_rollout(config, actor)
    loader = ShardedLoader(
        open_files(config.data.train_files, "data.train_files"),
        dp_rank=0,
        dp_size=1,
        batch_size=plan.prompts_per_rollout_rank,
        seed=0,
        shuffle=False,
    )
    actor.connect_weight_sync(weight_sync)
    task = task or SumTask()
    table = PromptTable.encode(task, loader.source, config.data.max_prompt_length)  # as the worker builds it
    resources = NodeResources(
        config, plan, task, loader, rollout, actor, reference=build_reference(config), prompt_table=table
    )
    sync_rollout_weights(resources, version=0)
    return resources


def _weights(resources: NodeResources) -> dict[str, torch.Tensor]:
    """The actor's exported tensors by Hugging Face name (through the role, as the weight sync reads them)."""
    return {name: tensor.clone() for bucket in resources.actor.export_weights(2**30) for name, tensor in bucket}


def _context(resources: NodeResources, operation: str) -> NodeContext[NodeResources]:
    node = next(n for n in get_pipeline("grpo").nodes.values() if n.operation == operation)
    return NodeContext(node, 0, DataParallelInfo(0, 1), 0, resources)


def _until_old_log_prob(resources: NodeResources) -> StepData:
    data = generate(_context(resources, "generate"), {})
    data = compute_reward(_context(resources, "compute_reward"), {"rollout": data})
    data = compute_advantage(_context(resources, "compute_advantage"), {"reward": data})
    return compute_old_log_prob(_context(resources, "compute_old_log_prob"), {"advantage": data})


def _actor_step(resources: NodeResources) -> tuple[StepData, StepData]:
    """(compute_old_log_prob's output, train_actor's output) of one step."""
    old = _until_old_log_prob(resources)
    return old, train_actor(_context(resources, "train_actor"), {"old_log_prob": old})


def test_on_policy_step_from_the_training_forward_equals_the_recomputed_one(tmp_path: Path) -> None:
    full = _resources(_config(tmp_path, recompute_old_log_prob="always"))
    lean = _resources(_config(tmp_path, recompute_old_log_prob="auto"))
    assert not skips_old_log_prob_pass(full.config) and skips_old_log_prob_pass(lean.config)
    full_old, full_out = _actor_step(full)
    lean_old, lean_out = _actor_step(lean)

    assert "old_log_probs" in full_old.batch and "timing_s/old_log_prob" in full_old.metrics
    assert "old_log_probs" not in lean_old.batch and lean_old.metrics == {}  # no forward pass ran
    assert lean_old.batch["advantages"].abs().sum() > 0  # a step with a gradient
    torch.testing.assert_close(lean_out.batch["old_log_probs"], full_old.batch["old_log_probs"], atol=1e-5, rtol=0)
    full_metrics = {**full_old.metrics, **full_out.metrics}  # as the worker merges a step's node metrics
    for name in ("actor/pg_loss", "actor/grad_norm", *FORWARD_METRICS):
        assert lean_out.metrics[name] == pytest.approx(full_metrics[name], rel=1e-4, abs=1e-6), name
    assert set(lean_out.metrics) == set(full_metrics) - {"timing_s/old_log_prob"}
    full_weights, lean_weights = _weights(full), _weights(lean)
    assert full_weights.keys() == lean_weights.keys()
    for name, tensor in full_weights.items():
        torch.testing.assert_close(lean_weights[name], tensor, atol=1e-6, rtol=0, msg=name)
    assert lean.policy_version == full.policy_version == 1  # both synced their update to the rollout engine


@pytest.mark.parametrize(
    ("batch", "algorithm"),
    [
        ({"ppo_epochs": 2}, {}),
        ({"mini_batches_per_step": 2}, {}),
        ({}, {"kl": {"mode": "in_reward", "coef": 0.01}}),  # compute_advantage may read old_log_probs first
    ],
)
def test_off_policy_steps_still_run_the_old_log_prob_forward(
    tmp_path: Path, batch: dict[str, int], algorithm: dict[str, Any]
) -> None:
    config = _config(tmp_path, batch=batch, pipeline="grpo", **algorithm)
    assert not skips_old_log_prob_pass(config)
    resources = _resources(config)
    data = generate(_context(resources, "generate"), {})
    data = compute_reward(_context(resources, "compute_reward"), {"rollout": data})
    old = compute_old_log_prob(_context(resources, "compute_old_log_prob"), {"reward": data})
    assert old.batch["old_log_probs"].shape == data.batch["input_ids"].shape
    assert {"timing_s/old_log_prob", *FORWARD_METRICS} <= set(old.metrics)


def test_off_policy_update_without_old_log_probs_names_the_missing_field(tmp_path: Path) -> None:
    resources = _resources(_config(tmp_path, batch={"mini_batches_per_step": 2}))
    data = generate(_context(resources, "generate"), {})
    data = compute_reward(_context(resources, "compute_reward"), {"rollout": data})
    data = compute_advantage(_context(resources, "compute_advantage"), {"reward": data})
    with pytest.raises(StepDataError, match=r"node 'actor_train' needs batch fields \['old_log_probs'\]"):
        train_actor(_context(resources, "train_actor"), {"advantage": data})
    assert resources.actor.global_step == 0


class FirstGroupAlikeTask(SumTask):
    """Test double of a task: the step's first prompt's responses all score 1 (a group with advantage 0 everywhere);
    the others score as `SumTask`'s."""

    def score(self, samples: Sequence[ResponseSample]) -> ScoreResult:
        first = samples[0].prompt_ids
        sums = super().score(samples).scores
        return ScoreResult(tuple(1.0 if s.prompt_ids == first else sums[i] for i, s in enumerate(samples)), {})


def _alike_step(config: RunConfig) -> tuple[NodeResources, StepData, StepData]:
    resources = _resources(config, FirstGroupAlikeTask())
    old, out = _actor_step(resources)
    return resources, old, out


def test_skipping_inert_rows_keeps_the_update_and_reports_the_trained_rows(tmp_path: Path) -> None:
    every_row = _config(tmp_path)
    skipping = _config(tmp_path, skip_inert_rows=True)
    kept, _, kept_out = _alike_step(every_row)
    skipped, old, skip_out = _alike_step(skipping)
    batch = old.batch
    inert = ~(batch["advantages"].ne(0) & batch["response_mask"].bool()).any(dim=-1)
    assert 0 < int(inert.sum()) < len(inert)  # the first group, and not the second
    for out in (kept_out, skip_out):
        assert out.metrics["actor/inert_row_fraction"] == pytest.approx(float(inert.float().mean()))
    # The update: the same loss, metrics of the loss and weights (the inert rows reach the loss through a ratio of 1).
    for name in ("actor/pg_loss", "actor/grad_norm", "actor/pg_clipfrac", "actor/ppo_kl"):
        assert skip_out.metrics[name] == pytest.approx(kept_out.metrics[name], rel=1e-6, abs=1e-9), name
    kept_weights, skip_weights = _weights(kept), _weights(skipped)
    for name, tensor in kept_weights.items():
        torch.testing.assert_close(skip_weights[name], tensor, atol=0, rtol=0, msg=name)
    # The forward's metrics cover the trained rows, as a separate forward of the pre-update policy gives them.
    assert "old_log_probs" in kept_out.batch and "old_log_probs" not in skip_out.batch
    fresh = _resources(every_row, FirstGroupAlikeTask())
    before = fresh.actor.compute_log_probs(batch, with_entropy=True)
    assert before.entropy is not None and before.log_probs is not None
    trained = batch["response_mask"].bool() & ~inert.unsqueeze(-1)
    assert skip_out.metrics["actor/entropy"] == pytest.approx(float(before.entropy[trained].mean()), rel=1e-5)
    gap = (before.log_probs.exp() - batch["rollout_log_probs"].exp()).abs()[trained]
    assert skip_out.metrics["training/rollout_probs_diff_mean"] == pytest.approx(float(gap.mean()), abs=1e-6)
    assert kept_out.metrics["actor/entropy"] != pytest.approx(skip_out.metrics["actor/entropy"], rel=1e-6)


def test_skip_inert_rows_computes_every_row_where_the_loss_reads_them(tmp_path: Path) -> None:
    # An entropy bonus reads every row's entropy: no row is inert, every row runs its forward (with autograd), and the
    # batch gets old_log_probs.
    resources, _, out = _alike_step(_config(tmp_path, skip_inert_rows=True, entropy_coef=0.01))
    assert not resources.actor.skips_inert_forward
    assert "old_log_probs" in out.batch and "actor/inert_row_fraction" not in out.metrics
