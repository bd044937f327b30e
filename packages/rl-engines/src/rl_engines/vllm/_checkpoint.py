"""The tensors of a safetensors checkpoint directory: file listing, names/shapes, loading, wire encoding."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from rl_core import nearest_name
from rl_engines.rollout import (
    ParameterShapeError,
    UnknownParameterError,
    dtype_name,
    parse_dtype,
    safetensors_files,
)

WireTensor = tuple[str, str, list[int], bytes]
"""A tensor as plain values `(name, dtype name, shape, raw bytes)`: what `collective_rpc` can carry."""


def checkpoint_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Every tensor name of the checkpoint and its shape, read from the file headers only."""
    shapes: dict[str, tuple[int, ...]] = {}
    for file in safetensors_files(path):
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a Mapping
                shapes[name] = tuple(handle.get_slice(name).get_shape())
    return shapes


def load_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint, on CPU."""
    out: dict[str, torch.Tensor] = {}
    for file in safetensors_files(path):
        out.update(load_file(str(file)))
    return out


def validate(expected: Mapping[str, tuple[int, ...]], specs: Iterable[tuple[str, tuple[int, ...]]]) -> None:
    """Raise `UnknownParameterError` / `ParameterShapeError` unless every `(name, shape)` matches `expected`."""
    for name, shape in specs:
        if name not in expected:
            hint = nearest_name(name, list(expected))
            raise UnknownParameterError(
                f"the model has no tensor {name!r}" + (f"; did you mean {hint!r}?" if hint else "")
            )
        if tuple(shape) != expected[name]:
            raise ParameterShapeError(f"tensor {name!r} has shape {tuple(shape)}, the model's is {expected[name]}")


def to_wire(named: Iterable[tuple[str, torch.Tensor]]) -> list[WireTensor]:
    """Plain-value copies of named tensors (one host copy each)."""
    out = []
    for name, tensor in named:
        flat = tensor.detach().to("cpu").contiguous()
        out.append((name, dtype_name(flat.dtype), list(flat.shape), flat.view(torch.uint8).numpy().tobytes()))
    return out


def from_wire(wire: Iterable[WireTensor]) -> list[tuple[str, torch.Tensor]]:
    """The tensors of `to_wire` output."""
    out = []
    for name, dtype, shape, data in wire:
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        out.append((name, raw.view(parse_dtype(dtype)).reshape(shape)))
    return out
