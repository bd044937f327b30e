"""The engine's own micro-batch plan: exact cover of the batch, the token budget, and the batch's own shape."""

from __future__ import annotations

import pytest
import torch
from _training_helpers import engine_config, ppo_loss_fn, rollout_batch

from rl_engines.training import BatchError, ForwardSpec, FSDPEngine, MicroBatchConfig, MicroBatchError
from rl_engines.training._fsdp import ProcessLayout
from rl_engines.training._micro_batches import plan_micro_batches

CPU = torch.device("cpu")
ALONE = ProcessLayout(world_size=1, rank=0, device=CPU, distributed=False)


@pytest.fixture(scope="module")
def engine() -> FSDPEngine:
    return FSDPEngine.from_config(engine_config(micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=24)))


@pytest.fixture
def batch() -> dict[str, torch.Tensor]:
    return rollout_batch(4, seed=5)


def test_micro_batches_cover_every_row_once_under_the_budget() -> None:
    mask = torch.tensor([[1] * 6 + [0] * 2, [1] * 8, [1] * 3 + [0] * 5, [1] * 5 + [0] * 3])
    plan = plan_micro_batches({"input_ids": torch.ones_like(mask), "attention_mask": mask}, 11, ALONE)
    assert sorted(i for rows in plan for i in rows) == [0, 1, 2, 3]
    tokens = mask.sum(dim=-1).tolist()
    assert all(sum(tokens[i] for i in rows) <= 11 for rows in plan)
    assert len(plan) == 2  # 22 tokens need two micro-batches of at most 11


def test_replicas_plan_alone_without_a_collective() -> None:
    # ddp replicas meet once a step: each plans its own fewest; torch.distributed is not even initialised here.
    replica = ProcessLayout(world_size=2, rank=1, device=CPU, distributed=True, replicated=True)
    batch = {"input_ids": torch.ones(4, 5, dtype=torch.int64)}
    plan = plan_micro_batches(batch, 10, replica)
    assert plan == plan_micro_batches(batch, 10, ALONE)
    assert len(plan) == 2


def test_forward_runs_the_engines_own_plan_under_its_budget(engine: FSDPEngine, batch: dict) -> None:
    lengths = batch["attention_mask"].sum(-1).tolist()
    assert sum(lengths) > 24
    plan = plan_micro_batches(batch, 24, ALONE)
    assert len(plan) > 1 and all(sum(lengths[i] for i in rows) <= 24 for rows in plan)
    wide = FSDPEngine.from_config(engine_config(micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=1024)))
    torch.testing.assert_close(
        engine.forward(batch, ForwardSpec()).log_probs, wide.forward(batch, ForwardSpec()).log_probs, atol=1e-5, rtol=0
    )


def test_single_sequence_longer_than_the_budget_runs_alone(batch: dict) -> None:
    assert sorted(plan_micro_batches(batch, 1, ALONE)) == [[0], [1], [2], [3]]
    tight = FSDPEngine.from_config(engine_config(micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=1)))
    outputs = tight.forward(batch, ForwardSpec())
    assert (outputs.log_probs[batch["response_mask"].bool()] < 0).all()


def test_row_without_tokens_is_refused(engine: FSDPEngine, batch: dict) -> None:
    batch["attention_mask"][2] = 0
    with pytest.raises(MicroBatchError, match=r"rows \[2\] have no valid tokens"):
        engine.forward(batch, ForwardSpec())


def test_batch_without_input_ids_is_refused(engine: FSDPEngine, batch: dict) -> None:
    del batch["input_ids"]
    with pytest.raises(BatchError, match="no 'input_ids'"):
        engine.forward(batch, ForwardSpec())


def test_batch_entries_must_share_the_first_dim(engine: FSDPEngine, batch: dict) -> None:
    batch["advantages"] = batch["advantages"][:3]
    with pytest.raises(
        BatchError, match=r"batch\['advantages'\] must be a tensor with the batch's first dim 4, got \(3, 16\)"
    ):
        engine.forward(batch, ForwardSpec())


def test_input_ids_must_be_two_dimensional(engine: FSDPEngine, batch: dict) -> None:
    batch = {"input_ids": batch["input_ids"][0]}
    with pytest.raises(BatchError, match=r"input_ids must be \(B, T\)"):
        engine.forward(batch, ForwardSpec())


def test_batch_without_attention_mask_treats_every_token_as_valid(engine: FSDPEngine) -> None:
    batch = {"input_ids": torch.randint(1, 100, (2, 6))}
    assert plan_micro_batches(batch, 24, ALONE) == [[0, 1]]
    outputs = engine.forward(batch, ForwardSpec())
    assert torch.equal(outputs.log_probs[:, 0], torch.zeros(2))
    assert (outputs.log_probs[:, 1:] < 0).all()


def test_train_step_without_response_mask_is_refused(engine: FSDPEngine, batch: dict) -> None:
    del batch["response_mask"]
    with pytest.raises(BatchError, match=r"needs 'response_mask' \(B, T\) to normalise the loss"):
        engine.train_step(batch, ppo_loss_fn, ForwardSpec())
