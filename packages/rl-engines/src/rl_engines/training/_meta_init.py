"""Building the network: in full on one process, or, in a sharded run, as a meta-device skeleton on every rank
that is sharded and then filled with the weights only rank 0 reads or initialises.

The rank-0 path keeps every other rank from ever holding the full model: rank 0 builds it on the CPU as a
single process would, every rank builds the same network on the meta device (no storage), shards it with
FSDP2, allocates its shards (`to_empty`) and receives them from rank 0 one tensor at a time
(`set_model_state_dict(..., broadcast_from_rank0=True)`). Non-persistent buffers (rotary `inv_freq`) are not
in the state dict, so they are broadcast from rank 0 separately; tied parameters stay one FSDP2 parameter.
"""

from __future__ import annotations

import logging

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

from rl_engines.training._config import TrainEngineConfig
from rl_engines.training._config_model import ModelConfig
from rl_engines.training._errors import ModelSourceError
from rl_engines.training._forward import PolicyNetwork
from rl_engines.training._fsdp import ProcessLayout, shard
from rl_engines.training._model import build_causal_lm
from rl_engines.training._vla import VLANetwork, build_vla, is_vla

logger = logging.getLogger(__name__)

SOURCE_RANK = 0
_FROM_RANK0 = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)


def build_network(config: ModelConfig, dtype: torch.dtype, *, meta: bool = False) -> PolicyNetwork | VLANetwork:
    """The causal LM and its optional value head in `dtype` (or, for a `model_type` tiny_vla or openvla model, the
    VLA): real weights on the CPU, or (with `meta`) a skeleton on the meta device."""
    if is_vla(config):
        return build_vla(config, dtype, meta=meta)
    backbone = build_causal_lm(config, dtype, meta=meta)
    if not meta:
        return PolicyNetwork(backbone, value_head=config.value_head, init_seed=config.init_seed)
    with torch.device("meta"):
        return PolicyNetwork(backbone, value_head=config.value_head, init_seed=config.init_seed)


def non_persistent_buffers(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Buffers a state dict leaves out (computed at construction, e.g. rotary `inv_freq`), by qualified name."""
    return [
        (f"{prefix}.{name}" if prefix else name, buffer)
        for prefix, owner in module.named_modules()
        for name, buffer in owner.named_buffers(recurse=False)
        if buffer is not None and name in owner._non_persistent_buffers_set
    ]


def _rank0_network(config: TrainEngineConfig, layout: ProcessLayout) -> PolicyNetwork | VLANetwork | None:
    """The full network on rank 0 (None elsewhere). A failure there is raised on every rank, since the
    others would otherwise wait forever for the weights."""
    network, error = None, None
    if layout.rank == SOURCE_RANK:
        try:
            network = build_network(config.model, config.precision.param)
        except Exception as caught:  # re-raised below, after every rank has learnt of it
            error = caught
    message = [None if error is None else f"{type(error).__name__}: {error}"]
    dist.broadcast_object_list(message, src=SOURCE_RANK)
    if error is not None:
        raise error
    if message[0] is not None:
        raise ModelSourceError(
            f"rank {SOURCE_RANK} could not build the model it broadcasts ({message[0]}); fix the model source "
            "there, or set ModelConfig.broadcast_from_rank0=False to build it on every rank"
        )
    return network


@torch.no_grad()
def _broadcast_buffers(network: torch.nn.Module, source: torch.nn.Module | None, layout: ProcessLayout) -> None:
    """Copy rank 0's non-persistent buffers into every rank's (allocated but uninitialised) ones."""
    source_buffers = dict(non_persistent_buffers(source)) if source is not None else {}
    for name, buffer in non_persistent_buffers(network):
        if layout.rank == SOURCE_RANK:
            buffer.copy_(source_buffers[name])
        dist.broadcast(buffer, src=SOURCE_RANK)


def _move_buffers(network: torch.nn.Module, device: torch.device) -> None:
    """Put every buffer on the compute device (under CPU offload the shards stay on the CPU, buffers do not)."""
    for module in network.modules():
        for name, buffer in module._buffers.items():
            if buffer is not None:
                module._buffers[name] = buffer.to(device)


def build_sharded_from_rank0(config: TrainEngineConfig, layout: ProcessLayout) -> PolicyNetwork | VLANetwork:
    """The FSDP2-sharded network with rank 0's weights, without any other rank building the full model.

    A collective: every rank of the default process group calls it.
    """
    network = build_network(config.model, config.precision.param, meta=True)
    source = _rank0_network(config, layout)
    shard(network, network.backbone, config, layout)
    # Under FSDP2 CPU offload the shards live on the CPU; otherwise on the compute device.
    network.to_empty(device=torch.device("cpu") if config.offload.fsdp_cpu_offload else layout.device)
    _move_buffers(network, layout.device)
    set_model_state_dict(network, source.state_dict() if source is not None else {}, options=_FROM_RANK0)
    _broadcast_buffers(network, source, layout)
    logger.info("received the weights of %s from rank %d", type(network.backbone).__name__, SOURCE_RANK)
    return network
