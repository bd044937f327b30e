"""One optimizer step in one process: gradient accumulation against a whole-batch reference, NaN skipping, clipping."""

from __future__ import annotations

import math

import pytest
import torch
from _training_helpers import engine_config, ppo_loss_fn, reference_gradients, rollout_batch

from rl_engines.training import BatchError, ForwardSpec, FSDPEngine, LossOutput, TrainConfigError
from rl_engines.training._fsdp import ProcessLayout
from rl_engines.training._micro_batches import plan_micro_batches
from rl_engines.training._step import _grad_norm

ALONE = ProcessLayout(world_size=1, rank=0, device=torch.device("cpu"), distributed=False)


_ROW = "row"
"""A `(B,)` row index riding along in the batch, so a loss function knows which rows its micro-batch holds."""


def _weights(engine: FSDPEngine) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in engine.network.named_parameters()}


def test_several_micro_batches_give_the_whole_batch_gradient() -> None:
    batch = rollout_batch(6, seed=0)
    engine = FSDPEngine.from_config(engine_config())
    assert len(plan_micro_batches(batch, engine.config.micro_batch.max_tokens_per_micro_batch, ALONE)) > 1
    gradients = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    reference = reference_gradients(batch)
    assert gradients.keys() == reference.keys()
    for name, grad in reference.items():
        torch.testing.assert_close(gradients[name], grad, atol=1e-6, rtol=1e-5, msg=name)
    assert all(p.grad is None for p in engine.network.parameters())  # nothing left behind, nothing applied


def test_step_applies_adamw_and_reports_loss_norm_and_metrics() -> None:
    batch = rollout_batch(6, seed=0)
    engine = FSDPEngine.from_config(engine_config())
    reference_norm = math.sqrt(sum(float(g.square().sum()) for g in reference_gradients(batch).values()))
    before = _weights(engine)
    result = engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    assert not result.skipped
    assert result.grad_norm == pytest.approx(reference_norm, rel=1e-5)
    budget = engine.config.micro_batch.max_tokens_per_micro_batch
    assert result.num_micro_batches == len(plan_micro_batches(batch, budget, ALONE)) > 1
    assert result.normalizer == engine.global_normalizer(batch["response_mask"])
    assert set(result.metrics) == {"pg_clipfrac", "pg_clipfrac_lower", "ppo_kl"}
    assert engine.global_step == 1
    after = _weights(engine)
    assert all(not torch.equal(before[n], after[n]) for n in before)


def _nan_loss(outputs, micro_batch, normalizer) -> LossOutput:
    # Only the micro-batch holding row 0 turns NaN; the engine's other micro-batches stay finite.
    loss, metrics = ppo_loss_fn(outputs, micro_batch, normalizer)
    return LossOutput(loss * float("nan") if bool((micro_batch[_ROW] == 0).any()) else loss, metrics)


def _inf_loss(outputs, micro_batch, normalizer) -> LossOutput:
    loss, metrics = ppo_loss_fn(outputs, micro_batch, normalizer)
    return LossOutput(loss + float("inf"), metrics)


@pytest.mark.parametrize("loss_fn", [_nan_loss, _inf_loss], ids=["nan", "inf"])
def test_non_finite_loss_skips_the_step(loss_fn) -> None:
    batch = rollout_batch(6, seed=0)
    batch[_ROW] = torch.arange(6)
    engine = FSDPEngine.from_config(engine_config())
    before = _weights(engine)
    result = engine.train_step(batch, loss_fn, ForwardSpec())
    assert result.skipped
    assert not math.isfinite(result.loss)
    assert engine.global_step == 0
    after = _weights(engine)
    assert all(torch.equal(before[n], after[n]) for n in before)
    assert all(p.grad is None for p in engine.network.parameters())
    assert not engine.train_step(batch, ppo_loss_fn, ForwardSpec()).skipped
    assert engine.global_step == 1


def test_grad_norm_clips_to_the_limit_and_reports_the_norm_before() -> None:
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))]
    params[0].grad, params[1].grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])
    assert _grad_norm(params, 1.0) == pytest.approx(5.0)
    torch.testing.assert_close(params[0].grad, torch.tensor([0.6, 0.0]), atol=1e-6, rtol=0)
    assert _grad_norm(params, None) == pytest.approx(1.0, rel=1e-5)


def test_a_frozen_engine_cannot_train() -> None:
    batch = rollout_batch(2, seed=0)
    frozen = FSDPEngine.from_config(engine_config(optimizer=None))
    assert not frozen.trainable
    assert frozen.lr == 0.0
    with pytest.raises(TrainConfigError, match=r"engine is frozen \(TrainEngineConfig.optimizer=None\)"):
        frozen.train_step(batch, ppo_loss_fn, ForwardSpec())
    with pytest.raises(TrainConfigError, match="cannot step the learning-rate schedule"):
        frozen.step_lr_scheduler()


def test_loss_must_be_a_scalar() -> None:
    batch = rollout_batch(2, seed=0)
    engine = FSDPEngine.from_config(engine_config())

    def per_token(outputs, micro_batch, normalizer) -> LossOutput:
        return LossOutput(outputs.log_probs, {})

    with pytest.raises(BatchError, match="0-dim loss, got shape"):
        engine.train_step(batch, per_token, ForwardSpec())


def test_normalizer_of_a_batch_without_response_tokens_is_refused() -> None:
    engine = FSDPEngine.from_config(engine_config())
    with pytest.raises(BatchError, match="no response tokens on any rank"):
        engine.global_normalizer(torch.zeros(2, 5))


def test_normalizer_counts_and_horizon() -> None:
    engine = FSDPEngine.from_config(engine_config())
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    normalizer = engine.global_normalizer(mask)
    assert (normalizer.num_tokens, normalizer.num_sequences, normalizer.horizon) == (6.0, 2.0, 4.0)
    assert engine.global_normalizer(mask, horizon=16).horizon == 16.0
