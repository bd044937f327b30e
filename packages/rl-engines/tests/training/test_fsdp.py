"""Two real gloo processes with FSDP2: outputs, gradients, NaN skipping and export against one-process references."""

from __future__ import annotations

import math

import pytest
import torch
from _training_helpers import (
    qwen_config,
    reference_gradients,
    reference_model,
    reference_outputs,
    rollout_batch,
    run_distributed,
)
from _training_workers import BUCKET_BYTES, FULL_BATCH, LOCAL_BATCH, fsdp_scenario
from transformers import AutoModelForCausalLM

pytestmark = pytest.mark.slow

GRAD_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("fsdp")
    run_distributed(fsdp_scenario, out)
    return [torch.load(out / f"fsdp_rank{rank}.pt", weights_only=False) | {"out": out} for rank in range(2)]


@pytest.fixture(scope="module")
def full_batch() -> dict[str, torch.Tensor]:
    return rollout_batch(FULL_BATCH, seed=0)


def test_packed_and_padded_forwards_agree_with_plain_transformers(ranks: list[dict], full_batch: dict) -> None:
    with torch.no_grad():
        log_probs, entropy = reference_outputs(reference_model(qwen_config()), full_batch)
    packed = torch.cat([r["log_probs_True"] for r in ranks])
    padded = torch.cat([r["log_probs_False"] for r in ranks])
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=0)
    torch.testing.assert_close(packed, log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat([r["entropy_True"] for r in ranks]), entropy, atol=1e-5, rtol=0)
    assert (packed[full_batch["response_mask"].bool()] < 0).all()
    assert all(rank["sharded_after_forward"] for rank in ranks)
    assert not any(rank["splits_inert_rows"] for rank in ranks)


def test_ranks_plan_as_many_micro_batches_or_all_refuse(ranks: list[dict]) -> None:
    assert ranks[0]["plan_size"] == ranks[1]["plan_size"] > 1  # rank 0's rows alone would fit one micro-batch
    for rank in ranks:
        needed = ranks[1]["plan_size"]
        assert rank["uneven_error"].startswith(
            f"a rank needs {needed} micro-batches under MicroBatchConfig.max_tokens_per_micro_batch=24, more than "
            "the 1 rows the smallest rank holds"
        )


def test_bf16_mixed_precision_keeps_fp32_shards_and_close_log_probs(ranks: list[dict]) -> None:
    for rank in ranks:
        assert rank["bf16_param_dtype"] == {torch.float32}  # the shards (and AdamW) stay in float32
        torch.testing.assert_close(rank["log_probs_bf16"], rank["log_probs_True"], atol=0.05, rtol=0)
        assert not torch.equal(rank["log_probs_bf16"], rank["log_probs_True"])  # bf16 compute did happen


def test_normalizer_counts_every_rank(ranks: list[dict], full_batch: dict) -> None:
    mask = full_batch["response_mask"]
    for rank in ranks:
        assert rank["normalizer"].num_tokens == float(mask.sum())
        assert rank["normalizer"].num_sequences == FULL_BATCH
        assert rank["real_step"].normalizer == rank["normalizer"]  # the step divided by the global counts


def test_dp2_times_two_micro_batches_gradients_equal_one_process(ranks: list[dict], full_batch: dict) -> None:
    reference = reference_gradients(full_batch, qwen_config())
    for rank in ranks:
        gradients = rank["gradients"]
        assert gradients.keys() == reference.keys()
        for name, grad in reference.items():
            assert grad.abs().max() > 0, name
            torch.testing.assert_close(gradients[name], grad, atol=GRAD_TOLERANCE, rtol=GRAD_TOLERANCE, msg=name)


def test_nan_loss_on_one_rank_skips_the_step_on_both(ranks: list[dict]) -> None:
    for rank in ranks:
        result = rank["nan_step"]
        assert result.skipped
        assert rank["unchanged_after_nan"]
        assert math.isnan(result.loss)
        assert not rank["real_step"].skipped
        assert rank["real_step"].num_micro_batches > 1  # gradients accumulated over micro-batches and ranks
        assert rank["global_step"] == 1


def test_step_loss_is_the_full_batch_loss(ranks: list[dict]) -> None:
    assert ranks[0]["real_step"].loss == pytest.approx(ranks[1]["real_step"].loss, abs=1e-12)
    assert ranks[0]["real_step"].grad_norm == pytest.approx(ranks[1]["real_step"].grad_norm, rel=1e-6)


def test_bucketed_export_covers_every_parameter_once_under_the_limit(ranks: list[dict]) -> None:
    expected = reference_model(qwen_config()).state_dict()
    for rank in ranks:
        buckets = rank["buckets"]
        names = [name for bucket in buckets for name, _ in bucket]
        assert sorted(names) == sorted(expected)
        assert len(names) == len(set(names))
        assert len(buckets) > 1
        for bucket in buckets:
            size = sum(t.numel() * t.element_size() for _, t in bucket)
            assert size <= BUCKET_BYTES or len(bucket) == 1
        for name, tensor in (pair for bucket in buckets for pair in bucket):
            torch.testing.assert_close(tensor, expected[name], atol=0, rtol=0, msg=name)


def test_export_hf_of_two_ranks_reloads_with_the_same_log_probs(ranks: list[dict], full_batch: dict) -> None:
    out = ranks[0]["out"]
    reloaded = AutoModelForCausalLM.from_pretrained(out / "hf", attn_implementation="eager")
    with torch.no_grad():
        log_probs, _ = reference_outputs(reloaded, full_batch)
    trained = torch.cat([r["trained_log_probs"] for r in ranks])
    torch.testing.assert_close(trained, log_probs, atol=1e-5, rtol=0)
    with torch.no_grad():
        initial, _ = reference_outputs(reference_model(qwen_config()), full_batch)
    assert (trained - initial).abs().max() > 1e-3  # the export holds the trained weights, not the initial ones


def test_each_rank_ran_its_own_rows(ranks: list[dict], full_batch: dict) -> None:
    for index, rank in enumerate(ranks):
        rows = slice(index * LOCAL_BATCH, (index + 1) * LOCAL_BATCH)
        assert (rank["log_probs_True"] != 0).sum() == full_batch["response_mask"][rows].sum()
