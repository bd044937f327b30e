"""The actor, critic and reference roles: each composes a `TrainEngine` with its own loss and forward spec.

A role holds an engine; it is not a kind of engine. The same `FSDPEngine` class serves all three, built
with a value head (critic) or without an optimizer (reference).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import torch

from rl_core import RLCoreError
from rl_core.kl import get_kl_estimator, kl_loss
from rl_core.losses import (
    LossNormalizer,
    PolicyLossInputs,
    aggregate_loss,
    clipped_value_loss,
    get_aggregation,
    get_policy_loss,
)
from rl_engines.training._errors import BatchError, TrainConfigError
from rl_engines.training._protocol import TrainEngine
from rl_engines.training._types import Batch, ForwardOutput, ForwardSpec, LossOutput, MiniBatch, StepResult

DEFAULT_VALUE_CLIP_RANGE = 0.5
"""verl's `critic.cliprange_value`."""
_ROW_KEY = "_update_on_policy_row"
"""`(B,)` int64 row index `ActorRole.update_on_policy` adds to its batch, to place each micro-batch's outputs."""


def _check_name(owner: str, name: str, lookup: Callable[[str], object]) -> None:
    try:
        lookup(name)
    except (RLCoreError, KeyError) as error:
        raise TrainConfigError(f"{owner}: {error}") from None


def _check_epochs_and_coef(owner: str, ppo_epochs: int, **coefs: float) -> None:
    if isinstance(ppo_epochs, bool) or not isinstance(ppo_epochs, int) or ppo_epochs < 1:
        raise TrainConfigError(f"{owner}.ppo_epochs must be an int >= 1, got {ppo_epochs!r}")
    for name, value in coefs.items():
        if not (math.isfinite(value) and value >= 0):
            raise TrainConfigError(f"{owner}.{name} must be a finite number >= 0, got {value}")


def _require(batch: Batch, keys: Sequence[str], role: str) -> None:
    missing = [key for key in keys if key not in batch]
    if missing:
        raise BatchError(f"the {role} needs batch keys {missing}; found {sorted(batch)}")


def _output(value: torch.Tensor | None, name: str, role: str) -> torch.Tensor:
    """A `ForwardOutput` field the role's `ForwardSpec` asked for."""
    if value is None:
        raise BatchError(f"the {role} needs the forward's {name}, which it returned as None; ask for it in ForwardSpec")
    return value


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.bool()
    return torch.where(mask, values, 0.0).sum().detach() / mask.sum().clamp(min=1)


def _update(engine: TrainEngine, mini_batches: Sequence[MiniBatch], epochs: int, loss, spec) -> list[StepResult]:
    """`epochs` passes over the mini-batches, one optimizer step each, then one schedule step."""
    results = [
        engine.train_step(mini.batch, mini.micro_batches, mini.normalizer, loss, spec)
        for _ in range(epochs)
        for mini in mini_batches
    ]
    engine.step_lr_scheduler()
    return results


@dataclass(frozen=True)
class ActorConfig:
    """The actor's loss: a registered policy loss, plus an optional KL-to-reference loss and entropy bonus.

    Attributes:
        policy_loss: a name in `rl_core.losses.POLICY_LOSSES` ("ppo", "gspo", "cispo", ...).
        policy_loss_params: keyword parameters of that loss (e.g. `{"clip_ratio_high": 0.28}`).
        aggregation: a `rl_core.losses.AGGREGATIONS` mode, shared by every term.
        kl_coef: weight of the KL(pi || pi_ref) loss (needs `ref_log_probs` in the batch); 0 turns it off.
        kl_estimator: a name in `rl_core.kl.KL_ESTIMATORS`.
        entropy_coef: weight of the entropy bonus (subtracted from the loss); 0 turns it off.
        temperature: the sampler's temperature, applied to the logits.
        ppo_epochs: passes over the mini-batches per `update`.
    """

    policy_loss: str = "ppo"
    policy_loss_params: Mapping[str, Any] = field(default_factory=dict)
    aggregation: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    temperature: float = 1.0
    ppo_epochs: int = 1

    def __post_init__(self) -> None:
        _check_name("ActorConfig.policy_loss", self.policy_loss, get_policy_loss)
        _check_name("ActorConfig.aggregation", self.aggregation, get_aggregation)
        _check_name("ActorConfig.kl_estimator", self.kl_estimator, get_kl_estimator)
        _check_epochs_and_coef("ActorConfig", self.ppo_epochs, kl_coef=self.kl_coef, entropy_coef=self.entropy_coef)
        # Frozen means frozen: a read-only copy, so the caller's dict cannot change the loss later.
        object.__setattr__(self, "policy_loss_params", MappingProxyType(dict(self.policy_loss_params)))


class ActorRole:
    """The policy: old log-probs before an update, then PPO-style updates over mini-batches."""

    def __init__(self, engine: TrainEngine, config: ActorConfig) -> None:
        if not engine.trainable:
            raise TrainConfigError("the actor needs a trainable engine; set TrainEngineConfig.optimizer")
        self.engine = engine
        self.config = config
        self._policy_loss = get_policy_loss(config.policy_loss)
        self._train_spec = ForwardSpec(entropy=config.entropy_coef > 0, temperature=config.temperature)

    @classmethod
    def from_config(cls, config: ActorConfig, engine: TrainEngine) -> ActorRole:
        """The actor role around `engine`."""
        return cls(engine, config)

    def compute_log_probs(
        self, batch: Batch, micro_batches: Sequence[Sequence[int]], *, with_entropy: bool = False
    ) -> ForwardOutput:
        """`(B, T)` log-probs (and entropy) of the response tokens under the current policy, without gradients."""
        spec = ForwardSpec(entropy=with_entropy, temperature=self.config.temperature)
        return self.engine.forward(batch, micro_batches, spec)

    def loss(self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
        """Policy loss + `kl_coef` * KL loss - `entropy_coef` * entropy, each over the step's global counts.

        Without `old_log_probs` in the micro-batch (`update_on_policy`) the old log-probs are the detached
        log-probs of this very forward: the ratio is exactly 1 and the gradient is the on-policy one.
        """
        config = self.config
        _require(micro_batch, ("advantages", "response_mask"), "actor")
        mask = micro_batch["response_mask"]
        log_probs = _output(outputs.log_probs, "log_probs", "actor")
        old_log_probs = micro_batch.get("old_log_probs")
        inputs = PolicyLossInputs(
            log_probs,
            log_probs.detach() if old_log_probs is None else old_log_probs,
            micro_batch["advantages"],
            mask,
            rollout_log_probs=micro_batch.get("rollout_log_probs"),
        )
        loss, policy_metrics = self._policy_loss(
            inputs, aggregation=config.aggregation, normalizer=normalizer, **config.policy_loss_params
        )
        metrics = {f"actor/{name}": value for name, value in policy_metrics.items()}
        if config.kl_coef > 0:
            _require(micro_batch, ("ref_log_probs",), "actor's KL loss (kl_coef > 0)")
            ref = micro_batch["ref_log_probs"]
            kl = kl_loss(
                log_probs,
                ref,
                mask,
                estimator=config.kl_estimator,
                aggregation=config.aggregation,
                normalizer=normalizer,
            )
            loss = loss + config.kl_coef * kl
            metrics["actor/kl_loss"] = _masked_mean(get_kl_estimator(config.kl_estimator)(log_probs, ref), mask)
        if config.entropy_coef > 0:
            entropy = _output(outputs.entropy, "entropy", "actor's entropy bonus (entropy_coef > 0)")
            loss = loss - config.entropy_coef * aggregate_loss(entropy, mask, config.aggregation, normalizer)
            metrics["actor/entropy"] = _masked_mean(entropy, mask)
        return LossOutput(loss, metrics)

    def update(self, mini_batches: Sequence[MiniBatch]) -> list[StepResult]:
        """`ppo_epochs` passes over the mini-batches (one optimizer step each), then one schedule step.

        Every mini-batch carries `old_log_probs` `(B, T)` (`compute_log_probs` before the first update); an
        on-policy step may leave them to `update_on_policy` instead.
        """
        for index, mini in enumerate(mini_batches):
            if "old_log_probs" not in mini.batch:
                raise BatchError(
                    f"mini-batch {index} of the actor's update has no 'old_log_probs'; compute them with "
                    "compute_log_probs before the update, or, for one on-policy mini-batch, call update_on_policy"
                )
        return _update(self.engine, mini_batches, self.config.ppo_epochs, self.loss, self._train_spec)

    def update_on_policy(self, mini_batch: MiniBatch) -> tuple[StepResult, ForwardOutput]:
        """The step's one optimizer step (one mini-batch, one epoch), with the old log-probs taken from its own
        training forward, then one schedule step.

        The update starts from the weights that sampled the batch, so the detached log-probs of the training
        forward are the old log-probs a separate `compute_log_probs` pass would give (as verl's actor does):
        the same loss, gradient and update without that pass. The batch needs no `old_log_probs`.

        Returns:
            The step's result, and that forward's detached `(B, T)` float32 log-probs and entropy (what
            `compute_log_probs(..., with_entropy=True)` returns before the step; values None).
        """
        if self.config.ppo_epochs != 1:
            raise TrainConfigError(
                f"update_on_policy makes one optimizer step, but ActorConfig.ppo_epochs={self.config.ppo_epochs}; "
                "compute old_log_probs with compute_log_probs and call update"
            )
        batch = mini_batch.batch
        if "old_log_probs" in batch:
            raise BatchError(
                "the batch of update_on_policy has 'old_log_probs', which it would not use; call update to train "
                "against them, or leave them out"
            )
        shape = tuple(batch["input_ids"].shape)
        device = batch["input_ids"].device
        log_probs = torch.zeros(shape, dtype=torch.float32, device=device)
        entropy = torch.zeros(shape, dtype=torch.float32, device=device)

        def recording_loss(outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
            rows = micro_batch[_ROW_KEY].to(device)
            log_probs[rows] = _output(outputs.log_probs, "log_probs", "actor").detach().to(device)
            entropy[rows] = _output(outputs.entropy, "entropy", "actor").detach().to(device)
            return self.loss(outputs, micro_batch, normalizer)

        # Each sample's row index rides along into its micro-batch, so the forward's rows land in place.
        tagged = {**batch, _ROW_KEY: torch.arange(shape[0], device=device)}
        spec = ForwardSpec(entropy=True, temperature=self.config.temperature)
        result = self.engine.train_step(tagged, mini_batch.micro_batches, mini_batch.normalizer, recording_loss, spec)
        self.engine.step_lr_scheduler()
        return result, ForwardOutput(log_probs, entropy, None)


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
            raise TrainConfigError(
                f"CriticConfig.clip_range must be > 0 (inf turns clipping off), got {self.clip_range}"
            )
        _check_name("CriticConfig.aggregation", self.aggregation, get_aggregation)
        _check_epochs_and_coef("CriticConfig", self.ppo_epochs)


class CriticRole:
    """The value model: per-token values, and updates of the clipped value loss onto the returns."""

    _SPEC = ForwardSpec(log_probs=False, values=True)

    def __init__(self, engine: TrainEngine, config: CriticConfig) -> None:
        if not engine.trainable or not engine.has_value_head:
            raise TrainConfigError(
                "the critic needs a trainable engine with a value head: set ModelConfig.value_head=True and "
                "TrainEngineConfig.optimizer"
            )
        self.engine = engine
        self.config = config

    @classmethod
    def from_config(cls, config: CriticConfig, engine: TrainEngine) -> CriticRole:
        """The critic role around `engine`."""
        return cls(engine, config)

    def compute_values(self, batch: Batch, micro_batches: Sequence[Sequence[int]]) -> torch.Tensor:
        """`(B, T)` float32 values of the response tokens' preceding states, without gradients."""
        values = self.engine.forward(batch, micro_batches, self._SPEC).values
        assert values is not None  # asked for by _SPEC
        return values

    def loss(self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
        """`rl_core.losses.clipped_value_loss` of the predictions against `returns`, around the batch's `values`."""
        _require(micro_batch, ("values", "returns", "response_mask"), "critic")
        mask = micro_batch["response_mask"]
        values = _output(outputs.values, "values", "critic")
        loss, clipfrac = clipped_value_loss(
            values,
            micro_batch["values"],
            micro_batch["returns"],
            mask,
            clip_range=self.config.clip_range,
            aggregation=self.config.aggregation,
            normalizer=normalizer,
        )
        return LossOutput(loss, {"critic/vf_clipfrac": clipfrac, "critic/vpred_mean": _masked_mean(values, mask)})

    def update(self, mini_batches: Sequence[MiniBatch]) -> list[StepResult]:
        """`ppo_epochs` passes over the mini-batches (one optimizer step each), then one schedule step."""
        return _update(self.engine, mini_batches, self.config.ppo_epochs, self.loss, self._SPEC)


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
            raise TrainConfigError(f"ReferenceConfig.temperature must be a finite number > 0, got {self.temperature}")


class ReferenceRole:
    """The reference policy: forward only, never updated, optionally offloaded between uses."""

    def __init__(self, engine: TrainEngine, config: ReferenceConfig) -> None:
        if engine.trainable:
            raise TrainConfigError(
                "the reference model must be frozen: build its engine with TrainEngineConfig.optimizer=None"
            )
        self.engine = engine
        self.config = config
        self._spec = ForwardSpec(temperature=config.temperature)
        if config.offload_between_uses:
            engine.offload()

    @classmethod
    def from_config(cls, config: ReferenceConfig, engine: TrainEngine) -> ReferenceRole:
        """The reference role around `engine`."""
        return cls(engine, config)

    def compute_ref_log_probs(self, batch: Batch, micro_batches: Sequence[Sequence[int]]) -> torch.Tensor:
        """`(B, T)` float32 log-probs of the response tokens under the reference policy."""
        if not self.config.offload_between_uses:
            return self._forward(batch, micro_batches)
        self.engine.onload()
        try:
            return self._forward(batch, micro_batches)
        finally:
            self.engine.offload()

    def _forward(self, batch: Batch, micro_batches: Sequence[Sequence[int]]) -> torch.Tensor:
        log_probs = self.engine.forward(batch, micro_batches, self._spec).log_probs
        assert log_probs is not None  # asked for by _spec
        return log_probs
