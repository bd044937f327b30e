"""Named access to a transformers model's tensors: validated updates, checksums, offload and discard.

Names are the model's `state_dict()` keys (HF checkpoint names); tied weights answer to both names. An
update is validated in full before any tensor changes, so a rejected bucket leaves every weight as it was.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file

from rl_core import nearest_name
from rl_engines.rollout._checksum import weights_checksum
from rl_engines.rollout._copy import copy_into
from rl_engines.rollout._errors import InvalidRequestError, ParameterShapeError, UnknownParameterError

logger = logging.getLogger(__name__)

SAFETENSORS_INDEX = "model.safetensors.index.json"


def safetensors_files(path: str | os.PathLike[str]) -> list[Path]:
    """The safetensors files of a checkpoint directory (from its index when present), or of one file."""
    root = Path(path)
    if root.is_file() and root.suffix == ".safetensors":
        return [root]
    if not root.is_dir():
        raise InvalidRequestError(f"weights path {str(root)!r} is neither a directory nor a .safetensors file")
    index = root / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (KeyError, ValueError) as error:
            raise InvalidRequestError(f"{index} is not a safetensors index (needs 'weight_map'): {error}") from None
        files = [root / name for name in sorted(set(weight_map.values()))]
    else:
        files = sorted(root.glob("*.safetensors"))
    if not files:
        raise InvalidRequestError(f"no .safetensors files in {str(root)!r}; point at a checkpoint directory")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise InvalidRequestError(f"files listed in {index} are missing: {missing[:3]}")
    return files


def iter_safetensors(path: str | os.PathLike[str]) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """One bucket of `(name, tensor)` per safetensors file of `path`, loaded on CPU."""
    for file in safetensors_files(path):
        yield list(load_file(str(file)).items())


class ModelWeights:
    """The tensors of `model` by state-dict name, with validated in-place updates."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._model = model
        self._entries: dict[str, torch.Tensor] = dict(model.state_dict(keep_vars=True))
        # Tied names share one tensor; operate on each storage once.
        unique: dict[int, torch.Tensor] = {}
        for tensor in self._entries.values():
            unique.setdefault(id(tensor), tensor)
        self._unique = unique
        self._missing: set[int] = set()
        self._shapes: dict[int, tuple[torch.Size, torch.dtype, torch.device]] = {}
        self._offloaded: dict[int, torch.device] = {}
        self._lender: dict[int, str] = {}  # tensor id -> id of the lent shared buffer holding its data

    @property
    def names(self) -> list[str]:
        """Every name an update may carry."""
        return list(self._entries)

    @property
    def fully_loaded(self) -> bool:
        """False after `discard` until every tensor has been written again."""
        return not self._missing

    def validate(self, specs: Iterable[tuple[str, tuple[int, ...]]]) -> None:
        """Raise `UnknownParameterError` / `ParameterShapeError` unless every `(name, shape)` fits the model."""
        for name, shape in specs:
            target = self._entries.get(name)
            if target is None:
                near = nearest_name(name, self._entries)
                hint = f" (did you mean {near!r}?)" if near else ""
                raise UnknownParameterError(
                    f"weight update names {name!r}, which the model does not have{hint}; send HF state-dict names "
                    f"(the model has {len(self._entries)}, e.g. {next(iter(self._entries))!r})"
                )
            expected = self._shapes.get(id(target), (target.shape,))[0]
            if tuple(shape) != tuple(expected):
                raise ParameterShapeError(
                    f"weight update sends {name!r} with shape {tuple(shape)}, but the model's is {tuple(expected)}; "
                    "send the full (unsharded) tensor in HF layout"
                )

    @torch.no_grad()
    def apply(self, named: Iterable[tuple[str, torch.Tensor]], *, owned: bool, lender: str | None = None) -> None:
        """Validate, then write each tensor into the model (casting dtype/device as needed).

        With `owned=True` the caller hands the tensors over: one whose dtype, device and layout already
        match is adopted as the parameter's storage instead of copied. Never pass tensors someone else
        still uses (e.g. a trainer's live parameters) as owned. `lender` names the lent shared buffer the
        tensors live in, so `lent_buffers` can tell which buffers the model still holds.
        """
        named = list(named)
        self.validate((name, tuple(tensor.shape)) for name, tensor in named)
        for name, tensor in named:
            target = self._entries[name]
            adopt = (
                owned
                and tensor.dtype == target.dtype
                and tensor.device == target.device
                and tensor.is_contiguous()
                and not tensor.requires_grad
            )
            self._lender.pop(id(target), None)
            if adopt:
                target.data = tensor
                if lender is not None:
                    self._lender[id(target)] = lender
            else:
                copy_into(target.data, tensor)
            self._missing.discard(id(target))

    def lent_buffers(self) -> frozenset[str]:
        """Ids of lent shared buffers some tensor of the model still lives in."""
        return frozenset(self._lender.values())

    def checksum(self, names: Iterable[str] | None = None) -> str:
        """`weights_checksum` over `names` (default: all), as stored in the model."""
        selected = list(self._entries) if names is None else list(names)
        for name in selected:
            if name not in self._entries:
                self.validate([(name, ())])
        return weights_checksum((name, self._entries[name]) for name in selected)

    def tensors(self, names: Iterable[str]) -> list[tuple[str, torch.Tensor]]:
        """The model's own tensors under `names` (views, not copies)."""
        return [(name, self._entries[name].detach()) for name in names]

    @torch.no_grad()
    def offload(self) -> None:
        """Move every tensor on an accelerator to host memory (level-1 sleep); CPU tensors stay."""
        for key, tensor in self._unique.items():
            if tensor.device.type != "cpu":
                self._offloaded[key] = tensor.device
                tensor.data = tensor.data.to("cpu", non_blocking=False)
        if self._offloaded and torch.cuda.is_available():
            torch.cuda.empty_cache()

    @torch.no_grad()
    def onload(self) -> None:
        """Undo `offload`."""
        for key, device in self._offloaded.items():
            tensor = self._unique[key]
            tensor.data = tensor.data.to(device, non_blocking=False)
        self._offloaded.clear()

    @torch.no_grad()
    def discard(self) -> None:
        """Free every tensor's memory (level-2 sleep); `restore` reallocates them uninitialised."""
        for key, tensor in self._unique.items():
            if key not in self._shapes:
                self._shapes[key] = (tensor.shape, tensor.dtype, self._offloaded.pop(key, tensor.device))
            tensor.data = torch.empty(0, dtype=tensor.dtype, device=tensor.device)
        self._lender.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    @torch.no_grad()
    def restore(self) -> None:
        """Reallocate discarded tensors (contents undefined) and mark them all missing until written."""
        for key, (shape, dtype, device) in self._shapes.items():
            self._unique[key].data = torch.empty(shape, dtype=dtype, device=device)
            self._missing.add(key)
        self._shapes.clear()
