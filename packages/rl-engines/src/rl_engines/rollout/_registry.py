"""Rollout engines by name: the builders a trainer can call, in a plain dict filled by a decorator.

    @register_rollout_engine("my_engine")
    def build_my_engine(spec: RolloutEngineSpec) -> InferenceEngine:
        return MyEngine.from_model_config(spec.hf_config, dtype=spec.dtype, **spec.engine_kwargs)

A run config accepts exactly the names in `ROLLOUT_ENGINES`, and the trainer builds its engine with
`build_rollout_engine(name, spec)`; an engine that runs standalone but has no builder here is not one a
trainer can run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rl_core import lookup, registrar
from rl_engines.rollout._protocol import InferenceEngine


@dataclass(frozen=True)
class RolloutEngineSpec:
    """What a trainer decides about the rollout engine it builds; the engine's own settings ride in
    `engine_kwargs`."""

    hf_config: Any
    """The transformers config of the policy; the engine starts from a fresh model of it, whose weights are the
    trainer's only after the first weight sync."""
    dtype: str
    """Dtype of the engine's weights ("float32", "bfloat16", "float16"): the policy's compute dtype."""
    device: str
    """"cpu" or "cuda" (the current device of the process)."""
    seed: int | None = None
    """Seed of the engine's sampling generator; None draws one."""
    engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """The engine's own settings (a run config's `rollout.engine_kwargs`); they take precedence over the fields
    above where the engine's config has the same name."""
    servers: tuple[str, ...] = ()
    """Addresses (`http://host:port`) of running rollout servers this engine should use (the "server" engine);
    empty: an engine that needs a server starts its own."""
    model_path: str | None = None
    """A local checkpoint of the policy, for engines that must load one at start (vLLM); None: the engine starts
    from a fresh model of `hf_config`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_kwargs", MappingProxyType(dict(self.engine_kwargs)))
        object.__setattr__(self, "servers", tuple(self.servers))


RolloutEngineBuilder = Callable[[RolloutEngineSpec], InferenceEngine]
"""Builds a ready rollout engine (awake, weights loaded) from a spec."""

ROLLOUT_ENGINES: dict[str, RolloutEngineBuilder] = {}
"""Rollout-engine builders by name: the engines a trainer can build."""

register_rollout_engine = registrar(ROLLOUT_ENGINES, "rollout engine")
"""Decorator adding a builder to `ROLLOUT_ENGINES` under a name."""


def build_rollout_engine(name: str, spec: RolloutEngineSpec) -> InferenceEngine:
    """The rollout engine registered as `name`, built from `spec`; an unknown name raises listing the known ones."""
    return lookup(ROLLOUT_ENGINES, name, "rollout engine")(spec)
