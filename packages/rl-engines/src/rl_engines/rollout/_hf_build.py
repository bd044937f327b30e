"""The "hf" rollout engine's builder: `HFEngine` on a fresh transformers model of the policy's config."""

from __future__ import annotations

from transformers import AutoModelForCausalLM

from rl_engines.rollout._errors import InvalidRequestError
from rl_engines.rollout._hf_config import HFEngineConfig
from rl_engines.rollout._hf_engine import HFEngine
from rl_engines.rollout._registry import RolloutEngineSpec, register_rollout_engine


def hf_engine_config(spec: RolloutEngineSpec) -> HFEngineConfig:
    """`HFEngineConfig` of the spec's dtype, device and seed, then its `engine_kwargs` (which take precedence).

    Raises:
        InvalidRequestError: a key of `engine_kwargs` is not an `HFEngineConfig` field, or a value is invalid.
    """
    settings = {"dtype": spec.dtype, "device": spec.device, "seed": spec.seed}
    try:
        return HFEngineConfig(**{**settings, **spec.engine_kwargs})
    except TypeError as error:
        raise InvalidRequestError(f"rollout engine_kwargs has a key HFEngineConfig does not take: {error}") from None


@register_rollout_engine("hf")
def build_hf_engine(spec: RolloutEngineSpec) -> HFEngine:
    """An in-process `HFEngine` on a fresh (randomly initialised) model of `spec.hf_config`."""
    config = hf_engine_config(spec)
    return HFEngine(AutoModelForCausalLM.from_config(spec.hf_config), config)
