"""Bucketed weight export and `export_hf` in one process (the 2-process cases are in test_fsdp.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _training_helpers import (
    engine_config,
    llama_config,
    ppo_loss_fn,
    qwen_config,
    reference_model,
    reference_outputs,
    rollout_batch,
    save_tokenizer,
)
from transformers import AutoModelForCausalLM

from rl_engines.training import ForwardSpec, FSDPEngine, ModelConfig, TrainConfigError


def _trained_engine(hf_config) -> FSDPEngine:
    engine = FSDPEngine.from_config(engine_config(hf_config))
    batch = rollout_batch(4, seed=1)
    engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    return engine


@pytest.mark.parametrize("make_config", [qwen_config, llama_config], ids=["qwen2", "llama-tied"])
def test_buckets_hold_every_hf_tensor_once_under_the_limit(make_config) -> None:
    engine = FSDPEngine.from_config(engine_config(make_config()))
    limit = 6000
    buckets = list(engine.export_weights(limit))
    expected = reference_model(make_config()).state_dict()
    if make_config().tie_word_embeddings:
        expected.pop("lm_head.weight")  # tied: saved once, as the embedding (what save_pretrained writes too)
    names = [name for bucket in buckets for name, _ in bucket]
    assert len(names) == len(set(names))
    assert set(names) == set(expected)
    for bucket in buckets:
        assert sum(t.numel() * t.element_size() for _, t in bucket) <= limit or len(bucket) == 1
    assert any(len(bucket) > 1 for bucket in buckets)
    for name, tensor in (pair for bucket in buckets for pair in bucket):
        assert torch.equal(tensor, expected[name]), name


def test_buckets_cast_to_the_requested_dtype() -> None:
    engine = FSDPEngine.from_config(engine_config())
    tensors = [t for bucket in engine.export_weights(1 << 20, dtype=torch.bfloat16) for _, t in bucket]
    assert {t.dtype for t in tensors} == {torch.bfloat16}


@pytest.mark.parametrize("size", [0, -1, 1.5])
def test_bucket_size_must_be_positive(size) -> None:
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(TrainConfigError, match="bucket_bytes must be an int > 0"):
        next(engine.export_weights(size))


@pytest.mark.parametrize("make_config", [qwen_config, llama_config], ids=["qwen2", "llama-tied"])
def test_export_hf_reloads_with_the_same_log_probs(tmp_path: Path, make_config) -> None:
    engine = _trained_engine(make_config())
    path = engine.export_hf(tmp_path / "hf")
    assert (path / "model.safetensors").is_file() and (path / "config.json").is_file()
    reloaded = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    batch = rollout_batch(5, seed=2)
    with torch.no_grad():
        expected, _ = reference_outputs(reloaded, batch)
    torch.testing.assert_close(engine.forward(batch, ForwardSpec()).log_probs, expected, atol=1e-5, rtol=0)


def test_export_hf_shards_with_an_index_and_copies_the_tokenizer(tmp_path: Path) -> None:
    source = tmp_path / "source"
    reference_model().save_pretrained(str(source))
    save_tokenizer(source, 128)
    engine = FSDPEngine.from_config(engine_config(model=ModelConfig(path=str(source))))
    path = engine.export_hf(tmp_path / "hf", dtype=torch.bfloat16, shard_bytes=20_000)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and all((path / shard).is_file() for shard in shards)
    assert (path / "tokenizer.json").is_file()
    assert json.loads((path / "config.json").read_text())["dtype"] == "bfloat16"
    reloaded = AutoModelForCausalLM.from_pretrained(path)
    assert next(reloaded.parameters()).dtype == torch.bfloat16
    original = reference_model().state_dict()
    for name, tensor in reloaded.state_dict().items():
        assert torch.equal(tensor, original[name].to(torch.bfloat16)), name


def test_export_hf_replaces_an_earlier_export(tmp_path: Path) -> None:
    engine = FSDPEngine.from_config(engine_config())
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "stale.txt").write_text("old")
    engine.export_hf(tmp_path / "hf")
    assert not (tmp_path / "hf" / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]
