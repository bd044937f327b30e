"""The "vllm" rollout engine's builder: `VLLMEngine` on the policy's checkpoint, or on a fresh model of its config.

vLLM loads a checkpoint directory at start and accepts updates only of the tensors it holds; without a
`RolloutEngineSpec.model_path` the builder saves a fresh (random) model of the policy's config to a temporary
folder, which the trainer's first sync overwrites. `rollout.engine_kwargs` are `VLLMEngineConfig` fields.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import weakref

from rl_engines.rollout import InvalidRequestError, RolloutEngineSpec
from rl_engines.vllm._config import VLLMEngineConfig
from rl_engines.vllm._engine import VLLMEngine, import_vllm


def _fresh_checkpoint(spec: RolloutEngineSpec) -> str:
    from transformers import AutoModelForCausalLM

    folder = tempfile.mkdtemp(prefix="rl-vllm-model-")
    AutoModelForCausalLM.from_config(spec.hf_config).save_pretrained(folder, safe_serialization=True)
    return folder


def vllm_engine_config(spec: RolloutEngineSpec, model_path: str) -> VLLMEngineConfig:
    """`VLLMEngineConfig` of the spec's dtype and seed at `model_path`, then its `engine_kwargs` (which win)."""
    known = {field.name for field in dataclasses.fields(VLLMEngineConfig)}
    unknown = sorted(set(spec.engine_kwargs) - known)
    if unknown:
        raise InvalidRequestError(f"rollout engine_kwargs {unknown} are not VLLMEngineConfig fields: {sorted(known)}")
    settings = {"model_path": model_path, "dtype": spec.dtype, "seed": 0 if spec.seed is None else spec.seed}
    return VLLMEngineConfig(**{**settings, **spec.engine_kwargs})


def build_vllm_engine(spec: RolloutEngineSpec) -> VLLMEngine:
    """A `VLLMEngine` of `spec` (see the module doc); ImportError naming the pip install without vllm."""
    import_vllm()
    fresh = spec.model_path is None
    model_path = _fresh_checkpoint(spec) if spec.model_path is None else spec.model_path
    try:
        engine = VLLMEngine(vllm_engine_config(spec, model_path))
    except BaseException:
        if fresh:
            shutil.rmtree(model_path, ignore_errors=True)
        raise
    if fresh:
        weakref.finalize(engine, shutil.rmtree, model_path, True)
    return engine
