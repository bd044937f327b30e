"""The actor role: the policy's loss (a registered policy loss, KL to the reference, entropy bonus) around its
engine, its old log-probs, and its PPO-style updates.

The loss is the run config's `algorithm` section (`AlgorithmConfig`: policy_loss, policy_loss_params, loss_agg_mode,
entropy_coef, kl), read as is: the role has no config class of its own to mirror it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs
import torch

from rl_core.kl import get_kl_estimator, kl_loss
from rl_core.losses import (
    LossNormalizer,
    PolicyLossInputs,
    aggregate_loss,
    get_policy_loss,
    with_rollout_correction,
)
from rl_core.schema import ADVANTAGES, OLD_LOG_PROBS, REF_LOG_PROBS, RESPONSE_MASK, ROLLOUT_LOG_PROBS
from rl_engines.training import (
    Batch,
    ForwardOutput,
    ForwardSpec,
    LossOutput,
    NormalizedLoss,
    StepResult,
    TrainEngine,
)
from rl_runtime.config import AlgorithmConfig, KLMode, RunConfig, resolve_policy_loss
from rl_runtime.roles._common import (
    EngineRole,
    check_ppo_epochs,
    check_temperature,
    forward_output,
    masked_mean,
    require_keys,
    run_update,
)
from rl_runtime.roles._errors import RoleConfigError, RoleError

_CORRECTION_METRIC_PREFIX = "rollout_is_"
"""Metrics of `rl_core.losses.rollout_correction`; reported under verl's `rollout_corr/`, not `actor/`."""
_ROW_KEY = "_update_on_policy_row"
"""`(B,)` int64 row index `ActorRole.update_on_policy` adds to its batch, to place each micro-batch's outputs."""
ADVANTAGE_MULTIPLE_LOSSES = frozenset({"ppo", "decoupled_ppo"})
"""Policy losses whose per-token loss is the token's advantage times a finite factor: 0, with a zero gradient, where
the advantage is 0 (PPO's clipped surrogate, dual clip included; decoupled PPO's is that surrogate times a detached
behaviour weight)."""


def zero_advantage_rows(micro_batch: Batch) -> torch.Tensor:
    """`(B,)` bool: the rows whose advantage is 0 on every response token (a GRPO group that scored alike)."""
    response = micro_batch[RESPONSE_MASK].bool()
    return ~(micro_batch[ADVANTAGES].ne(0) & response).any(dim=-1)


class ActorRole(EngineRole):
    """The policy: old log-probs before an update, then PPO-style updates over the mini-batches it splits the step's
    batch into; its weights go to the rollout engine (`export_weights`) and to Hugging Face folders (`export_hf`)."""

    def __init__(
        self, engine: TrainEngine, algorithm: AlgorithmConfig, *, temperature: float = 1.0, ppo_epochs: int = 1
    ) -> None:
        """The actor around `engine`, minimising `algorithm`'s policy loss (with its KL term when `kl.mode` is
        "as_loss", and its entropy bonus); `temperature` is the sampler's, `ppo_epochs` the passes per `update`."""
        if not engine.trainable:
            raise RoleConfigError("the actor needs a trainable engine; set TrainEngineConfig.optimizer")
        check_ppo_epochs("ActorRole", ppo_epochs)
        check_temperature("ActorRole", temperature)
        super().__init__(engine)
        self.algorithm = algorithm
        self.temperature = temperature
        self.ppo_epochs = ppo_epochs
        self.kl_coef = algorithm.kl.coef if algorithm.kl.mode is KLMode.AS_LOSS else 0.0
        """Weight of the KL-to-reference loss: `algorithm.kl.coef` when the KL is a loss term, else 0."""
        # A read-only copy, so the caller's dict cannot change the loss later.
        self._policy_loss_params = MappingProxyType(dict(algorithm.policy_loss_params))
        loss_name = resolve_policy_loss(algorithm)
        self._policy_loss = get_policy_loss(loss_name)
        if algorithm.rollout_correction is not None:
            settings = attrs.asdict(algorithm.rollout_correction)
            self._policy_loss = with_rollout_correction(self._policy_loss, **settings)
        # Zero-advantage rows add nothing to a loss with no other terms: the engine skips their backward.
        inert = (
            loss_name in ADVANTAGE_MULTIPLE_LOSSES
            and algorithm.rollout_correction is None
            and self.kl_coef == 0
            and algorithm.entropy_coef == 0
        )
        self._inert_rows = zero_advantage_rows if inert else None
        self._train_spec = ForwardSpec(entropy=algorithm.entropy_coef > 0, temperature=temperature)
        # update_on_policy reports the forward's entropy too; both specs are fixed for the role's life.
        self._on_policy_spec = ForwardSpec(entropy=True, temperature=temperature)

    @classmethod
    def from_config(cls, config: RunConfig, engine: TrainEngine) -> ActorRole:
        """The actor role of run `config` around `engine`: the `algorithm` section's loss, the sampler's
        `rollout.temperature` and `batch.ppo_epochs`."""
        return cls(engine, config.algorithm, temperature=config.rollout.temperature, ppo_epochs=config.batch.ppo_epochs)

    def compute_log_probs(self, batch: Batch, *, with_entropy: bool = False) -> ForwardOutput:
        """`(B, T)` log-probs (and entropy) of the response tokens under the current policy, without gradients."""
        spec = ForwardSpec(entropy=with_entropy, temperature=self.temperature)
        return self._engine.forward(batch, spec)

    def loss(self, outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
        """Policy loss + `kl_coef` * KL loss - `algorithm.entropy_coef` * entropy, each over the step's global counts.

        Without `old_log_probs` in the micro-batch (`update_on_policy`) the old log-probs are the detached
        log-probs of this very forward: the ratio is exactly 1 and the gradient is the on-policy one.
        """
        algorithm = self.algorithm
        require_keys(micro_batch, (ADVANTAGES, RESPONSE_MASK), "actor")
        mask = micro_batch[RESPONSE_MASK]
        log_probs = forward_output(outputs.log_probs, "log_probs", "actor")
        old_log_probs = micro_batch.get(OLD_LOG_PROBS)
        inputs = PolicyLossInputs(
            log_probs,
            log_probs.detach() if old_log_probs is None else old_log_probs,
            micro_batch[ADVANTAGES],
            mask,
            rollout_log_probs=micro_batch.get(ROLLOUT_LOG_PROBS),
        )
        loss, policy_metrics = self._policy_loss(
            inputs, aggregation=algorithm.loss_agg_mode, normalizer=normalizer, **self._policy_loss_params
        )
        metrics = {
            f"{'rollout_corr' if name.startswith(_CORRECTION_METRIC_PREFIX) else 'actor'}/{name}": value
            for name, value in policy_metrics.items()
        }
        if self.kl_coef > 0:
            require_keys(micro_batch, (REF_LOG_PROBS,), "actor's KL loss (kl_coef > 0)")
            ref = micro_batch[REF_LOG_PROBS]
            kl = kl_loss(
                log_probs,
                ref,
                mask,
                estimator=algorithm.kl.estimator,
                aggregation=algorithm.loss_agg_mode,
                normalizer=normalizer,
            )
            loss = loss + self.kl_coef * kl
            metrics["actor/kl_loss"] = masked_mean(get_kl_estimator(algorithm.kl.estimator)(log_probs, ref), mask)
        if algorithm.entropy_coef > 0:
            entropy = forward_output(outputs.entropy, "entropy", "actor's entropy bonus (entropy_coef > 0)")
            loss = loss - algorithm.entropy_coef * aggregate_loss(entropy, mask, algorithm.loss_agg_mode, normalizer)
            metrics["actor/entropy"] = masked_mean(entropy, mask)
        return LossOutput(loss, metrics)

    def update(self, batch: Batch, num_mini_batches: int = 1) -> list[StepResult]:
        """`ppo_epochs` passes over `batch` split into `num_mini_batches` equal contiguous mini-batches (one
        optimizer step each), then one schedule step.

        The batch carries `old_log_probs` `(B, T)` (`compute_log_probs` before the first update); an on-policy step
        may leave them to `update_on_policy` instead.
        """
        if OLD_LOG_PROBS not in batch:
            raise RoleError(
                "the batch of the actor's update has no 'old_log_probs'; compute them with compute_log_probs before "
                "the update, or, for one on-policy mini-batch, call update_on_policy"
            )
        # Every term is aggregated with loss_agg_mode: a replicated engine may learn the counts after the backward.
        loss = NormalizedLoss(self.loss, self.algorithm.loss_agg_mode, self._inert_rows)
        return run_update(self._engine, batch, num_mini_batches, self.ppo_epochs, loss, self._train_spec)

    def update_on_policy(self, batch: Batch) -> tuple[StepResult, ForwardOutput]:
        """The step's one optimizer step (one mini-batch, one epoch), with the old log-probs taken from its own
        training forward, then one schedule step.

        The update starts from the weights that sampled the batch, so the detached log-probs of the training
        forward are the old log-probs a separate `compute_log_probs` pass would give (as verl's actor does):
        the same loss, gradient and update without that pass. The batch needs no `old_log_probs`.

        Returns:
            The step's result, and that forward's detached `(B, T)` float32 log-probs and entropy (what
            `compute_log_probs(..., with_entropy=True)` returns before the step; values None).
        """
        if self.ppo_epochs != 1:
            raise RoleConfigError(
                f"update_on_policy makes one optimizer step, but the actor's ppo_epochs={self.ppo_epochs} "
                "(batch.ppo_epochs); compute old_log_probs with compute_log_probs and call update"
            )
        if OLD_LOG_PROBS in batch:
            raise RoleError(
                "the batch of update_on_policy has 'old_log_probs', which it would not use; call update to train "
                "against them, or leave them out"
            )
        # The log-probs cover the response mask's columns: the whole sequence for a causal LM, the flattened action
        # tokens (B, S*A) for a VLA, whose input_ids hold only the instruction.
        shape = tuple(batch[RESPONSE_MASK].shape)
        device = batch[RESPONSE_MASK].device
        log_probs = torch.zeros(shape, dtype=torch.float32, device=device)
        entropy = torch.zeros(shape, dtype=torch.float32, device=device)

        def recording_loss(outputs: ForwardOutput, micro_batch: Batch, normalizer: LossNormalizer) -> LossOutput:
            rows = micro_batch[_ROW_KEY].to(device)
            log_probs[rows] = forward_output(outputs.log_probs, "log_probs", "actor").detach().to(device)
            entropy[rows] = forward_output(outputs.entropy, "entropy", "actor").detach().to(device)
            return self.loss(outputs, micro_batch, normalizer)

        # Each sample's row index rides along into its micro-batch, so the forward's rows land in place.
        tagged = {**batch, _ROW_KEY: torch.arange(shape[0], device=device)}
        loss = NormalizedLoss(recording_loss, self.algorithm.loss_agg_mode, self._inert_rows)
        result = self._engine.train_step(tagged, loss, self._on_policy_spec)
        self._engine.step_lr_scheduler()
        return result, ForwardOutput(log_probs, entropy, None)

    @property
    def hf_config(self) -> Any:
        """The transformers config of the policy's model (what a rollout engine of the same model is built from)."""
        return self._engine.hf_config

    def export_weights(
        self, bucket_bytes: int, dtype: torch.dtype | None = None
    ) -> Iterator[list[tuple[str, torch.Tensor]]]:
        """The policy's full tensors under Hugging Face names, in buckets of at most `bucket_bytes` (a collective
        generator: every rank iterates it to the end)."""
        return self._engine.export_weights(bucket_bytes, dtype)

    def export_hf(self, path: str | Path, dtype: torch.dtype | None = None) -> Path:
        """Write a folder `AutoModelForCausalLM.from_pretrained` loads (a collective; rank 0 writes)."""
        return self._engine.export_hf(path, dtype)
