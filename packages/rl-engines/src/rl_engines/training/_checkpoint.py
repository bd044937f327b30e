"""Resumable checkpoints with torch.distributed.checkpoint: sharded model and optimizer state, the schedule,
the step count and every rank's RNG state, published atomically.

Layout of a checkpoint folder: DCP's shard files and `.metadata`, plus `engine.json` (world size, model
fingerprint, step, schedule state). A checkpoint only loads into an engine with the same world size (the
RNG streams are per rank) and the same model; anything else is refused naming the differing setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.optim.lr_scheduler import LRScheduler

from rl_engines.training._atomic import prepare_staging, publish, staging_path
from rl_engines.training._errors import CheckpointError, CheckpointMismatchError
from rl_engines.training._fsdp import ProcessLayout, barrier

logger = logging.getLogger(__name__)

ENGINE_FILE = "engine.json"
FORMAT_VERSION = 1
_ARCHITECTURE_FIELDS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
)


def model_fingerprint(network: torch.nn.Module, hf_config: Any) -> dict[str, Any]:
    """The architecture fields of `hf_config` and a digest of every parameter's name and full shape."""
    text_config = hf_config.get_text_config()
    fingerprint: dict[str, Any] = {name: getattr(text_config, name, None) for name in _ARCHITECTURE_FIELDS}
    shapes = ";".join(f"{name}:{tuple(p.shape)}" for name, p in network.named_parameters())
    fingerprint["parameters"] = hashlib.sha256(shapes.encode()).hexdigest()[:16]
    return fingerprint


@contextlib.contextmanager
def _single_process_quiet() -> Iterator[None]:
    """Silence DCP's warning that it runs without a process group: one unsharded process is a supported layout."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
        yield


def _rng_key(rank: int) -> str:
    return f"rng_rank{rank}"


def _rng_state(layout: ProcessLayout) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if layout.device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(layout.device)
    return state


def _set_rng_state(state: dict[str, torch.Tensor], layout: ProcessLayout) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], layout.device)


def _app_state(
    network: torch.nn.Module, optimizer: torch.optim.Optimizer | None, layout: ProcessLayout
) -> dict[str, Any]:
    state: dict[str, Any] = {"model": get_model_state_dict(network), _rng_key(layout.rank): _rng_state(layout)}
    if optimizer is not None:
        state["optimizer"] = get_optimizer_state_dict(network, optimizer)
    return state


def save_checkpoint(
    path: str | Path,
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: LRScheduler | None,
    global_step: int,
    hf_config: Any,
    layout: ProcessLayout,
) -> Path:
    """Write a checkpoint to `path` atomically (every rank calls it); an existing one there is replaced only
    once the new one is complete."""
    final = Path(path)
    staging = prepare_staging(final) if layout.rank == 0 else None
    barrier(layout)
    with _single_process_quiet():
        dcp.save(
            _app_state(network, optimizer, layout), checkpoint_id=str(staging_path(final)), no_dist=not layout.sharded
        )
    if staging is not None:
        meta = {
            "format_version": FORMAT_VERSION,
            "world_size": layout.world_size,
            "model": model_fingerprint(network, hf_config),
            "global_step": global_step,
            "optimizer": optimizer is not None,
            "scheduler": None if scheduler is None else scheduler.state_dict(),
        }
        (staging / ENGINE_FILE).write_text(json.dumps(meta, indent=2))
        publish(final)
        logger.info("saved checkpoint of step %d to %s", global_step, final)
    barrier(layout)
    return final


def _read_meta(path: Path) -> dict[str, Any]:
    meta_file = path / ENGINE_FILE
    if not meta_file.is_file():
        raise CheckpointError(
            f"{str(path)!r} is not a checkpoint written by save_checkpoint (no {ENGINE_FILE}); "
            "pass the folder save_checkpoint was given"
        )
    meta = json.loads(meta_file.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{meta_file} has format_version {meta.get('format_version')}, expected {FORMAT_VERSION}")
    return meta


def check_compatible(
    meta: dict[str, Any], network: torch.nn.Module, hf_config: Any, has_optimizer: bool, layout: ProcessLayout
) -> None:
    """Raise `CheckpointMismatchError` naming the first setting where the checkpoint and the engine differ."""
    if meta["world_size"] != layout.world_size:
        raise CheckpointMismatchError(
            f"checkpoint was written with world_size={meta['world_size']} but this engine runs world_size="
            f"{layout.world_size}; resume with the same number of data-parallel ranks (per-rank RNG streams "
            "cannot be remapped), or export_hf and start a new run from the exported model"
        )
    engine_model = model_fingerprint(network, hf_config)
    for field, saved in meta["model"].items():
        if engine_model.get(field) != saved:
            raise CheckpointMismatchError(
                f"checkpoint model has {field}={saved!r} but this engine's model has {field}="
                f"{engine_model.get(field)!r}; load it into an engine built with the same ModelConfig"
            )
    if meta["optimizer"] != has_optimizer:
        raise CheckpointMismatchError(
            f"checkpoint {'has' if meta['optimizer'] else 'has no'} optimizer state but the engine "
            f"{'has' if has_optimizer else 'has no'} optimizer (TrainEngineConfig.optimizer); build them alike"
        )


def load_checkpoint(
    path: str | Path,
    network: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: LRScheduler | None,
    hf_config: Any,
    layout: ProcessLayout,
) -> int:
    """Restore model, optimizer, schedule and this rank's RNG from `path`; return the saved step count."""
    folder = Path(path)
    meta = _read_meta(folder)
    check_compatible(meta, network, hf_config, optimizer is not None, layout)
    state = _app_state(network, optimizer, layout)
    with _single_process_quiet():
        dcp.load(state, checkpoint_id=str(folder), no_dist=not layout.sharded)
    set_model_state_dict(network, state["model"])
    if optimizer is not None:
        set_optimizer_state_dict(network, optimizer, state["optimizer"])
    if scheduler is not None and meta["scheduler"] is not None:
        scheduler.load_state_dict(meta["scheduler"])
    _set_rng_state(state[_rng_key(layout.rank)], layout)
    logger.info("loaded checkpoint of step %d from %s", meta["global_step"], folder)
    return int(meta["global_step"])
