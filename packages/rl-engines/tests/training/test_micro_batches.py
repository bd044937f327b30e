"""The micro-batch plan: exact cover of the batch, the token budget, and the batch's own shape."""

from __future__ import annotations

import re

import pytest
import torch
from _training_helpers import engine_config, rollout_batch

from rl_engines.training import BatchError, ForwardSpec, FSDPEngine, MicroBatchConfig, MicroBatchError


@pytest.fixture(scope="module")
def engine() -> FSDPEngine:
    return FSDPEngine.from_config(engine_config(micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=24)))


@pytest.fixture
def batch() -> dict[str, torch.Tensor]:
    return rollout_batch(4, seed=5)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([[0, 1], [2]], r"missing \[3\]"),
        ([[0, 1], [1, 2, 3]], r"repeated \[1\]"),
        ([[0], [1], [2], [3, 4]], r"out of range \[4\]"),
    ],
)
def test_plan_must_cover_the_batch_exactly_once(engine: FSDPEngine, batch: dict, plan: list, message: str) -> None:
    with pytest.raises(MicroBatchError, match=message):
        engine.forward(batch, plan, ForwardSpec())


def test_micro_batch_over_the_budget_names_budget_and_lengths(engine: FSDPEngine, batch: dict) -> None:
    lengths = batch["attention_mask"].sum(-1).tolist()
    assert sum(lengths) > 24
    expected = re.escape(f"{sum(lengths)} tokens (sequence lengths {lengths}) over ")
    with pytest.raises(MicroBatchError, match=expected + "MicroBatchConfig.max_tokens_per_micro_batch=24"):
        engine.forward(batch, [[0, 1, 2, 3]], ForwardSpec())


def test_single_sequence_longer_than_the_budget_runs_alone(batch: dict) -> None:
    tight = FSDPEngine.from_config(engine_config(micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=1)))
    outputs = tight.forward(batch, [[0], [1], [2], [3]], ForwardSpec())
    assert (outputs.log_probs[batch["response_mask"].bool()] < 0).all()


def test_row_without_tokens_is_refused(engine: FSDPEngine, batch: dict) -> None:
    batch["attention_mask"][2] = 0
    with pytest.raises(MicroBatchError, match=r"rows \[2\] have no valid tokens"):
        engine.forward(batch, [[0, 1], [2, 3]], ForwardSpec())


def test_batch_without_input_ids_is_refused(engine: FSDPEngine, batch: dict) -> None:
    del batch["input_ids"]
    with pytest.raises(BatchError, match="no 'input_ids'"):
        engine.forward(batch, [[0, 1], [2, 3]], ForwardSpec())


def test_batch_entries_must_share_the_first_dim(engine: FSDPEngine, batch: dict) -> None:
    batch["advantages"] = batch["advantages"][:3]
    with pytest.raises(
        BatchError, match=r"batch\['advantages'\] must be a tensor with the batch's first dim 4, got \(3, 16\)"
    ):
        engine.forward(batch, [[0, 1], [2, 3]], ForwardSpec())


def test_input_ids_must_be_two_dimensional(engine: FSDPEngine, batch: dict) -> None:
    batch = {"input_ids": batch["input_ids"][0]}
    with pytest.raises(BatchError, match=r"input_ids must be \(B, T\)"):
        engine.forward(batch, [[0]], ForwardSpec())


def test_batch_without_attention_mask_treats_every_token_as_valid(engine: FSDPEngine) -> None:
    batch = {"input_ids": torch.randint(1, 100, (2, 6))}
    outputs = engine.forward(batch, [[0], [1]], ForwardSpec())
    assert torch.equal(outputs.log_probs[:, 0], torch.zeros(2))
    assert (outputs.log_probs[:, 1:] < 0).all()
