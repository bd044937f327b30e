"""SGLangEngine: import guard and config checks everywhere; generation against HF only where sglang and CUDA exist."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from rl_engines.rollout import GenerateRequest, InvalidRequestError, SamplingParams
from rl_engines.sglang import SGLangEngine, SGLangEngineConfig
from rl_engines.testing import ConformanceModels, reference_greedy

HAS_SGLANG = importlib.util.find_spec("sglang") is not None


def test_config_rejects_bad_values() -> None:
    with pytest.raises(InvalidRequestError, match="tp_size must be >= 1"):
        SGLangEngineConfig(model_path="/m", tp_size=0)
    with pytest.raises(InvalidRequestError, match="model_path"):
        SGLangEngineConfig(model_path="")


@pytest.mark.skipif(HAS_SGLANG, reason="sglang is installed, so the import guard does not fire")
def test_building_without_sglang_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"rl-engines\[sglang\]"):
        SGLangEngine(SGLangEngineConfig(model_path="/m"))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_SGLANG, reason="sglang is not installed (it needs CUDA; see notes/rollout-engines.md)")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="SGLang needs a CUDA device")
def test_greedy_matches_hf_reference(tmp_path) -> None:
    models = ConformanceModels.create(tmp_path)
    engine = SGLangEngine(SGLangEngineConfig(model_path=str(models.v1_dir), dtype="float32", initial_version=1))
    try:
        prompts = models.prompts(3)
        sampling = SamplingParams(max_new_tokens=8, temperature=0.0, ignore_eos=True)
        outputs = engine.generate([GenerateRequest(f"g{i}", tuple(p), sampling) for i, p in enumerate(prompts)])
        for output, prompt in zip(outputs, prompts, strict=True):
            assert list(output.output_ids) == reference_greedy(models.v1, prompt, 8)[0]
            assert output.weight_version == 1
    finally:
        engine.shutdown()
