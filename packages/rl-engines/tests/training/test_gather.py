"""Batched gathering of FSDP2 shards: the same full tensors as `DTensor.full_tensor`, on 2 gloo ranks."""

from __future__ import annotations

from pathlib import Path

import torch
from _gather_workers import gather_scenario
from _training_helpers import run_distributed

from rl_engines.training._gather import gather_full_tensors


def test_batched_gather_equals_full_tensor_one_by_one(tmp_path: Path) -> None:
    run_distributed(gather_scenario, tmp_path)
    for rank in range(2):
        saved = torch.load(tmp_path / f"gather_rank{rank}.pt", weights_only=False)
        for original, batched, single in zip(saved["originals"], saved["batched"], saved["one_by_one"], strict=True):
            assert batched.dtype == original.dtype and batched.shape == original.shape
            assert torch.equal(batched, single)
            assert torch.equal(batched, original)


def test_plain_tensors_come_back_as_they_are() -> None:
    tensors = [torch.arange(6.0).reshape(2, 3), torch.tensor([1, 2])]
    gathered = gather_full_tensors(tensors)
    assert all(g is t for g, t in zip(gathered, tensors, strict=True))
