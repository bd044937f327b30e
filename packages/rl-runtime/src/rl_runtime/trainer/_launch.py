"""How this process runs a config's slots: under Ray (this process is the driver, one DAG worker actor per slot)
or under torchrun (SPMD: this process is slot RANK of WORLD_SIZE and the ranks meet over torch.distributed).

`trainer.launcher: auto` picks torchrun when torchrun's environment variables are set (`launch_from_env`), Ray
otherwise. Under torchrun rank 0 is the leader: it alone holds the run folder's lock, runs a warm start, writes the
metrics sinks and commits checkpoints; the other ranks wait for it at a barrier of the control group (gloo).
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any

import attrs
import torch
import torch.distributed as dist

from rl_runtime.config import ConfigError, RunConfig
from rl_runtime.config._schema import spmd_problems
from rl_runtime.config._schema_sections import RAY_LAUNCHER, TORCHRUN_LAUNCHER
from rl_runtime.trainer._errors import TrainerError

logger = logging.getLogger(__name__)

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun (and any `env://` launcher) sets in every process it starts; all four mean an SPMD launch."""
LOCAL_RANK_ENV = "LOCAL_RANK"
"""The process's rank on its machine (its GPU index)."""

_control: list[Any] = []
"""The gloo group of every rank this process joined (`join_spmd`), once; empty before and after."""


@attrs.frozen
class Launch:
    """Where this process stands: `spmd` (one slot of a torchrun job: rank `rank` of `world_size`) or not (the Ray
    driver of every slot)."""

    spmd: bool
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_leader(self) -> bool:
        """Whether this process writes the run folder's shared files (always, under Ray; rank 0 under torchrun)."""
        return self.rank == 0


RAY_LAUNCH = Launch(spmd=False)


def launch_from_env() -> Launch:
    """The SPMD launch torchrun's environment variables describe, or `RAY_LAUNCH` when they are not all set."""
    if not all(os.environ.get(name) for name in TORCHRUN_ENV):
        return RAY_LAUNCH
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return Launch(True, rank, world_size, int(os.environ.get(LOCAL_RANK_ENV, "0")))


def resolve_launch(config: RunConfig) -> Launch:
    """How `config` runs in this process (`trainer.launcher` and the environment); a TrainerError or ConfigError
    naming the mismatch, raised on every rank before any collective, when the launch cannot run it."""
    launcher, found = config.trainer.launcher, launch_from_env()
    slots = config.placement.slots
    if launcher == RAY_LAUNCHER:
        if found.spmd and found.world_size > 1:
            raise TrainerError(
                f"trainer.launcher: expected torchrun or auto for a process torchrun started (rank {found.rank} of "
                f"WORLD_SIZE={found.world_size}), found 'ray', which would start {slots} Ray workers in every rank; "
                "launch with `rl-recipes train ...` without torchrun, or set trainer.launcher=auto"
            )
        return RAY_LAUNCH
    if not found.spmd:
        if launcher == TORCHRUN_LAUNCHER:
            missing = [name for name in TORCHRUN_ENV if not os.environ.get(name)]
            raise TrainerError(
                f"trainer.launcher: expected torchrun's environment variables ({', '.join(TORCHRUN_ENV)}) with "
                f"'torchrun', found {', '.join(missing)} unset; launch with `torchrun --nproc-per-node {slots} -m "
                "rl_recipes train ...`, or set trainer.launcher=auto to run under Ray"
            )
        return RAY_LAUNCH
    if found.world_size != slots:
        raise TrainerError(
            f"placement.slots: expected torchrun's WORLD_SIZE={found.world_size} (each rank is one slot), found "
            f"{slots}; launch with `torchrun --nproc-per-node {slots}` (times the nodes), or set "
            f"placement.slots={found.world_size}"
        )
    problems = spmd_problems(config, "a torchrun launch")
    if problems:
        raise ConfigError(problems)
    return found


def join_spmd(launch: Launch, timeout_s: float) -> Any:
    """Join torch.distributed from torchrun's `env://` (once per process) and return the control group: a gloo
    group of every rank for barriers and metric dicts. The default group is gloo on CPU, gloo+NCCL on CUDA (each rank
    on GPU `LOCAL_RANK`), with a `timeout_s` collective timeout."""
    if _control:
        return _control[0]
    if not dist.is_initialized():
        backend = "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(launch.local_rank)
            backend = "cpu:gloo,cuda:nccl"
        dist.init_process_group(backend=backend, init_method="env://", timeout=timedelta(seconds=timeout_s))
        logger.info("rank %d of %d joined torch.distributed over %s", launch.rank, launch.world_size, backend)
    control = dist.new_group(backend="gloo")
    _control.append(control)
    return control


def leave_spmd() -> None:
    """Wait for every rank, then leave torch.distributed (what `join_spmd` joined)."""
    if not _control:
        return
    dist.barrier(group=_control.pop())
    if dist.is_initialized():
        dist.destroy_process_group()


def spmd_barrier(launch: Launch, timeout_s: float) -> None:
    """Under torchrun, wait until every rank gets here (joining first); under Ray, return at once."""
    if launch.spmd:
        dist.barrier(group=join_spmd(launch, timeout_s))
