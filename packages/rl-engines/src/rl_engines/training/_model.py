"""Building the Hugging Face causal LM from a local folder or a transformers config, with the input checks."""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from rl_engines.training._config_model import ModelConfig, hf_config_from_mapping
from rl_engines.training._errors import ModelSourceError

logger = logging.getLogger(__name__)

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
"""File names that hold weights in a Hugging Face folder (single or sharded)."""

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
"""Any one of these marks a folder as holding a tokenizer."""


def check_model_folder(path: str) -> Path:
    """Return `path` as a Path after checking it is a folder with a config.json and weight files."""
    folder = Path(path)
    if not folder.is_dir():
        raise ModelSourceError(f"ModelConfig.path={path!r} is not an existing folder; point it at a local model folder")
    if not (folder / "config.json").is_file():
        raise ModelSourceError(f"ModelConfig.path={path!r} has no config.json; is it a Hugging Face model folder?")
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        found = sorted(p.name for p in folder.iterdir())[:10]
        raise ModelSourceError(
            f"ModelConfig.path={path!r} holds no weights ({' or '.join(WEIGHT_PATTERNS)}); found {found}. "
            "Export the weights there, or use ModelConfig(hf_config=...) for a randomly initialised model"
        )
    return folder


def vocab_size(hf_config: Any) -> int:
    """The model's vocabulary size (the text config's, for multimodal configs)."""
    text_config = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    return int(text_config.vocab_size)


def _tokenizer_folder(config: ModelConfig) -> Path | None:
    if config.tokenizer_path is not None:
        folder = Path(config.tokenizer_path)
        if not folder.is_dir():
            raise ModelSourceError(f"ModelConfig.tokenizer_path={config.tokenizer_path!r} is not an existing folder")
        return folder
    if config.path is not None and any((Path(config.path) / name).is_file() for name in TOKENIZER_FILES):
        return Path(config.path)
    return None


def check_vocabulary(config: ModelConfig, hf_config: Any) -> None:
    """Raise `ModelSourceError` when the tokenizer has ids the model's embedding cannot hold."""
    folder = _tokenizer_folder(config)
    if folder is None:
        return
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model_vocab, tokenizer_vocab = vocab_size(hf_config), len(tokenizer)
    # Models often pad their embedding beyond the tokenizer (multiples of 64/128); the reverse breaks lookups.
    if tokenizer_vocab > model_vocab:
        raise ModelSourceError(
            f"tokenizer at {str(folder)!r} has {tokenizer_vocab} tokens but the model's vocab_size is {model_vocab}; "
            "ModelConfig.tokenizer_path must name the tokenizer the model was trained with"
        )


def load_hf_config(config: ModelConfig) -> Any:
    """The transformers config of the model `config` describes (a private copy): read from `path`, built from an
    `hf_config` mapping (`AutoConfig.for_model(model_type, **fields)`), or a copy of a given `PretrainedConfig`.

    Raises:
        ModelSourceError: the folder is not a model folder.
    """
    if config.path is not None:
        folder = check_model_folder(config.path)
        return AutoConfig.from_pretrained(str(folder), local_files_only=True)
    if isinstance(config.hf_config, Mapping):
        return hf_config_from_mapping(config.hf_config)
    return copy.deepcopy(config.hf_config)


def _enable_activation_checkpointing(model: PreTrainedModel) -> None:
    """Recompute each decoder layer in backward (non-reentrant: the variant that composes with FSDP2)."""
    # transformers 5 renamed gradient_checkpointing_enable (now a deprecated alias) to activation_checkpointing_enable.
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def build_causal_lm(config: ModelConfig, dtype: torch.dtype, *, meta: bool = False) -> PreTrainedModel:
    """The causal LM on the CPU in `dtype`, with the same weights on every rank; with `meta`, its skeleton
    on the meta device (no storage, nothing read), after the same checks of the folder and tokenizer.

    From a folder the weights are read; from a config they are initialised under `config.init_seed`
    without touching the caller's random state.
    """
    hf_config = load_hf_config(config)
    check_vocabulary(config, hf_config)
    kwargs = {"dtype": dtype, "attn_implementation": config.attn_implementation}
    if meta:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config, **kwargs)
    elif config.path is not None:
        model = AutoModelForCausalLM.from_pretrained(config.path, local_files_only=True, **kwargs)
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.init_seed)
            model = AutoModelForCausalLM.from_config(hf_config, **kwargs)
    if config.gradient_checkpointing:
        _enable_activation_checkpointing(model)
    logger.info(
        "built %s with %d parameters%s",
        type(model).__name__,
        sum(p.numel() for p in model.parameters()),
        " on the meta device" if meta else "",
    )
    return model
