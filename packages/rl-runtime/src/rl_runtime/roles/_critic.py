"""The critic role: the value model's clipped value loss (rl-core's `ValueObjective`) handed to its engine, its values,
and its updates.

The objective is built once from the run config's `algorithm` section (`value_clip`, `loss_agg_mode`) as is; the
engine calls it directly, never back into the runtime."""

from __future__ import annotations

import torch

from rl_core.objectives import ValueObjective
from rl_engines.training import (
    Batch,
    ForwardSpec,
    StepResult,
    TrainEngine,
)
from rl_runtime.config import AlgorithmConfig, RunConfig
from rl_runtime.roles._common import (
    EngineRole,
    check_ppo_epochs,
    require_keys,
    run_update,
)
from rl_runtime.roles._errors import RoleConfigError


class CriticRole(EngineRole):
    """The value model: per-token values, and updates of the clipped value loss onto the returns."""

    _SPEC = ForwardSpec(log_probs=False, values=True)

    def __init__(self, engine: TrainEngine, algorithm: AlgorithmConfig, *, ppo_epochs: int = 1) -> None:
        """The critic around `engine`, minimising the value loss clipped at `algorithm.value_clip` (null: no clip),
        aggregated by `algorithm.loss_agg_mode`; `ppo_epochs` passes per `update`."""
        if not engine.trainable or not engine.has_value_head:
            raise RoleConfigError(
                "the critic needs a trainable engine with a value head: set ModelConfig.value_head=True and "
                "TrainEngineConfig.optimizer"
            )
        check_ppo_epochs("CriticRole", ppo_epochs)
        super().__init__(engine)
        self.algorithm = algorithm
        self.ppo_epochs = ppo_epochs
        self.clip_range = algorithm.value_clip if algorithm.value_clip is not None else float("inf")
        """How far a prediction may move from the batch's `values` before its error stops shrinking (inf: no clip)."""
        self.objective = ValueObjective(self.clip_range, algorithm.loss_agg_mode)
        """The loss the engine runs on every micro-batch (rl-core's, built once here; it says itself whether a
        replicated engine may learn the counts after the backward)."""

    @classmethod
    def from_config(cls, config: RunConfig, engine: TrainEngine) -> CriticRole:
        """The critic role of run `config` around `engine`: the `algorithm` section's value loss, `batch.ppo_epochs`."""
        return cls(engine, config.algorithm, ppo_epochs=config.batch.ppo_epochs)

    def compute_values(self, batch: Batch) -> torch.Tensor:
        """`(B, T)` float32 values of the response tokens' preceding states, without gradients."""
        values = self._engine.forward(batch, self._SPEC).values
        assert values is not None  # asked for by _SPEC
        return values

    def update(self, batch: Batch, num_mini_batches: int = 1) -> list[StepResult]:
        """`ppo_epochs` passes over `batch` split into `num_mini_batches` equal contiguous mini-batches (one
        optimizer step each), then one schedule step."""
        require_keys(batch, self.objective.required_fields, "critic")
        return run_update(self._engine, batch, num_mini_batches, self.ppo_epochs, self.objective, self._SPEC)
