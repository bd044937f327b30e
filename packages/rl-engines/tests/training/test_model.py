"""Building the model: local folders, their weights and tokenizer, and configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _training_helpers import (
    VOCAB,
    engine_config,
    qwen_config,
    reference_model,
    reference_outputs,
    rollout_batch,
    save_tokenizer,
)

from rl_engines.training import ForwardSpec, FSDPEngine, ModelConfig, ModelSourceError, TrainConfigError
from rl_engines.training._fsdp import decoder_layers


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    reference_model().save_pretrained(str(folder))
    save_tokenizer(folder, VOCAB)
    return folder


def test_folder_model_has_the_saved_weights(model_folder: Path) -> None:
    engine = FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(model_folder))))
    batch = rollout_batch(3, seed=0)
    with torch.no_grad():
        expected, _ = reference_outputs(reference_model(), batch)
    outputs = engine.forward(batch, ForwardSpec())
    torch.testing.assert_close(outputs.log_probs, expected, atol=1e-5, rtol=0)


def test_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match=r"ModelConfig.path='.*nowhere' is not an existing folder"):
        FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(tmp_path / "nowhere"))))


def test_folder_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match=r"has no config\.json"):
        FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(tmp_path))))


def test_folder_without_weights_is_refused(model_folder: Path) -> None:
    (model_folder / "model.safetensors").unlink()
    with pytest.raises(ModelSourceError, match=r"holds no weights \(\*.safetensors or pytorch_model\*.bin\)"):
        FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(model_folder))))


def test_tokenizer_larger_than_the_vocabulary_is_refused(model_folder: Path, tmp_path: Path) -> None:
    save_tokenizer(model_folder, VOCAB + 10)
    with pytest.raises(ModelSourceError, match=rf"has {VOCAB + 10} tokens but the model's vocab_size is {VOCAB}"):
        FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(model_folder))))


def test_separate_tokenizer_folder_is_checked(tmp_path: Path) -> None:
    save_tokenizer(tmp_path / "tok", VOCAB + 1)
    config = ModelConfig(hf_config=qwen_config(), tokenizer_path=str(tmp_path / "tok"))
    with pytest.raises(ModelSourceError, match=r"ModelConfig\.tokenizer_path must name the tokenizer"):
        FSDPEngine.from_config(engine_config(model=config))
    missing = ModelConfig(hf_config=qwen_config(), tokenizer_path=str(tmp_path / "absent"))
    with pytest.raises(ModelSourceError, match=r"tokenizer_path=.* is not an existing folder"):
        FSDPEngine.from_config(engine_config(model=missing))


def test_smaller_tokenizer_than_the_padded_vocabulary_is_fine(tmp_path: Path) -> None:
    save_tokenizer(tmp_path / "tok", VOCAB - 28)
    engine = FSDPEngine.from_config(
        engine_config(model=ModelConfig(hf_config=qwen_config(), tokenizer_path=str(tmp_path / "tok")))
    )
    assert engine.hf_config.vocab_size == VOCAB


def test_model_config_needs_exactly_one_source() -> None:
    with pytest.raises(TrainConfigError, match="exactly one of path"):
        ModelConfig()
    with pytest.raises(TrainConfigError, match="exactly one of path"):
        ModelConfig(path="x", hf_config=qwen_config())
    with pytest.raises(
        TrainConfigError,
        match=r"must be a transformers PretrainedConfig or a mapping with a 'model_type' key, got dict without",
    ):
        ModelConfig(hf_config={"hidden_size": 8})
    with pytest.raises(TrainConfigError, match="must name an attention implementation"):
        ModelConfig(hf_config=qwen_config(), attn_implementation="")


@pytest.mark.parametrize("value_head", [False, True])
def test_config_model_does_not_touch_the_callers_random_state(value_head: bool) -> None:
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    FSDPEngine.from_config(engine_config(model=ModelConfig(hf_config=qwen_config(), value_head=value_head)))
    assert torch.equal(torch.rand(3), expected)


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    from _training_helpers import ppo_loss_fn

    batch = rollout_batch(4, seed=1)
    grads = []
    for checkpointing in (False, True):
        model = ModelConfig(hf_config=qwen_config(), gradient_checkpointing=checkpointing, init_seed=3)
        engine = FSDPEngine.from_config(engine_config(model=model))
        grads.append(engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec()))
    backbone = engine.network.backbone
    assert getattr(backbone, "is_activation_checkpointing", None) or backbone.is_gradient_checkpointing
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_model_without_decoder_layer_classes_cannot_be_sharded() -> None:
    with pytest.raises(TrainConfigError, match="declares no decoder-layer classes"):
        decoder_layers(torch.nn.Linear(2, 2))
