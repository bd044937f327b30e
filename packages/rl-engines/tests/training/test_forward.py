"""Per-token log-probs, entropy and values: packed and padded layouts against plain transformers forwards."""

from __future__ import annotations

import pytest
import torch
from _training_helpers import (
    engine_config,
    llama_config,
    qwen_config,
    reference_model,
    reference_outputs,
    rollout_batch,
)

from rl_engines.training import BatchError, ForwardSpec, FSDPEngine, ModelConfig, TrainConfigError
from rl_engines.training._packing import padded_inputs, target_mask

TOLERANCE = 1e-5


@pytest.mark.parametrize("make_config", [qwen_config, llama_config], ids=["qwen2", "llama-tied"])
def test_packed_and_padded_agree_with_one_forward_per_sequence(make_config) -> None:
    batch = rollout_batch(6, seed=0)
    with torch.no_grad():
        log_probs, entropy = reference_outputs(reference_model(make_config()), batch)
    results = {}
    for packing in (True, False):
        engine = FSDPEngine.from_config(engine_config(make_config(), packing=packing))
        results[packing] = engine.forward(batch, ForwardSpec(entropy=True))
    for outputs in results.values():
        torch.testing.assert_close(outputs.log_probs, log_probs, atol=TOLERANCE, rtol=0)
        torch.testing.assert_close(outputs.entropy, entropy, atol=TOLERANCE, rtol=0)
        assert outputs.values is None
    assert torch.equal(results[True].log_probs != 0, batch["response_mask"].bool())


@pytest.mark.parametrize("response_only", [True, False])
def test_padded_rows_end_at_the_last_column_that_predicts_a_target(response_only: bool) -> None:
    batch = rollout_batch(6, seed=3)
    batch["response_mask"][:, -1] = 0  # the last column holds no target: the columns up to it still run
    inputs = padded_inputs(batch, response_only)
    first = int(batch["attention_mask"].any(dim=0).nonzero()[0])
    last_target = int(target_mask(batch, response_only).any(dim=0).nonzero()[-1])
    assert inputs.input_ids.shape[1] == last_target - first
    assert int(inputs.source.max()) < inputs.input_ids.numel()


def test_temperature_divides_the_logits() -> None:
    batch = rollout_batch(3, seed=1)
    model = reference_model()
    engine = FSDPEngine.from_config(engine_config())
    outputs = engine.forward(batch, ForwardSpec(temperature=0.5))
    with torch.no_grad():
        tokens = batch["input_ids"][0][batch["attention_mask"][0].bool()]
        logits = model(input_ids=tokens[None]).logits[0, :-1] / 0.5
        expected = torch.log_softmax(logits, -1).gather(-1, tokens[1:, None]).squeeze(-1)
    response = batch["response_mask"][0].bool()
    start = int(batch["attention_mask"][0].nonzero()[0])
    cols = torch.arange(start + 1, start + len(tokens))
    torch.testing.assert_close(outputs.log_probs[0][response], expected[response[cols]], atol=TOLERANCE, rtol=0)


def test_response_only_false_covers_every_predicted_token() -> None:
    batch = rollout_batch(4, seed=2)
    engine = FSDPEngine.from_config(engine_config())
    outputs = engine.forward(batch, ForwardSpec(response_only=False))
    mask = batch["attention_mask"].bool()
    predicted = mask & torch.cat([torch.zeros(4, 1, dtype=torch.bool), mask[:, :-1]], dim=1)
    assert torch.equal(outputs.log_probs != 0, predicted)


def test_values_agree_between_layouts_and_with_the_value_head_on_hidden_states() -> None:
    batch = rollout_batch(5, seed=3)
    model = ModelConfig(hf_config=qwen_config(), value_head=True, init_seed=3)
    packed = FSDPEngine.from_config(engine_config(model=model, packing=True))
    padded = FSDPEngine.from_config(engine_config(model=model, packing=False))
    spec = ForwardSpec(log_probs=False, values=True)
    values = packed.forward(batch, spec).values
    torch.testing.assert_close(values, padded.forward(batch, spec).values, atol=TOLERANCE, rtol=0)
    head = packed.network.value_head
    with torch.no_grad():
        tokens = batch["input_ids"][1][batch["attention_mask"][1].bool()]
        hidden = reference_model().model(input_ids=tokens[None]).last_hidden_state[0]
        expected = head(hidden[:-1]).squeeze(-1)
    start = int(batch["attention_mask"][1].nonzero()[0])
    response = batch["response_mask"][1].bool()
    cols = torch.arange(start + 1, start + len(tokens))
    torch.testing.assert_close(values[1][response], expected[response[cols]], atol=TOLERANCE, rtol=0)
    assert not packed.network.backbone.lm_head.weight.requires_grad  # the critic does not train the LM head


def test_values_need_a_value_head() -> None:
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(TrainConfigError, match="value_head=True"):
        engine.forward(rollout_batch(2, seed=0), ForwardSpec(log_probs=False, values=True))


def test_packing_refuses_position_ids_it_would_rewrite() -> None:
    batch = rollout_batch(2, seed=0)
    batch["position_ids"] = batch["position_ids"] + 3
    engine = FSDPEngine.from_config(engine_config(packing=True))
    with pytest.raises(BatchError, match="packing=False"):
        engine.forward(batch, ForwardSpec())
    padded = FSDPEngine.from_config(engine_config(packing=False))
    assert padded.forward(batch, ForwardSpec()).log_probs.shape == (2, batch["input_ids"].shape[1])


def test_mismatched_masks_are_refused() -> None:
    batch = rollout_batch(2, seed=0)
    batch["response_mask"] = batch["response_mask"][:, :-1]
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(BatchError, match="response_mask has shape"):
        engine.forward(batch, ForwardSpec())


def test_forward_spec_rejections() -> None:
    with pytest.raises(TrainConfigError, match="asks for nothing"):
        ForwardSpec(log_probs=False)
    with pytest.raises(TrainConfigError, match="temperature must be a finite number > 0"):
        ForwardSpec(temperature=0.0)


def test_forward_keeps_no_graph_and_returns_on_the_batch_device() -> None:
    engine = FSDPEngine.from_config(engine_config())
    outputs = engine.forward(rollout_batch(2, seed=0), ForwardSpec(entropy=True))
    assert not outputs.log_probs.requires_grad
    assert outputs.log_probs.device == torch.device("cpu")
    assert outputs.log_probs.dtype == torch.float32
