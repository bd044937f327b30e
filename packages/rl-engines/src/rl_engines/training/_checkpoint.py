"""Resumable checkpoints with torch.distributed.checkpoint: sharded model and optimizer state, the schedule,
the step count and every rank's RNG state, published atomically.

Layout of a checkpoint folder: DCP's shard files and `.metadata`, plus `engine.json` (world size, model
fingerprint and parameter shapes, step, schedule state). A checkpoint loads into an engine of the same model
(the same parameter names and full shapes; anything else is refused naming the first difference) at any
world size: DCP reshards model and optimizer state to the loading layout.

RNG states are per rank and cannot be resharded. Rank `r` of an engine loading a checkpoint written by
`saved_world_size` ranks restores the state saved by rank `r % saved_world_size`: at the same world size
every rank gets its own stream back (an exact resume); a smaller world drops the streams of the missing
ranks; a larger one gives several ranks the same stream (their dropout masks repeat across ranks). A
warning is logged whenever the sizes differ.
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
from torch.distributed.checkpoint.api import CheckpointException
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


def parameter_shapes(network: torch.nn.Module) -> dict[str, list[int]]:
    """Every parameter's name and full (unsharded) shape, the same at any world size."""
    return {name: list(p.shape) for name, p in network.named_parameters()}


def _check_parameter_shapes(saved: dict[str, list[int]], engine: dict[str, list[int]]) -> None:
    """Raise `CheckpointMismatchError` naming the first parameter that is missing, extra or of another shape."""
    fix = "load it into an engine built with the same ModelConfig (value_head included)"
    for name, shape in saved.items():
        if name not in engine:
            raise CheckpointMismatchError(
                f"checkpoint has parameter {name!r} of shape {tuple(shape)} that this engine's model lacks; {fix}"
            )
        if engine[name] != shape:
            raise CheckpointMismatchError(
                f"checkpoint parameter {name!r} has shape {tuple(shape)} but this engine's has "
                f"{tuple(engine[name])}; {fix}"
            )
    extra = [name for name in engine if name not in saved]
    if extra:
        raise CheckpointMismatchError(
            f"this engine's model has parameter {extra[0]!r} that the checkpoint lacks ({len(extra)} in all); {fix}"
        )


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


def rng_source_rank(rank: int, saved_world_size: int) -> int:
    """The saved rank whose RNG state rank `rank` restores (see the module docstring)."""
    return rank % saved_world_size


def _app_state(
    network: torch.nn.Module, optimizer: torch.optim.Optimizer | None, layout: ProcessLayout, rng_rank: int
) -> dict[str, Any]:
    state: dict[str, Any] = {"model": get_model_state_dict(network), _rng_key(rng_rank): _rng_state(layout)}
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
        # A public API that torch does not re-export explicitly.
        dcp.save(  # pyright: ignore[reportPrivateImportUsage]
            _app_state(network, optimizer, layout, layout.rank),
            checkpoint_id=str(staging_path(final)),
            no_dist=not layout.distributed,
        )
    if staging is not None:
        meta = {
            "format_version": FORMAT_VERSION,
            "world_size": layout.world_size,
            "model": model_fingerprint(network, hf_config),
            "parameter_shapes": parameter_shapes(network),
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
    try:
        meta = json.loads(meta_file.read_text())
    except ValueError as error:
        raise CheckpointError(f"{meta_file} is not valid JSON ({error}); the checkpoint is damaged") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{meta_file} has format_version {meta.get('format_version')}, expected {FORMAT_VERSION}")
    return meta


def check_compatible(meta: dict[str, Any], network: torch.nn.Module, hf_config: Any, has_optimizer: bool) -> None:
    """Raise `CheckpointMismatchError` naming the first setting where the checkpoint and the engine differ
    (the world size may differ: the state is resharded)."""
    engine_model = model_fingerprint(network, hf_config)
    for field, saved in meta["model"].items():
        if field != "parameters" and engine_model.get(field) != saved:
            raise CheckpointMismatchError(
                f"checkpoint model has {field}={saved!r} but this engine's model has {field}="
                f"{engine_model.get(field)!r}; load it into an engine built with the same ModelConfig"
            )
    if "parameter_shapes" in meta:
        _check_parameter_shapes(meta["parameter_shapes"], parameter_shapes(network))
    elif meta["model"]["parameters"] != engine_model["parameters"]:  # written before the shapes were stored
        raise CheckpointMismatchError(
            f"checkpoint model's parameter names and shapes (digest {meta['model']['parameters']}) differ from "
            f"this engine's (digest {engine_model['parameters']}); load it into an engine built with the same "
            "ModelConfig"
        )
    if meta["optimizer"] != has_optimizer:
        raise CheckpointMismatchError(
            f"checkpoint {'has' if meta['optimizer'] else 'has no'} optimizer state but the engine "
            f"{'has' if has_optimizer else 'has no'} optimizer (TrainEngineConfig.optimizer); build them alike"
        )


def _load_failure(error: BaseException) -> str:
    """What went wrong in a failed DCP load, without the per-rank tracebacks DCP folds into its message."""
    if isinstance(error, CheckpointException):
        return "; ".join(f"rank {rank}: {failure!r}" for rank, failure in sorted(error.failures.items()))
    return repr(error)


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
    check_compatible(meta, network, hf_config, optimizer is not None)
    saved_world_size = int(meta["world_size"])
    rng_rank = rng_source_rank(layout.rank, saved_world_size)
    if saved_world_size != layout.world_size:
        logger.warning(
            "checkpoint %s was written by %d ranks and loads into %d: model and optimizer are resharded; rank %d "
            "restores the RNG state of saved rank %d, so random streams (dropout) do not continue as they would "
            "have at world size %d",
            folder,
            saved_world_size,
            layout.world_size,
            layout.rank,
            rng_rank,
            saved_world_size,
        )
    state = _app_state(network, optimizer, layout, rng_rank)
    with _single_process_quiet():
        # A public API that torch does not re-export explicitly.
        try:
            dcp.load(  # pyright: ignore[reportPrivateImportUsage]
                state, checkpoint_id=str(folder), no_dist=not layout.distributed
            )
        except (Exception, CheckpointException) as error:  # DCP's own kind is a BaseException; name the folder
            raise CheckpointError(
                f"{folder}: reading its shards (.distcp, .metadata) failed ({_load_failure(error)}); the checkpoint "
                "is damaged"
            ) from None
    set_model_state_dict(network, state["model"])
    if optimizer is not None:
        set_optimizer_state_dict(network, optimizer, state["optimizer"])
    if scheduler is not None and meta["scheduler"] is not None:
        scheduler.load_state_dict(meta["scheduler"])
    _set_rng_state(state[_rng_key(rng_rank)], layout)
    logger.info("loaded checkpoint of step %d from %s", meta["global_step"], folder)
    return int(meta["global_step"])
