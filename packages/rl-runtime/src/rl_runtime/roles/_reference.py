"""The reference role: the frozen reference policy's log-probs, its engine optionally offloaded between uses
(the run config's `algorithm.offload_reference`)."""

from __future__ import annotations

import torch

from rl_engines.training import Batch, ForwardSpec, TrainEngine
from rl_runtime.config import AlgorithmConfig, RunConfig
from rl_runtime.roles._common import check_temperature
from rl_runtime.roles._errors import RoleConfigError


class ReferenceRole:
    """The reference policy: forward only, never updated, optionally offloaded between uses."""

    def __init__(self, engine: TrainEngine, algorithm: AlgorithmConfig, *, temperature: float = 1.0) -> None:
        """The reference around frozen `engine`, offloaded between uses when `algorithm.offload_reference`;
        `temperature` is the sampler's."""
        if engine.trainable:
            raise RoleConfigError(
                "the reference model must be frozen: build its engine with TrainEngineConfig.optimizer=None"
            )
        check_temperature("ReferenceRole", temperature)
        self._engine = engine
        self.offload_between_uses = algorithm.offload_reference
        self.temperature = temperature
        self._spec = ForwardSpec(temperature=temperature)
        if self.offload_between_uses:
            engine.offload()

    @classmethod
    def from_config(cls, config: RunConfig, engine: TrainEngine) -> ReferenceRole:
        """The reference role of run `config` around `engine`: `algorithm.offload_reference`, the sampler's
        `rollout.temperature`."""
        return cls(engine, config.algorithm, temperature=config.rollout.temperature)

    def compute_ref_log_probs(self, batch: Batch) -> torch.Tensor:
        """`(B, T)` float32 log-probs of the response tokens under the reference policy."""
        if not self.offload_between_uses:
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
