"""`VLAPolicy`: the rollout side of a VLA (the tiny VLA, or an OpenVLA-OFT checkpoint). It samples action chunks
for a batch of observations and takes the actor's weights through `rl_engines.sync` (the weight-sync subset of
`InferenceEngine`: pause, update from tensors or disk, flush, version, checksum, resume), so `WeightSync` verifies it
exactly as it verifies `HFEngine`.

Weights that changed since the last `set_weight_version` carry no version, and `act` refuses until one is set
(`UnversionedWeightsError`), so every sampled chunk is labelled with the weights that produced it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import cast

import torch
from safetensors import safe_open

from rl_engines.rollout import (
    EngineStateError,
    InvalidRequestError,
    PauseMode,
    UnversionedWeightsError,
    safetensors_files,
)
from rl_engines.rollout._hf_weights import ModelWeights, iter_safetensors
from rl_engines.vla._config import TinyVLAConfig
from rl_engines.vla._errors import VLAError
from rl_engines.vla._logprobs import action_distribution
from rl_engines.vla._model import TinyVLAForActionChunking
from rl_engines.vla._openvla import OpenVLAActions, is_openvla_folder, load_openvla
from rl_engines.vla._openvla_spec import OPENVLA_MODEL_TYPE, OpenVLASpec

logger = logging.getLogger(__name__)

CAPABILITIES = frozenset({"tensor", "disk", "bounded_calls"})
"""Weight transports the policy takes (by reference/shared tensors' list form, and from disk); its calls return
without waiting on anything but its own lock."""


class VLAPolicy:
    """Samples a VLA's action chunks on observations; receives versioned, checksummed weight syncs.

    Args:
        config: the model's config: a `TinyVLAConfig` (weights are initialised under `init_seed` until the first sync
            or load), or an OpenVLA-OFT checkpoint's (its remote config, whose `name_or_path` is the folder, or its
            `OpenVLASpec`): the weights are then read from the folder (`init_seed` is unused).
        device: where the model runs.
        dtype: the stored weights' dtype (a sync must send this dtype for its checksum to match).
        init_seed: seed of the initial weights.
        version: the initial weights' version.
    """

    def __init__(
        self,
        config: TinyVLAConfig | OpenVLASpec | object,
        *,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        init_seed: int = 0,
        version: int = 0,
    ) -> None:
        if getattr(config, "model_type", None) == OPENVLA_MODEL_TYPE:
            folder = config.path if isinstance(config, OpenVLASpec) else getattr(config, "name_or_path", "")
            model, spec = load_openvla(folder, dtype)
            self._setup(model, device, dtype, version, OpenVLAActions(model, spec))
            return
        if not isinstance(config, TinyVLAConfig):
            raise VLAError(
                f"VLAPolicy takes a TinyVLAConfig or an OpenVLA-OFT checkpoint's config, got {type(config).__name__}"
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            model = TinyVLAForActionChunking(config)
        self._setup(model, device, dtype, version)

    @classmethod
    def from_pretrained(
        cls,
        folder: str | os.PathLike[str],
        *,
        device: str | torch.device = "cpu",
        version: int = 0,
        dtype: torch.dtype | None = None,
    ) -> VLAPolicy:
        """The policy with the weights of a saved (or exported) tiny VLA folder, or of an OpenVLA-OFT checkpoint
        folder (`model_type: openvla`, loaded by `load_openvla`; `dtype` defaults to bfloat16 there, to the stored
        dtype for a tiny VLA)."""
        policy = cls.__new__(cls)
        if is_openvla_folder(folder):
            model, spec = load_openvla(folder, dtype or torch.bfloat16)
            policy._setup(model, device, dtype or torch.bfloat16, version, OpenVLAActions(model, spec))
            return policy
        model = TinyVLAForActionChunking.from_pretrained(str(folder), local_files_only=True)
        policy._setup(model, device, dtype or next(model.parameters()).dtype, version)
        return policy

    def _setup(
        self,
        model: torch.nn.Module,
        device: str | torch.device,
        dtype: torch.dtype,
        version: int,
        actions: OpenVLAActions | None = None,
    ) -> None:
        torch.nn.Module.to(model, device=torch.device(device), dtype=dtype)
        model.eval().requires_grad_(False)
        self.model = model
        self._actions = actions if actions is not None else model
        self.config: TinyVLAConfig | OpenVLASpec = (
            actions.config if actions is not None else cast("TinyVLAConfig", model.config)
        )
        self.device = torch.device(device)
        self._weights = ModelWeights(model)
        self._lock = threading.Lock()
        self._paused = False
        self._version: int | None = version

    @property
    def capabilities(self) -> frozenset[str]:
        """The weight-sync capabilities (`Capability` names) the policy supports."""
        return CAPABILITIES

    # ---- acting ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def act(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor,
        temperature: float,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one action chunk per observation.

        Args:
            input_ids: (N, L) instruction word ids (OpenVLA-OFT: the `OpenVLAPrompt` ids).
            attention_mask: (N, L) 1 on real tokens.
            pixel_values: (N, C, H, W) uint8 frames.
            temperature: > 0 samples from the restricted softmax at this temperature; 0 takes the argmax (its
                log-probs are then those of the temperature-1 softmax).
            generator: the torch.Generator to sample with (on the policy's device), for reproducible rollouts.

        Returns:
            (bins (N, K, D) int64 in [0, action_bins), log_probs (N, K*D) float32 of the chosen bins).
        """
        if not (temperature >= 0 and temperature != float("inf")):
            raise VLAError(f"temperature must be a finite number >= 0, got {temperature}")
        with self._lock:
            if self._paused:
                raise EngineStateError("the VLA policy is paused for a weight sync; call resume() first")
            if self._version is None:
                raise UnversionedWeightsError(
                    "the VLA policy's weights changed since the last set_weight_version; set a version first"
                )
            logits = self._actions(
                input_ids.to(self.device), attention_mask.to(self.device), pixel_values.to(self.device)
            ).float()
        if temperature == 0:
            log_p, _ = action_distribution(logits, 1.0)
            chosen = logits.argmax(dim=-1)
        else:
            log_p, _ = action_distribution(logits, temperature)
            flat = log_p.exp().reshape(-1, log_p.shape[-1])
            chosen = torch.multinomial(flat, 1, generator=generator).view(logits.shape[:2])
        log_probs = log_p.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        bins = chosen.view(-1, self.config.chunk_size, self.config.action_dims)
        return bins, log_probs

    # ---- weight sync (the InferenceEngine subset WeightSync uses) ---------------------------------------------
    def pause(self, mode: PauseMode = "abort", *, timeout_s: float | None = None) -> None:
        """Refuse `act` until `resume` (an `act` in flight finishes first: acting is synchronous, so every mode
        waits for it)."""
        if not self._lock.acquire(timeout=-1 if timeout_s is None else timeout_s):
            raise EngineStateError(f"pause({mode!r}) timed out after {timeout_s}s waiting for an act in flight")
        self._paused = True
        self._lock.release()

    def resume(self) -> None:
        """Serve `act` again."""
        with self._lock:
            self._paused = False

    def update_weights_from_tensors(self, tensors: Sequence[tuple[str, torch.Tensor]]) -> frozenset[str]:
        """Copy `(HF name, full tensor)` pairs into the model, all validated before any is written (a rejected
        bucket changes nothing); the weights are unversioned until `set_weight_version`."""
        with self._lock:
            self._weights.apply(list(tensors), owned=False)
            self._version = None
        return frozenset()

    def update_weights_from_disk(self, path: str | os.PathLike[str]) -> None:
        """Load a safetensors checkpoint directory (or file) the same way, every file validated first."""
        specs = []
        for file in safetensors_files(path):
            with safe_open(str(file), framework="pt") as handle:
                specs += [(name, tuple(handle.get_slice(name).get_shape())) for name in handle.keys()]  # noqa: SIM118
        with self._lock:
            self._weights.validate(specs)
            for bucket in iter_safetensors(path):
                self._weights.apply(bucket, owned=False)
            self._version = None
        logger.info("loaded %d tensors from %s", len(specs), Path(path))

    def flush_cache(self) -> None:
        """Nothing is cached between acts."""

    def set_weight_version(self, version: int) -> None:
        """Label the current weights with policy version `version` (an int >= 0)."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidRequestError(f"weight version must be an int >= 0 (the policy version), got {version!r}")
        with self._lock:
            self._version = version

    def weight_version(self) -> int:
        """The current weights' version (-1 while they changed without a version)."""
        return -1 if self._version is None else self._version

    def weights_checksum(self, names: Collection[str] | None = None) -> str:
        """`rl_engines.rollout.weights_checksum` of the stored weights under `names` (default: all)."""
        with self._lock:
            return self._weights.checksum(names)
