"""The shared-prefix layout: rows that share a prompt run it once; outputs and gradients match one plain forward
per sequence (and the padded layout), in one process and under FSDP2; where it does not apply the rows run padded."""

from __future__ import annotations

import pytest
import torch
from _shared_prefix_workers import grouped_batch, shared_prefix_scenario
from _training_helpers import (
    VOCAB,
    engine_config,
    llama_config,
    ppo_loss_fn,
    qwen_config,
    reference_gradients,
    reference_model,
    reference_outputs,
    rollout_batch,
    run_distributed,
)
from transformers import MistralConfig, Qwen2Config

from rl_engines._attention import full_attention_only
from rl_engines.training import ForwardSpec, FSDPEngine, MicroBatchConfig, ModelConfig, TrainConfigError
from rl_engines.training._micro_batches import plan_micro_batches
from rl_engines.training._packing import InputLayout, padded_inputs, shared_prefix_inputs

TOLERANCE = 1e-5
GROUPS, SAMPLES = 3, 4


def _engine(hf_config=None, **micro_batch) -> FSDPEngine:
    model = ModelConfig(hf_config=hf_config or qwen_config(), init_seed=3, value_head=True)
    settings = {"max_tokens_per_micro_batch": 1024, "packing": False} | micro_batch
    return FSDPEngine.from_config(engine_config(model=model, micro_batch=MicroBatchConfig(**settings)))


def test_rows_sharing_a_prompt_run_it_once() -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=0)
    inputs = shared_prefix_inputs(batch, response_only=True)
    assert inputs is not None and inputs.prefix is not None
    assert inputs.prefix.input_ids.shape[0] == GROUPS + 1  # the groups' prompts and the lone row's
    assert inputs.prefix.row_prefix.tolist() == [g for g in range(GROUPS) for _ in range(SAMPLES)] + [GROUPS]
    padded = padded_inputs(batch, response_only=True)
    assert torch.equal(inputs.labels, padded.labels) and torch.equal(inputs.rows, padded.rows)


@pytest.mark.parametrize("make_config", [qwen_config, llama_config], ids=["qwen2", "llama-tied"])
@pytest.mark.parametrize("response_only", [True, False])
def test_outputs_equal_one_forward_per_sequence(make_config, response_only: bool) -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=1)
    spec = ForwardSpec(entropy=True, values=True, response_only=response_only)
    shared, padded = _engine(make_config()), _engine(make_config(), share_prefixes=False)
    assert shared.input_layout is InputLayout.SHARED_PREFIX and padded.input_layout is InputLayout.PADDED
    got, want = shared.forward(batch, spec), padded.forward(batch, spec)
    for name in ("log_probs", "entropy", "values"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=TOLERANCE, rtol=0)
    if response_only:
        with torch.no_grad():
            log_probs, entropy = reference_outputs(reference_model(make_config()), batch)
        torch.testing.assert_close(got.log_probs, log_probs, atol=TOLERANCE, rtol=0)
        torch.testing.assert_close(got.entropy, entropy, atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("make_config", [qwen_config, llama_config], ids=["qwen2", "llama-tied"])
def test_gradients_equal_one_forward_per_sequence(make_config) -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=2)
    # A budget of 3/5 of the batch's tokens: the engine plans two micro-batches or more, splitting groups.
    budget = int(batch["attention_mask"].sum()) * 3 // 5
    engine = FSDPEngine.from_config(
        engine_config(make_config(), micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=budget, packing=False))
    )
    assert engine.input_layout is InputLayout.SHARED_PREFIX
    # Groups split across micro-batches: each piece runs its prompt once and the gradients still add up.
    assert len(plan_micro_batches(batch, budget, engine.layout)) >= 2
    got = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    want = reference_gradients(batch, make_config())
    assert got.keys() == want.keys()
    for name, grad in want.items():
        assert grad.abs().max() > 0, name
        torch.testing.assert_close(got[name], grad, atol=TOLERANCE, rtol=TOLERANCE)


def test_continuations_leave_out_the_last_token_which_predicts_nothing() -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=6)
    inputs = shared_prefix_inputs(batch, response_only=True)
    assert inputs is not None
    longest = int(batch["response_mask"].sum(dim=-1).max())
    assert inputs.input_ids.shape[1] == longest - 1


def test_one_token_responses_are_predicted_from_the_prefix_alone() -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=7)
    first_response = batch["response_mask"].int().argmax(dim=-1)
    keep = torch.arange(batch["input_ids"].shape[1])[None, :] <= first_response[:, None]
    batch = dict(batch, attention_mask=batch["attention_mask"] * keep, response_mask=batch["response_mask"] * keep)
    batch["input_ids"] = batch["input_ids"] * batch["attention_mask"]
    inputs = shared_prefix_inputs(batch, response_only=True)
    assert inputs is not None and inputs.input_ids.shape[1] == 1
    with torch.no_grad():
        log_probs, _ = reference_outputs(reference_model(qwen_config()), batch)
    got = _engine().forward(batch, ForwardSpec())
    torch.testing.assert_close(got.log_probs, log_probs, atol=TOLERANCE, rtol=0)
    assert torch.equal(got.log_probs != 0, batch["response_mask"].bool())


def test_tokens_inside_the_continuation_outside_the_response_are_inputs_only() -> None:
    batch = grouped_batch(GROUPS, SAMPLES, seed=5)
    # A multi-turn row: a tool's output (not trained on) sits between two generated parts.
    response = batch["response_mask"].clone()
    lengths = response.sum(dim=-1)
    for row in range(response.shape[0]):
        if lengths[row] >= 4:
            start = int(response[row].nonzero()[0])
            response[row, start + 1 : start + 3] = 0
    batch = dict(batch, response_mask=response)
    inputs = shared_prefix_inputs(batch, response_only=True)
    assert inputs is not None and inputs.prefix is not None
    spec = ForwardSpec(entropy=True)
    got, want = _engine().forward(batch, spec), _engine(share_prefixes=False).forward(batch, spec)
    torch.testing.assert_close(got.log_probs, want.log_probs, atol=TOLERANCE, rtol=0)
    assert torch.equal(got.log_probs != 0, response.bool())


def test_where_the_layout_does_not_apply_the_rows_run_padded() -> None:
    assert shared_prefix_inputs(rollout_batch(6, seed=0), response_only=True) is None  # no shared prompt
    batch = grouped_batch(GROUPS, SAMPLES, seed=3)
    shifted = dict(batch, position_ids=batch["position_ids"] + 1)
    assert shared_prefix_inputs(shifted, response_only=True) is None
    no_response = dict(batch, response_mask=batch["response_mask"].clone())
    no_response["response_mask"][0] = 0
    assert shared_prefix_inputs(no_response, response_only=True) is None
    assert shared_prefix_inputs({k: v for k, v in batch.items() if k != "response_mask"}, True) is None
    engine = _engine()
    outputs = engine.forward(shifted, ForwardSpec())
    expected = _engine(share_prefixes=False).forward(shifted, ForwardSpec())
    torch.testing.assert_close(outputs.log_probs, expected.log_probs, atol=TOLERANCE, rtol=0)


def test_the_engine_picks_the_layout_from_its_config_and_model() -> None:
    assert _engine(packing=True).input_layout is InputLayout.PACKED
    checkpointed = ModelConfig(hf_config=qwen_config(), gradient_checkpointing=True)
    engine = FSDPEngine.from_config(engine_config(model=checkpointed, packing=False))
    assert engine.input_layout is InputLayout.PADDED
    sliding = qwen_config().to_dict() | {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 0}
    sliding.pop("layer_types", None)
    assert not full_attention_only(Qwen2Config(**sliding))
    assert not full_attention_only(MistralConfig(vocab_size=VOCAB, sliding_window=8))
    assert full_attention_only(MistralConfig(vocab_size=VOCAB, sliding_window=None))
    assert full_attention_only(qwen_config()) and full_attention_only(llama_config())
    with pytest.raises(TrainConfigError, match="share_prefixes must be True or False"):
        MicroBatchConfig(share_prefixes="yes")


@pytest.mark.slow
def test_fsdp2_gradients_equal_one_forward_per_sequence(tmp_path) -> None:
    run_distributed(shared_prefix_scenario, tmp_path)
    full = grouped_batch(GROUPS, SAMPLES, seed=4)
    want = reference_gradients(full, qwen_config())
    for rank in range(2):
        saved = torch.load(tmp_path / f"shared_rank{rank}.pt", weights_only=False)
        assert saved["layout"] == InputLayout.SHARED_PREFIX.value
        assert not saved["fast"]  # sharded parameters go through transformers' forward (FSDP2's hooks)
        for name, grad in want.items():
            torch.testing.assert_close(saved["gradients"][name], grad, atol=TOLERANCE, rtol=TOLERANCE)
