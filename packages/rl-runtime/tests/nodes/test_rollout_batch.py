"""Rollout batches: right-padded layout, masks, log-prob alignment, selection and concatenation."""

from __future__ import annotations

import pytest
import torch

from rl_engines.rollout import GenerateOutput
from rl_runtime.nodes import PromptItem
from rl_runtime.nodes._rollout_batch import PAD_ID, build_rollout_batch, concat_samples, select_samples
from rl_runtime.workers import StepData, StepDataError


def _output(rid: str, ids: tuple[int, ...], logprobs: tuple[float, ...], reason: str = "stop") -> GenerateOutput:
    return GenerateOutput(rid, ids, logprobs, reason, "3", 0)


def _batch():
    prompts = [PromptItem((5, 6), {"truth": "a"}), PromptItem((7,), {"truth": "b"})]
    outputs = [_output("1", (9,), (-0.5,)), _output("2", (10, 11, 12), (-0.1, -0.2, -0.3), "length")]
    return build_rollout_batch(prompts, outputs, [11, 12], [1, 2], policy_version=3)


def test_rows_are_prompt_then_response_then_padding() -> None:
    data = _batch()
    batch = data.batch
    assert batch["input_ids"].tolist() == [[5, 6, 9, PAD_ID], [7, 10, 11, 12]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert batch["response_mask"].tolist() == [[0, 0, 1, 0], [0, 1, 1, 1]]
    assert batch["prompt_len"].tolist() == [2, 1] and batch["response_len"].tolist() == [1, 3]
    assert batch["uid"].tolist() == [11, 12] and batch["group_id"].tolist() == [1, 2]
    assert batch["policy_version"].tolist() == [3, 3]
    assert data.extras == {"truth": ["a", "b"], "finish_reason": ["stop", "length"]}


def test_rollout_log_probs_sit_on_the_tokens_they_scored() -> None:
    # log_probs[b, t] scores input_ids[b, t] (the engine's forward alignment), so they start at prompt_len.
    expected = torch.tensor([[0.0, 0.0, -0.5, 0.0], [0.0, -0.1, -0.2, -0.3]])
    assert torch.equal(_batch().batch["rollout_log_probs"], expected)


def test_a_row_without_log_probs_keeps_zeros_and_the_others_stay_aligned() -> None:
    prompts = [PromptItem((5,)), PromptItem((6, 7)), PromptItem((8,))]
    outputs = [
        _output("1", (9, 10), (-0.1, -0.2)),
        GenerateOutput("2", (11,), None, "stop", "3", 0),
        _output("3", (12, 13, 14), (-0.3, -0.4, -0.5)),
    ]
    batch = build_rollout_batch(prompts, outputs, [1, 2, 3], [1, 2, 3], policy_version=0).batch
    expected = torch.tensor([[0.0, -0.1, -0.2, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, -0.3, -0.4, -0.5]])
    assert torch.equal(batch["rollout_log_probs"], expected)
    assert batch["input_ids"].tolist() == [[5, 9, 10, PAD_ID], [6, 7, 11, PAD_ID], [8, 12, 13, 14]]


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(StepDataError, match="as many prompts, outputs, uids and group ids"):
        build_rollout_batch([PromptItem((1,))], [], [1], [1], policy_version=0)


def test_select_and_concat_keep_tensors_and_extras_together() -> None:
    data = _batch()
    picked = select_samples(data, [1])
    assert picked.batch["uid"].tolist() == [12] and picked.extras["truth"] == ["b"]
    short = select_samples(data, [0])
    trimmed = type(short)({k: v[:, :3] if v.dim() == 2 else v for k, v in short.batch.items()}, short.extras)
    joined = concat_samples([trimmed, picked])
    assert joined.batch["input_ids"].tolist() == [[5, 6, 9, PAD_ID], [7, 10, 11, 12]]
    assert joined.extras["truth"] == ["a", "b"]


def test_concat_pads_only_the_length_and_refuses_other_mismatches() -> None:
    small = StepData({"pixel_values": torch.zeros(1, 3, 8, 8)})
    large = StepData({"pixel_values": torch.zeros(1, 3, 16, 16)})
    with pytest.raises(StepDataError, match=r"field 'pixel_values' has shapes .* may differ only in dim 1"):
        concat_samples([small, large])
    steps = concat_samples([StepData({"actions": torch.ones(1, 1, 2)}), StepData({"actions": torch.ones(1, 2, 2)})])
    assert steps.batch["actions"].tolist() == [[[1.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]
