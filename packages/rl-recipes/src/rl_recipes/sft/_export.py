"""Writing the warm-started model as a Hugging Face folder: weights, config, tokenizer and generation defaults."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol

import torch.distributed as dist

MODEL_DIR = "model"
"""Sub-folder of `output_dir` that holds the exported model."""
_STAGING_PREFIX = ".staging-"
_REPLACED_PREFIX = ".replaced-"


class HFExportable(Protocol):
    """What `export_model_folder` writes from: an `FSDPEngine`, or the actor role (rl_runtime.roles) owning one."""

    @property
    def rank(self) -> int:
        """This process's data-parallel rank (rank 0 writes)."""
        ...

    def export_hf(self, path: str | Path) -> Path:
        """Write the model's weights and config as a Hugging Face folder at `path` (a collective)."""
        ...


def _generation_config(folder: Path, tokenizer: Any) -> Any:
    """The folder's generation config (copied from a source model, if any) with the tokenizer's eos among its
    stop tokens and a pad token set, so generation stops where the warm start taught it to."""
    from transformers import GenerationConfig

    config = (
        GenerationConfig.from_pretrained(str(folder))
        if (folder / "generation_config.json").is_file()
        else GenerationConfig()
    )
    eos = config.eos_token_id
    eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if tokenizer.eos_token_id not in eos_ids:
        eos_ids.append(tokenizer.eos_token_id)
    config.eos_token_id = eos_ids[0] if len(eos_ids) == 1 else eos_ids
    if config.pad_token_id is None:
        config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if config.bos_token_id is None and tokenizer.bos_token_id is not None:
        config.bos_token_id = tokenizer.bos_token_id
    return config


def export_model_folder(engine: HFExportable, tokenizer: Any, path: str | Path) -> Path:
    """Write `path`: the engine's weights and config (`export_hf`), the tokenizer and a generation config.

    Every rank calls it (the export gathers shards); rank 0 writes. The folder is assembled under a
    temporary name and renamed into place, so a folder already at `path` stays whole until replaced.
    """
    final = Path(path)
    staging = final.parent / f"{_STAGING_PREFIX}{final.name}"
    engine.export_hf(staging)
    if engine.rank == 0:
        tokenizer.save_pretrained(str(staging))
        _generation_config(staging, tokenizer).save_pretrained(str(staging))
        replaced = final.parent / f"{_REPLACED_PREFIX}{final.name}"
        if replaced.exists():
            shutil.rmtree(replaced)
        if final.exists():
            final.rename(replaced)
        staging.rename(final)
        if replaced.exists():
            shutil.rmtree(replaced)
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    return final
