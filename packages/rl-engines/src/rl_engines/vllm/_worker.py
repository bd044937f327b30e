"""`RLWorkerExtension`: methods vLLM mixes into each of its workers (`worker_extension_cls`) for weight sync.

vLLM keeps some weights in a form that cannot be read back (on CPU, linear layers live only as oneDNN-packed
handles) and fuses HF tensors (q/k/v into `qkv_proj`, gate/up into `gate_up_proj`). So each worker keeps a
host copy of the HF-named weights it loaded. It serves two purposes: a partial update is completed with the
current values of the other tensors of every module it touches (vLLM's in-place reload re-creates a module
from all of its checkpoint tensors), and checksums are computed from it. The copy is replaced only after
`reload_weights` succeeded. Called through `collective_rpc`, so arguments are plain values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch

from rl_engines.rollout import WeightGroup, WeightGroupSpec, parse_dtype, weights_checksum
from rl_engines.vllm._checkpoint import WireTensor, from_wire, load_checkpoint

logger = logging.getLogger(__name__)


class RLWorkerExtension:
    """Weight-sync methods on a vLLM worker (`self.model_runner`, `self.rank`, `self.device` come from it)."""

    # Set by the vLLM worker this class is mixed into.
    model_runner: Any
    rank: int
    device: torch.device

    _rl_host: dict[str, torch.Tensor]
    _rl_group: WeightGroup | None

    # ---- the host copy -----------------------------------------------------------------------------
    def rl_init(self, model_path: str, dtype: str) -> int:
        """Load the host copy from the served checkpoint; returns its tensor count."""
        self._rl_dtype = parse_dtype(dtype)
        self._rl_host = {n: self._rl_cast(t) for n, t in load_checkpoint(model_path).items()}
        self._rl_group = None
        model = self.model_runner.get_model()
        packed: dict[str, list[str]] = dict(getattr(model, "packed_modules_mapping", {}) or {})
        self._rl_part_of = {part: fused for fused, parts in packed.items() for part in parts}
        self._rl_modules: dict[str, list[str]] = {}
        for name in self._rl_host:
            self._rl_modules.setdefault(self._rl_module(name), []).append(name)
        return len(self._rl_host)

    def _rl_cast(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(self._rl_dtype) if tensor.is_floating_point() else tensor

    def _rl_module(self, name: str) -> str:
        """The vLLM module an HF tensor loads into: `...q_proj.weight` -> `...qkv_proj`."""
        module, _, _ = name.rpartition(".")
        prefix, _, leaf = module.rpartition(".")
        fused = self._rl_part_of.get(leaf)
        return f"{prefix}.{fused}" if fused is not None else module

    def rl_covers_modules(self, names: list[str]) -> bool:
        """Whether `names` holds every tensor of each module it touches (a plain reload is then safe)."""
        given = set(names)
        return all(set(self._rl_modules[self._rl_module(n)]) <= given for n in given if n in self._rl_host)

    def _rl_apply(self, named: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Reload `named`, completed with host-copy values of the other tensors of each touched module."""
        new = {name: self._rl_cast(tensor) for name, tensor in named}
        complete = dict(new)
        for module in {self._rl_module(n) for n in new}:
            for sibling in self._rl_modules[module]:
                complete.setdefault(sibling, self._rl_host[sibling])
        self.model_runner.reload_weights(weights_iterator=iter(list(complete.items())))
        for name, tensor in new.items():
            self._rl_host[name] = tensor.detach().to("cpu").clone()

    # ---- transports --------------------------------------------------------------------------------
    def rl_load(self, wire: list[WireTensor]) -> None:
        """Load tensors sent as plain values (the bytes side channel)."""
        self._rl_apply(from_wire(wire))

    def rl_load_disk(self, path: str) -> None:
        """Load a (possibly partial) checkpoint directory through the host copy."""
        self._rl_apply(load_checkpoint(path).items())

    def rl_host_from_disk(self, path: str) -> None:
        """Refresh the host copy after the built-in `reload_weights(weights_path=path)` succeeded."""
        for name, tensor in load_checkpoint(path).items():
            self._rl_host[name] = self._rl_cast(tensor)

    def rl_init_group(self, spec: dict[str, Any]) -> None:
        """Join the trainer's weight-update group (this worker's rank: `rank_offset + self.rank`)."""
        group_spec = WeightGroupSpec(**spec)
        self._rl_group = WeightGroup(group_spec, group_spec.rank_offset + int(self.rank))

    def rl_receive(self, names: list[str], dtypes: list[str], shapes: list[list[int]], apply: bool) -> None:
        """Receive every tensor broadcast from rank 0 (even a rejected bucket, so the trainer never hangs)."""
        if self._rl_group is None:
            raise RuntimeError("no weight-update group on this worker; call rl_init_group first")
        device = self.device if self._rl_group.spec.backend == "nccl" else torch.device("cpu")
        received = []
        for name, dtype, shape in zip(names, dtypes, shapes, strict=True):
            buffer = torch.empty(shape, dtype=parse_dtype(dtype), device=device)
            self._rl_group.broadcast(buffer, src=0)
            received.append((name, buffer))
        if apply:
            self._rl_apply(received)

    def rl_destroy_group(self) -> None:
        """Leave the weight-update group (no-op without one)."""
        group, self._rl_group = self._rl_group, None
        if group is not None:
            group.close()

    def rl_checksum(self, names: list[str] | None) -> str:
        """`weights_checksum` of the host copy restricted to `names` (None: all)."""
        selected = sorted(self._rl_host) if names is None else list(names)
        return weights_checksum((name, self._rl_host[name]) for name in selected)
