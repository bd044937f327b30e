"""The actor role: the policy's objective (rl-core's `PolicyObjective`: a registered policy loss, KL to the
reference, entropy bonus) handed to its engine, its old log-probs, and its PPO-style updates.

The objective is built once from the run config's `algorithm` section (`AlgorithmConfig`: policy_loss,
policy_loss_params, loss_agg_mode, entropy_coef, kl, rollout_correction), read as is: the role has no config class of
its own to mirror it, and the engine calls the rl-core objective directly, never back into the runtime."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import torch

from rl_core.objectives import PolicyObjective
from rl_core.schema import ADVANTAGES, INERT_ROWS, OLD_LOG_PROBS, RESPONSE_MASK
from rl_engines.sync import SyncReport, WeightPublisher
from rl_engines.training import Batch, ForwardOutput, ForwardSpec, StepResult, TrainEngine
from rl_runtime.config import AlgorithmConfig, KLMode, RunConfig, resolve_policy_loss
from rl_runtime.config._schema_algorithm import ON_POLICY_LOSS
from rl_runtime.roles._common import (
    EngineRole,
    check_ppo_epochs,
    check_temperature,
    require_keys,
    run_update,
)
from rl_runtime.roles._errors import RoleConfigError, RoleError

logger = logging.getLogger(__name__)


def zero_advantage_rows(batch: Batch) -> torch.Tensor:
    """`(B,)` bool: the rows whose advantage is 0 on every response token (a GRPO group that scored alike)."""
    response = batch[RESPONSE_MASK].bool()
    return ~(batch[ADVANTAGES].ne(0) & response).any(dim=-1)


def _inert_skip_unmet(algorithm: AlgorithmConfig, objective: PolicyObjective, engine: TrainEngine) -> list[str]:
    """Why the actor cannot skip the inert rows' forward under `algorithm.skip_inert_rows` (empty: it can)."""
    unmet = []
    if objective.policy_loss != ON_POLICY_LOSS or not objective.inert_on_zero_advantage:
        unmet.append(
            f"the loss is not {ON_POLICY_LOSS} alone (policy loss {objective.policy_loss}, a KL loss, an "
            "entropy bonus or a rollout correction reads every row)"
        )
    if algorithm.max_staleness > 0:
        unmet.append(f"max_staleness={algorithm.max_staleness}: the rollout log-probs of every row stay comparable")
    if not engine.splits_inert_rows:
        unmet.append("the actor's engine runs every row's forward (FSDP2 sharding: a forward is a collective)")
    return unmet


SYNC_BUCKET_BYTES = 256 * 1024 * 1024
"""Weights stream to the rollout engine in buckets of this size: large enough to amortise each call, small
enough that the exported copy never approaches the model's size."""


class ActorRole(EngineRole):
    """The policy: old log-probs before an update, then PPO-style updates over the mini-batches it splits the step's
    batch into; its weights go to the rollout engines its engine is connected to (`publish_weights`) and to Hugging
    Face folders (`export_hf`)."""

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
        correction = algorithm.rollout_correction
        self.objective = PolicyObjective(
            policy_loss=resolve_policy_loss(algorithm),
            params=algorithm.policy_loss_params,
            aggregation=algorithm.loss_agg_mode,
            kl_coef=self.kl_coef,
            kl_estimator=algorithm.kl.estimator,
            entropy_coef=algorithm.entropy_coef,
            rollout_correction=None if correction is None else attrs.asdict(correction),
        )
        """The loss the engine runs on every micro-batch (rl-core's, resolved once here; it aggregates every term with
        `loss_agg_mode` and says itself whether a replicated engine may learn the counts after the backward)."""
        self._loss_fields = "actor's loss" + (" with its KL loss (kl_coef > 0)" if self.kl_coef > 0 else "")
        """Who needs `objective.required_fields`, for the error naming the missing ones."""
        self._train_spec = ForwardSpec(entropy=algorithm.entropy_coef > 0, temperature=temperature)
        unmet = _inert_skip_unmet(algorithm, self.objective, engine) if algorithm.skip_inert_rows else []
        if unmet:
            logger.info("algorithm.skip_inert_rows: every row runs its forward here (%s)", "; ".join(unmet))
        self.skips_inert_forward = algorithm.skip_inert_rows and not unmet
        """Whether `update_on_policy` runs no forward for the inert rows (`algorithm.skip_inert_rows` on a synchronous
        run with a lone ppo loss, whose on-policy ratio is 1 whatever those rows' log-probs, on an engine that runs
        them apart)."""
        # update_on_policy reports the forward's entropy and takes its outputs back; both specs are fixed for life.
        self._on_policy_spec = ForwardSpec(
            entropy=True, temperature=temperature, return_outputs=True, inert_outputs=not self.skips_inert_forward
        )

    @classmethod
    def from_config(cls, config: RunConfig, engine: TrainEngine) -> ActorRole:
        """The actor role of run `config` around `engine`: the `algorithm` section's loss, the sampler's
        `rollout.temperature` and `batch.ppo_epochs`."""
        return cls(engine, config.algorithm, temperature=config.rollout.temperature, ppo_epochs=config.batch.ppo_epochs)

    def compute_log_probs(self, batch: Batch, *, with_entropy: bool = False) -> ForwardOutput:
        """`(B, T)` log-probs (and entropy) of the response tokens under the current policy, without gradients."""
        spec = ForwardSpec(entropy=with_entropy, temperature=self.temperature)
        return self._engine.forward(batch, spec)

    def inert_rows(self, batch: Batch) -> torch.Tensor | None:
        """`(B,)` bool: the rows of `batch` the actor's loss gives no loss or gradient whatever the forward
        (`zero_advantage_rows` under a lone advantage-multiple loss), or None when its loss reads every row."""
        if not self.objective.inert_on_zero_advantage:
            return None
        return zero_advantage_rows(batch)

    def _with_inert_rows(self, batch: Batch) -> Batch:
        """`batch` for the engine: with the loss's inert rows marked (`inert_rows`), so the engine may skip their
        backward (and their forward under `algorithm.skip_inert_rows`); the caller's batch is not changed."""
        require_keys(batch, self.objective.required_fields, self._loss_fields)
        inert = self.inert_rows(batch)
        return batch if inert is None else {**batch, INERT_ROWS: inert}

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
        batch = self._with_inert_rows(batch)
        return run_update(self._engine, batch, num_mini_batches, self.ppo_epochs, self.objective, self._train_spec)

    def update_on_policy(self, batch: Batch) -> tuple[StepResult, ForwardOutput]:
        """The step's one optimizer step (one mini-batch, one epoch), with the old log-probs taken from its own
        training forward, then one schedule step.

        The update starts from the weights that sampled the batch, so the detached log-probs of the training
        forward are the old log-probs a separate `compute_log_probs` pass would give (as verl's actor does):
        the same loss, gradient and update without that pass. The batch needs no `old_log_probs`.

        With `skips_inert_forward` the rows `inert_rows` marks run no forward: the loss, gradient and
        update are the same (the on-policy ratio is 1 whatever their log-probs), and their outputs come back as 0.

        Returns:
            The step's result, and that forward's detached `(B, T)` float32 log-probs and entropy (what
            `compute_log_probs(..., with_entropy=True)` returns before the step, 0 on skipped rows; values None),
            which the engine returns for `ForwardSpec.return_outputs`.
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
        result = self._engine.train_step(self._with_inert_rows(batch), self.objective, self._on_policy_spec)
        self._engine.step_lr_scheduler()
        forward = result.outputs
        if forward is None or forward.log_probs is None or forward.entropy is None:
            raise RoleError("the actor's engine returned no training-forward outputs for ForwardSpec.return_outputs")
        return result, ForwardOutput(forward.log_probs, forward.entropy, None)

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

    def connect_weight_sync(self, sync: WeightPublisher, bucket_bytes: int = SYNC_BUCKET_BYTES) -> None:
        """Connect the policy's engine to `sync`, where `publish_weights` sends its weights (this worker's
        `rl_engines.sync.WeightSync`, a server fleet's, or a split placement's sender to the rollout slots); the
        engine exports them in buckets of at most `bucket_bytes` and closes `sync` in `close_weight_sync`."""
        self._engine.connect_weight_sync(sync, bucket_bytes)

    def publish_weights(self, version: int) -> SyncReport:
        """Send the policy's weights to the rollout engines as `version` through the connected sync (the engine's
        `update_weights`; a collective: every training rank calls it); what was moved."""
        return self._engine.update_weights(version)

    def close_weight_sync(self) -> None:
        """Close the weight sync the engine is connected to (nothing when none is)."""
        self._engine.close_weight_sync()

    def export_hf(self, path: str | Path, dtype: torch.dtype | None = None) -> Path:
        """Write a folder `AutoModelForCausalLM.from_pretrained` loads (a collective; rank 0 writes)."""
        return self._engine.export_hf(path, dtype)
