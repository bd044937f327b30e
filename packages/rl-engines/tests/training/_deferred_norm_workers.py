"""2-rank gloo scenario of the ddp normaliser riding on the gradient all-reduce (`_deferred_norm`): per aggregation
mode, one step with the separate all-gather and one with the counts deferred, from the same weights."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from _replicate_workers import ddp_config
from _training_helpers import rollout_batch
from _training_workers import exported_weights

from rl_core.kl import kl_loss
from rl_core.losses import AGGREGATIONS, LossNormalizer, PolicyLossInputs, aggregate_loss, get_policy_loss
from rl_engines.training import ForwardOutput, ForwardSpec, FSDPEngine, LossOutput, NormalizedLoss

SPEC = ForwardSpec(entropy=True)
MODES = sorted(AGGREGATIONS)


def mode_loss(mode: str) -> Callable[[ForwardOutput, dict[str, torch.Tensor], LossNormalizer], LossOutput]:
    """PPO + 0.1 * KL (k3, to the old log-probs) - 0.01 * entropy, every term aggregated with `mode`: the actor's
    loss shape."""

    def loss_fn(outputs: ForwardOutput, micro_batch: dict[str, torch.Tensor], normalizer: LossNormalizer) -> LossOutput:
        mask = micro_batch["response_mask"]
        inputs = PolicyLossInputs(outputs.log_probs, micro_batch["old_log_probs"], micro_batch["advantages"], mask)
        loss, metrics = get_policy_loss("ppo")(inputs, aggregation=mode, normalizer=normalizer)
        kl = kl_loss(outputs.log_probs, micro_batch["old_log_probs"], mask, aggregation=mode, normalizer=normalizer)
        entropy = aggregate_loss(outputs.entropy, mask, mode, normalizer)
        return LossOutput(loss + 0.1 * kl - 0.01 * entropy, metrics)

    return loss_fn


def uneven_rows(rank: int, seed: int) -> dict[str, torch.Tensor]:
    """Rank 0: 5 rows of the full width; rank 1: 3 rows cut 3 columns narrower (other counts, another width)."""
    if rank == 0:
        return rollout_batch(5, seed=seed)
    batch = rollout_batch(3, seed=seed + 100)
    return {name: tensor[:, :-3].contiguous() for name, tensor in batch.items()}


def _one_step(loss_fn: Callable, rank: int, calls: list[int]) -> dict[str, object]:
    engine = FSDPEngine.from_config(ddp_config())
    original = engine.global_normalizer

    def counted(*args: object, **kwargs: object) -> LossNormalizer:
        calls.append(1)
        return original(*args, **kwargs)

    engine.global_normalizer = counted  # type: ignore[method-assign]
    batch = uneven_rows(rank, seed=0)
    gradients = engine.compute_gradients(batch, loss_fn, SPEC)
    result = engine.train_step(batch, loss_fn, SPEC)
    second = engine.train_step(uneven_rows(rank, seed=1), loss_fn, SPEC)
    return {"gradients": gradients, "result": result, "second": second, "weights": exported_weights(engine)}


def deferred_norm_scenario(rank: int, out: Path) -> None:
    """For each mode: the separate-collective path (a plain loss function) and the deferred one (`NormalizedLoss`)."""
    saved: dict[str, object] = {}
    for mode in MODES:
        separate_calls: list[int] = []
        deferred_calls: list[int] = []
        saved[mode] = {
            "separate": _one_step(mode_loss(mode), rank, separate_calls),
            "deferred": _one_step(NormalizedLoss(mode_loss(mode), mode), rank, deferred_calls),
            "separate_calls": len(separate_calls),
            "deferred_calls": len(deferred_calls),
        }
    torch.save(saved, out / f"deferred_rank{rank}.pt")
