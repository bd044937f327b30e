"""Where the warm start's model, tokenizer and data come from: the embedded default or the configured files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch.distributed as dist

from rl_engines.training import ModelConfig
from rl_recipes.embedded import (
    HELDOUT_FILE,
    TRAIN_FILE,
    build_embedded_tokenizer,
    embedded_model_config,
    write_default_dataset,
)
from rl_recipes.sft._config import SFTConfig
from rl_recipes.sft._errors import SFTError
from rl_recipes.tasks import load_tokenizer

DATA_DIR = "data"
"""Sub-folder of `output_dir` the embedded dataset is written to."""


def resolve_tokenizer(config: SFTConfig) -> Any:
    """The tokenizer `config` names, checked to have an eos token (SFT ends every response with it)."""
    if config.tokenizer is not None:
        folder = Path(config.tokenizer)
        if not folder.is_dir():
            raise SFTError(
                f"SFTConfig.tokenizer={config.tokenizer!r} is not an existing folder; point it at a tokenizer"
            )
        tokenizer = load_tokenizer(folder)
    elif config.uses_embedded_model:
        tokenizer = build_embedded_tokenizer()
    else:
        tokenizer = load_tokenizer(check_model_folder(config))
    if tokenizer.eos_token_id is None:
        raise SFTError(
            f"the tokenizer of SFTConfig.tokenizer={config.tokenizer!r} / model={config.model!r} has no eos token; "
            "every response ends with eos so generation can stop: use a tokenizer that defines one"
        )
    return tokenizer


def check_model_folder(config: SFTConfig) -> Path:
    """`config.model` as a folder, after checking it looks like a Hugging Face model folder."""
    folder = Path(config.model)
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise SFTError(
            f"SFTConfig.model={config.model!r} is neither 'embedded' nor a Hugging Face model folder with a "
            "config.json; give 'embedded' or a local model folder"
        )
    return folder


def model_source(config: SFTConfig, tokenizer: Any) -> ModelConfig:
    """The training engine's model source: the embedded config sized to `tokenizer`, or the model folder."""
    if config.uses_embedded_model:
        return ModelConfig(hf_config=embedded_model_config(tokenizer), init_seed=config.seed)
    return ModelConfig(path=str(check_model_folder(config)), tokenizer_path=config.tokenizer)


def data_files(config: SFTConfig) -> tuple[Path, Path | None]:
    """(train, held-out or None): the configured files, or the embedded dataset written under `output_dir`.

    The embedded dataset is written by rank 0 only; the other ranks wait for it.
    """
    if config.train_file is not None:
        return Path(config.train_file), Path(config.heldout_file) if config.heldout_file is not None else None
    folder = Path(config.output_dir) / DATA_DIR
    distributed = dist.is_available() and dist.is_initialized()
    if not distributed or dist.get_rank() == 0:
        write_default_dataset(folder)
    if distributed:
        dist.barrier()
    heldout = Path(config.heldout_file) if config.heldout_file is not None else folder / HELDOUT_FILE
    return folder / TRAIN_FILE, heldout
