"""Samples of producer batches padded to different widths, stacked into one consumer batch: each field padded on
the right with 0 to the widest, then trimmed to the longest sample."""

from __future__ import annotations

import pytest
import torch

from rl_engines.rollout import GenerateOutput
from rl_runtime.nodes import PromptItem
from rl_runtime.nodes._rollout_batch import PAD_ID, build_rollout_batch
from rl_runtime.workers import StepData, StepDataError
from rl_runtime.workers._padding import PAD_VALUE, pad_stack, stack_padded, trim_padding
from rl_runtime.workers._step_data import Sample, SampleBatch


def _producer_a() -> StepData:
    """Two samples 3 wide: rows `[prompt | response | pad]` with their per-token floats, as a train-side node sees
    them after the rollout (advantages, values, old log-probs on the response tokens)."""
    batch = {
        "input_ids": torch.tensor([[5, 6, 9], [7, 8, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1], [1, 1, 0]]),
        "response_mask": torch.tensor([[0, 0, 1], [0, 1, 0]]),
        "old_log_probs": torch.tensor([[0.0, 0.0, -0.5], [0.0, -0.25, 0.0]]),
        "values": torch.tensor([[0.0, 0.0, 1.5], [0.0, 2.5, 0.0]]),
        "uid": torch.tensor([1, 2]),
        "prompt_len": torch.tensor([2, 1]),
    }
    return StepData(batch, {"truth": ["a", "b"]})


def _producer_b() -> StepData:
    """One sample 5 wide."""
    batch = {
        "input_ids": torch.tensor([[3, 4, 10, 11, 12]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1, 1]]),
        "response_mask": torch.tensor([[0, 0, 1, 1, 1]]),
        "old_log_probs": torch.tensor([[0.0, 0.0, -0.125, -0.25, -0.375]]),
        "values": torch.tensor([[0.0, 0.0, 0.5, 0.75, 1.0]]),
        "uid": torch.tensor([3]),
        "prompt_len": torch.tensor([2]),
    }
    return StepData(batch, {"truth": ["c"]})


def _samples(*parts: StepData) -> list[Sample]:
    batches = [SampleBatch(part, "node 'p'") for part in parts]
    return [batch[i] for batch in batches for i in range(len(batch))]


def test_two_producers_of_different_widths_stack_right_padded_with_zeros() -> None:
    # The consumer's order interleaves the producers, as the coordinator may hand them out.
    a, b = _samples(_producer_a()), _samples(_producer_b())
    data = stack_padded([a[0], b[0], a[1]])

    assert PAD_VALUE == PAD_ID == 0
    batch = data.batch
    assert batch["input_ids"].tolist() == [[5, 6, 9, 0, 0], [3, 4, 10, 11, 12], [7, 8, 0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch["response_mask"].tolist() == [[0, 0, 1, 0, 0], [0, 0, 1, 1, 1], [0, 1, 0, 0, 0]]
    assert batch["old_log_probs"].tolist() == [
        [0.0, 0.0, -0.5, 0.0, 0.0],
        [0.0, 0.0, -0.125, -0.25, -0.375],
        [0.0, -0.25, 0.0, 0.0, 0.0],
    ]
    assert batch["values"].tolist() == [
        [0.0, 0.0, 1.5, 0.0, 0.0],
        [0.0, 0.0, 0.5, 0.75, 1.0],
        [0.0, 2.5, 0.0, 0.0, 0.0],
    ]
    assert batch["uid"].tolist() == [1, 3, 2] and batch["prompt_len"].tolist() == [2, 2, 1]
    assert batch["input_ids"].dtype == torch.int64 and batch["old_log_probs"].dtype == torch.float32
    assert data.extras == {"truth": ["a", "c", "b"]}


def test_a_consumers_share_is_trimmed_to_its_longest_sample() -> None:
    # Sample 2 of producer a (2 tokens) and nothing of b: the widest producer width (5) is not kept.
    a, b = _samples(_producer_a()), _samples(_producer_b())
    assert stack_padded([a[1]]).batch["input_ids"].tolist() == [[7, 8]]
    assert stack_padded([a[0], a[1]]).batch["values"].tolist() == [[0.0, 0.0, 1.5], [0.0, 2.5, 0.0]]
    assert stack_padded([b[0], a[1]]).batch["response_mask"].shape == (2, 5)


def _output(ids: tuple[int, ...], logprobs: tuple[float, ...]) -> GenerateOutput:
    return GenerateOutput("r", ids, logprobs, "stop", 0, 0)


def test_stacked_rollout_batches_equal_the_batch_one_producer_builds_from_the_same_samples() -> None:
    """Reference: build_rollout_batch over all the samples at once (one producer) against two producers' batches
    of the same samples (widths 3 and 7) stacked on the consumer."""
    prompts = [PromptItem((5, 6)), PromptItem((7,)), PromptItem((8, 9, 10)), PromptItem((11,))]
    outputs = [
        _output((12,), (-0.5,)),
        _output((13, 14), (-0.1, -0.2)),
        _output((15, 16, 17, 18), (-0.3, -0.4, -0.6, -0.7)),
        _output((19,), (-0.8,)),
    ]
    uids, groups = [1, 2, 3, 4], [1, 1, 2, 2]
    first = build_rollout_batch(prompts[:2], outputs[:2], uids[:2], groups[:2], policy_version=3)
    second = build_rollout_batch(prompts[2:], outputs[2:], uids[2:], groups[2:], policy_version=3)
    assert (first.batch["input_ids"].shape[1], second.batch["input_ids"].shape[1]) == (3, 7)

    stacked = stack_padded(_samples(first, second))
    whole = build_rollout_batch(prompts, outputs, uids, groups, policy_version=3)
    assert stacked.batch.keys() == whole.batch.keys()
    for name, tensor in whole.batch.items():
        assert torch.equal(stacked.batch[name], tensor), name
    assert stacked.extras == whole.extras

    # A consumer's share holding only short rows of both producers gets their width, as one producer gives it.
    share = _samples(first, second)
    picked = [share[0], share[3]]
    alone = build_rollout_batch([prompts[0], prompts[3]], [outputs[0], outputs[3]], [1, 4], [1, 2], policy_version=3)
    for name, tensor in alone.batch.items():
        assert torch.equal(stack_padded(picked).batch[name], tensor), name


def test_pad_stack_pads_the_first_dim_with_zeros_and_refuses_other_mismatches() -> None:
    assert pad_stack("ids", [torch.tensor([3, 3]), torch.tensor([4, 4, 4, 0])]).tolist() == [[3, 3, 0, 0], [4, 4, 4, 0]]
    assert pad_stack("uid", [torch.tensor(1), torch.tensor(2)]).tolist() == [1, 2]  # (B,) fields: scalars per sample
    masks = pad_stack("response_mask", [torch.tensor([True]), torch.tensor([False, True])])
    assert masks.dtype == torch.bool and masks.tolist() == [[True, False], [False, True]]
    # (S, C) per sample of different step counts: padded to the most steps, zeros past each one's.
    frames = pad_stack("frames", [torch.ones(1, 2), torch.full((2, 2), 2.0)])
    assert frames.tolist() == [[[1.0, 1.0], [0.0, 0.0]], [[2.0, 2.0], [2.0, 2.0]]]
    # A later dim no producer pads (an image size): refused, not filled with zeros.
    with pytest.raises(StepDataError, match=r"'pixel_values' tensors have shapes \[\(3, 8, 8\), \(3, 16, 16\)\]"):
        pad_stack("pixel_values", [torch.zeros(3, 8, 8), torch.zeros(3, 16, 16)])
    with pytest.raises(StepDataError, match=r"the samples' 'ids' tensors have shapes .*same number of dims"):
        pad_stack("ids", [torch.zeros(2), torch.zeros(2, 1)])


def test_stack_padded_trims_on_an_edge_only_when_widths_differed() -> None:
    # One producer's samples with an unused last column and an unnamed field of that width: kept as built.
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    one = SampleBatch(StepData({"attention_mask": mask, "my_feat": torch.ones(2, 3)}), "one")
    kept = stack_padded([one[0], one[1]], always_trim=False)
    assert kept.batch["attention_mask"].shape == (2, 3) and kept.batch["my_feat"].shape == (2, 3)
    assert stack_padded([one[0], one[1]]).batch["attention_mask"].shape == (2, 2)  # rebalance: always trimmed
    # Two widths: padded, then trimmed to the longest sample.
    wide = SampleBatch(StepData({"attention_mask": torch.tensor([[1, 1, 0, 0]]), "my_feat": torch.ones(1, 4)}), "w")
    mixed = stack_padded([one[0], wide[0]], always_trim=False)
    assert mixed.batch["attention_mask"].tolist() == [[1, 1], [1, 1]]


def test_trim_padding_cuts_unused_columns_of_token_fields_only() -> None:
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]])
    data = StepData(
        {
            "attention_mask": mask,
            "ids": mask * 9,
            "score": torch.ones(2, 5),
            "instruction_ids": torch.ones(2, 4, dtype=torch.int64),  # (B, L): L is not the rows' width
            "uid": torch.tensor([1, 2]),
        }
    )
    trimmed = trim_padding(data)
    assert torch.equal(trimmed.batch["attention_mask"], mask[:, :3])
    assert torch.equal(trimmed.batch["ids"], mask[:, :3] * 9)
    assert trimmed.batch["score"].shape == (2, 5)  # not token-aligned: kept whole
    assert trimmed.batch["instruction_ids"].shape == (2, 4)
    assert trim_padding(StepData({"attention_mask": mask[:, :3]})).batch["attention_mask"].shape == (2, 3)
