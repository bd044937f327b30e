"""Scenarios run by each rank of a 2-process gloo group; they save what they saw for the test to check."""

from __future__ import annotations

from pathlib import Path

import torch
from _training_helpers import engine_config, ppo_loss_fn, qwen_config, rollout_batch
from torch.distributed.tensor import DTensor

from rl_engines.training import (
    ForwardSpec,
    FSDPEngine,
    MicroBatchError,
    ModelConfig,
    OptimizerConfig,
    PrecisionConfig,
    ScheduleConfig,
    TrainEngineConfig,
)
from rl_engines.training._micro_batches import plan_micro_batches

FULL_BATCH = 8
LOCAL_BATCH = FULL_BATCH // 2
BUCKET_BYTES = 8192


def local_rows(batch: dict[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor]:
    """This rank's half of the full batch."""
    return {k: v[rank * LOCAL_BATCH : (rank + 1) * LOCAL_BATCH] for k, v in batch.items()}


def fsdp_scenario(rank: int, out: Path) -> None:
    """Forward (packed and padded), gradients, a NaN step, bucketed export and one real step, dp = 2."""
    full = rollout_batch(FULL_BATCH, seed=0)
    batch = local_rows(full, rank)
    spec = ForwardSpec(entropy=True)
    saved: dict[str, object] = {}
    for packing in (True, False):
        engine = FSDPEngine.from_config(engine_config(qwen_config(), packing=packing))
        outputs = engine.forward(batch, spec)
        saved[f"log_probs_{packing}"], saved[f"entropy_{packing}"] = outputs.log_probs, outputs.entropy
    mixed = FSDPEngine.from_config(engine_config(qwen_config(), precision=PrecisionConfig(compute_dtype="bfloat16")))
    saved["log_probs_bf16"] = mixed.forward(batch, ForwardSpec()).log_probs
    saved["bf16_param_dtype"] = {p.dtype for p in mixed.network.parameters()}
    del mixed
    # A forward without backward must not leave the root's embedding and LM head gathered.
    saved["sharded_after_forward"] = all(isinstance(p, DTensor) for p in engine.network.parameters())
    saved["splits_inert_rows"] = engine.splits_inert_rows  # a sharded forward is a collective: every rank runs all
    # FSDP2 pairs collectives per micro-batch: a rank whose rows fit one micro-batch runs as many as the other.
    few_short_rows = {"input_ids": torch.ones(4, 3, dtype=torch.int64)}
    budget = engine.config.micro_batch.max_tokens_per_micro_batch
    saved["plan_size"] = len(plan_micro_batches(few_short_rows if rank == 0 else batch, budget, engine.layout))
    try:
        engine.forward({"input_ids": torch.ones(1, 3, dtype=torch.int64)} if rank == 0 else batch, spec)
    except MicroBatchError as error:  # every rank must refuse, or the next collective would hang
        saved["uneven_error"] = str(error)
    saved["normalizer"] = engine.global_normalizer(batch["response_mask"])
    saved["gradients"] = engine.compute_gradients(batch, ppo_loss_fn, ForwardSpec())
    buckets = [[(name, tensor.clone()) for name, tensor in bucket] for bucket in engine.export_weights(BUCKET_BYTES)]
    saved["buckets"] = buckets
    poisoned = dict(batch)
    if rank == 1:
        poisoned["advantages"] = batch["advantages"].clone()
        poisoned["advantages"][0, -1] = float("nan")
        poisoned["response_mask"] = batch["response_mask"].clone()
        poisoned["response_mask"][0, -1] = 1
    saved["nan_step"] = engine.train_step(poisoned, ppo_loss_fn, ForwardSpec())
    before = {name: tensor for bucket in buckets for name, tensor in bucket}
    after = exported_weights(engine)
    saved["unchanged_after_nan"] = before.keys() == after.keys() and all(
        torch.equal(after[n], t) for n, t in before.items()
    )
    saved["real_step"] = engine.train_step(batch, ppo_loss_fn, ForwardSpec())
    saved["global_step"] = engine.global_step
    saved["trained_log_probs"] = engine.forward(batch, ForwardSpec()).log_probs
    engine.export_hf(out / "hf")
    torch.save(saved, out / f"fsdp_rank{rank}.pt")


def _steps(engine: FSDPEngine, rank: int, seeds: range) -> list[float]:
    losses = []
    for seed in seeds:
        batch = local_rows(rollout_batch(FULL_BATCH, seed=seed), rank)
        losses.append(engine.train_step(batch, ppo_loss_fn, ForwardSpec()).loss)
        engine.step_lr_scheduler()
    return losses


def exported_weights(engine: FSDPEngine) -> dict[str, torch.Tensor]:
    """Every exported (full) tensor by Hugging Face name, copied."""
    return {name: tensor.clone() for bucket in engine.export_weights(BUCKET_BYTES) for name, tensor in bucket}


def resume_scenario(rank: int, out: Path, hf_config: object) -> None:
    """Three steps straight, against one step, save, a fresh engine that loads, and two more steps."""
    config = engine_config(
        hf_config,
        optimizer=OptimizerConfig(lr=1e-2, max_grad_norm=0.5),  # clipping of sharded gradients is exercised too
        schedule=ScheduleConfig(kind="cosine", warmup_steps=1, total_steps=4),
    )
    torch.manual_seed(100 + rank)
    straight = FSDPEngine.from_config(config)
    straight_losses = _steps(straight, rank, range(1, 4))
    straight_weights = exported_weights(straight)
    del straight

    torch.manual_seed(100 + rank)
    first = FSDPEngine.from_config(config)
    resumed_losses = _steps(first, rank, range(1, 2))
    first.forward(local_rows(rollout_batch(FULL_BATCH, seed=9), rank), ForwardSpec())
    first.save_checkpoint(out / "ckpt")
    del first
    torch.manual_seed(12345)  # scramble the RNG: only the checkpoint's RNG state may make the runs agree
    second = FSDPEngine.from_config(config)
    step = second.load_checkpoint(out / "ckpt")
    resumed_losses += _steps(second, rank, range(2, 4))
    torch.save(
        {
            "straight_losses": straight_losses,
            "resumed_losses": resumed_losses,
            "loaded_step": step,
            "lr": second.lr,
            "identical": all(torch.equal(straight_weights[k], v) for k, v in exported_weights(second).items()),
        },
        out / f"resume_rank{rank}.pt",
    )


def reshard_config() -> TrainEngineConfig:
    """A dropout-free model with clipping and a cosine schedule, for checkpoints that change world size; sharded,
    it is built from rank 0's weights (so checkpoints of such engines are covered too)."""
    return engine_config(
        model=ModelConfig(hf_config=qwen_config(), init_seed=3, broadcast_from_rank0=True),
        # Steps of ~1e-3 keep the rounding differences of another world size (amplified by Adam where gradients
        # are near 0) well inside the 1e-6 tolerance, while a lost optimizer or schedule state moves weights ~1e-3.
        optimizer=OptimizerConfig(lr=1e-3, max_grad_norm=0.5),
        schedule=ScheduleConfig(kind="cosine", warmup_steps=1, total_steps=4),
    )


def steps_at(engine: FSDPEngine, seeds: range) -> list[float]:
    """Train steps on the full batch of each seed, split over the engine's ranks (or whole in one process)."""
    losses = []
    for seed in seeds:
        full = rollout_batch(FULL_BATCH, seed=seed)
        batch = full if engine.world_size == 1 else local_rows(full, engine.rank)
        losses.append(engine.train_step(batch, ppo_loss_fn, ForwardSpec()).loss)
        engine.step_lr_scheduler()
    return losses


def reshard_scenario(rank: int, out: Path) -> None:
    """At world size 2: one step, save, two more steps; then load the world-size-1 checkpoint `out/ckpt1`
    and take the same two steps from it."""
    torch.manual_seed(200 + rank)
    engine = FSDPEngine.from_config(reshard_config())
    steps_at(engine, range(1, 2))
    saved_rng = torch.get_rng_state()
    engine.save_checkpoint(out / "ckpt2")
    continued = steps_at(engine, range(2, 4))
    continued_weights = exported_weights(engine)
    del engine
    torch.manual_seed(999)
    grown = FSDPEngine.from_config(reshard_config())
    step = grown.load_checkpoint(out / "ckpt1")
    rng_after_load = torch.get_rng_state()
    torch.save(
        {
            "saved_rng": saved_rng,
            "continued": continued,
            "continued_weights": continued_weights,
            "grown_step": step,
            "grown_rng": rng_after_load,
            "grown_lr": grown.lr,
            "grown": steps_at(grown, range(2, 4)),
            "grown_weights": exported_weights(grown),
        },
        out / f"reshard_rank{rank}.pt",
    )
