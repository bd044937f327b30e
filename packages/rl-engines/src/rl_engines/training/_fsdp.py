"""The process layout (world, rank, device, data-parallel mode) and FSDP2 sharding: one unit per decoder layer
plus the root.

The same code runs on CPU with gloo and on GPU with nccl: the device mesh takes the engine's device
type and the caller's default process group. Without an initialised process group the engine runs
unsharded in one process; under `data_parallel="ddp"` every rank holds a whole replica (`_replicate.py`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.distributed.tensor import DTensor

from rl_engines.training._collectives import all_gather_stacked, all_reduce_sum_
from rl_engines.training._config import DATA_PARALLEL_DDP, TrainEngineConfig
from rl_engines.training._errors import TrainConfigError

logger = logging.getLogger(__name__)

SUM_GRADIENTS = 1.0
"""FSDP2's gradient divide factor: 1 sums gradients over ranks, because every rank's loss is already
divided by the global token count (dividing again by the world size would shrink the step)."""


@dataclass(frozen=True)
class ProcessLayout:
    """Where this process sits: data-parallel world size, rank, compute device, whether a process group joins it
    to other ranks (`distributed`: collectives run), and whether each rank holds a whole replica (`replicated`,
    `data_parallel="ddp"`) rather than FSDP2 shards."""

    world_size: int
    rank: int
    device: torch.device
    distributed: bool
    replicated: bool = False

    @property
    def sharded(self) -> bool:
        """Whether FSDP2 shards the model over the process group."""
        return self.distributed and not self.replicated


def resolve_layout(config: TrainEngineConfig) -> ProcessLayout:
    """The layout from the default process group (if initialised), `config.device` and `config.data_parallel`."""
    distributed = dist.is_available() and dist.is_initialized()
    world_size, rank = (dist.get_world_size(), dist.get_rank()) if distributed else (1, 0)
    want_cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    if want_cuda and not torch.cuda.is_available():
        raise TrainConfigError("TrainEngineConfig.device='cuda' but no CUDA device is visible; use 'cpu' or 'auto'")
    # Under several GPUs per node the launcher selects this rank's GPU first (torch.cuda.set_device).
    device = torch.device("cuda", torch.cuda.current_device()) if want_cuda else torch.device("cpu")
    if config.offload.fsdp_cpu_offload and device.type != "cuda":
        raise TrainConfigError(
            "OffloadConfig.fsdp_cpu_offload=True offloads from a CUDA device to the CPU, but the engine runs on "
            f"{device}; turn it off or run on CUDA"
        )
    layout = ProcessLayout(
        world_size, rank, device, distributed, replicated=distributed and config.data_parallel == DATA_PARALLEL_DDP
    )
    if not layout.sharded and config.precision.compute != config.precision.param:
        fix = (
            "set TrainEngineConfig.data_parallel='fsdp'"
            if layout.replicated
            else "initialise a process group (torch.distributed.init_process_group, world size 1 is fine)"
        )
        raise TrainConfigError(
            f"PrecisionConfig.compute_dtype={config.precision.compute_dtype!r} differs from param_dtype="
            f"{config.precision.param_dtype!r}, which needs FSDP2 mixed precision; {fix} or set compute_dtype=None"
        )
    return layout


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face model (the classes its `_no_split_modules` names)."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise TrainConfigError(
            f"{type(model).__name__} declares no decoder-layer classes (_no_split_modules={sorted(names)}); "
            "FSDP2 needs one unit per decoder layer"
        )
    return layers


def shard(
    network: torch.nn.Module, backbone: torch.nn.Module, config: TrainEngineConfig, layout: ProcessLayout
) -> None:
    """Apply `fully_shard` to every decoder layer of `backbone` and then to `network` (the root), in place."""
    mesh = init_device_mesh(layout.device.type, (layout.world_size,))
    precision = config.precision
    mixed = MixedPrecisionPolicy(param_dtype=precision.compute, reduce_dtype=precision.reduce)
    offload: OffloadPolicy = (
        CPUOffloadPolicy(pin_memory=config.offload.pin_memory) if config.offload.fsdp_cpu_offload else OffloadPolicy()
    )
    for layer in decoder_layers(backbone):
        fully_shard(
            layer,
            mesh=mesh,
            mp_policy=mixed,
            offload_policy=offload,
            reshard_after_forward=config.reshard_after_forward,
        )
    # The root (embeddings, final norm, heads) stays gathered between forward and backward: it runs last
    # in forward and first in backward, so resharding it would only add an all-gather.
    fully_shard(network, mesh=mesh, mp_policy=mixed, offload_policy=offload, reshard_after_forward=False)
    for module in network.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(SUM_GRADIENTS)
            # A plain SUM: gloo has no PREMUL_SUM, and with a factor of 1 there is nothing to pre-multiply.
            module.set_force_sum_reduction_for_comms(True)
    logger.info("sharded %s over %d ranks on %s", type(backbone).__name__, layout.world_size, layout.device)


def reshard(network: torch.nn.Module) -> None:
    """Free every gathered parameter. The root keeps its parameters gathered after a forward (it expects the
    backward next); after a forward without backward that would hold the embedding and LM head in full."""
    for module in network.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The whole tensor: gathered from every rank for a DTensor (a collective), the tensor itself otherwise."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def all_reduce_sum(tensor: torch.Tensor, layout: ProcessLayout) -> torch.Tensor:
    """`tensor` summed over ranks (returned; a copy when sharded); itself in one process."""
    if not layout.distributed:
        return tensor
    reduced = tensor.clone()
    all_reduce_sum_(reduced)
    return reduced


def all_gather_rows(values: torch.Tensor, layout: ProcessLayout) -> torch.Tensor:
    """`(world, n)`: every rank's `(n,)` `values`, row `r` from rank `r` (one collective: sums and maxima of
    several small statistics in one round)."""
    if not layout.distributed:
        return values.unsqueeze(0)
    return all_gather_stacked(values)


def all_reduce_min_max(value: int, layout: ProcessLayout) -> tuple[int, int]:
    """The minimum and maximum of an integer over ranks."""
    if not layout.distributed:
        return value, value
    pair = torch.tensor([-value, value], dtype=torch.int64, device=collective_device(layout))
    dist.all_reduce(pair, op=dist.ReduceOp.MAX)
    return -int(pair[0]), int(pair[1])


def collective_device(layout: ProcessLayout) -> torch.device:
    """Where small tensors for collectives live: the CUDA device under nccl, else the CPU."""
    return layout.device if layout.device.type == "cuda" else torch.device("cpu")


def barrier(layout: ProcessLayout) -> None:
    """Wait for every rank (nothing in one process)."""
    if layout.distributed:
        dist.barrier()
