"""The critic role: the value model's clipped value loss around its engine, its values, and its updates."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rl_core.losses import LossNormalizer, clipped_value_loss, get_aggregation
from rl_core.schema import RESPONSE_MASK, RETURNS, VALUES
from rl_engines.training import (
    Batch,
    ForwardOutput,
    ForwardSpec,
    LossOutput,
    NormalizedLoss,
    StepResult,
    TrainEngine,
)
from rl_runtime.roles._common import (
    EngineRole,
    check_epochs_and_coefs,
    check_name,
    forward_output,
    masked_mean,
    require_keys,
    run_update,
)
from rl_runtime.roles._errors import RoleConfigError

DEFAULT_VALUE_CLIP_RANGE = 0.5
"""verl's `critic.cliprange_value`."""


@dataclass(frozen=True)
class CriticConfig:
    """The critic's clipped value loss.

    Attributes:
        clip_range: how far a prediction may move from the batch's `values` before its error stops shrinking.
        aggregation: a `rl_core.losses.AGGREGATIONS` mode.
        ppo_epochs: passes over the mini-batches per `update`.
    """

    clip_range: float = DEFAULT_VALUE_CLIP_RANGE
    aggregation: str = "token-mean"
    ppo_epochs: int = 1

    def __post_init__(self) -> None:
        if not self.clip_range > 0:
            raise RoleConfigError(
                f"CriticConfig.clip_range must be > 0 (inf turns clipping off), got {self.clip_range}"
            )
        check_name("CriticConfig.aggregation", self.aggregation, get_aggregation)
        check_epochs_and_coefs("CriticConfig", self.ppo_epochs)


class CriticRole(EngineRole):
    """The value model: per-token values, and updates of the clipped value loss onto the returns."""

    _SPEC = ForwardSpec(log_probs=False, values=True)

    def __init__(self, engine: TrainEngine, config: CriticConfig) -> None:
        if not engine.trainable or not engine.has_value_head:
            raise RoleConfigError(
                "the critic needs a trainable engine with a value head: set ModelConfig.value_head=True and "
                "TrainEngineConfig.optimizer"
            )
        super().__init__(engine)
        self.config = config

    @classmethod
    def from_config(cls, config: CriticConfig, engine: TrainEngine) -> CriticRole:
        """The critic role around `engine`."""
        return cls(engine, config)

    def compute_values(self, batch: Batch) -> torch.Tensor:
        """`(B, T)` float32 values of the response tokens' preceding states, without gradients."""
        values = self._engine.forward(batch, self._SPEC).values
        assert values is not None  # asked for by _SPEC
        return values

    def loss(self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
        """`rl_core.losses.clipped_value_loss` of the predictions against `returns`, around the batch's `values`."""
        require_keys(micro_batch, (VALUES, RETURNS, RESPONSE_MASK), "critic")
        mask = micro_batch[RESPONSE_MASK]
        values = forward_output(outputs.values, VALUES, "critic")
        loss, clipfrac = clipped_value_loss(
            values,
            micro_batch[VALUES],
            micro_batch[RETURNS],
            mask,
            clip_range=self.config.clip_range,
            aggregation=self.config.aggregation,
            normalizer=normalizer,
        )
        return LossOutput(loss, {"critic/vf_clipfrac": clipfrac, "critic/vpred_mean": masked_mean(values, mask)})

    def update(self, batch: Batch, num_mini_batches: int = 1) -> list[StepResult]:
        """`ppo_epochs` passes over `batch` split into `num_mini_batches` equal contiguous mini-batches (one
        optimizer step each), then one schedule step."""
        loss = NormalizedLoss(self.loss, self.config.aggregation)  # one mode: the counts may come after the backward
        return run_update(self._engine, batch, num_mini_batches, self.config.ppo_epochs, loss, self._SPEC)
