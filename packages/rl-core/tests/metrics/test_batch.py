"""Lengths and token counts read from the sample schema."""

from __future__ import annotations

import pytest
import torch

from rl_core import ShapeError
from rl_core.metrics import MetricsError, count_tokens, sequence_lengths, token_counts


def test_lengths_come_from_prompt_len_and_response_len(batch: dict[str, torch.Tensor]) -> None:
    prompt, response = sequence_lengths(batch)
    assert prompt.tolist() == [2.0, 3.0, 3.0]
    assert response.tolist() == [2.0, 3.0, 0.0]
    assert prompt.dtype == torch.float64


def test_lengths_fall_back_to_the_masks(batch: dict[str, torch.Tensor]) -> None:
    del batch["prompt_len"], batch["response_len"]
    prompt, response = sequence_lengths(batch)
    assert prompt.tolist() == [2.0, 3.0, 3.0]
    assert response.tolist() == [2.0, 3.0, 0.0]


def test_token_counts(batch: dict[str, torch.Tensor]) -> None:
    assert token_counts(batch) == (8, 5)
    assert count_tokens(batch) == 13  # attention_mask: 4 + 6 + 3
    del batch["attention_mask"]
    assert count_tokens(batch) == 13  # from the lengths


def test_missing_key_names_it_and_the_keys_present() -> None:
    with pytest.raises(MetricsError, match=r"batch has no 'attention_mask'.*keys present: response_mask"):
        sequence_lengths({"response_mask": torch.ones(2, 3)})


def test_mismatched_batch_sizes_are_rejected(batch: dict[str, torch.Tensor]) -> None:
    batch["response_len"] = torch.tensor([1, 2])
    with pytest.raises(ShapeError, match=r"response_len must have shape \(B\) with B=3"):
        sequence_lengths(batch)


def test_non_binary_mask_is_rejected(batch: dict[str, torch.Tensor]) -> None:
    batch["attention_mask"] = batch["attention_mask"] * 2
    with pytest.raises(ShapeError, match="attention_mask must hold only 0/1"):
        count_tokens(batch)
