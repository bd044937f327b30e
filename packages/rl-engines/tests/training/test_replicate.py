"""`data_parallel="ddp"` on two real gloo processes: replicas start from rank 0's weights, gradients are summed to
the one-process gradient, a NaN step is skipped on both ranks, replicas stay equal, an FSDP2 engine continues
from their checkpoint; and the gradient buckets and refused settings."""

from __future__ import annotations

import math

import pytest
import torch
from _replicate_workers import ddp_scenario, uneven_gradients_scenario
from _training_helpers import (
    engine_config,
    qwen_config,
    reference_gradients,
    reference_model,
    rollout_batch,
    run_distributed,
)
from _training_workers import FULL_BATCH

from rl_engines.training import OffloadConfig, TrainConfigError
from rl_engines.training._replicate import _buckets

pytestmark = pytest.mark.slow

GRAD_TOLERANCE = 1e-5
CROSS_MODE_TOLERANCE = 1e-6
"""FSDP2 sums the same gradients in another order (reduce-scatter of shards against one all-reduce)."""


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("ddp")
    run_distributed(ddp_scenario, out)
    return [torch.load(out / f"ddp_rank{rank}.pt", weights_only=False) for rank in range(2)]


def test_replicas_are_plain_tensors_starting_from_rank_0s_weights(ranks: list[dict]) -> None:
    expected = reference_model(qwen_config(), init_seed=3).state_dict()
    for rank in ranks:
        assert rank["plain_parameters"]
        assert rank["initial"].keys() == expected.keys()
        for name, tensor in expected.items():
            assert torch.equal(rank["initial"][name], tensor), name


def test_dp2_times_two_micro_batches_gradients_equal_one_process(ranks: list[dict]) -> None:
    reference = reference_gradients(rollout_batch(FULL_BATCH, seed=0), qwen_config())
    for rank in ranks:
        assert rank["gradients"].keys() == reference.keys()
        for name, grad in reference.items():
            assert grad.abs().max() > 0, name
            torch.testing.assert_close(rank["gradients"][name], grad, atol=GRAD_TOLERANCE, rtol=GRAD_TOLERANCE)


def test_a_nan_on_one_rank_skips_the_step_on_both(ranks: list[dict]) -> None:
    for rank in ranks:
        assert rank["nan_step"].skipped and math.isnan(rank["nan_step"].loss)
        assert rank["unchanged_after_nan"]


def test_replicas_take_identical_steps(ranks: list[dict]) -> None:
    assert ranks[0]["losses"] == ranks[1]["losses"]
    for name, tensor in ranks[0]["trained"].items():
        assert torch.equal(tensor, ranks[1]["trained"][name]), name
    for name, _ in reference_model(qwen_config()).named_parameters():
        assert not torch.equal(ranks[0]["trained"][name], ranks[0]["initial"][name]), name


def test_export_has_every_tensor_once(ranks: list[dict]) -> None:
    names = [name for bucket in ranks[0]["buckets"] for name in bucket]
    assert sorted(names) == sorted(reference_model(qwen_config()).state_dict())


def test_an_fsdp_engine_continues_a_ddp_checkpoint(ranks: list[dict]) -> None:
    for rank in ranks:
        assert rank["fsdp_loaded_step"] == 2
        assert rank["fsdp_continued"] == pytest.approx(rank["continued"], abs=CROSS_MODE_TOLERANCE)
        for name, tensor in rank["continued_weights"].items():
            torch.testing.assert_close(rank["fsdp_continued_weights"][name], tensor, atol=CROSS_MODE_TOLERANCE, rtol=0)


def test_mixed_precision_is_refused_with_the_fix(ranks: list[dict]) -> None:
    for rank in ranks:
        # Refused when the config is built (before any engine), naming the fix.
        error = rank["mixed_precision_error"]
        assert "data_parallel='ddp' replicas have no mixed precision" in error and "data_parallel='fsdp'" in error


def test_a_parameter_without_gradient_on_one_rank_is_summed_as_zero_there(tmp_path) -> None:
    run_distributed(uneven_gradients_scenario, tmp_path)
    for rank in range(2):
        grads = torch.load(tmp_path / f"uneven_rank{rank}.pt", weights_only=False)
        assert grads["a"].tolist() == [3.0, 3.0, 3.0]  # 1 + 2
        assert grads["b"].tolist() == [10.0, 10.0] and grads["b"].dtype == torch.float64
        assert grads["c"] is None


def test_buckets_group_by_dtype_under_the_byte_limit() -> None:
    tensors = [torch.zeros(4), torch.zeros(4, dtype=torch.float64), torch.zeros(2), torch.zeros(8), torch.zeros(1)]
    # float32: 16 + 8 bytes fit in 24, the 32-byte tensor goes alone, then 4 bytes; float64: 32 bytes alone.
    # Full buckets come out as they fill, then the open ones in the order their dtype first appeared.
    assert _buckets(tensors, 24) == [[0, 2], [3], [4], [1]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"data_parallel": "zero3"}, r"data_parallel must be one of \['fsdp', 'ddp'\], got 'zero3'"),
        (
            {"data_parallel": "ddp", "offload": OffloadConfig(fsdp_cpu_offload=True)},
            r"fsdp_cpu_offload=True offloads FSDP2 shards, but .*data_parallel='ddp' keeps whole replicas",
        ),
    ],
)
def test_bad_data_parallel_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(TrainConfigError, match=message):
        engine_config(qwen_config(), **kwargs)
