"""The reference role: the frozen reference policy's log-probs, its engine optionally offloaded between uses."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rl_engines.training import Batch, ForwardSpec, TrainEngine
from rl_runtime.roles._errors import RoleConfigError


@dataclass(frozen=True)
class ReferenceConfig:
    """The frozen reference policy.

    Attributes:
        offload_between_uses: keep the weights in CPU memory except while computing log-probs.
        temperature: the sampler's temperature, applied to the logits.
    """

    offload_between_uses: bool = False
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise RoleConfigError(f"ReferenceConfig.temperature must be a finite number > 0, got {self.temperature}")


class ReferenceRole:
    """The reference policy: forward only, never updated, optionally offloaded between uses."""

    def __init__(self, engine: TrainEngine, config: ReferenceConfig) -> None:
        if engine.trainable:
            raise RoleConfigError(
                "the reference model must be frozen: build its engine with TrainEngineConfig.optimizer=None"
            )
        self._engine = engine
        self.config = config
        self._spec = ForwardSpec(temperature=config.temperature)
        if config.offload_between_uses:
            engine.offload()

    @classmethod
    def from_config(cls, config: ReferenceConfig, engine: TrainEngine) -> ReferenceRole:
        """The reference role around `engine`."""
        return cls(engine, config)

    def compute_ref_log_probs(self, batch: Batch) -> torch.Tensor:
        """`(B, T)` float32 log-probs of the response tokens under the reference policy."""
        if not self.config.offload_between_uses:
            return self._forward(batch)
        self._engine.onload()
        try:
            return self._forward(batch)
        finally:
            self._engine.offload()

    def _forward(self, batch: Batch) -> torch.Tensor:
        log_probs = self._engine.forward(batch, self._spec).log_probs
        assert log_probs is not None  # asked for by _spec
        return log_probs
