"""The model part of the engine's config: where the model comes from (a Hugging Face folder or a transformers
config) and how it is built."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import CONFIG_MAPPING, AutoConfig, PretrainedConfig
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from rl_core import nearest_name
from rl_engines.training._config_checks import check_bool, invalid
from rl_engines.training._errors import TrainConfigError

OPENVLA_MODEL_TYPE = "openvla"
"""`rl_engines.vla.OPENVLA_MODEL_TYPE`, repeated here so the config module needs no model code."""
EAGER_ATTENTION = "eager"
"""transformers' plain attention, the one implementation outside its attention registry."""
PAGED_PREFIX = "paged|"
"""transformers strips this prefix from an implementation (only "paged|eager" keeps it)."""
HF_MODEL_TYPE_KEY = "model_type"
"""The key of an `hf_config` mapping that picks the transformers config class (`AutoConfig.for_model`)."""


@dataclass(frozen=True)
class ModelConfig:
    """Where the model comes from and how it is built (exactly one of `path` and `hf_config`).

    `fast_forward` changes nothing for other model families, which run through transformers either way.
    `broadcast_from_rank0` is opt-in because it costs one transfer of the model: turn it on when host memory, not
    start-up time, is short (many ranks per node, large models).
    """

    path: str | None = None
    """A local Hugging Face model folder (config.json plus *.safetensors or pytorch_model*.bin)."""
    hf_config: Any = None
    """A transformers config to initialise a fresh model from with `init_seed`: a mapping (`model_type` plus the
    config's fields, as YAML writes it) or a `transformers.PretrainedConfig`."""
    tokenizer_path: str | None = None
    """Folder of the tokenizer to check the vocabulary against; null uses `path` when it holds tokenizer files
    (with `hf_config`, null skips the check)."""
    attn_implementation: str = "sdpa"
    """The transformers attention implementation ("sdpa", "eager", "flash_attention_2", ...)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward (less memory, about a third more compute)."""
    fast_forward: bool = True
    """Run a whole-on-each-rank Llama-family decoder (llama, qwen2, qwen3, mistral; SDPA, no activation
    checkpointing) through the engine's own functional forward: the same outputs, less overhead for small models."""
    value_head: bool = False
    """Add a `(hidden, 1)` value head (the critic) and drop the LM head's training."""
    init_seed: int = 0
    """Seed of the random initialisation from `hf_config` (identical on every rank)."""
    broadcast_from_rank0: bool = False
    """Sharded, only rank 0 reads the full weights and sends the others their shards (less host memory, one more
    transfer of the model); false builds the full model on every rank."""

    def __post_init__(self) -> None:
        if (self.path is None) == (self.hf_config is None):
            raise TrainConfigError(
                "ModelConfig needs exactly one of path (a local Hugging Face folder) and hf_config "
                f"(a transformers config); got path={self.path!r}, hf_config={type(self.hf_config).__name__}",
                field="",
                expected="exactly one of path (a Hugging Face model folder) and hf_config (a transformers config)",
                found={"path": self.path, "hf_config": None if self.hf_config is None else "set"},
                fix="set one and remove the other",
            )
        if self.hf_config is not None and not _is_hf_config(self.hf_config):
            found = type(self.hf_config).__name__
            if isinstance(self.hf_config, Mapping):
                found = f"{found} without a {HF_MODEL_TYPE_KEY!r} key"
            raise invalid(
                "ModelConfig",
                "hf_config",
                f"a transformers PretrainedConfig or a mapping with a {HF_MODEL_TYPE_KEY!r} key (e.g. qwen2)",
                self.hf_config,
                message=f"ModelConfig.hf_config must be a transformers PretrainedConfig or a mapping with a "
                f"{HF_MODEL_TYPE_KEY!r} key, got {found}",
            )
        if isinstance(self.hf_config, Mapping):
            hf_config_from_mapping(self.hf_config)  # refuses, now, a mapping the engine could not build
        if not self.attn_implementation:
            raise invalid(
                "ModelConfig",
                "attn_implementation",
                "an attention implementation such as 'sdpa'",
                self.attn_implementation,
                message="ModelConfig.attn_implementation must name an attention implementation, e.g. 'sdpa'",
            )
        check_attn_implementation(self.attn_implementation)
        for name in ("gradient_checkpointing", "fast_forward", "value_head", "broadcast_from_rank0"):
            check_bool("ModelConfig", name, getattr(self, name))
        if self.path is not None and _folder_model_type(self.path) == OPENVLA_MODEL_TYPE:
            check_openvla_settings(self)


def attention_implementations() -> list[str]:
    """The attention implementations transformers can build a model with: "eager" and the names in its attention
    registry (`ALL_ATTENTION_FUNCTIONS`: sdpa, flash_attention_2, flex_attention, ..., and any registered by
    `AttentionInterface.register`)."""
    return [EAGER_ATTENTION, *ALL_ATTENTION_FUNCTIONS.valid_keys()]


def check_attn_implementation(name: str) -> None:
    """Refuse an `attn_implementation` transformers has no attention function for, which it would refuse only when
    the engine builds the model. A Hub kernel ("org/repo", with a slash) is transformers' to fetch then; whether a
    known one runs here (flash_attention_2 needs its package) is also decided then."""
    known = attention_implementations()
    if "/" in name or name in known or name.removeprefix(PAGED_PREFIX) in known:
        return
    near = nearest_name(name, known)
    raise invalid(
        "ModelConfig",
        "attn_implementation",
        f"an attention implementation transformers knows ({', '.join(known)}) or a Hub kernel (org/repo)",
        name,
        f"did you mean {near!r}?" if near else "use sdpa (the default) or eager",
    )


def _folder_model_type(folder: str) -> str | None:
    """The `model_type` in `folder`'s config.json; None without one (the engine's folder checks say what is wrong)."""
    try:
        fields = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    return fields.get(HF_MODEL_TYPE_KEY) if isinstance(fields, dict) else None


def check_openvla_settings(config: ModelConfig) -> None:
    """Refuse the settings the OpenVLA-OFT path does not build: a value head, activation checkpointing, and the
    rank-0 broadcast (it needs a meta-device skeleton of the checkpoint's remote code)."""
    refused = (
        ("value_head", "SRPO/GRPO need no critic"),
        ("gradient_checkpointing", "not built for the OpenVLA-OFT path"),
        ("broadcast_from_rank0", "the checkpoint's remote code is not built on the meta device; every rank reads it"),
    )
    for name, reason in refused:
        if getattr(config, name):
            raise invalid(
                "ModelConfig",
                name,
                "false for an OpenVLA-OFT checkpoint (model_type openvla)",
                True,
                f"set model.{name}: false",
                message=f"ModelConfig.{name}=True is not built for an OpenVLA-OFT checkpoint ({reason}); set it to "
                "false",
            )


def _check_model_type(model_type: str) -> None:
    """Refuse a `model_type` transformers has no config class for, before any engine is built."""
    if model_type in CONFIG_MAPPING:
        return
    if model_type == OPENVLA_MODEL_TYPE:
        raise invalid(
            "ModelConfig",
            f"hf_config.{HF_MODEL_TYPE_KEY}",
            "a model type transformers builds from a config alone",
            model_type,
            "an OpenVLA-OFT model runs its checkpoint's own code: set model.path to the checkpoint folder instead",
        )
    near = nearest_name(model_type, list(CONFIG_MAPPING.keys()))
    raise invalid(
        "ModelConfig",
        f"hf_config.{HF_MODEL_TYPE_KEY}",
        "a model type transformers knows (AutoConfig.for_model: llama, qwen2, ...)",
        model_type,
        f"did you mean {near!r}?" if near else "check the model's config.json for its model_type",
    )


def hf_config_from_mapping(fields: Mapping[str, Any]) -> PretrainedConfig:
    """The transformers config `AutoConfig.for_model(model_type, **other_fields)` of an `hf_config` mapping.

    Raises:
        TrainConfigError: transformers knows no such `model_type`, or refuses the fields (its message is kept).
    """
    kwargs = copy.deepcopy(dict(fields))
    model_type = kwargs.pop(HF_MODEL_TYPE_KEY)
    _check_model_type(model_type)
    try:
        return AutoConfig.for_model(model_type, **kwargs)
    except Exception as error:  # transformers validates fields with several error types (ValueError, its own)
        detail = " ".join(str(error).split())
        raise invalid(
            "ModelConfig",
            "hf_config",
            f"fields transformers accepts for model_type {model_type!r}",
            fields,
            f"transformers says: {detail}",
            message=f"ModelConfig.hf_config does not build a transformers config: {detail}",
        ) from None


def _is_hf_config(value: object) -> bool:
    if isinstance(value, Mapping):
        return isinstance(value.get(HF_MODEL_TYPE_KEY), str)
    return hasattr(value, "to_dict")
