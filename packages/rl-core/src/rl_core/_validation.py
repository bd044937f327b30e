"""Argument checks shared by every public rl-core function; each failure names the argument."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_core._errors import ShapeError

Dim = int | str | None
"""One expected dimension: an exact size, a symbol that must match across arguments, or None for any."""


def check_tensor(
    name: str,
    value: object,
    shape: Sequence[Dim],
    *,
    dims: dict[str, int] | None = None,
    floating: bool | None = None,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
) -> torch.Tensor:
    """Check that `value` is a tensor of the given symbolic shape and dtype family; return it.

    `shape` uses symbols such as ``("B", "T")``. `dims` carries the sizes bound so far, so that
    several arguments can be checked against each other; it is updated in place.
    `floating=True` requires a floating dtype, `False` an integer or bool one.
    """
    expected = "(" + ", ".join(str(d) for d in shape) + ")"
    if not isinstance(value, torch.Tensor):
        raise ShapeError(f"{name} must be a torch.Tensor of shape {expected}, got {type(value).__name__}")
    if value.dim() != len(shape):
        raise ShapeError(f"{name} must have shape {expected}, got {tuple(value.shape)}")
    bound = dims if dims is not None else {}
    for axis, (want, got) in enumerate(zip(shape, value.shape, strict=True)):
        if want is None:
            continue
        if isinstance(want, int):
            if got != want:
                raise ShapeError(
                    f"{name} must have shape {expected} with size {want} at dim {axis}, got {tuple(value.shape)}"
                )
            continue
        if want in bound and bound[want] != got:
            raise ShapeError(
                f"{name} must have shape {expected} with {want}={bound[want]} (from an earlier argument), "
                f"got {tuple(value.shape)}"
            )
        bound[want] = got
    if floating is True and not value.is_floating_point():
        raise ShapeError(f"{name} must have a floating dtype, got {value.dtype}")
    if floating is False and value.is_floating_point():
        raise ShapeError(f"{name} must have an integer or bool dtype, got {value.dtype}")
    if dtype is not None:
        allowed = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
        if value.dtype not in allowed:
            names = ", ".join(str(d) for d in allowed)
            raise ShapeError(f"{name} must have dtype {names}, got {value.dtype}")
    return value


def check_same_device(**tensors: torch.Tensor | None) -> None:
    """Raise `ShapeError` unless every non-None tensor lives on the same device."""
    present = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(present.values())) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in present.items())
        raise ShapeError(f"tensors must share one device, got {listing}")


def check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    """Raise `ValueError` naming `name` unless `value` is positive (or zero when allowed); NaN never passes."""
    if not (value >= 0 if allow_zero else value > 0):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def as_bool_mask(name: str, mask: torch.Tensor) -> torch.Tensor:
    """Return `mask` as a bool tensor; accept bool, integer or 0/1 float masks, reject anything else."""
    if mask.dtype == torch.bool:
        return mask
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ShapeError(f"{name} must hold only 0/1 (or bool) values")
    return mask.bool()
