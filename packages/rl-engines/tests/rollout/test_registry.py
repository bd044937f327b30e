"""The rollout-engine registry: builders by name, the "hf" builder, and the errors of unknown names and keys."""

from __future__ import annotations

import pytest
from transformers import Qwen2Config

from rl_core import DuplicateNameError, UnknownNameError
from rl_engines.rollout import (
    ROLLOUT_ENGINES,
    HFEngine,
    InvalidRequestError,
    RolloutEngineSpec,
    build_rollout_engine,
    hf_engine_config,
    register_rollout_engine,
)


def _spec(**engine_kwargs) -> RolloutEngineSpec:
    hf_config = Qwen2Config(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        vocab_size=64, max_position_embeddings=32,
    )  # fmt: skip
    return RolloutEngineSpec(hf_config, dtype="float32", device="cpu", seed=5, engine_kwargs=engine_kwargs)


def test_only_the_engines_a_trainer_can_build_are_registered() -> None:
    assert sorted(ROLLOUT_ENGINES) == ["hf", "server", "vllm"]


def test_the_hf_builder_takes_the_spec_then_its_engine_kwargs() -> None:
    engine = build_rollout_engine("hf", _spec(max_batch_size=4, dtype="bfloat16"))
    try:
        assert isinstance(engine, HFEngine)
        assert (engine.config.dtype, engine.config.device, engine.config.seed) == ("bfloat16", "cpu", 5)
        assert engine.config.max_batch_size == 4
    finally:
        engine.shutdown()


def test_an_unknown_engine_kwarg_is_named() -> None:
    with pytest.raises(InvalidRequestError, match=r"engine_kwargs has a key HFEngineConfig does not take.*batch"):
        hf_engine_config(_spec(batch=4))


def test_an_unknown_engine_name_lists_the_known_ones() -> None:
    with pytest.raises(
        UnknownNameError, match=r"unknown rollout engine 'hff' \(did you mean 'hf'\?\); valid names: hf, server, vllm"
    ):
        build_rollout_engine("hff", _spec())


def test_a_name_registers_once() -> None:
    with pytest.raises(DuplicateNameError, match="rollout engine 'hf' is already registered"):
        register_rollout_engine("hf")(lambda spec: None)  # type: ignore[arg-type,return-value]
    assert sorted(ROLLOUT_ENGINES) == ["hf", "server", "vllm"]


def test_the_spec_keeps_a_read_only_copy_of_the_engine_kwargs() -> None:
    kwargs = {"max_batch_size": 4}
    spec = RolloutEngineSpec(None, dtype="float32", device="cpu", engine_kwargs=kwargs)
    kwargs["max_batch_size"] = 8
    assert spec.engine_kwargs == {"max_batch_size": 4}
    with pytest.raises(TypeError):
        spec.engine_kwargs["max_batch_size"] = 8  # type: ignore[index]
