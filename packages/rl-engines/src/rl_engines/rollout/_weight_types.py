"""Values that describe a weight update: tensor metadata, broadcast groups and dtype names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from rl_engines.rollout._errors import InvalidRequestError

NamedTensors = Sequence[tuple[str, torch.Tensor]]
"""One bucket of a weight update: `(HF parameter name, full tensor)` pairs."""
GroupBackend = Literal["gloo", "nccl"]
DEFAULT_GROUP_NAME = "weight_update_group"
DEFAULT_GROUP_TIMEOUT_S = 300.0
"""Collectives on the weight-update group fail after this long rather than hang (gloo and NCCL alike)."""


def dtype_name(dtype: torch.dtype) -> str:
    """The wire name of a dtype: `torch.bfloat16` -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    """The dtype named `name` ("bfloat16", "float32", ...); raises `InvalidRequestError` for anything else."""
    value = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(value, torch.dtype):
        raise InvalidRequestError(f"unknown dtype {name!r}; use a torch dtype name such as 'bfloat16' or 'float32'")
    return value


@dataclass(frozen=True)
class WeightsMeta:
    """Names, dtypes and shapes of the tensors the trainer broadcasts next, in broadcast order."""

    names: tuple[str, ...]
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        names, dtypes = tuple(self.names), tuple(self.dtypes)
        shapes = tuple(tuple(int(d) for d in shape) for shape in self.shapes)
        if not names:
            raise InvalidRequestError("WeightsMeta.names is empty; send at least one tensor")
        if not len(names) == len(dtypes) == len(shapes):
            raise InvalidRequestError(
                f"WeightsMeta needs one dtype and one shape per name: {len(names)} names, "
                f"{len(dtypes)} dtypes, {len(shapes)} shapes"
            )
        if len(set(names)) != len(names):
            raise InvalidRequestError("WeightsMeta.names has duplicates; send each tensor once per bucket")
        for dtype in dtypes:
            parse_dtype(dtype)
        if any(d < 0 for shape in shapes for d in shape):
            raise InvalidRequestError(f"WeightsMeta.shapes must be non-negative, got {shapes}")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "dtypes", dtypes)
        object.__setattr__(self, "shapes", shapes)

    @classmethod
    def of(cls, named: NamedTensors) -> WeightsMeta:
        """The metadata of a bucket of named tensors."""
        return cls(
            names=tuple(name for name, _ in named),
            dtypes=tuple(dtype_name(t.dtype) for _, t in named),
            shapes=tuple(tuple(t.shape) for _, t in named),
        )


@dataclass(frozen=True)
class WeightGroupSpec:
    """Where an engine joins the trainer's weight-update group; the trainer is rank 0 and hosts the store."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    group_name: str = DEFAULT_GROUP_NAME
    backend: GroupBackend = "gloo"
    timeout_s: float = DEFAULT_GROUP_TIMEOUT_S

    def __post_init__(self) -> None:
        if not isinstance(self.master_address, str) or not self.master_address:
            raise InvalidRequestError(f"master_address must be a host name or IP, got {self.master_address!r}")
        if not 0 < int(self.master_port) < 65536:
            raise InvalidRequestError(f"master_port must be in 1..65535, got {self.master_port!r}")
        if self.world_size < 2:
            raise InvalidRequestError(f"world_size must be >= 2 (trainer + engine ranks), got {self.world_size}")
        if not 1 <= self.rank_offset < self.world_size:
            raise InvalidRequestError(
                f"rank_offset must be in 1..world_size-1 (rank 0 is the trainer), got {self.rank_offset} "
                f"with world_size {self.world_size}"
            )
        if self.backend not in ("gloo", "nccl"):
            raise InvalidRequestError(f"backend must be 'gloo' (CPU) or 'nccl' (GPU), got {self.backend!r}")
        if not self.timeout_s > 0:
            raise InvalidRequestError(f"timeout_s must be > 0, got {self.timeout_s!r}")
