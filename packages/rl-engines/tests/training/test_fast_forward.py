"""`FastForward` gives transformers' outputs and gradients for the families it takes, in the padded and shared-prefix
layouts and with either attention kernel; the engine takes it only where the model is whole and runs SDPA."""

from __future__ import annotations

import pytest
import torch
from _shared_prefix_workers import grouped_batch
from _training_helpers import (
    VOCAB,
    engine_config,
    ppo_loss_fn,
    reference_gradients,
    reference_model,
    reference_outputs,
)
from transformers import GemmaConfig, LlamaConfig, MistralConfig, PretrainedConfig, Qwen2Config, Qwen3Config

from rl_engines.training import ForwardSpec, FSDPEngine, MicroBatchConfig, ModelConfig, TrainConfigError, _fast_forward
from rl_engines.training._fast_forward import FastForward
from rl_engines.training._packing import InputLayout

TOLERANCE = 1e-5
GROUPS, SAMPLES = 3, 4
_SIZES = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
SUPPORTED = {
    "llama-tied": lambda: LlamaConfig(**_SIZES, tie_word_embeddings=True),
    "llama-biases": lambda: LlamaConfig(**_SIZES, attention_bias=True, mlp_bias=True),
    "qwen2": lambda: Qwen2Config(**_SIZES),
    "qwen3": lambda: Qwen3Config(**_SIZES, head_dim=16),
    "mistral": lambda: MistralConfig(**_SIZES, sliding_window=None),
}
KERNELS = {"matmul": _fast_forward.MATMUL_ATTENTION_MAX_KEYS, "sdpa": 0}


def _engine(hf_config: PretrainedConfig, *, fast: bool = True, share: bool = True, **model: object) -> FSDPEngine:
    settings = ModelConfig(hf_config=hf_config, init_seed=3, value_head=True, fast_forward=fast, **model)
    micro_batch = MicroBatchConfig(max_tokens_per_micro_batch=1024, packing=False, share_prefixes=share)
    return FSDPEngine.from_config(engine_config(model=settings, micro_batch=micro_batch))


def _perturb(engines: list[FSDPEngine]) -> None:
    """The same random biases and norm gains in every engine, so that each term of the layer shows."""
    generator = torch.Generator().manual_seed(7)
    parameters = [dict(engine.network.named_parameters()) for engine in engines]
    with torch.no_grad():
        for name, parameter in parameters[0].items():
            if name.endswith(("bias", "norm.weight", "layernorm.weight")):
                noise = torch.randn(parameter.shape, generator=generator) * 0.5
                for named in parameters:
                    named[name].add_(noise)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("share", [True, False], ids=["shared-prefix", "padded"])
@pytest.mark.parametrize("family", sorted(SUPPORTED))
def test_outputs_and_gradients_equal_transformers(
    family: str, share: bool, kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_fast_forward, "MATMUL_ATTENTION_MAX_KEYS", KERNELS[kernel])
    fast, plain = _engine(SUPPORTED[family](), share=share), _engine(SUPPORTED[family](), fast=False, share=share)
    assert fast.network.fast_forward is not None and plain.network.fast_forward is None
    layout = InputLayout.SHARED_PREFIX if share else InputLayout.PADDED
    assert fast.input_layout is layout and plain.input_layout is layout
    _perturb([fast, plain])
    batch = grouped_batch(GROUPS, SAMPLES, seed=11)
    spec = ForwardSpec(entropy=True, values=True)
    got, want = fast.forward(batch, spec), plain.forward(batch, spec)
    for name in ("log_probs", "entropy", "values"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=TOLERANCE, rtol=0)
    got_grads = fast.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    want_grads = plain.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        assert torch.isfinite(got_grads[name]).all(), name
        torch.testing.assert_close(got_grads[name], grad, atol=TOLERANCE, rtol=TOLERANCE)


def test_gradients_equal_one_plain_forward_per_sequence() -> None:
    """Against an independent reference: one unpadded transformers forward per sequence."""
    config = SUPPORTED["llama-tied"]()
    engine = FSDPEngine.from_config(
        engine_config(config, micro_batch=MicroBatchConfig(max_tokens_per_micro_batch=1024, packing=False))
    )
    assert engine.network.fast_forward is not None
    batch = grouped_batch(GROUPS, SAMPLES, seed=12)
    with torch.no_grad():
        log_probs, _ = reference_outputs(reference_model(config), batch)
    torch.testing.assert_close(engine.forward(batch, ForwardSpec()).log_probs, log_probs, atol=TOLERANCE, rtol=0)
    got = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    for name, grad in reference_gradients(batch, config).items():
        torch.testing.assert_close(got[name], grad, atol=TOLERANCE, rtol=TOLERANCE)


def test_parameters_replaced_after_construction_are_the_ones_used() -> None:
    engine = _engine(SUPPORTED["qwen2"]())
    layer = engine.network.backbone.model.layers[1]
    replacement = torch.nn.Parameter(layer.mlp.down_proj.weight.detach() * 3.0)
    batch = grouped_batch(GROUPS, SAMPLES, seed=13)
    before = engine.forward(batch, ForwardSpec()).log_probs
    layer.mlp.down_proj.weight = replacement
    after = engine.forward(batch, ForwardSpec()).log_probs
    reference = _engine(SUPPORTED["qwen2"](), fast=False)
    reference.network.backbone.model.layers[1].mlp.down_proj.weight = torch.nn.Parameter(replacement.detach().clone())
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, reference.forward(batch, ForwardSpec()).log_probs, atol=TOLERANCE, rtol=0)


UNSUPPORTED = {
    "gemma": (lambda: GemmaConfig(**_SIZES, head_dim=8), "model type"),
    "sliding window": (lambda: MistralConfig(**_SIZES, sliding_window=8), "sliding window"),
    "gelu MLP": (lambda: LlamaConfig(**_SIZES, hidden_act="gelu"), "activation"),
    "attention dropout": (lambda: LlamaConfig(**_SIZES, attention_dropout=0.1), "attention dropout"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_other_models_train_through_transformers(case: str, caplog: pytest.LogCaptureFixture) -> None:
    build, reason = UNSUPPORTED[case]
    with caplog.at_level("INFO", logger="rl_engines.training._fast_forward"):
        engine = _engine(build())
    assert engine.network.fast_forward is None
    assert reason in caplog.text


def test_the_engine_takes_it_only_where_the_forward_is_transformers_sdpa_on_whole_parameters() -> None:
    config = SUPPORTED["llama-tied"]
    assert isinstance(_engine(config()).network.fast_forward, FastForward)
    assert _engine(config(), fast=False).network.fast_forward is None
    assert _engine(config(), attn_implementation="eager").network.fast_forward is None
    assert _engine(config(), gradient_checkpointing=True).network.fast_forward is None
    with pytest.raises(TrainConfigError, match="fast_forward must be True or False"):
        ModelConfig(hf_config=config(), fast_forward="yes")
